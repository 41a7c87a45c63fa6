"""One sync: make the objects this reconciler manages equal to the rendered repo.

1. read the inventory; list each kind once, by the owner label (one request per kind);
2. decide per object: unchanged (no request at all), to apply (changed in the repo, or
   drifted in the cluster), or to prune (in the inventory or labelled ours, not rendered);
3. record new objects in the inventory before creating them;
4. apply with server-side apply (field manager `gitops-sched`, forced: the repo wins) in
   stages: CRDs, then wait until they are Established; namespaces; everything else;
5. prune, custom resources and namespaced objects first, namespaces (when empty of objects
   we do not manage) and CRDs last;
6. write the inventory when it changed.

Objects carrying another reconciler's owner label are never touched, whatever their other
labels say. A failed object is reported and the others go on; the inventory keeps listing
anything that may exist, so a sync cut off at any request is finished by the next one.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from gitops_sched.cluster.client import ClusterClient, ObjectRef
from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.compiler.storage import NO_PRUNE
from gitops_sched.reconciler.diff import FIELD_MANAGER, compared, content_hash, why_apply
from gitops_sched.reconciler.inventory import UNKNOWN, Inventory, InventoryStore

OWNER_LABEL = "gitops-sched.io/reconciler"
CRD_KIND = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
NAMESPACE_KIND = ("v1", "Namespace")
PRUNE_NAMESPACES = ("empty", "always", "never")
# What a namespace may hold that we would not delete with it (checked before pruning one).
NAMESPACE_CONTENTS = [
    ("v1", "PersistentVolumeClaim"),
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("batch/v1", "Job"),
]
NAMESPACE_DEFAULTS = {("ConfigMap", "kube-root-ca.crt")}  # put in every namespace by Kubernetes


class SourceConflict(Exception):
    """The inventory belongs to a reconciler of another repo with the same name."""


def stage(ref: ObjectRef) -> int:
    """Apply order: CRDs, namespaces, cluster-scoped objects, namespaced objects."""
    if (ref.api_version, ref.kind) == CRD_KIND:
        return 0
    if (ref.api_version, ref.kind) == NAMESPACE_KIND:
        return 1
    return 2 if not ref.namespace else 3


@dataclass
class SyncResult:
    revision: str
    objects: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    # left in place when the repo dropped them (they carry a no-prune annotation: claims)
    orphaned: list[str] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)  # objects repaired: "Kind/ns/name: fields"
    errors: list[str] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)  # dry run: what would change
    live: dict[ObjectRef, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def applied(self) -> int:
        return len(self.created) + len(self.updated)

    @property
    def changed(self) -> bool:
        return bool(self.applied or self.pruned)


class Syncer:
    def __init__(
        self,
        client: ClusterClient,
        name: str,
        namespace: str,
        source: str,
        prune_namespaces: str = "empty",
        crd_timeout: float = 60.0,
        poll: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if prune_namespaces not in PRUNE_NAMESPACES:
            raise ValueError(f"prune_namespaces must be one of {PRUNE_NAMESPACES}")
        self.client = client
        self.name = name
        self.source = source
        self.prune_namespaces = prune_namespaces
        self.crd_timeout, self.poll, self.sleep = crd_timeout, poll, sleep
        self.inventory_store = InventoryStore(client, namespace, name, FIELD_MANAGER)
        self.selector = f"{OWNER_LABEL}={name}"

    def owned(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The rendered object with our owner label."""
        meta = obj["metadata"]
        labels = {**meta.get("labels", {}), OWNER_LABEL: self.name}
        return {**obj, "metadata": {**meta, "labels": dict(sorted(labels.items()))}}

    # --- reading ---------------------------------------------------------------------

    def read_inventory(self) -> Inventory:
        inventory = self.inventory_store.read()
        if inventory is None:
            return Inventory(self.source)
        if inventory.source and inventory.source != self.source:
            raise SourceConflict(
                f"inventory {self.inventory_store.ref} belongs to {inventory.source}, not "
                f"{self.source}: give this reconciler another --name"
            )
        return inventory

    def list_live(self, kinds: list[tuple[str, str]]) -> dict[ObjectRef, dict[str, Any]]:
        """Our objects of these kinds, one list request per kind."""
        live: dict[ObjectRef, dict[str, Any]] = {}
        for api_version, kind in kinds:
            for obj in self.client.list(api_version, kind, self.selector) or []:
                live[ObjectRef.of(obj)] = obj
        return live

    # --- the sync --------------------------------------------------------------------

    def sync(
        self, rendered: list[dict[str, Any]], revision: str, dry_run: bool = False
    ) -> SyncResult:
        desired = {ObjectRef.of(o): self.owned(o) for o in rendered}
        digests = {ref: content_hash(obj) for ref, obj in desired.items()}
        result = SyncResult(revision, objects=len(desired))
        inventory = self.read_inventory()
        kinds = sorted(
            {(r.api_version, r.kind) for r in [*desired, *inventory.entries]},
            key=lambda k: (stage(ObjectRef(k[0], k[1], "", "")), k),
        )
        live = self.list_live(kinds)
        result.live = live
        todo = {}
        for ref, obj in desired.items():
            reasons = why_apply(obj, live.get(ref))
            if reasons:
                todo[ref] = reasons
        prune = sorted({*inventory.entries, *live} - desired.keys(), key=lambda r: (-stage(r), r))
        foreign = self._foreign_owners([r for r in todo if r not in live])
        for ref, owner in foreign.items():
            result.errors.append(f"{ref}: owned by reconciler {owner!r}; left untouched")
            del todo[ref]
        if dry_run:
            self._dry_run(desired, live, todo, prune, result)
            return result
        new = [r for r in todo if r not in inventory.entries]
        if new:
            grown = Inventory(self.source, inventory.revision, dict(inventory.entries))
            grown.entries.update({r: UNKNOWN for r in new})
            self.inventory_store.write(grown)
        done = self._apply_stages(desired, todo, inventory, digests, live, result)
        kept = self._prune(prune, live, result)
        entries = {ref: digests[ref] for ref in desired if ref in done or ref not in todo}
        for ref in todo:
            if ref not in done:  # failed: keep what we knew (it may exist)
                entries[ref] = inventory.entries.get(ref, UNKNOWN)
        entries.update({ref: inventory.entries.get(ref, UNKNOWN) for ref in kept})
        final = Inventory(self.source, revision, entries)
        if final != inventory:
            self.inventory_store.write(final)
        return result

    def _foreign_owners(self, refs: list[ObjectRef]) -> dict[ObjectRef, str]:
        """New objects that already exist under another reconciler's owner label (one
        unfiltered list per kind, only for kinds with new objects)."""
        owners: dict[ObjectRef, str] = {}
        for api_version, kind in sorted({(r.api_version, r.kind) for r in refs}):
            wanted = {r for r in refs if (r.api_version, r.kind) == (api_version, kind)}
            for obj in self.client.list(api_version, kind, OWNER_LABEL) or []:
                ref = ObjectRef.of(obj)
                owner = obj["metadata"].get("labels", {}).get(OWNER_LABEL)
                if ref in wanted and owner != self.name:
                    owners[ref] = owner
        return owners

    def _apply_stages(self, desired, todo, inventory, digests, live, result) -> set[ObjectRef]:
        """Apply what changed, CRDs first; the refs applied."""
        done: set[ObjectRef] = set()
        ordered = sorted(todo, key=lambda r: (stage(r), r))
        crds = [r for r in ordered if stage(r) == 0]
        rest = [r for r in ordered if stage(r) > 0]
        for ref in crds:
            self._apply_one(ref, desired, todo, inventory, digests, live, result, done)
        blocked = self._wait_for_crds(desired, live) if rest else {}
        for ref in rest:
            why = blocked.get((ref.api_version, ref.kind))
            if why:
                result.errors.append(f"{ref}: {why}")
                continue
            self._apply_one(ref, desired, todo, inventory, digests, live, result, done)
        return done

    def _apply_one(self, ref, desired, todo, inventory, digests, live, result, done) -> None:
        try:
            self.client.apply(desired[ref], FIELD_MANAGER, force=True)
        except ApiFailure as exc:
            result.errors.append(f"{ref}: {exc.message or exc}")
            return
        done.add(ref)
        unchanged_in_repo = inventory.entries.get(ref) == digests[ref]
        if ref not in live:
            if unchanged_in_repo:
                result.drift.append(f"{ref}: deleted")
            result.created.append(str(ref))
        else:
            if unchanged_in_repo:
                result.drift.append(f"{ref}: {', '.join(todo[ref])}")
            result.updated.append(str(ref))

    def _wait_for_crds(self, desired, live) -> dict[tuple[str, str], str]:
        """Wait until every rendered CRD is Established; the kinds of those that are not."""
        pending = {
            ref: desired[ref]
            for ref in desired
            if (ref.api_version, ref.kind) == CRD_KIND and not _established(live.get(ref))
        }
        deadline = time.monotonic() + self.crd_timeout
        while pending:
            for ref in list(pending):
                current = self.client.get(ref)
                if _established(current):
                    del pending[ref]
            if not pending or time.monotonic() >= deadline:
                break
            self.sleep(self.poll)
        blocked = {}
        for ref, crd in pending.items():
            spec = crd["spec"]
            for version in spec["versions"]:
                kind = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                blocked[kind] = f"its CRD {ref.name} is not Established"
        return blocked

    def _prune(self, prune: list[ObjectRef], live, result) -> list[ObjectRef]:
        """Delete what we manage and the repo no longer has; the refs that could not go."""
        kept = []
        for ref in prune:
            obj = live.get(ref)
            if obj is None:
                continue  # gone already, or no longer labelled ours: not ours to delete
            annotations = obj["metadata"].get("annotations") or {}
            if any(annotations.get(key) == value for key, value in NO_PRUNE.items()):
                result.orphaned.append(str(ref))  # its data outlives the repo's mention
                continue
            if (ref.api_version, ref.kind) == NAMESPACE_KIND:
                reason = self._keeps_namespace(ref.name)
                if reason:
                    result.errors.append(f"{ref}: not pruned: {reason}")
                    kept.append(ref)
                    continue
            try:
                self.client.delete(ref)
            except ApiFailure as exc:
                result.errors.append(f"{ref}: prune failed: {exc.message or exc}")
                kept.append(ref)
                continue
            result.pruned.append(str(ref))
        return kept

    def _keeps_namespace(self, namespace: str) -> str | None:
        if self.prune_namespaces == "always":
            return None
        if self.prune_namespaces == "never":
            return "namespaces are never pruned (--prune-namespaces=never)"
        for api_version, kind in NAMESPACE_CONTENTS:
            for obj in self.client.list(api_version, kind, namespace=namespace) or []:
                meta = obj["metadata"]
                ours = meta.get("labels", {}).get(OWNER_LABEL) == self.name
                if ours or (kind, meta["name"]) in NAMESPACE_DEFAULTS:
                    continue
                if kind == "Pod" and meta.get("ownerReferences"):
                    continue  # a controller's pod goes with its controller
                return f"it holds {kind}/{meta['name']}, which gitops-sched does not manage"
        return None

    def _dry_run(self, desired, live, todo, prune, result) -> None:
        for ref in sorted(todo, key=lambda r: (stage(r), r)):
            before = live.get(ref)
            try:
                after = self.client.apply(desired[ref], FIELD_MANAGER, force=True, dry_run=True)
            except ApiFailure as exc:
                if exc.status == 404 and before is None:
                    after = desired[ref]  # its namespace or CRD does not exist yet
                else:
                    result.errors.append(f"{ref}: {exc.message or exc}")
                    continue
            (result.created if before is None else result.updated).append(str(ref))
            result.diff.append(_unified(ref, before, after))
        for ref in prune:
            if ref in live:
                result.pruned.append(str(ref))
                result.diff.append(_unified(ref, live[ref], None))


def _established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _unified(ref: ObjectRef, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    def text(obj: dict[str, Any] | None) -> list[str]:
        if obj is None:
            return []
        return yaml.safe_dump(compared(obj), sort_keys=True).splitlines(keepends=True)

    lines = difflib.unified_diff(
        text(before),
        text(after),
        f"live/{ref}" if before is not None else "/dev/null",
        f"repo/{ref}" if after is not None else "/dev/null",
    )
    return "".join(lines)
