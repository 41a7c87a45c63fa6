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
                on_node.setdefault(node, []).append(job.name)
    for name in session.projects_by_ratio(queues):
        for job in queues[name]:
            current = session.jobs[job.name]
            if current.running or current.request.kind is not RequestKind.WHOLE:
                continue
            if quota_blocker(session, current) or not may_reclaim(session, current):
                continue
            need = current.request.count * current.min_available
            if session.free_whole(current) < need:
                continue
            nodes = sorted(session.candidate_nodes(current), key=lambda n: (-n.free_whole, n.name))
            for node in nodes:
                movable = [session.jobs[m] for m in on_node.get(node.name, ())]
                if _make_room(session, current, node, movable):
                    session.pending_reasons.pop(job.name, None)
                    break


def _make_room(session: Session, job: Job, node: NodeUse, candidates: list[Job]) -> bool:
    """Move `candidates` (preemptible jobs seen on `node`) off it until `job` fits."""
    movable = sorted(
        (j for j in candidates if any(p.node == node.name for p in j.placement)),
        key=lambda j: (session.job_gpus(j), j.name),
    )
    with session.statement() as commit:
        moved: list[str] = []
        for victim in movable:
            session.evict(victim, EvictReason.CONSOLIDATE, by=job.name)
            moved.append(victim.name)
            if place(session, session.jobs[job.name]):
                if all(place(session, session.jobs[m]) for m in moved):
                    commit()
                    return True
                return False
    return False
