"""Namespaces pods can be made in, and clients that act as a ServiceAccount.

- `make_namespace`: a namespace and, once kube-controller-manager has made it, its
  `default` ServiceAccount (the ServiceAccount admission plugin refuses pods before).
- `install_agent`: the node agent's shipped manifests (`kubectl apply -k scheduler/agent/`,
  less its DaemonSet): its namespace, ServiceAccount and least-privilege RBAC.
- `account_kubeconfig`: a kubeconfig holding a token the API server issued to a
  ServiceAccount (TokenRequest), so a part of the product runs with exactly the permissions
  its manifests grant, as it would in its pod; `account_client`: a client made from it the
  way the CLI makes its own (`load_configuration`).
- `refuse_admin`: a part of the product (its class) that fails to be built on a control
  plane's admin token, so a test cannot run a part with more than its manifests grant
  without saying why (the `as_admin` mark: an admin running it from outside).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes.client import Configuration

from gitops_sched.cluster import ClusterClient, ObjectRef, load_configuration
from testkit import fast_yaml
from testkit.control_plane.client import FAST_BACKOFF, connect
from testkit.control_plane.cluster import ADMIN_TOKENS, ControlPlane
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


def install_reconciler(plane: ControlPlane) -> Callable[[], ClusterClient]:
    """The reconciler's manifests (`kubectl apply -k reconciler/`, its Deployment aside); a
    maker of clients of its ServiceAccount."""
    apply_kustomization(plane, "reconciler")
    return lambda: account_client(plane, *RECONCILER)


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
    config = fast_yaml.load(plane.kubeconfig.read_text())
    user = f"{namespace}.{account}"
    config["users"] = [{"name": user, "user": {"token": token(plane, namespace, account)}}]
    config["contexts"][0]["context"]["user"] = user
    path = plane.root / "accounts" / f"{user}.kubeconfig"
    path.parent.mkdir(exist_ok=True)
    path.write_text(fast_yaml.dump(config))
    return path


def account_configuration(plane: ControlPlane, namespace: str, account: str) -> Configuration:
    """The ServiceAccount's client configuration (through a proxy: `FaultProxy.configuration`)."""
    return load_configuration(account_kubeconfig(plane, namespace, account))


def account_client(
    plane: ControlPlane, namespace: str = AGENT_NAMESPACE, account: str = AGENT_ACCOUNT
) -> ClusterClient:
    configuration = account_configuration(plane, namespace, account)
    return ClusterClient(configuration, backoff=FAST_BACKOFF, timeout=30.0)


def is_admin(client: object) -> bool:
    """Whether a client holds a control plane's admin token (group `system:masters`)."""
    configuration = getattr(getattr(client, "api_client", None), "configuration", None)
    keys = getattr(configuration, "api_key", None) or {}  # `authorization`, or a kubeconfig's
    return any(str(key).removeprefix("Bearer ") in ADMIN_TOKENS for key in keys.values())


def refuse_admin(part: type) -> Callable[..., None]:
    """`part.__init__`, failing when its `client` is an admin's: the part must run as its
    ServiceAccount (`account_client`), as its manifests make it run in a cluster."""
    init: Callable[..., None] = vars(part)["__init__"]  # each part defines its own
    signature = inspect.signature(init)

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kw: Any) -> None:
        client = signature.bind(self, *args, **kw).arguments.get("client")
        if is_admin(client):
            raise AssertionError(
                f"{part.__name__} built on the admin's token (system:masters): give it its "
                "ServiceAccount's client (account_client), or mark the test "
                "@pytest.mark.as_admin(why)"
            )
        init(self, *args, **kw)

    return checked
