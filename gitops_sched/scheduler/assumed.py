"""What the scheduler has done and its informers have not shown yet.

A bind or an eviction reaches the informer's cache only when its watch event arrives. A
cycle that ran before that would see the pod still pending, or still running, and could
give its GPUs to another pod. So, as kube-scheduler's "assumed pods", the scheduler lays
its own writes over the cached pods until the cache shows them (or they are too old to
trust: the write may have been lost).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

ASSUME_FOR_S = 30.0  # after this, the cache is believed even if it never showed our write


@dataclass
class _Bind:
    node: str
    annotations: dict[str, str]
    at: float


@dataclass
class Assumed:
    binds: dict[str, _Bind] = field(default_factory=dict)  # pod uid -> where we bound it
    evictions: dict[str, float] = field(default_factory=dict)  # pod uid -> when we evicted it

    def bound(self, uid: str, node: str, annotations: dict[str, str], now: float) -> None:
        self.binds[uid] = _Bind(node, dict(annotations), now)

    def evicted(self, uid: str, now: float) -> None:
        self.evictions[uid] = now

    def overlay(self, pods: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        """The cached pods with our unseen writes applied; assumptions the cache has caught up
        with, or that are too old, are dropped."""
        if not self.binds and not self.evictions:
            return pods
        seen: set[str] = set()
        out = []
        for pod in pods:
            uid = (pod.get("metadata") or {}).get("uid", "")
            seen.add(uid)
            out.append(self._apply(uid, pod, now))
        for uids in (self.binds, self.evictions):
            for uid in [u for u in uids if u not in seen]:  # the pod is gone
                del uids[uid]
        return out

    def _apply(self, uid: str, pod: dict[str, Any], now: float) -> dict[str, Any]:
        bind, evicted_at = self.binds.get(uid), self.evictions.get(uid)
        if bind is not None and (pod["spec"].get("nodeName") or now - bind.at > ASSUME_FOR_S):
            del self.binds[uid]
            bind = None
        terminating = bool(pod["metadata"].get("deletionTimestamp"))
        if evicted_at is not None and (terminating or now - evicted_at > ASSUME_FOR_S):
            del self.evictions[uid]
            evicted_at = None
        if bind is None and evicted_at is None:
            return pod
        pod = copy.deepcopy(pod)
        if bind is not None:
            pod["spec"]["nodeName"] = bind.node
            pod["metadata"].setdefault("annotations", {}).update(bind.annotations)
        if evicted_at is not None:
            stamp = datetime.fromtimestamp(evicted_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            pod["metadata"]["deletionTimestamp"] = stamp
        return pod
