"""Preempt: inside a project, higher-priority pending work evicts lower-priority work.

The project does not grow past its fair share through preemption: it trades its own
lower-priority GPUs for the higher-priority job. Victims go cheapest to lose first (lowest
priority, then youngest); those the job turns out not to need get their place back, and
one that fits elsewhere is moved rather than stopped (see victims.give_back). Quota and
hard limits are checked once the victims have left, so a project at its hard limit can
trade a train job for an inference job, as KAI's preempt does.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import chain

from gitops_sched.engine.actions.victims import VictimPool, evict_until_placed, place_in_room
from gitops_sched.engine.admission import fits_quota, quota_blocker
from gitops_sched.engine.pools import pool_of, restricted, tries
from gitops_sched.engine.session import Session, Victim
from gitops_sched.engine.types import GPU_EPSILON, EvictReason, Job


def preempt(session: Session) -> None:
    """Preempt for the pending work of every project."""
    queues = session.pending_by_project()
    pool = VictimPool(session, EvictReason.PREEMPT, set(queues))
    # (project, shape, priority) that found no room: the same victims are left, or fewer
    failed: set[tuple] = set()
    for name in session.serve_order(queues):
        lowest = pool.lowest_priority(name)
        if lowest is None or queues[name][0].priority <= lowest:
            continue  # its first job (job order: the highest priority) outranks none of its work
        # the project's victims by priority (the pool's order): those below a job's
        # priority are a prefix, found by bisection
        priorities = [session.jobs[v.job].priority for v in pool.victims(name)]
        if not priorities:
            continue
        for job in queues[name]:
            if job.priority <= priorities[0]:
                break  # no victim of lower priority, nor for the jobs after it (job order)
            if session.pools is None:
                _preempt_job(session, pool, job, priorities, failed)
                continue
            for groups in tries(session, job):
                with restricted(session, job, groups) as each:
                    if _preempt_job(session, pool, each, priorities, failed):
                        break


def _preempt_job(
    session: Session, pool: VictimPool, job: Job, priorities: list[int], failed: set[tuple]
) -> bool:
    """Preempt lower-priority work of the job's project for it; whether it was placed."""
    name = job.project
    job = session.jobs[job.key]
    if job.missing == 0:
        return False
    cut = bisect.bisect_left(priorities, job.priority)
    shape = (name, job.request, job.next_pods, job.node_groups, job.priority)
    if shape in failed:
        return False
    pool.begin()
    found = _below(pool, job, cut)
    first = next(found, None)
    if first is None:
        return False
    victims: Iterable[Victim] = chain((first,), found)
    if quota_blocker(session, job):
        victims = list(victims)
        freed = sum(pool.gpus(v) for v in victims if v.pods is None)
        freeable = {name: freed, session.department_of(name): freed}
        if quota_blocker(session, job, freeable):
            return False
    held = _held(session, job)
    ceiling = max(held(), _share(session, job))

    def accept() -> bool:
        return held() <= ceiling + GPU_EPSILON and fits_quota(session, job)

    def within(placed: Job, gain: float) -> bool:
        """accept's ceiling with `gain` GPUs more of `placed` (told before placing them):
        what placing adds to the project's total, added as placing adds it."""
        return placed.project != name or held() + gain <= ceiling + GPU_EPSILON

    # in a node group of per-group quotas the project's total there is summed pod by pod
    cap = within if pool_of(session, job) is None else None
    next_victim = partial(next, iter(victims), None)
    if place_in_room(session, job, accept, cap) or evict_until_placed(
        session, job, EvictReason.PREEMPT, next_victim, accept, ceiling=cap
    ):
        session.pending_reasons.pop(job.key, None)
        return True
    failed.add(shape)
    return False


def _held(session: Session, job: Job) -> Callable[[], float]:
    """What the job's project holds: in the node group the job is tried in, for a project
    with per-group quotas (engine.pools), else in all."""
    group = pool_of(session, job)
    if group is None:
        return partial(session.allocated.__getitem__, job.project)
    pools = session.pools
    assert pools is not None
    return partial(pools.held, job.project, (group,))


def _share(session: Session, job: Job) -> float:
    """The fair share preempt keeps the project within, judged as _held judges."""
    group = pool_of(session, job)
    if group is None:
        return session.fair_share.get(job.project, 0.0)
    pools = session.pools
    assert pools is not None
    return pools.share(job.project, (group,))


def _below(pool: VictimPool, job: Job, cut: int) -> Iterator[Victim]:
    """The project's usable victims before `cut` (of lower priority than the job), the
    job's own pods aside, found as they are asked for: a try takes victims until it
    fits or misses MAX_MISSES times, not every lower-priority job of the project.
    A victim this try stops is one already
    given, so each is still usable when it is asked for, as it was when the try began."""
    victims = pool.victims(job.project)
    allowed = set(job.node_groups) or None
    index = pool.first_usable(job.project, 0, allowed)
    while index is not None and index < cut:
        if victims[index].job != job.key:
            yield victims[index]
        index = pool.first_usable(job.project, index + 1, allowed)
