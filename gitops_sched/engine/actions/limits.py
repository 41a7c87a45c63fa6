"""Stop interactive work past the project's time limit or idle past its idle timeout."""

from __future__ import annotations

from gitops_sched.engine.session import Session
from gitops_sched.engine.types import EvictReason


def enforce_limits(session: Session) -> None:
    for job in session.running():
        if job.type != "interactive":
            continue
        project = session.projects.get(job.project)
        if project is None:
            continue
        limit, idle = project.interactive_time_limit_s, project.idle_timeout_s
        if limit and job.started_at is not None and session.now - job.started_at >= limit:
            session.stop(job, EvictReason.TIME_LIMIT)
        elif idle and job.idle_since is not None and session.now - job.idle_since >= idle:
            session.stop(job, EvictReason.IDLE)
