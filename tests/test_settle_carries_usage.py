"""A settle's cycles carry the GPU usage on (Usage.carry) instead of building it again:
what `simulate`, `test` and `plan` decide must stay what a fresh session per cycle -- the
in-cluster scheduler's way -- decides."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.engine import apply_decisions, schedule, settle
from gitops_sched.engine.cycle import schedule_carrying
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import Decisions, Snapshot
from gitops_sched.engine.usage import Usage
from tests.conftest import examples
from tests.strategies import pool_quota_snapshots, snapshots


def settle_afresh(snapshot: Snapshot, max_cycles: int = 50) -> tuple[Snapshot, list[Decisions]]:
    """settle as the in-cluster scheduler runs it: a new session from each snapshot."""
    history: list[Decisions] = []
    for _ in range(max_cycles):
        decisions = schedule(snapshot)
        history.append(decisions)
        if not decisions.changed:
            break
        snapshot = apply_decisions(snapshot, decisions)
    return snapshot, history


@settings(max_examples=examples(80), deadline=None)
@given(st.one_of(snapshots(), pool_quota_snapshots()))
def test_a_settle_carrying_usage_decides_as_a_fresh_session_per_cycle(snapshot: Snapshot) -> None:
    assert settle(snapshot) == settle_afresh(snapshot)


@settings(max_examples=examples(80), deadline=None)
@given(snapshots())
def test_a_carried_usage_is_the_usage_built_from_the_next_snapshot(snapshot: Snapshot) -> None:
    decisions, usage = schedule_carrying(snapshot)
    after = apply_decisions(snapshot, decisions)
    assert state(Session(after, usage).usage) == state(Session(after).usage)


def state(usage: Usage) -> dict[str, Any]:
    """Everything a reader of the usage can tell: each GPU's use (its shares and MIG
    instances in their order, sums to the last bit), each node's free GPUs, and the
    indexes' entries, without the order a dict's keys were made in or empty buckets."""
    return {
        "gpus": {
            (name, gpu.index): (
                gpu.whole,
                list(gpu.shares.items()),
                gpu.used,
                list(gpu.mig.items()),
                gpu.busy_instances,
                gpu.is_free,
            )
            for name, use in usage.nodes.items()
            for gpu in use.gpus
        },
        "free": {name: use.free_whole for name, use in usage.nodes.items()},
        "nodes": [use.node for use in usage.nodes.values()],
        "free_index": _buckets(usage.free_index),
        "free_in_domain": _buckets(usage.free_in_domain),
        "domain_free": usage.domain_free,
        "free_total": usage.free_total,
        "shared": _lists(usage.shared),
        "solo": {key: gpus for key, gpus in usage.solo.items() if gpus},
        "idle_mig": _lists(usage.idle_mig),
        "mig_room": _lists(usage.mig_room),
        "mig_idle_any": _lists(usage.mig_idle_any),
    }


def _buckets(index: dict[Any, dict[int, list[str]]]) -> dict[Any, dict[int, list[str]]]:
    return {key: _lists(buckets) for key, buckets in index.items()}


def _lists(index: dict[Any, list[Any]]) -> dict[Any, list[Any]]:
    return {key: entries for key, entries in index.items() if entries}
