"""Namespaces pods can be made in, and clients that act as a ServiceAccount.

- `make_namespace`: a namespace and, once kube-controller-manager has made it, its
  `default` ServiceAccount (the ServiceAccount admission plugin refuses pods before).
- `install_agent`: the node agent's shipped manifests (`kubectl apply -k scheduler/agent/`,
  less its DaemonSet): its namespace, ServiceAccount and least-privilege RBAC.
- `account_kubeconfig`: a kubeconfig holding a token the API server issued to a
  ServiceAccount (TokenRequest), so a part of the product runs with exactly the permissions
  its manifests grant, as it would in its pod; `account_client`: a client made from it the
  way the CLI makes its own (`load_configuration`).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gitops_sched.cluster import ClusterClient, ObjectRef, load_configuration
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.fixtures import FAST_BACKOFF, connect
from testkit.control_plane.install import apply_kustomization
from testkit.control_plane.waiting import wait

AGENT_NAMESPACE = AGENT_ACCOUNT = "gitops-sched-agent"
# (namespace, ServiceAccount) of each part, as the shipped manifests make them
RECONCILER = ("gitops-sched", "gitops-sched-reconciler")
SCHEDULER = ("gitops-sched-system", "gitops-sched-scheduler")
RESERVATION = ("gitops-sched-system", "gitops-sched-reservation")  # reservation pods
AGENT = (AGENT_NAMESPACE, AGENT_ACCOUNT)


def make_namespace(client: ClusterClient, name: str) -> None:
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    account = ObjectRef("v1", "ServiceAccount", name, "default")
    wait(f"the default ServiceAccount of {name}", lambda: client.get(account))


def install_agent(plane: ControlPlane) -> None:
    """The agent's manifests; its device plugin Role needs `gpu-operator` to exist."""
    apply_kustomization(plane, "scheduler/agent")


def token(plane: ControlPlane, namespace: str, account: str) -> str:
    """A token the API server issues to the ServiceAccount (TokenRequest), good for an hour."""
    admin = connect(plane)
    try:
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        }
        answer = admin.post(ObjectRef("v1", "ServiceAccount", namespace, account), "token", request)
        return str(answer["status"]["token"])
    finally:
        admin.close()


def account_kubeconfig(plane: ControlPlane, namespace: str, account: str) -> Path:
    """`<plane>/accounts/<namespace>.<account>.kubeconfig`: the plane's server and CA, the
    ServiceAccount's token (a fresh one each call)."""
    config = yaml.safe_load(plane.kubeconfig.read_text())
    user = f"{namespace}.{account}"
    config["users"] = [{"name": user, "user": {"token": token(plane, namespace, account)}}]
    config["contexts"][0]["context"]["user"] = user
    path = plane.root / "accounts" / f"{user}.kubeconfig"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def account_client(
    plane: ControlPlane, namespace: str = AGENT_NAMESPACE, account: str = AGENT_ACCOUNT
) -> ClusterClient:
    configuration = load_configuration(account_kubeconfig(plane, namespace, account))
    return ClusterClient(configuration, backoff=FAST_BACKOFF, timeout=30.0)
