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


class VictimPool:
    """Running preemptible jobs per project, cheapest to lose first, with their size and
    node groups taken once per action (a victim's placement does not change while it runs).
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.by_project = session.preemptible_by_project()
        self.gpus: dict[str, float] = {}
        self.groups: dict[str, frozenset[str]] = {}
        for jobs in self.by_project.values():
            for job in jobs:
                self.gpus[job.name] = session.job_gpus(job)
                self.groups[job.name] = frozenset(
                    session.nodes[p.node].node.node_group
                    for p in job.placement
                    if p.node in session.nodes
                )

    def first_usable(self, project: str, start: int, allowed: set[str] | None) -> int | None:
        """Index of the project's next victim still running on an allowed node group."""
        candidates = self.by_project[project]
        for index in range(start, len(candidates)):
            name = candidates[index].name
            if self.session.jobs[name].running and (
                allowed is None or not self.groups[name].isdisjoint(allowed)
            ):
                return index
        return None
