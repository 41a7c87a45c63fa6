"""Stale gangs: a gang running fewer than `min_available` pods for longer than the
policy's grace period is evicted whole, as KAI's stale-gang eviction does.

A gang in flight is pending work first (allocate, reclaim and preempt try to start its
missing pods); only when that has not happened within the grace period do its running
pods give their GPUs back, so a half-started training job never holds GPUs it cannot use.
"""

from __future__ import annotations

from gitops_sched.engine.session import Session
from gitops_sched.engine.types import EvictReason


def evict_stale_gangs(session: Session) -> None:
    grace = session.snapshot.policy.stale_gang_grace_s
    for job in list(session.jobs.values()):
        if job.short and job.short_since is not None and session.now - job.short_since >= grace:
            session.evict(job, EvictReason.STALE_GANG)
