"""One scheduling cycle: the actions in order over one session, then the queues' status."""

from __future__ import annotations

from gitops_sched.engine.actions.allocate import allocate
from gitops_sched.engine.actions.consolidate import consolidate
from gitops_sched.engine.actions.limits import enforce_limits
from gitops_sched.engine.actions.preempt import preempt
from gitops_sched.engine.actions.reclaim import reclaim
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import (
    Bind,
    Decisions,
    Evict,
    QueueSpec,
    QueueStatus,
    Snapshot,
)

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

    evictions, binds = net_changes(snapshot, session)
    return Decisions(
        evictions=evictions,
        binds=binds,
        mig_changes=tuple(session.mig_changes),
        departments=tuple(status(d) for d in snapshot.policy.departments),
        projects=tuple(status(p) for p in snapshot.policy.projects),
        pending_reasons=tuple(
            (job.name, session.pending_reasons.get(job.name, "waiting for GPUs"))
            for job in sorted(pending, key=lambda j: j.name)
        ),
    )


def net_changes(snapshot: Snapshot, session: Session) -> tuple[tuple[Evict, ...], tuple[Bind, ...]]:
    """What changed for each job between the snapshot and the end of the cycle.

    An action may undo an earlier action's work in the same cycle (allocate binds a job
    that reclaim then evicts); the cluster only needs the net result, so such a job gets
    neither decision. Evictions keep the order they were taken in and the last reason.
    """
    before = {job.name: job for job in snapshot.jobs}
    last_reason = {evict.job: evict for evict in session.evictions}
    evictions: dict[str, Evict] = {}
    for evict in session.evictions:
        was, now = before[evict.job], session.jobs.get(evict.job)
        moved = now is None or now.placement != was.placement
        if was.running and moved and evict.job not in evictions:
            evictions[evict.job] = last_reason[evict.job]
    binds: dict[str, Bind] = {}
    for bind in session.binds:
        now = session.jobs.get(bind.job)
        if now is not None and now.placement == bind.pods != before[bind.job].placement:
            binds[bind.job] = bind
    return tuple(evictions.values()), tuple(binds.values())
