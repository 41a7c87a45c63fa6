"""Fold a cycle's decisions into the next snapshot, and run cycles until nothing changes."""

from __future__ import annotations

from dataclasses import replace

from gitops_sched.engine.cycle import schedule
from gitops_sched.engine.types import Decisions, EvictReason, Node, Snapshot

STOPPING = (EvictReason.TIME_LIMIT, EvictReason.IDLE)


def apply_decisions(snapshot: Snapshot, decisions: Decisions) -> Snapshot:
    """Evictions first, then binds (a moved job is evicted and bound in one cycle)."""
    jobs = {job.name: job for job in snapshot.jobs}
    stopped = set()
    for evict in decisions.evictions:
        jobs[evict.job] = replace(jobs[evict.job], placement=(), started_at=None, idle_since=None)
        if evict.reason in STOPPING:
            stopped.add(evict.job)
    for bind in decisions.binds:
        jobs[bind.job] = replace(jobs[bind.job], placement=bind.pods, started_at=snapshot.now)
    nodes = {node.name: node for node in snapshot.nodes}
    for change in decisions.mig_changes:
        nodes[change.node] = _with_mig_change(nodes[change.node], change)
    return replace(
        snapshot,
        nodes=tuple(nodes[node.name] for node in snapshot.nodes),
        jobs=tuple(jobs[job.name] for job in snapshot.jobs if job.name not in stopped),
    )


def _with_mig_change(node: Node, change) -> Node:
    gpus = list(node.gpus)
    gpu = gpus[change.gpu]
    instances = [i for i in gpu.mig_instances if i != change.instance]
    if change.create:
        instances.append(change.instance)
    gpus[change.gpu] = replace(gpu, mig_instances=tuple(sorted(instances, key=lambda i: i.start)))
    return replace(node, gpus=tuple(gpus))


def settle(snapshot: Snapshot, max_cycles: int = 50) -> tuple[Snapshot, list[Decisions]]:
    """Cycle until one changes nothing; the last Decisions carry the settled status."""
    history: list[Decisions] = []
    for _ in range(max_cycles):
        decisions = schedule(snapshot)
        history.append(decisions)
        if not decisions.changed:
            break
        snapshot = apply_decisions(snapshot, decisions)
    return snapshot, history
