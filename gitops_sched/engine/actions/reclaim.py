"""Reclaim: a project below its fair share (or its deserved quota) takes GPUs back.

Victims are preemptible jobs of projects above their fair share, taken one at a time
from the project furthest above it, so the order of projects by allocated/fair-share
is kept, and never so many that a victim project (or its department) drops below its
fair share. A project still below its deserved quota may take any work of projects
over their own deserved quota, because deserved quota is guaranteed.
"""

from __future__ import annotations

from gitops_sched.engine.actions.victims import Victim, VictimPool, evict_until_placed
from gitops_sched.engine.admission import may_reclaim, quota_blocker
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import GPU_EPSILON, EvictReason, Job

MAX_FAILED_PER_PROJECT = 2  # a queue whose first jobs cannot reclaim waits for next cycle


def reclaim(session: Session) -> None:
    queues = session.pending_by_project()
    pool = VictimPool(session)
    # A job shape that could not reclaim is not tried again this cycle: every reclaim
    # only lowers what victims can still give, so a later try would fail the same way.
    failed_shapes: set[tuple] = set()
    for name in session.projects_by_ratio(queues):
        failed = 0
        for job in queues[name]:
            if failed >= MAX_FAILED_PER_PROJECT:
                break
            job = session.jobs[job.key]
            if job.missing == 0 or quota_blocker(session, job):
                continue
            if not may_reclaim(session, job):
                continue
            gain = session.wanted_gpus(job)
            guaranteed = (
                session.allocated[name] + gain <= session.projects[name].deserved + GPU_EPSILON
            )
            shape = (job.request, job.next_pods, job.node_groups, guaranteed)
            if shape in failed_shapes:
                continue
            if _reclaim_for(session, job, pool, gain, guaranteed):
                session.pending_reasons.pop(job.key, None)
            else:
                failed += 1
                failed_shapes.add(shape)


def _reclaim_for(
    session: Session, job: Job, pool: VictimPool, gain: float, guaranteed: bool
) -> bool:
    allowed = set(job.node_groups) or None
    cursors = {
        p: 0
        for p in pool.by_project
        if p != job.project
        and (guaranteed or session.allocated[p] > session.fair_share.get(p, 0.0))
    }

    def next_victim() -> Victim | None:
        for project in sorted(cursors, key=lambda p: (-session.ratio(p), p)):
            index = pool.first_usable(project, cursors[project], allowed)
            if index is not None:
                victim = pool.by_project[project][index]
                if _may_lose(session, job, gain, victim.job, pool.gpus(victim), guaranteed):
                    cursors[project] = index + 1
                    return victim
            # nothing (more) this project can give up for this job
            del cursors[project]
        return None

    return evict_until_placed(session, job, EvictReason.RECLAIM, next_victim)


def _may_lose(
    session: Session, job: Job, gain: float, victim_key: str, amount: float, guaranteed: bool
) -> bool:
    """Whether the victim's project (and department) stays at or above its floor."""
    victim = session.jobs[victim_key]
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
