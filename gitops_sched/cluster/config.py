"""Where the API server is and how to authenticate: `--kubeconfig`, then `KUBECONFIG`, then
the pod's service account (in-cluster), then `~/.kube/config`."""

from __future__ import annotations

import os
from pathlib import Path

import kubernetes
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import SERVICE_HOST_ENV_NAME, load_incluster_config


def load_configuration(
    kubeconfig: str | Path | None = None, context: str | None = None
) -> kubernetes.client.Configuration:
    config = kubernetes.client.Configuration()
    explicit = kubeconfig or os.environ.get("KUBECONFIG")
    if explicit:
        # KUBECONFIG may list several files; the first one that exists is used
        path = next((p for p in str(explicit).split(os.pathsep) if Path(p).is_file()), None)
        if path is None:
            raise ConfigException(f"kubeconfig {explicit} does not exist")
        kubernetes.config.load_kube_config(path, context, client_configuration=config)
    elif os.environ.get(SERVICE_HOST_ENV_NAME):
        load_incluster_config(client_configuration=config)
    else:
        home = Path(os.path.expanduser("~/.kube/config"))
        if not home.is_file():
            raise ConfigException(f"{home} does not exist and KUBECONFIG is not set")
        kubernetes.config.load_kube_config(context=context, client_configuration=config)
    config.retries = False  # retries are ours (retry.py): counted, jittered, 409/429/5xx aware
    return config
