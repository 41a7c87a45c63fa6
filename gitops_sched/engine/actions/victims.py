"""Choosing running work to evict, shared by reclaim, preempt and consolidate."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gitops_sched.engine.placement import place
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import EvictReason, Job


def victim_order(job: Job) -> tuple:
    """Cheapest to lose first: lowest priority, then the most recently submitted."""
    return (job.priority, -job.submitted, job.name)


def on_nodes(jobs: Iterable[Job], nodes: set[str]) -> list[Job]:
    return [j for j in jobs if any(pod.node in nodes for pod in j.placement)]


def evict_until_placed(
    session: Session,
    job: Job,
    reason: EvictReason,
    next_victim: Callable[[], Job | None],
    accept: Callable[[], bool] = lambda: True,
) -> bool:
    """Evict victims one at a time until `job` fits and `accept()` holds; else undo all."""
    with session.statement() as commit:
        while (victim := next_victim()) is not None:
            session.evict(victim, reason, by=job.name)
            if place(session, session.jobs[job.name]):
                if accept():
                    commit()
                    return True
                return False
    return False
