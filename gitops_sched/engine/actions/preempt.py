"""Preempt: inside a project, higher-priority pending work evicts lower-priority work.

The project does not grow past its fair share through preemption: it trades its own
lower-priority GPUs for the higher-priority job. Victims go cheapest to lose first (lowest
priority, then youngest); those the job turns out not to need get their place back, and
one that fits elsewhere is moved rather than stopped (see victims.give_back). Quota and
hard limits are checked once the victims have left, so a project at its hard limit can
trade a train job for an inference job, as KAI's preempt does.
"""

from __future__ import annotations

from gitops_sched.engine.actions.victims import VictimPool, evict_until_placed
from gitops_sched.engine.admission import fits_quota, quota_blocker
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import GPU_EPSILON, EvictReason


def preempt(session: Session) -> None:
    queues = session.pending_by_project()
    pool = VictimPool(session)
    for name in session.serve_order(queues):
        for job in queues[name]:
            job = session.jobs[job.key]
            if job.missing == 0:
                continue
            allowed = set(job.node_groups) or None
            victims = [
                v
                for v in pool.by_project.get(name, ())
                if v.job != job.key
                and session.jobs[v.job].priority < job.priority
                and pool.still_running(v)
                and (allowed is None or not v.groups.isdisjoint(allowed))
            ]
            if not victims:
                continue
            freed = sum(pool.gpus(v) for v in victims if v.pods is None)
            freeable = {name: freed, session.department_of(name): freed}
            if quota_blocker(session, job, freeable):
                continue
            ceiling = max(session.fair_share.get(name, 0.0), session.allocated[name])

            def next_victim(victims=victims):
                return victims.pop(0) if victims else None

            def accept(job=job, name=name, ceiling=ceiling) -> bool:
                within_share = session.allocated[name] <= ceiling + GPU_EPSILON
                return within_share and fits_quota(session, job)

            if evict_until_placed(session, job, EvictReason.PREEMPT, next_victim, accept):
                session.pending_reasons.pop(job.key, None)
