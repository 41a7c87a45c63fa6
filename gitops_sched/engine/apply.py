"""Fold a cycle's decisions into the next snapshot, and run cycles until nothing changes."""

from __future__ import annotations

from dataclasses import replace

from gitops_sched.engine.cycle import schedule_carrying
from gitops_sched.engine.types import Decisions, EvictReason, Node, Snapshot
from gitops_sched.engine.usage import Usage
from gitops_sched.gcpause import paused_gc
from gitops_sched.hardware.mig import in_layout_order

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
    for change in decisions.mig_changes:
        nodes[change.node] = _with_mig_change(nodes[change.node], change)
    return replace(
        snapshot,
        nodes=tuple(nodes[node.name] for node in snapshot.nodes),
        jobs=tuple(jobs[job.key] for job in snapshot.jobs if job.key not in stopped),
        releasing=(),
    )


def _with_mig_change(node: Node, change) -> Node:
    gpus = list(node.gpus)
    gpu = gpus[change.gpu]
    instances = [i for i in gpu.mig_instances if i != change.instance]
    if change.create:
        instances.append(change.instance)
    gpus[change.gpu] = replace(gpu, mig_instances=in_layout_order(instances))
    return replace(node, gpus=tuple(gpus))


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
