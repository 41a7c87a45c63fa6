"""Consolidation on random fragmented clusters: work is moved, never lost or doubled."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gitops_sched.engine import apply_decisions, schedule
from gitops_sched.engine.types import EvictReason, Snapshot
from tests.conftest import examples
from tests.engine_builders import job, nodes, policy, project
from tests.strategies import scattered


@st.composite
def fragmented(draw) -> tuple[Snapshot, int]:
    """Small preemptible jobs scattered so no node has room for the big job, though the
    cluster has enough free GPUs in total; returns the snapshot and the big job's size."""
    node_count = draw(st.integers(2, 4))
    gpus = 4
    cluster = nodes("n", node_count, gpus=gpus)
    free = {(f"n-{i}", g) for i in range(node_count) for g in range(gpus)}
    small = []
    for k in range(draw(st.integers(1, node_count * 2))):
        size, pods = draw(st.integers(1, 2)), draw(st.integers(1, 2))  # 2: a gang on two nodes
        placed = scattered(draw, free, size, pods)
        if placed is None:
            continue
        work = job(f"small-{k}", "q", size, pods=pods)
        small.append(replace(work, placement=placed, submitted=k))
    most_free = max(sum(1 for n, _ in free if n == f"n-{i}") for i in range(node_count))
    assume(most_free < gpus)  # some node is empty: nothing is fragmented
    size = draw(st.integers(most_free + 1, gpus))
    big = job("big", "p", size, submitted=100)
    # q's quota covers the whole cluster, so only consolidation (never reclaim) moves its work
    pol = policy(project("p", gpus), project("q", gpus * node_count))
    return Snapshot(pol, cluster, (*small, big)), len(free) >= size


@settings(max_examples=examples(60), deadline=None)
@given(fragmented())
def test_consolidation_moves_work_without_losing_or_doubling_it(case):
    snapshot, enough_free = case
    decisions = schedule(snapshot)
    moved = {e.job for e in decisions.evictions}
    assert all(e.reason is EvictReason.CONSOLIDATE for e in decisions.evictions)
    assert moved <= {b.job for b in decisions.binds}, "a moved job was not placed again"
    if moved:
        assert "big" in {b.job for b in decisions.binds}
    after = apply_decisions(snapshot, decisions)
    running_before = {j.name for j in snapshot.jobs if j.running}
    assert running_before <= {j.name for j in after.jobs if j.running}
    holders: dict[tuple[str, int], str] = {}
    for j in after.jobs:
        for pod in j.placement:
            for gpu in pod.gpus:
                assert (pod.node, gpu) not in holders, f"GPU {pod.node}/{gpu} given twice"
                holders[(pod.node, gpu)] = j.name
    if not enough_free:
        assert not moved, "moved work although the cluster lacked free GPUs in total"
    # a pod moves only when other work took its place (a gang's pods elsewhere stay put)
    for evicted in decisions.evictions:
        for pod in evicted.pods:
            taken = [holders.get((pod.node, gpu), evicted.job) for gpu in pod.gpus]
            assert set(taken) != {evicted.job}, f"{evicted.job} moved off {pod.node} needlessly"
