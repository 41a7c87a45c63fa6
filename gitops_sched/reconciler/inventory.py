"""What this reconciler manages, kept in the cluster: a ConfigMap per reconciler in its own
namespace, `gitops-sched-inventory-<name>`, whose `objects` lists one object a line as
`<digest> <apiVersion> <kind> <namespace or -> <name>`.

It is written before new objects are created (old entries plus the new ones, with no
digest yet) and again after the sync (exactly the repo's objects), so whenever a sync is cut
off, every object we may have created is listed and the next sync prunes what the repo no
longer has. The digest of the rendered object applied last tells a repo change from drift.

The reconciler's namespace is created on the first write that finds it missing (a new
cluster, or `reconcile --once` run from outside it): labelled managed-by gitops-sched, not
with the owner label, so no reconciler ever prunes it. Nothing is read for it otherwise.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from gitops_sched.cluster.client import ClusterClient, ObjectRef
from gitops_sched.cluster.errors import ApiFailure, NotFound

log = logging.getLogger(__name__)
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

    def write(self, inventory: Inventory) -> bool:
        """Write the inventory, creating its namespace first when it does not exist;
        whether it created the namespace."""
        try:
            self.client.apply(self._object(inventory), self.manager)
        except NotFound:
            if not self.ensure_namespace():
                raise
            self.client.apply(self._object(inventory), self.manager)
            return True
        return False

    @property
    def namespace_ref(self) -> ObjectRef:
        return ObjectRef("v1", "Namespace", "", self.ref.namespace)

    def namespace(self) -> dict[str, Any]:
        """The namespace the inventory lives in, as this store creates it."""
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": self.ref.namespace,
                "labels": {"app.kubernetes.io/managed-by": "gitops-sched"},
            },
        }

    def ensure_namespace(self) -> bool:
        """Create the reconciler's namespace when it does not exist; whether it did not."""
        ref = self.namespace_ref
        if self.client.get(ref) is not None:
            return False
        try:
            self.client.create(self.namespace(), self.manager)
        except ApiFailure as exc:
            if exc.reason != "AlreadyExists":  # created meanwhile: as good
                raise
        log.info("created namespace %s for the inventory (it did not exist)", ref.name)
        return True

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
