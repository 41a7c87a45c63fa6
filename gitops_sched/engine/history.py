"""Fairness over time: past usage, decayed, lowers a project's part of the spare GPUs.

KAI Scheduler's time-aware fairness: a queue's usage over a window, each GPU-second
weighted 0.5^(age / halfLife) and normalized to what the cluster could have given in
that window, changes its over-quota weight in each round of the proportion plugin's
split (`divideUpToFairShare`) to

    max(0, w + k * (w - usage))     w: its weight over the weights of the queues asking

so a queue that used more than its weight's part gets less of the spare GPUs, one that
used less gets more; `k` is the policy's `historyWeight` (KAI's kValue). Deserved quota
is handed out before and is never lowered.

Everything here is a function of its arguments: the callers (`simulate`'s `advance:`
steps, the in-cluster scheduler between cycles) `record` what each project held over a
stretch of time and pass the history in the snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from gitops_sched.engine.types import GPU_EPSILON, USAGE_BUCKETS, Fairness, UsageHistory

Buckets = tuple[tuple[float, float], ...]  # (bucket start, GPU-seconds), oldest first
K = TypeVar("K", str, tuple[str, str])  # a project, or a (project, node group)


def decay(fairness: Fairness, age: float) -> float:
    """What a GPU-second `age` seconds old counts for: 1 now, 1/2 one half-life ago."""
    if fairness.half_life_s <= 0:
        return 1.0
    return 0.5 ** (max(age, 0.0) / fairness.half_life_s)


def record(
    history: UsageHistory,
    fairness: Fairness,
    start: float,
    end: float,
    allocated: Mapping[str, float],
    by_group: Mapping[tuple[str, str], float] | None = None,
) -> UsageHistory:
    """The history with each project holding `allocated` GPUs from `start` to `end`
    added (and, for projects with per-node-group quotas, `by_group`: (project, group) ->
    GPUs held there), and the buckets that ended a window or more before `end` forgotten."""
    return UsageHistory(
        _added(history.projects, fairness, start, end, allocated),
        _added(history.node_groups, fairness, start, end, by_group or {}),
    )


def _added(
    entries: tuple[tuple[K, Buckets], ...],
    fairness: Fairness,
    start: float,
    end: float,
    allocated: Mapping[K, float],
) -> tuple[tuple[K, Buckets], ...]:
    """`entries` (key -> buckets) with `allocated` GPUs held from `start` to `end` added
    and the buckets a window or more old forgotten (see record)."""
    width = fairness.bucket_s
    start = max(start, end - fairness.window_s)
    forget = end - fairness.window_s
    by_key: dict[K, dict[float, float]] = {key: dict(buckets) for key, buckets in entries}
    for key, gpus in allocated.items():
        if gpus <= GPU_EPSILON or end <= start:
            continue
        buckets = by_key.setdefault(key, {})
        at = start
        while at < end:
            bucket = math.floor(at / width) * width
            until = min(end, bucket + width)
            buckets[bucket] = buckets.get(bucket, 0.0) + gpus * (until - at)
            at = until
    kept = []
    for key in sorted(by_key):
        left = tuple(sorted((b, s) for b, s in by_key[key].items() if b + width > forget))
        if left:
            kept.append((key, left))
    return tuple(kept)


def window_capacity(fairness: Fairness) -> float:
    """What one GPU held for the whole window counts for, decayed bucket by bucket: the
    denominator that makes usage a share of what the cluster could give."""
    width = fairness.bucket_s
    return sum(width * decay(fairness, (k + 0.5) * width) for k in range(USAGE_BUCKETS))


def past_usage(
    history: UsageHistory, fairness: Fairness, now: float, capacity: float
) -> dict[str, float]:
    """Each project's decayed usage over the window at `now`, as a share of what
    `capacity` GPUs give in the window (1: the whole cluster all the time, no decay)."""
    if capacity <= GPU_EPSILON:
        return {}
    whole = capacity * window_capacity(fairness)
    return {name: _decayed(buckets, fairness, now) / whole for name, buckets in history.projects}


def group_usage(
    history: UsageHistory, fairness: Fairness, now: float, capacity: Mapping[str, float]
) -> dict[tuple[str, str], float]:
    """(project, node group) -> the project's decayed usage in the group, as a share of
    what the group's `capacity` GPUs give in the window: past_usage, one group at a time."""
    result = {}
    for (project, group), buckets in history.node_groups:
        gpus = capacity.get(group, 0.0)
        if gpus > GPU_EPSILON:
            whole = gpus * window_capacity(fairness)
            result[(project, group)] = _decayed(buckets, fairness, now) / whole
    return result


def _decayed(buckets: Buckets, fairness: Fairness, now: float) -> float:
    """The GPU-seconds of the buckets still in the window at `now`, each decayed by the
    age of its middle."""
    width = fairness.bucket_s
    since = now - fairness.window_s
    return sum(
        seconds * decay(fairness, now - start - width / 2)
        for start, seconds in buckets
        if start + width > since and start <= now
    )


def share_weights(weights: Sequence[float], usage: Sequence[float], k: float) -> list[float]:
    """KAI's share weights of the queues asking in one round: each weight over their sum,
    raised by `k` times how far its usage is below that, never below 0.

    Usages add up to at most 1 while the cluster keeps its size, and then so do not all
    share weights vanish; where they would (the cluster shrank), the plain weights are
    used: KAI would leave the spare GPUs to nobody."""
    total = sum(weights)
    if total <= 0:
        return list(weights)
    shares = [max(0.0, w / total + k * (w / total - u)) for w, u in zip(weights, usage)]
    return shares if sum(shares) > 0 else list(weights)


def buckets_of(history: UsageHistory, project: str) -> Buckets:
    """One project's buckets (none if it used nothing in the window)."""
    return next((buckets for name, buckets in history.projects if name == project), ())


def with_buckets(history: UsageHistory, project: str, buckets: Buckets) -> UsageHistory:
    """The history with one project's buckets set (as a restarted scheduler reads them)."""
    rest = [(name, b) for name, b in history.projects if name != project]
    if buckets:
        rest.append((project, tuple(sorted(buckets))))
    return replace(history, projects=tuple(sorted(rest)))


def with_group_buckets(
    history: UsageHistory, key: tuple[str, str], buckets: Buckets
) -> UsageHistory:
    """The history with one (project, node group)'s buckets set (see with_buckets)."""
    rest = [(k, b) for k, b in history.node_groups if k != key]
    if buckets:
        rest.append((key, tuple(sorted(buckets))))
    return replace(history, node_groups=tuple(sorted(rest)))
