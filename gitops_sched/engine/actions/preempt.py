"""Preempt: inside a project, higher-priority pending work evicts lower-priority work.

The project does not grow past its fair share through preemption: it trades its own
lower-priority GPUs for the higher-priority job.
"""

from __future__ import annotations

from gitops_sched.engine.actions.victims import VictimPool, evict_until_placed
from gitops_sched.engine.admission import quota_blocker
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import GPU_EPSILON, EvictReason


def preempt(session: Session) -> None:
    queues = session.pending_by_project()
    pool = VictimPool(session)
    for name in sorted(queues):
        for job in queues[name]:
            job = session.jobs[job.key]
            if job.missing == 0:
                continue
            victims = [
                v
                for v in pool.by_project.get(name, ())
                if v.job != job.key
                and session.jobs[v.job].priority < job.priority
                and pool.still_running(v)
            ]
            if not victims or quota_blocker(session, job):
                continue
            ceiling = max(session.fair_share.get(name, 0.0), session.allocated[name])

            def next_victim(victims=victims):
                return victims.pop(0) if victims else None

            def within_share(name=name, ceiling=ceiling) -> bool:
                return session.allocated[name] <= ceiling + GPU_EPSILON

            if evict_until_placed(session, job, EvictReason.PREEMPT, next_victim, within_share):
                session.pending_reasons.pop(job.key, None)
