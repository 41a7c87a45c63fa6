"""One sync: make the objects this reconciler manages equal to the rendered repo.

1. read the inventory; list each kind once, by the owner label (one request per kind);
2. decide per object: unchanged (no request at all), to apply (changed in the repo, or
   drifted in the cluster), or to prune (in the inventory or labelled ours, not rendered);
3. record new objects in the inventory before creating them (the inventory's namespace,
   the reconciler's own, is created first when it does not exist);
4. apply with server-side apply (field manager `gitops-sched`, forced: the repo wins) in
   stages: CRDs, then wait until they are Established; namespaces; everything else;
5. replace what cannot change in place (`replace`: a Job whose pod template changed): delete
   in the foreground, wait until the old object and its pods are gone, create it again; one
   still terminating after `replace_timeout` is created by a later sync;
6. prune, custom resources and namespaced objects first, namespaces and CRDs last; never
   the reconciler's own namespace; an object already being deleted (a namespace
   kube-controller-manager is emptying) is left to go. A namespace goes only when discovery
   says it holds nothing we do not manage (every namespaced kind the server lists; the
   defaults Kubernetes puts in every namespace, Events and objects with an owner aside);
   one kept is a warning and stays in the inventory, pruned by the first sync that finds it
   empty;
7. write the inventory when it changed.

Objects carrying another reconciler's owner label are never touched, whatever their other
labels say. An object that exists without our owner label and is not in the inventory was
made by someone else: it is not taken (an error naming it) unless the live object carries
`gitops-sched.io/adopt: "true"` or the sync adopts (`--adopt`). A failed object is reported
and the others go on; the inventory keeps listing anything that may exist, so a sync cut off
at any request is finished by the next one.
"""

from __future__ import annotations

import difflib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from gitops_sched.cluster.client import ClusterClient, ObjectRef
from gitops_sched.cluster.diff import (
    FIELD_MANAGER,
    compared,
    content_hash,
    differences,
    value_changes,
    why_apply,
)
from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.cluster.replace import (
    FOREGROUND,
    immutable_fields,
    refused_as_immutable,
    replaceable,
    terminating,
)
from gitops_sched.compiler.storage import NO_PRUNE
from gitops_sched.reconciler.inventory import UNKNOWN, Inventory, InventoryStore

log = logging.getLogger(__name__)

