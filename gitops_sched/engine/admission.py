"""Whether a queue may take a job at all: deserved quota, over-quota rules, hard limits.

These rules hold whatever action places the job (allocate, reclaim, preempt,
consolidate), so they live in one place and return the reason shown on pending work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from gitops_sched.engine.pools import pool_of
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import GPU_EPSILON, Job
from gitops_sched.hardware.gpus import gpus_text


class Bound(NamedTuple):
    """One quota rule on a job: its queue holds `used` of at most `cap` GPUs (a named
    tuple: every placement tried asks for a few)."""

    used: float
    cap: float
    rule: str  # completes "... ({used + amount} > {cap} GPUs)"
    queue: str = ""
    evictable: bool = True  # preemptible work counts in `used`: evicting it makes room


_LEVELS = ("project", "department")
_FIXED_RULES = {
    level: f"non-preemptible work must fit in the {level}'s deserved quota" for level in _LEVELS
}
_LIMIT_RULES = {level: f"{level} hard limit reached" for level in _LEVELS}


def bounds(session: Session, job: Job) -> list[Bound]:
    """Every rule bounding what the job may add to its project and department.

    Whether any rule bounds a preemptible job depends on its project's and department's
    specs alone (hard limits, over quota denied), so that is worked out once per project
    and most work skips the rest."""
    if job.preemptible:
        unbounded = session.unbounded.get(job.project)
        if unbounded is None:
            unbounded = session.unbounded[job.project] = not _bounds(session, job)
        if unbounded:
            return []
    return _bounds(session, job)


def _bounds(session: Session, job: Job) -> list[Bound]:
    project = session.projects[job.project]
    department = session.departments.get(project.parent)
    found: list[Bound] = []
    for queue, level in ((project, "project"), (department, "department")):
        if queue is None:
            continue
        name = queue.name
        if not job.preemptible:
            rule = _FIXED_RULES[level]
            found.append(Bound(session.fixed[name], queue.deserved, rule, name, False))
        if queue.limit is not None:
            found.append(Bound(session.allocated[name], queue.limit, _LIMIT_RULES[level], name))
    if not project.over_quota_allowed:
        rule = "project may not go over quota"
        found.append(Bound(session.allocated[project.name], project.deserved, rule, project.name))
    if session.pools is not None and (group := pool_of(session, job)) is not None:
        found.extend(_pool_bounds(session, job, group))
    return found


def _pool_bounds(session: Session, job: Job, group: str) -> list[Bound]:
    """The project's rules in the node group the job is tried in (engine.pools): its
    deserved quota there bounds non-preemptible work, and all work if over quota is
    denied."""
    pools = session.pools
    assert pools is not None
    name, key = job.project, (job.project, group)
    deserved = pools.deserved(name, (group,))
    found = []
    if not job.preemptible:
        rule = f"non-preemptible work must fit in the project's deserved quota in {group}"
        found.append(Bound(pools.fixed.get(key, 0.0), deserved, rule, name, False))
    if not session.projects[name].over_quota_allowed:
        rule = f"project may not go over its quota in {group}"
        found.append(Bound(pools.allocated.get(key, 0.0), deserved, rule, name))
    return found


def quota_blocker(
    session: Session, job: Job, freeable: Mapping[str, float] | None = None
) -> str | None:
    """Why the job's project (or department) may not grow by this job now; None if it may.

    `freeable`: GPUs per queue that evicting the job's possible victims would give back
    (preempt and reclaim): a rule they can satisfy does not block the job before they
    leave; `fits_quota` checks it once they have.
    """
    if job.project not in session.projects:
        return f"project {job.project!r} is not in the policy"
    found = bounds(session, job)
    if not found:  # most work: no rule bounds it, nothing to add up
        return None
    amount = session.wanted_gpus(job)
    for bound in found:
        total = bound.used + amount
        freed = freeable.get(bound.queue, 0.0) if freeable and bound.evictable else 0.0
        if total - freed > bound.cap + GPU_EPSILON:
            return f"{bound.rule} ({gpus_text(total)} > {gpus_text(bound.cap)} GPUs)"
    return None


def fits_quota(session: Session, job: Job) -> bool:
    """Whether every quota rule holds with the job placed: what preempt and reclaim check
    after their victims have left (KAI: the preemptor must fit its queue's quota)."""
    return all([bound.used <= bound.cap + GPU_EPSILON for bound in bounds(session, job)])


def headroom(session: Session, job: Job) -> float:
    """The most GPUs the job may add now under the rules quota_blocker applies.

    Placement uses it for GPU-memory and MIG requests, whose share depends on the GPU
    they land on: a 24 GiB request fits a 0.5-GPU quota on an 80 GiB GPU, not on 32 GiB.
    """
    if job.project not in session.projects:
        return 0.0
    return min([b.cap - b.used for b in bounds(session, job)], default=float("inf"))


def may_reclaim(session: Session, job: Job) -> bool:
    """Within its deserved quota after the job; or below its fair share by more than the
    policy's reclaim threshold now, and not above it after the job.

    The threshold keeps small imbalances from evicting anyone.
    """
    project = session.projects[job.project]
    allocated = session.allocated[job.project]
    deserved, share = project.deserved, session.fair_share.get(job.project, 0.0)
    pools = session.pools
    if pools is not None and (group := pool_of(session, job)) is not None:
        # judged in the node group it is tried in (engine.pools)
        allocated = pools.held(job.project, (group,))
        deserved = pools.deserved(job.project, (group,))
        share = pools.share(job.project, (group,))
    after = allocated + session.wanted_gpus(job)
    if after <= deserved + GPU_EPSILON:
        return True
    threshold = session.snapshot.policy.reclaim_threshold
    return allocated < share - threshold - GPU_EPSILON and after <= share + GPU_EPSILON
