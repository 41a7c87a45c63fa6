"""One scheduling cycle: the actions in order over one session, then the queues' status."""

from __future__ import annotations

from gitops_sched.engine.actions.allocate import allocate
from gitops_sched.engine.actions.consolidate import consolidate
from gitops_sched.engine.actions.limits import enforce_limits
from gitops_sched.engine.actions.preempt import preempt
from gitops_sched.engine.actions.reclaim import reclaim
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import Decisions, QueueSpec, QueueStatus, Snapshot

ACTIONS = (enforce_limits, allocate, consolidate, reclaim, preempt)


def schedule(snapshot: Snapshot) -> Decisions:
    """Decide binds, evictions and MIG changes for one cycle; pure and deterministic."""
    session = Session(snapshot)
    for action in ACTIONS:
        action(session)
    queued: dict[str, float] = {}
    pending = session.pending()
    for job in pending:
        queued[job.project] = queued.get(job.project, 0.0) + session.job_gpus(job)
    for spec in snapshot.policy.projects:
        parent = spec.parent
        queued[parent] = queued.get(parent, 0.0) + queued.get(spec.name, 0.0)

    def status(spec: QueueSpec) -> QueueStatus:
        return QueueStatus(
            name=spec.name,
            deserved=spec.deserved,
            fair_share=session.fair_share.get(spec.name, 0.0),
            allocated=session.allocated.get(spec.name, 0.0),
            queued=queued.get(spec.name, 0.0),
        )

    return Decisions(
        evictions=tuple(session.evictions),
        binds=tuple(session.binds),
        mig_changes=tuple(session.mig_changes),
        departments=tuple(status(d) for d in snapshot.policy.departments),
        projects=tuple(status(p) for p in snapshot.policy.projects),
        pending_reasons=tuple(
            (job.name, session.pending_reasons.get(job.name, "waiting for GPUs"))
            for job in sorted(pending, key=lambda j: j.name)
        ),
    )