OWNER_LABEL = "gitops-sched.io/reconciler"
CRD_KIND = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
NAMESPACE_KIND = ("v1", "Namespace")
PRUNE_NAMESPACES = ("empty", "always", "never")
# put in every namespace by Kubernetes: they go with it
NAMESPACE_DEFAULTS = {("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}
# records of what happened in a namespace, not contents: they go with it
NAMESPACE_RECORDS = {("v1", "Event"), ("events.k8s.io/v1", "Event")}
# on the live object, the owner's consent to let this reconciler take it over
ADOPT_ANNOTATION = "gitops-sched.io/adopt"


def owned(obj: dict[str, Any], name: str) -> dict[str, Any]:
    """A rendered object as the reconciler `name` applies it: with its owner label, by which
    a later sync finds it as its own."""
    meta = obj["metadata"]
    labels = {**meta.get("labels", {}), OWNER_LABEL: name}
    return {**obj, "metadata": {**meta, "labels": dict(sorted(labels.items()))}}


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
    # deleted and created again: a field fixed at creation changed (a Job's pod template)
    replaced: list[str] = field(default_factory=list)
    # replacements whose old object is still being deleted (its pods stopping): "ref: why";
    # a later sync creates them
    waiting: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    # left in place when the repo dropped them (they carry a no-prune annotation: claims)
    orphaned: list[str] = field(default_factory=list)
    # made by someone else, taken over with consent (annotation or --adopt)
    adopted: list[str] = field(default_factory=list)
    # not errors: namespaces the repo dropped kept because they hold what we do not manage
    warnings: list[str] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)  # objects repaired: "Kind/ns/name: fields"
    errors: list[str] = field(default_factory=list)
    # written for the reconciler itself, not rendered: its inventory's namespace, created
    # first when it does not exist
    prepared: list[str] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)  # dry run: what would change
    live: dict[ObjectRef, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def applied(self) -> int:
        return len(self.created) + len(self.updated) + len(self.replaced) + len(self.adopted)

    @property
    def changed(self) -> bool:
        return bool(self.applied or self.pruned)


@dataclass
class _Pass:
    """What one sync knows and has done so far."""

    desired: dict[ObjectRef, dict[str, Any]]
    digests: dict[ObjectRef, str]
    inventory: Inventory
    live: dict[ObjectRef, dict[str, Any]]
    todo: dict[ObjectRef, list[str]]  # ref -> why it is applied
    result: SyncResult
    done: set[ObjectRef] = field(default_factory=set)  # applied (or replaced) this sync
    adopting: set[ObjectRef] = field(default_factory=set)  # someone else's, taken with consent
    refused: set[ObjectRef] = field(default_factory=set)  # someone else's: never ours
    # ref -> the fields that cannot change in place: deleted and created again
    replace: dict[ObjectRef, list[str]] = field(default_factory=dict)


class Syncer:
    def __init__(
        self,
        client: ClusterClient,
        name: str,
        namespace: str,
        source: str,
        prune_namespaces: str = "empty",
        adopt: bool = False,
        crd_timeout: float = 60.0,
        replace_timeout: float = 60.0,
        poll: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if prune_namespaces not in PRUNE_NAMESPACES:
            raise ValueError(f"prune_namespaces must be one of {PRUNE_NAMESPACES}")
        self.client = client
        self.name = name
        self.source = source
        self.prune_namespaces = prune_namespaces
        self.adopt = adopt
        self.crd_timeout, self.poll, self.sleep = crd_timeout, poll, sleep
        self.replace_timeout = replace_timeout
        self.inventory_store = InventoryStore(client, namespace, name, FIELD_MANAGER)
        self.selector = f"{OWNER_LABEL}={name}"

    def owned(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The rendered object with our owner label."""
        return owned(obj, self.name)

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
        own = ObjectRef(*NAMESPACE_KIND, "", self.inventory_store.ref.namespace)
        if own in prune and own in live:
            prune.remove(own)  # its inventory, Lease and Events (and maybe itself) live there
            result.orphaned.append(str(own))
        p = _Pass(desired, digests, inventory, live, todo, result)
        self._claim(p, [r for r in todo if r not in live], own)
        p.replace = self._replacements(p)
        if dry_run:
            self._dry_run(p, prune)
            return result
        new = [r for r in todo if r not in inventory.entries]
        if new:
            grown = Inventory(self.source, inventory.revision, dict(inventory.entries))
            grown.entries.update({r: UNKNOWN for r in new})
            self._write_inventory(grown, p)
        self._apply_stages(p)
        self._replace(p)
        kept = self._prune(prune, live, result)
        entries = {
            ref: digests[ref]
            for ref in desired
            if ref in p.done or (ref not in todo and ref not in p.refused)
        }
        for ref in todo:
            if ref not in p.done:  # failed or waiting: keep what we knew (it may exist)
                entries[ref] = inventory.entries.get(ref, UNKNOWN)
        entries.update({ref: inventory.entries.get(ref, UNKNOWN) for ref in kept})
        final = Inventory(self.source, revision, entries)
        if final != inventory:
            self._write_inventory(final, p)
        return result

    def _write_inventory(self, inventory: Inventory, p: _Pass) -> None:
        """Write the inventory; its namespace, when the write had to create it, is a
        write of the sync (the repo's own Namespace object, if it renders one, is created
        by its apply as well)."""
        if self.inventory_store.write(inventory):
            p.result.prepared.append(str(self.inventory_store.namespace_ref))

    def _replacements(self, p: _Pass) -> dict[ObjectRef, list[str]]:
        """What cannot be applied in place: objects of a replaceable kind whose change
        touches a field fixed at creation, or that are already being deleted (created again
        once gone); ref -> the fields (or why)."""
        out = {}
        for ref in p.todo:
            want, current = p.desired[ref], p.live.get(ref)
            if current is None or not replaceable(want):
                continue
            if terminating(current):
                out[ref] = ["being deleted"]
            elif fields := immutable_fields(want, value_changes(want, current)):
                out[ref] = fields
        return out

    def _claim(self, p: _Pass, refs: list[ObjectRef], own: ObjectRef) -> None:
        """Of the objects to create, those that exist already (one unfiltered list per kind,
        only for kinds with such objects): another reconciler's are left alone; one without
        an owner label that the inventory does not list is someone else's, taken only with
        consent (the live object's adopt annotation, or `adopt`); the reconciler's own
        namespace (made before the first sync) is ours. Those not taken leave `todo`."""
        kinds = {(r.api_version, r.kind) for r in refs}
        for api_version, kind in sorted(
            kinds, key=lambda k: (stage(ObjectRef(k[0], k[1], "", "")), k)
        ):
            wanted = {r for r in refs if (r.api_version, r.kind) == (api_version, kind)}
            for obj in self.client.list(api_version, kind) or []:
                ref = ObjectRef.of(obj)
                if ref not in wanted:
                    continue
                meta = obj["metadata"]
                owner = (meta.get("labels") or {}).get(OWNER_LABEL)
                consent = (meta.get("annotations") or {}).get(ADOPT_ANNOTATION) == "true"
                if owner is not None and owner != self.name:
                    p.result.errors.append(f"{ref}: owned by reconciler {owner!r}; left untouched")
                elif owner is not None or ref in p.inventory.entries or ref == own:
                    continue  # ours: listed, or labelled ours since our list
                elif consent or self.adopt:
                    p.adopting.add(ref)
                    continue
                else:
                    p.result.errors.append(
                        f"{ref}: exists and was not made by gitops-sched (no "
                        f"{OWNER_LABEL} label, not in the inventory); not taken over: annotate "
                        f'it {ADOPT_ANNOTATION}="true" or sync with --adopt to adopt it'
                    )
                del p.todo[ref]
                p.refused.add(ref)

    def _apply_stages(self, p: _Pass) -> None:
        """Apply what changed in place, CRDs first (replacements are left to `_replace`)."""
        ordered = sorted((r for r in p.todo if r not in p.replace), key=lambda r: (stage(r), r))
        crds = [r for r in ordered if stage(r) == 0]
        rest = [r for r in ordered if stage(r) > 0]
        for ref in crds:
            self._apply_one(p, ref)
        blocked = self._wait_for_crds(p.desired, p.live) if rest else {}
        for ref in rest:
            why = blocked.get((ref.api_version, ref.kind))
            if why:
                p.result.errors.append(f"{ref}: {why}")
                continue
            self._apply_one(p, ref)

    def _apply_one(self, p: _Pass, ref: ObjectRef) -> None:
        try:
            self.client.apply(p.desired[ref], FIELD_MANAGER, force=True)
        except ApiFailure as exc:
            fields = refused_as_immutable(exc)
            if fields and replaceable(p.desired[ref]):
                p.replace[ref] = fields  # a rule we do not know of: replaced all the same
            elif fields:
                p.result.errors.append(
                    f"{ref}: {exc.message or exc}; gitops-sched does not replace a {ref.kind} "
                    "(what it holds would go with it): delete it and the next sync creates it"
                )
            else:
                p.result.errors.append(f"{ref}: {exc.message or exc}")
            return
        p.done.add(ref)
        unchanged_in_repo = p.inventory.entries.get(ref) == p.digests[ref]
        if ref in p.adopting:
            p.result.adopted.append(str(ref))
        elif ref not in p.live:
            if unchanged_in_repo:
                p.result.drift.append(f"{ref}: deleted")
            p.result.created.append(str(ref))
        else:
            if unchanged_in_repo:
                p.result.drift.append(f"{ref}: {', '.join(p.todo[ref])}")
            p.result.updated.append(str(ref))

    def _replace(self, p: _Pass) -> None:
        """Delete each object to replace in the foreground (it goes once its pods are gone),
        wait for all of them together up to `replace_timeout`, create again those gone; the
        others are listed as waiting and created by a later sync."""
        deleted: dict[ObjectRef, str] = {}
        for ref in sorted(p.replace):
            current = p.live.get(ref) or {}
            why = ", ".join(p.replace[ref])
            if not terminating(current):
                try:
                    self.client.delete(ref, propagation=FOREGROUND)
                except ApiFailure as exc:
                    p.result.errors.append(
                        f"{ref}: not replaced ({why} cannot change in place): the delete "
                        f"failed: {exc.message or exc}"
                    )
                    continue
                log.info("replacing %s: %s cannot change in place", ref, why)
            deleted[ref] = current.get("metadata", {}).get("uid", "")
        gone = self._wait_until_gone(deleted)
        for ref in deleted:
            if ref not in gone:
                p.result.waiting.append(
                    f"{ref}: the old object is still being deleted (its pods are stopping); "
                    "a later sync creates it"
                )
                continue
            try:
                self.client.apply(p.desired[ref], FIELD_MANAGER, force=True)
            except ApiFailure as exc:
                p.result.errors.append(f"{ref}: {exc.message or exc}")
                continue
            p.done.add(ref)
            p.result.replaced.append(str(ref))
            if p.inventory.entries.get(ref) == p.digests[ref]:
                p.result.drift.append(f"{ref}: {', '.join(p.replace[ref])} (replaced)")

    def _wait_until_gone(self, deleted: dict[ObjectRef, str]) -> set[ObjectRef]:
        """The refs no longer there (or there as another object, by uid) within
        `replace_timeout`: one list per kind and round, the pause between rounds doubling."""
        pending = dict(deleted)
        deadline = time.monotonic() + self.replace_timeout
        pause = self.poll
        while pending:
            for api_version, kind in sorted({(r.api_version, r.kind) for r in pending}):
                there = {
                    ObjectRef.of(o): o["metadata"].get("uid", "")
                    for o in self.client.list(api_version, kind, self.selector) or []
                }
                for ref in [r for r in pending if (r.api_version, r.kind) == (api_version, kind)]:
                    if there.get(ref) != pending[ref]:
                        del pending[ref]
            if not pending or time.monotonic() >= deadline:
                break
            self.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 5.0)
        return set(deleted) - set(pending)

    def _wait_for_crds(self, desired, live) -> dict[tuple[str, str], str]:
        """Wait until every rendered CRD is Established; the kinds of those that are not."""
        pending = {
            ref: desired[ref]
            for ref in desired
            if (ref.api_version, ref.kind) == CRD_KIND and not established(live.get(ref))
        }
        deadline = time.monotonic() + self.crd_timeout
        while pending:
            for ref in list(pending):
                current = self.client.get(ref)
                if established(current):
                    del pending[ref]
            if not pending or time.monotonic() >= deadline:
                break
            self.sleep(self.poll)
        return {
            kind: f"its CRD {ref.name} is not Established"
            for ref, crd in pending.items()
            for kind in _served(crd)
        }

    def _prune(self, prune: list[ObjectRef], live, result) -> list[ObjectRef]:
        """Delete what we manage and the repo no longer has; the refs that could not go."""
        kept = []
        kinds: list[tuple[str, str]] = []  # namespaced kinds, discovered once per sync
        for ref in prune:
            obj = live.get(ref)
            if obj is None:
                continue  # gone already, or no longer labelled ours: not ours to delete
            if terminating(obj):
                # being deleted already (a namespace being emptied, an object waiting for
                # its finalizers): deleting it again would be a write every sync until it goes
                continue
            annotations = obj["metadata"].get("annotations") or {}
            if any(annotations.get(key) == value for key, value in NO_PRUNE.items()):
                result.orphaned.append(str(ref))  # its data outlives the repo's mention
                continue
            if (ref.api_version, ref.kind) == NAMESPACE_KIND:
                reason = self._keeps_namespace(ref.name, kinds)
                if reason:
                    result.warnings.append(f"{ref}: not pruned: {reason}")
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

    def _keeps_namespace(self, namespace: str, kinds: list[tuple[str, str]]) -> str | None:
        """Why a namespace we manage must stay, or None when it may go: it holds an object of
        some kind (all the server lists: `kinds`, filled on first use) that we do not
        manage, or what it holds could not be read."""
        if self.prune_namespaces == "always":
            return None
        if self.prune_namespaces == "never":
            return "namespaces are never pruned (--prune-namespaces=never)"
        try:
            if not kinds:
                kinds.extend(self.client.listable_kinds(namespaced_only=True))
            for api_version, kind in kinds:
                if (api_version, kind) in NAMESPACE_RECORDS:
                    continue
                for meta in self.client.list_metadata(api_version, kind, namespace):
                    if not self._goes_with_namespace(kind, meta):
                        name = meta.get("name", "")
                        return f"it holds {kind}/{name}, which gitops-sched does not manage"
        except ApiFailure as exc:
            return f"what it holds could not be listed ({exc.message or exc})"
        return None

    def _goes_with_namespace(self, kind: str, meta: dict[str, Any]) -> bool:
        """Ours, a default every namespace gets, or an object with an owner (a Job's pod, a
        Deployment's ReplicaSet: the owner is checked itself)."""
        return (
            (meta.get("labels") or {}).get(OWNER_LABEL) == self.name
            or (kind, meta.get("name")) in NAMESPACE_DEFAULTS
            or bool(meta.get("ownerReferences"))
        )

    def _dry_run(self, p: _Pass, prune: list[ObjectRef]) -> None:
        """Each write the real sync would make, as a server-side dry run (dryRun=All), so
        the server's refusals are the errors the real sync would report. The writes it
        makes first stand in for themselves: the inventory's namespace, when missing
        (`prepared`, as the real sync lists it), and the namespaces and CRDs the sync
        creates, whose objects the server cannot check before they exist."""
        result = p.result
        namespaces = {
            r.name for r in p.todo if (r.api_version, r.kind) == NAMESPACE_KIND and r not in p.live
        }
        own = self.inventory_store.namespace_ref
        if own not in p.live and self.client.get(own) is None:
            namespaces.add(own.name)
            result.prepared.append(str(own))
            note = f"# {own}: created first, for the reconciler's inventory\n"
            result.diff.append(note + _unified(own, None, self.inventory_store.namespace()))
        kinds = {
            kind
            for ref in p.todo
            if (ref.api_version, ref.kind) == CRD_KIND and not established(p.live.get(ref))
            for kind in _served(p.desired[ref])
        }
        for ref in sorted(p.todo, key=lambda r: (stage(r), r)):
            before = p.live.get(ref)
            first = ""  # what the sync creates before it: the server cannot check it now
            if ref in p.replace:
                after = p.desired[ref]  # a server dry run would refuse the change in place
            else:
                try:
                    after = self.client.apply(
                        p.desired[ref], FIELD_MANAGER, force=True, dry_run=True
                    )
                except ApiFailure as exc:
                    first = _created_first(ref, namespaces, kinds)
                    if exc.status == 404 and before is None and first:
                        after = p.desired[ref]
                    elif refused_as_immutable(exc) and replaceable(p.desired[ref]):
                        p.replace[ref] = refused_as_immutable(exc)
                        after = p.desired[ref]
                    else:
                        result.errors.append(f"{ref}: {exc.message or exc}")
                        continue
            if ref in p.replace:
                result.replaced.append(str(ref))
                note = f"# {ref}: replaced, {', '.join(p.replace[ref])} cannot change in place"
                shown = _shaped(before, after)  # what the server added is no difference
                result.diff.append(f"{note}\n{_unified(ref, shown, after)}")
                continue
            if ref in p.adopting:
                result.adopted.append(str(ref))
            else:
                (result.created if before is None else result.updated).append(str(ref))
            note = f"# {ref}: checked by the server once {first} exists\n" if first else ""
            result.diff.append(note + _unified(ref, before, after))
        for ref in prune:
            if ref in p.live:
                result.pruned.append(str(ref))
                result.diff.append(_unified(ref, p.live[ref], None))


def _served(crd: dict[str, Any]) -> list[tuple[str, str]]:
    """The (apiVersion, kind) pairs a CRD serves."""
    spec = crd["spec"]
    kind = spec["names"]["kind"]
    return [(f"{spec['group']}/{version['name']}", kind) for version in spec["versions"]]


def _created_first(ref: ObjectRef, namespaces: set[str], kinds: set[tuple[str, str]]) -> str:
    """What the sync creates before `ref` that `ref` needs (its namespace, its kind's
    CRD), as words; "" when neither."""
    if ref.namespace in namespaces:
        return f"its namespace {ref.namespace}"
    if (ref.api_version, ref.kind) in kinds:
        return f"the CRD of {ref.kind}"
    return ""


def established(crd: dict[str, Any] | None) -> bool:
    """Whether the API server serves the CRD's kinds (its Established condition is True)."""
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _shaped(have: Any, want: Any, path: tuple[str, ...] = ()) -> Any:
    """`have` cut to the fields `want` has (lists item by item when as long), with `want`'s
    spelling of the values equal by value (`12` for `12000m`)."""
    if isinstance(have, dict) and isinstance(want, dict):
        return {k: _shaped(have[k], want[k], (*path, k)) for k in want if k in have}
    if isinstance(have, list) and isinstance(want, list) and len(have) == len(want):
        return [_shaped(h, w, (*path, str(i))) for i, (h, w) in enumerate(zip(have, want))]
    return want if not differences(want, have, path) else have


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
