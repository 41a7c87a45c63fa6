"""Choosing running work to evict, shared by reclaim, preempt and consolidate."""

from __future__ import annotations

from collections.abc import Callable

from gitops_sched.engine.placement import place
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import EvictReason, Job

MAX_VICTIMS = 32


def evict_until_placed(
    session: Session,
    job: Job,
    reason: EvictReason,
    next_victim: Callable[[], Job | None],
    accept: Callable[[], bool] = lambda: True,
) -> bool:
    """Evict victims one at a time until `job` fits and `accept()` holds; else undo all.

    At most MAX_VICTIMS evictions are tried for one job, which bounds a cycle's work
    when a job cannot fit however much is evicted.
    """
    with session.statement() as commit:
        for _ in range(MAX_VICTIMS):
            victim = next_victim()
            if victim is None:
                break
            session.evict(victim, reason, by=job.name)
            if place(session, session.jobs[job.name]):
                if accept():
                    commit()
                    return True
                return False
    return False
