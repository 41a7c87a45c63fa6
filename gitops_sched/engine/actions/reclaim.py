"""Reclaim: a project below its fair share (or its deserved quota) takes GPUs back.

Victims are preemptible jobs of projects above their fair share, taken one at a time
from the project furthest above it, so the order of projects by allocated/fair-share
is kept, and never so many that a victim project (or its department) drops below its
fair share. A project still below its deserved quota may take any work of projects
over their own deserved quota, because deserved quota is guaranteed.
"""

from __future__ import annotations

from gitops_sched.engine.actions.victims import evict_until_placed
from gitops_sched.engine.admission import may_reclaim, quota_blocker
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import GPU_EPSILON, EvictReason, Job

MAX_FAILED_PER_PROJECT = 2  # a queue whose first jobs cannot reclaim waits for next cycle


def reclaim(session: Session) -> None:
    queues = session.pending_by_project()
    victims = session.preemptible_by_project()
    for name in session.projects_by_ratio(queues):
        failed = 0
        for job in queues[name]:
            if failed >= MAX_FAILED_PER_PROJECT:
                break
            if session.jobs[job.name].running or quota_blocker(session, job):
                continue
            if not may_reclaim(session, job):
                continue
            if _reclaim_for(session, job, victims):
                session.pending_reasons.pop(job.name, None)
            else:
                failed += 1


def _reclaim_for(session: Session, job: Job, victims: dict[str, list[Job]]) -> bool:
    guaranteed = (
        session.allocated[job.project] + session.job_gpus(job)
        <= session.projects[job.project].deserved + GPU_EPSILON
    )
    nodes = {n.name for n in session.candidate_nodes(job)} if job.node_groups else None
    over = [
        p
        for p in victims
        if p != job.project
        and (guaranteed or session.allocated[p] > session.fair_share.get(p, 0.0))
    ]
    cursors = dict.fromkeys(over, 0)

    def next_victim() -> Job | None:
        for project in sorted(cursors, key=lambda p: (-session.ratio(p), p)):
            candidates = victims[project]
            while cursors[project] < len(candidates):
                victim = session.jobs[candidates[cursors[project]].name]
                usable = victim.running and (
                    nodes is None or any(pod.node in nodes for pod in victim.placement)
                )
                if usable:
                    break
                cursors[project] += 1
            else:
                continue
            if _may_lose(session, job, victim, guaranteed):
                cursors[project] += 1
                return victim
        return None

    return evict_until_placed(session, job, EvictReason.RECLAIM, next_victim)


def _may_lose(session: Session, job: Job, victim: Job, guaranteed: bool) -> bool:
    """Whether the victim's project (and department) stays at or above its floor."""
    amount = session.job_gpus(victim)
    gain = session.job_gpus(job)
    queues = [(victim.project, job.project)]
    victim_dept = session.department_of(victim.project)
    if victim_dept != session.department_of(job.project):
        queues.append((victim_dept, session.department_of(job.project)))
    for queue, claimant in queues:
        share = session.fair_share.get(queue, 0.0)
        left = session.allocated[queue] - amount
        if guaranteed:
            # deserved quota is guaranteed: any work over the victim's own quota may go,
            # even a gang that leaves it below its quota once evicted whole
            spec = session.projects.get(queue) or session.departments.get(queue)
            if spec is None or session.allocated[queue] <= spec.deserved + GPU_EPSILON:
                return False
            continue
        if left < share - GPU_EPSILON:
            return False
        claimant_share = session.fair_share.get(claimant, 0.0)
        if share > GPU_EPSILON and claimant_share > GPU_EPSILON:
            claimant_after = (session.allocated[claimant] + gain) / claimant_share
            if left / share < claimant_after - GPU_EPSILON:
                return False
    return True
