"""Fold a cycle's decisions into the next snapshot, and run cycles until nothing changes."""

from __future__ import annotations

from dataclasses import replace

from gitops_sched.engine.cycle import schedule_carrying
from gitops_sched.engine.types import Decisions, EvictReason, MigChange, Node, Snapshot
from gitops_sched.engine.usage import Usage
from gitops_sched.gcpause import paused_gc
from gitops_sched.hardware.mig import MigInstance, in_layout_order

STOPPING = (EvictReason.TIME_LIMIT, EvictReason.IDLE)


def apply_decisions(snapshot: Snapshot, decisions: Decisions) -> Snapshot:
    """The next snapshot, as a simulated cluster would be after carrying the decisions out.

    Evictions first, then binds (a moved job is evicted and bound in one cycle); evicted
    pods are gone at once (a simulated pod takes no time to stop, so nothing is left
    releasing). A gang left running fewer than `min_available` pods keeps the time it
    became short, for the stale-gang grace period.
    """
    jobs = {job.key: job for job in snapshot.jobs}
    stopped = set()
    for evict in decisions.evictions:
        jobs[evict.job] = jobs[evict.job].without_pods(evict.pods)
        if evict.reason in STOPPING:
            stopped.add(evict.job)
    for bind in decisions.binds:
        jobs[bind.job] = jobs[bind.job].with_pods(bind.pods, snapshot.now)
    for key, job in jobs.items():
        jobs[key] = job.tracking_short(snapshot.now)
    nodes = {node.name: node for node in snapshot.nodes}
    for name, layouts in _mig_layouts(nodes, decisions.mig_changes).items():
        gpus = list(nodes[name].gpus)
        for index, instances in layouts.items():
            gpus[index] = replace(gpus[index], mig_instances=in_layout_order(instances))
        nodes[name] = replace(nodes[name], gpus=tuple(gpus))
    return replace(
        snapshot,
        nodes=tuple(nodes[node.name] for node in snapshot.nodes),
        jobs=tuple(jobs[job.key] for job in snapshot.jobs if job.key not in stopped),
        releasing=(),
    )


def _mig_layouts(
    nodes: dict[str, Node], changes: tuple[MigChange, ...]
) -> dict[str, dict[int, set[MigInstance]]]:
    """The instances each GPU the changes touch has once they are made, by node and GPU
    index: each node is then built once, not once per change (a first cycle may create a
    thousand instances). A layout is a set: in_layout_order gives it its one order."""
    layouts: dict[str, dict[int, set[MigInstance]]] = {}
    for change in changes:
        gpus = layouts.setdefault(change.node, {})
        if change.gpu not in gpus:
            gpus[change.gpu] = set(nodes[change.node].gpus[change.gpu].mig_instances)
        if change.create:
            gpus[change.gpu].add(change.instance)
        else:
            gpus[change.gpu].discard(change.instance)
    return layouts


@paused_gc()
def settle(snapshot: Snapshot, max_cycles: int = 50) -> tuple[Snapshot, list[Decisions]]:
    """Cycle until one changes nothing; the last Decisions carry the settled status."""
    history: list[Decisions] = []
    carried: Usage | None = None
    for _ in range(max_cycles):
        decisions, usage = schedule_carrying(snapshot, carried)
        history.append(decisions)
        if not decisions.changed:
            break
        # the next cycle carries on from the GPU usage this one ended with, which is the
        # next snapshot's, unless pods were releasing (their holders are the session's)
        carried = None if snapshot.releasing else usage
        snapshot = apply_decisions(snapshot, decisions)
    return snapshot, history
