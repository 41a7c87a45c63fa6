"""What the scheduler has written and its informers have not shown yet.

A write reaches the informer's cache only when its watch event arrives, and a watch can
lag, or go silent. A cycle that ran before would see the pod still pending, a reservation
pod not there, a victim still running, and could give the same GPU twice. So, as
kube-scheduler's "assumed pods", every write the scheduler makes to a pod is laid over
the cached pods until the cache shows it:

- a Binding: the pod bound to its node, with the Binding's annotations;
- a pod created (a reservation pod): the pod as the API answered it, or as sent;
- an Eviction or a delete: the pod terminating (it holds its GPUs until it has gone).

A write whose outcome is unknown (the connection dropped, a 5xx, a timeout, a 409 saying
the cache is behind) is assumed done (the GPUs it takes are taken), and so is a write the
cache has not shown after `ASSUME_FOR_S`: both are checked by reading the pod itself
(`to_check`, then `read`), and the pod as read is laid over the cache until the cache has
that version or a later one. An assumption is never dropped just for being old: a silent
watch would then hand out the GPUs again. A write the server refused (a 429, a 404) is not
assumed at all.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

ASSUME_FOR_S = 30.0  # unconfirmed for this long, a write is checked by reading the pod
Key = tuple[str, str]  # namespace, name


class Expect(Enum):
    BOUND = "bound"  # spec.nodeName set (to `Write.node`, as far as we know)
    CREATED = "created"  # the pod exists (as `Write.obj`)
    TERMINATING = "terminating"  # deletionTimestamp set, or gone
    READ = "read"  # the pod is `Write.obj`, read after the write
    GONE = "gone"  # read: no such pod


# writes that hold the whole pod: the overlay lists it even while the cache does not
KNOWN_ONLY_HERE = (Expect.CREATED, Expect.READ)


@dataclass
class Write:
    expect: Expect
    uid: str  # "" when not known (a create whose answer was lost)
    at: float
    node: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    obj: dict[str, Any] | None = None
    unsure: bool = False  # the outcome is unknown: check at the next cycle


@dataclass
class Assumed:
    writes: dict[Key, Write] = field(default_factory=dict)

    # --- writes in ---------------------------------------------------------------------

    def bound(
        self,
        key: Key,
        uid: str,
        node: str,
        annotations: dict[str, str],
        now: float,
        unsure: bool = False,
    ) -> None:
        known = self.writes.get(key)
        if known is not None and known.obj is not None and known.expect in KNOWN_ONLY_HERE:
            # a pod the cache may not list yet (we made it, or read it), then bound
            obj = _bound(known.obj, node, annotations)
            unsure = unsure or known.unsure
            self.writes[key] = Write(Expect.CREATED, known.uid or uid, now, obj=obj, unsure=unsure)
            return
        self.writes[key] = Write(Expect.BOUND, uid, now, node, dict(annotations), unsure=unsure)

    def created(self, obj: dict[str, Any], now: float, unsure: bool = False) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        self.writes[key] = Write(Expect.CREATED, meta.get("uid") or "", now, obj=obj, unsure=unsure)

    def terminating(self, key: Key, uid: str, now: float, unsure: bool = False) -> None:
        self.writes[key] = Write(Expect.TERMINATING, uid, now, unsure=unsure)

    # --- checking ----------------------------------------------------------------------

    def to_check(self, now: float) -> list[Key]:
        """The pods to read: their write's outcome is unknown, or unconfirmed for long."""
        return sorted(
            key
            for key, write in self.writes.items()
            if write.unsure or now - write.at > ASSUME_FOR_S
        )

    def read(self, key: Key, obj: dict[str, Any] | None, now: float) -> None:
        """The pod as a GET just gave it (None: not found), believed over the cache."""
        if key not in self.writes:
            return
        if obj is None:
            self.writes[key] = Write(Expect.GONE, self.writes[key].uid, now)
        else:
            self.writes[key] = Write(Expect.READ, obj["metadata"].get("uid") or "", now, obj=obj)

    # --- the cache with our writes -----------------------------------------------------

    def overlay(self, pods: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        """The cached pods with our unconfirmed writes applied; writes the cache has
        caught up with, or whose pod has gone, are dropped."""
        if not self.writes:
            return pods
        out = []
        seen: set[Key] = set()
        for pod in pods:
            meta = pod.get("metadata") or {}
            key = (meta.get("namespace") or "", meta.get("name") or "")
            seen.add(key)
            write = self.writes.get(key)
            if write is None:
                out.append(pod)
                continue
            if (write.uid and meta.get("uid") != write.uid) or _shows(pod, write):
                del self.writes[key]  # another pod of that name now, or confirmed
                out.append(pod)
            elif write.expect is not Expect.GONE:
                out.append(_applied(pod, write))
        for key, write in list(self.writes.items()):
            if key in seen:
                continue
            if write.obj is not None and write.expect in KNOWN_ONLY_HERE:
                out.append(copy.deepcopy(write.obj))  # made by us, not listed yet
            else:
                del self.writes[key]  # the pod has gone
        return out


def _shows(pod: dict[str, Any], write: Write) -> bool:
    """Whether the cached pod shows the write (or something after it)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if write.expect is Expect.BOUND:
        return bool(spec.get("nodeName"))
    if write.expect is Expect.TERMINATING:
        return bool(meta.get("deletionTimestamp"))
    if write.expect is Expect.CREATED:
        assert write.obj is not None
        return bool(spec.get("nodeName")) or not (write.obj.get("spec") or {}).get("nodeName")
    if write.expect is Expect.READ:
        assert write.obj is not None
        return _not_older(meta.get("resourceVersion"), write.obj["metadata"].get("resourceVersion"))
    return False  # GONE: shown when the pod is no longer listed


def _not_older(cached: Any, read: Any) -> bool:
    """Whether the cache's version of a pod is the one read, or later. Versions are etcd
    revisions: compared as numbers when they are (kube-apiserver's always are), else only
    equal ones count."""
    if not isinstance(cached, str) or not isinstance(read, str):
        return False
    if cached.isdigit() and read.isdigit():
        return int(cached) >= int(read)
    return cached == read


def _applied(pod: dict[str, Any], write: Write) -> dict[str, Any]:
    if write.expect is Expect.READ:
        assert write.obj is not None
        return copy.deepcopy(write.obj)
    if write.expect is Expect.CREATED:  # listed, not bound yet as far as the cache shows
        assert write.obj is not None
        return _bound(pod, (write.obj.get("spec") or {}).get("nodeName") or "", {})
    if write.expect is Expect.BOUND:
        return _bound(pod, write.node, write.annotations)
    pod = copy.deepcopy(pod)
    stamp = datetime.fromtimestamp(write.at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    pod["metadata"]["deletionTimestamp"] = stamp
    return pod


def _bound(pod: dict[str, Any], node: str, annotations: dict[str, str]) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod.setdefault("spec", {})["nodeName"] = node
    pod["metadata"].setdefault("annotations", {}).update(annotations)
    return pod
