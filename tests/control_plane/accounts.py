"""Namespaces pods can be made in, and clients that act as a ServiceAccount.

- `make_namespace`: a namespace and, once kube-controller-manager has made it, its
  `default` ServiceAccount (the ServiceAccount admission plugin refuses pods before).
- `install_agent`: the node agent's shipped manifests (`kubectl apply -k scheduler/agent/`,
  less its DaemonSet): its namespace, ServiceAccount and least-privilege RBAC.
- `account_client`: a client holding a token the API server issued to a ServiceAccount
  (TokenRequest), so a part of the product runs with exactly the permissions its manifests
  grant, as it would in its pod.
"""

from __future__ import annotations

from gitops_sched.cluster import ClusterClient, ObjectRef
from tests.control_plane.cluster import ControlPlane
from tests.control_plane.fixtures import FAST_BACKOFF, connect
from tests.control_plane.install import apply_kustomization
from tests.control_plane.waiting import wait

AGENT_NAMESPACE = AGENT_ACCOUNT = "gitops-sched-agent"


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


def account_client(
    plane: ControlPlane, namespace: str = AGENT_NAMESPACE, account: str = AGENT_ACCOUNT
) -> ClusterClient:
    configuration = plane.configuration()
    configuration.api_key = {"authorization": f"Bearer {token(plane, namespace, account)}"}
    return ClusterClient(configuration, backoff=FAST_BACKOFF, timeout=30.0)
