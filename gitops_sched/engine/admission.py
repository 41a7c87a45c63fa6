"""Whether a queue may take a job at all: deserved quota, over-quota rules, hard limits.

These rules hold whatever action places the job (allocate, reclaim, preempt,
consolidate), so they live in one place and return the reason shown on pending work.
"""

from __future__ import annotations

from gitops_sched.engine.session import Session
from gitops_sched.engine.types import GPU_EPSILON, Job


def quota_blocker(session: Session, job: Job) -> str | None:
    """Why the job's project (or department) may not grow by this job now; None if it may."""
    project = session.projects.get(job.project)
    if project is None:
        return f"project {job.project!r} is not in the policy"
    amount = session.job_gpus(job)
    queues = [project]
    department = session.departments.get(project.parent)
    if department is not None:
        queues.append(department)
    for queue in queues:
        level = "department" if queue is department else "project"
        if not job.preemptible:
            fixed = session.fixed[queue.name] + amount
            if fixed > queue.deserved + GPU_EPSILON:
                return (
                    f"non-preemptible work must fit in the {level}'s deserved quota "
                    f"({_gpus(fixed)} > {_gpus(queue.deserved)} GPUs)"
                )
        total = session.allocated[queue.name] + amount
        if queue.limit is not None and total > queue.limit + GPU_EPSILON:
            return f"{level} hard limit reached ({_gpus(total)} > {_gpus(queue.limit)} GPUs)"
    total = session.allocated[project.name] + amount
    if not project.over_quota_allowed and total > project.deserved + GPU_EPSILON:
        return f"project may not go over quota ({_gpus(total)} > {_gpus(project.deserved)} GPUs)"
    return None


def headroom(session: Session, job: Job) -> float:
    """The most GPUs the job may add to its project under the same rules as quota_blocker.

    Placement uses it for GPU-memory and MIG requests, whose share depends on the GPU
    they land on: a 24 GiB request fits a 0.5-GPU quota on an 80 GiB GPU, not on 32 GiB.
    """
    project = session.projects.get(job.project)
    if project is None:
        return 0.0
    room = float("inf")
    for queue in (project, session.departments.get(project.parent)):
        if queue is None:
            continue
        if not job.preemptible:
            room = min(room, queue.deserved - session.fixed[queue.name])
        if queue.limit is not None:
            room = min(room, queue.limit - session.allocated[queue.name])
    if not project.over_quota_allowed:
        room = min(room, project.deserved - session.allocated[project.name])
    return room


def may_reclaim(session: Session, job: Job) -> bool:
    """Within its deserved quota after the job; or below its fair share by more than the
    policy's reclaim threshold now, and not above it after the job.

    The threshold keeps small imbalances from evicting anyone.
    """
    project = session.projects[job.project]
    allocated = session.allocated[job.project]
    after = allocated + session.job_gpus(job)
    if after <= project.deserved + GPU_EPSILON:
        return True
    share = session.fair_share.get(job.project, 0.0)
    threshold = session.snapshot.policy.reclaim_threshold
    return allocated < share - threshold - GPU_EPSILON and after <= share + GPU_EPSILON


def _gpus(value: float) -> str:
    return f"{round(value, 4):g}"
