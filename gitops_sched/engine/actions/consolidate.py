"""Consolidate: when free GPUs are scattered so a pending job fits nowhere, move work.

Only when the allowed nodes have enough free GPUs in total (the job is blocked by
fragmentation, not by capacity): preemptible jobs on one node are moved elsewhere,
smallest first, until the pending job fits there; kept only if every moved job finds
a new place, so nothing is lost, only restarted.
"""

from __future__ import annotations

from gitops_sched.engine.admission import may_reclaim, quota_blocker
from gitops_sched.engine.placement import place
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import EvictReason, Job, RequestKind
from gitops_sched.engine.usage import NodeUse


def consolidate(session: Session) -> None:
    if not session.snapshot.policy.consolidation:
        return
    queues = session.pending_by_project()
    on_node: dict[str, list[str]] = {}
    for job in session.running():
        if job.preemptible and job.request.kind is RequestKind.WHOLE:
            for node in sorted({pod.node for pod in job.placement}):
                on_node.setdefault(node, []).append(job.key)
    for name in session.projects_by_ratio(queues):
        for job in queues[name]:
            current = session.jobs[job.key]
            if current.missing == 0 or current.request.kind is not RequestKind.WHOLE:
                continue
            if quota_blocker(session, current) or not may_reclaim(session, current):
                continue
            need = current.request.count * current.next_pods
            if session.free_whole(current) < need:
                continue
            nodes = sorted(session.candidate_nodes(current), key=lambda n: (-n.free_whole, n.name))
            for node in nodes:
                movable = [session.jobs[m] for m in on_node.get(node.name, ())]
                if _make_room(session, current, node, movable):
                    session.pending_reasons.pop(job.key, None)
                    break


def _make_room(session: Session, job: Job, node: NodeUse, candidates: list[Job]) -> bool:
    """Move `candidates` (preemptible jobs seen on `node`) off it until `job` fits."""
    movable = sorted(
        (j for j in candidates if any(p.node == node.name for p in j.placement)),
        key=lambda j: (session.placed_gpus(j), j.key),
    )
    with session.statement() as commit:
        moved: list[tuple[Job, int]] = []
        for victim in movable:
            session.evict(victim, EvictReason.CONSOLIDATE, by=job.key)
            moved.append((victim, len(victim.placement)))
            if place(session, job):
                if all(place(session, m, count) for m, count in moved):
                    commit()
                    return True
                return False
    return False
