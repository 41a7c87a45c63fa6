"""Choosing running work to evict, shared by reclaim, preempt and consolidate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gitops_sched.engine.placement import place
from gitops_sched.engine.session import Session, victim_order
from gitops_sched.engine.types import EvictReason, Job, PodPlacement

MAX_VICTIMS = 32


def still_running(session: Session, victim: Victim) -> bool:
    """Whether everything the victim would give back is still running."""
    current = session.jobs.get(victim.job)
    if current is None or not current.running:
        return False
    return victim.pods is None or all(p in current.placement for p in victim.pods)


@dataclass(frozen=True)
class Victim:
    """What one eviction takes: a whole job, or one elastic pod above its gang."""

    job: str  # key
    pods: tuple[PodPlacement, ...] | None  # None: every pod the job still runs
    groups: frozenset[str]  # node groups it runs on


def evict_until_placed(
    session: Session,
    job: Job,
    reason: EvictReason,
    next_victim: Callable[[], Victim | None],
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
            if not still_running(session, victim):
                continue
            session.evict(session.jobs[victim.job], reason, by=job.key, pods=victim.pods)
            if place(session, job):
                if accept():
                    commit()
                    return True
                return False
    return False


class VictimPool:
    """Running preemptible work per project, cheapest to lose first, with its size and
    node groups taken once per action (a victim's placement does not change while it runs).

    An elastic job above its gang offers its extra pods one at a time, highest index
    first, before the job as a whole.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.by_project: dict[str, list[Victim]] = {}
        for job in sorted(session.running(), key=victim_order):
            if job.preemptible:
                self.by_project.setdefault(job.project, []).extend(self._victims(job))

    def _victims(self, job: Job) -> list[Victim]:
        session = self.session
        groups = frozenset(
            session.nodes[p.node].node.node_group for p in job.placement if p.node in session.nodes
        )
        extra = sorted(job.placement, key=lambda p: -p.index)[
            : len(job.placement) - job.min_available
        ]
        victims = [Victim(job.key, (pod,), groups) for pod in extra]
        victims.append(Victim(job.key, None, groups))
        return victims

    def gpus(self, victim: Victim) -> float:
        """What evicting the victim now gives back."""
        current = self.session.jobs[victim.job]
        return self.session.placed_gpus(current, victim.pods)

    def still_running(self, victim: Victim) -> bool:
        return still_running(self.session, victim)

    def first_usable(self, project: str, start: int, allowed: set[str] | None) -> int | None:
        """Index of the project's next victim still running on an allowed node group."""
        candidates = self.by_project[project]
        for index in range(start, len(candidates)):
            victim = candidates[index]
            if self.still_running(victim) and (
                allowed is None or not victim.groups.isdisjoint(allowed)
            ):
                return index
        return None
