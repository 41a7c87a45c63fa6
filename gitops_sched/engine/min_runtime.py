"""Minimum guaranteed runtime: KAI's minruntime plugin (preemptMinRuntime /
reclaimMinRuntime), resolved per project by the caller (project over department over
cluster, as KAI walks up from the victim's queue).

A preemptible job that started less than its project's minimum ago is no victim of that
action: its whole gang stays; an elastic job may still give up pods above its gang, as
KAI's scenario validator allows. Start times and `now` are plain input: the engine reads
no clock.
"""

from __future__ import annotations

from gitops_sched.engine.types import EvictReason, Job, QueueSpec


def protected_until(job: Job, project: QueueSpec | None, reason: EvictReason) -> float | None:
    """Until when the running job is no victim of `reason` (preempt or reclaim), or None
    when it has no such protection (no minimum, not started, another reason)."""
    if project is None or job.started_at is None:
        return None
    if reason is EvictReason.PREEMPT:
        minimum = project.preempt_min_runtime_s
    elif reason is EvictReason.RECLAIM:
        minimum = project.reclaim_min_runtime_s
    else:
        return None
    return job.started_at + minimum if minimum > 0 else None


def is_protected(job: Job, project: QueueSpec | None, reason: EvictReason, now: float) -> bool:
    """Whether the job is still within its minimum runtime for `reason` at `now`."""
    until = protected_until(job, project, reason)
    return until is not None and now < until
