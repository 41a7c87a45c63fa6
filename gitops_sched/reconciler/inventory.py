"""What this reconciler manages, kept in the cluster: a ConfigMap per reconciler in its own
namespace, `gitops-sched-inventory-<name>`, whose `objects` lists one object a line as
`<digest> <apiVersion> <kind> <namespace or -> <name>`.

It is written before new objects are created (old entries plus the new ones, with no
digest yet) and again after the sync (exactly the repo's objects), so whenever a sync is cut
off, every object we may have created is listed and the next sync prunes what the repo no
longer has. The digest of the rendered object applied last tells a repo change from drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitops_sched.cluster.client import ClusterClient, ObjectRef

UNKNOWN = "-"  # the digest of an entry written before its object was applied


@dataclass
class Inventory:
    source: str
    revision: str = ""
    entries: dict[ObjectRef, str] = field(default_factory=dict)  # ref -> digest

    def text(self) -> str:
        return "".join(
            f"{digest} {r.api_version} {r.kind} {r.namespace or '-'} {r.name}\n"
            for r, digest in sorted(self.entries.items())
        )

    @classmethod
    def parse(cls, data: dict[str, str]) -> Inventory:
        entries = {}
        for line in data.get("objects", "").splitlines():
            digest, api_version, kind, namespace, name = line.split()
            entries[ObjectRef(api_version, kind, "" if namespace == "-" else namespace, name)] = (
                digest
            )
        return cls(data.get("source", ""), data.get("revision", ""), entries)


class InventoryStore:
    def __init__(self, client: ClusterClient, namespace: str, reconciler: str, manager: str):
        self.client = client
        self.ref = ObjectRef("v1", "ConfigMap", namespace, f"gitops-sched-inventory-{reconciler}")
        self.manager = manager
        self.labels = {
            "app.kubernetes.io/managed-by": "gitops-sched",
            "gitops-sched.io/inventory-of": reconciler,
        }

    def read(self) -> Inventory | None:
        obj = self.client.get(self.ref)
        return None if obj is None else Inventory.parse(obj.get("data") or {})

    def write(self, inventory: Inventory) -> None:
        self.client.apply(self._object(inventory), self.manager)

    def _object(self, inventory: Inventory) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.ref.name,
                "namespace": self.ref.namespace,
                "labels": self.labels,
            },
            "data": {
                "source": inventory.source,
                "revision": inventory.revision,
                "objects": inventory.text(),
            },
        }
