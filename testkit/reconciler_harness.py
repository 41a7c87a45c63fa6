"""What the reconciler's tests share: a small config repo in a real Git repository, and a
harness that runs a reconciler of it on a cluster (the real control plane, or the API
emulator for the fault tests) and looks at what it left there."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.contract.labels import API_VERSION as API
from gitops_sched.reconciler import OWNER_LABEL, Reconciler, Settings
from gitops_sched.reconciler.inventory import Inventory
from testkit import fast_yaml

# a finalizer a test puts on an object: deleted, it stays (terminating) until `release`
HOLD = "gitops-sched.io/test-hold"
SYSTEM = "gitops-sched"  # the reconciler's own namespace (inventory, Lease, Events)


def doc(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def config(
    projects: dict[str, int],
    cluster: str = "lab",
    image: str = "pytorch:2.3",
    system_namespace: str = "gitops-sched-system",
) -> dict[str, list[dict[str, Any]]]:
    """A small config repo: one node group, one department, `projects` (name -> GPU quota),
    a template (of `image`) with quantities the server normalises, and a train workload per
    project."""
    files = {
        "cluster.yaml": [
            doc(
                "Cluster",
                cluster,
                {
                    "kubernetesVersion": "1.32",
                    "systemNamespace": system_namespace,
                    "namespacePrefix": "gpu-",
                    "schedulerName": "gitops-sched",
                },
            )
        ],
        "node-groups.yaml": [
            doc(
                "NodeGroup",
                "a100",
                {
                    "role": "gpu-worker",
                    "nodeSelector": {"matchLabels": {"pool": "a100"}},
                    "nodeCount": 2,
                    "gpusPerNode": 8,
                    "gpu": {"model": "A100-80GB", "memory": "80Gi"},
                    "cpuPerNode": "128",
                    "memoryPerNode": "1000Gi",
                },
            )
        ],
        "departments.yaml": [doc("Department", "research", {"quota": {"gpu": 16}})],
        "templates.yaml": [
            doc(
                "Template",
                "train",
                {
                    "image": image,
                    "command": ["python", "train.py"],
                    # canonical on the server as 12 and 1Gi: must never look like drift
                    "resources": {"cpu": "12000m", "memory": "1024Mi"},
                },
            )
        ],
    }
    files["projects.yaml"] = [
        doc("Project", name, {"department": "research", "quota": {"gpu": gpu}})
        for name, gpu in projects.items()
    ]
    files["workloads.yaml"] = [
        doc(
            "Workload",
            f"{name}-train",
            {"project": name, "type": "train", "template": "train", "gpu": 1},
        )
        for name in projects
    ]
    return files


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def commit(repo: Path, files: dict[str, Any]) -> str:
    """Replace the repo's YAML files with `files` (raw text or documents) and commit."""
    repo.mkdir(exist_ok=True)
    if not (repo / ".git").exists():
        git(repo, "init", "-q", "-b", "main")
    for old in repo.glob("*.yaml"):
        old.unlink()
    for name, content in files.items():
        text = content if isinstance(content, str) else fast_yaml.dump_all(content, sort_keys=False)
        (repo / name).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "change", "--allow-empty")
    return git(repo, "rev-parse", "HEAD")


class Harness:
    """A reconciler named `name` of the Git repo `repo`.

    `client` is the reconciler's (from `reconciler`, else `connect`; through `via` when given:
    a proxy): its requests are counted in `client.requests` ("read", "write") and listed as
    "METHOD path" in `sent`, both emptied by `reset()`. The test looks through `look`, a
    client of its own (`connect`), so its reads never count as the reconciler's."""

    def __init__(
        self,
        connect: Callable[[], ClusterClient],
        repo: Path,
        name: str = "gitops-sched",
        reconciler: Callable[[], ClusterClient] | None = None,
        via: Callable[[], ClusterClient] | None = None,
    ):
        self.repo, self.name = repo, name
        self.connect = reconciler or connect  # the reconciler's clients (its ServiceAccount's)
        self.sent: list[str] = []
        self.look = connect()
        self.client = (via or self.connect)()
        self.client.before_request.append(lambda method, path: self.sent.append(f"{method} {path}"))
        self._reconcilers: list[Reconciler] = []
        self.reconciler = self.new_reconciler(self.client)
        self._clients = [self.look, self.client]
        self._held: list[ObjectRef] = []

    def new_reconciler(self, client: ClusterClient, **kw: Any) -> Reconciler:
        elector = kw.pop("elector", None)
        settings = Settings(
            repo=str(self.repo), name=self.name, namespace=SYSTEM, identity="test", **kw
        )
        reconciler = Reconciler(settings, client, elector)
        self._reconcilers.append(reconciler)
        return reconciler

    def new_client(self) -> ClusterClient:
        """Another client, closed with the harness."""
        client = self.connect()
        self._clients.append(client)
        return client

    def close(self) -> None:
        for ref in self._held:
            self.release(ref)
        for client in self._clients:
            client.close()
        for reconciler in self._reconcilers:
            reconciler.close()  # its scratch folder

    def hold(self, ref: ObjectRef) -> None:
        """Add the HOLD finalizer: deleted, the object stays until `release` (or `close`)."""
        finalizers = self.look.get(ref)["metadata"].get("finalizers") or []
        self.look.patch(ref, {"metadata": {"finalizers": [*finalizers, HOLD]}})
        self._held.append(ref)

    def release(self, ref: ObjectRef) -> None:
        obj = self.look.get(ref)
        if obj is not None:
            rest = [f for f in obj["metadata"].get("finalizers") or [] if f != HOLD]
            self.look.patch(ref, {"metadata": {"finalizers": rest or None}})

    def sync(self):
        return self.reconciler.sync_once()

    def reset(self) -> None:
        self.client.requests.clear()
        self.sent.clear()

    @property
    def writes(self) -> int:
        """Write requests the reconciler's client sent since the last `reset()`."""
        return self.client.requests["write"]

    def written(self) -> list[str]:
        """The write requests since the last `reset()`, as "METHOD path"."""
        return [r for r in self.sent if not r.startswith("GET ")]

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> Any:
        return self.look.get(ObjectRef(api_version, kind, namespace, name))

    def live(self) -> dict[str, dict[str, Any]]:
        """Every object carrying this reconciler's owner label, of any kind, by
        "Kind/ns/name"."""
        out = {}
        for api_version, kind in self.look.listable_kinds():
            for obj in self.look.list(api_version, kind, f"{OWNER_LABEL}={self.name}") or ():
                out[str(ObjectRef.of(obj))] = obj
        return out

    def inventory(self) -> Inventory:
        cm = self.get("v1", "ConfigMap", f"gitops-sched-inventory-{self.name}", SYSTEM)
        return Inventory.parse(cm["data"])

    def listed(self) -> set[str]:
        return {str(r) for r in self.inventory().entries}
