"""One scheduling cycle: the actions in order over one session, then the queues' status."""

from __future__ import annotations

from operator import attrgetter

from gitops_sched.engine.actions.allocate import allocate
from gitops_sched.engine.actions.consolidate import consolidate
from gitops_sched.engine.actions.limits import enforce_limits
from gitops_sched.engine.actions.preempt import preempt
from gitops_sched.engine.actions.reclaim import reclaim
from gitops_sched.engine.actions.stale_gangs import evict_stale_gangs
from gitops_sched.engine.pools import pool_queues
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import (
    Bind,
    Decisions,
    Evict,
    MigChange,
    PodPlacement,
    QueueSpec,
    QueueStatus,
    Snapshot,
)
from gitops_sched.engine.usage import Usage
from gitops_sched.gcpause import paused_gc

# The actions in the order `schedule` runs them first (allocate runs again after
# evictions, see below): what benchmarks/schedule_scale.py times one by one
ACTIONS = (enforce_limits, allocate, consolidate, reclaim, preempt, evict_stale_gangs)


def schedule(snapshot: Snapshot) -> Decisions:
    """Decide binds, evictions and MIG changes for one cycle; pure and deterministic."""
    return schedule_carrying(snapshot)[0]


@paused_gc()
def schedule_carrying(snapshot: Snapshot, carried: Usage | None = None) -> tuple[Decisions, Usage]:
    """`schedule`, with the GPU usage the cycle ended with, for the next cycle of a settle
    to carry on from (`carried`: see Session)."""
    session = Session(snapshot, carried)
    enforce_limits(session)
    allocate(session)
    consolidate(session)
    evicted = len(session.evictions)
    reclaim(session)
    preempt(session)
    # GPUs the victims freed beyond what their claimants took go to the queue now, not a
    # cycle later. Nothing more: as in KAI's session, reclaim and preempt run once, and a
    # project that lost work reclaims in the next cycle (repeating reclaim, preempt and
    # allocate while they evicted made a cycle dearer and a settle no shorter: plan_scale's
    # plan ran 7.4% more instructions with two rounds, the repo settle of schedule_scale 10%)
    if len(session.evictions) > evicted:
        allocate(session)
    evict_stale_gangs(session)
    queued: dict[str, float] = {}
    pending = session.pending()
    for job in pending:
        queued[job.project] = queued.get(job.project, 0.0) + session.wanted_gpus(job, job.missing)
    for spec in snapshot.policy.projects:
        parent = spec.parent
        queued[parent] = queued.get(parent, 0.0) + queued.get(spec.name, 0.0)

    pools = session.pools
    pool_queued = pool_queues(session, pending) if pools is not None else {}

    def status(spec: QueueSpec) -> QueueStatus:
        return QueueStatus(
            name=spec.name,
            deserved=spec.deserved,
            fair_share=session.fair_share.get(spec.name, 0.0),
            allocated=session.allocated.get(spec.name, 0.0),
            queued=queued.get(spec.name, 0.0),
            pools=pools.statuses(spec.name, pool_queued) if pools is not None else (),
            usage=session.usage_of(spec.name),
        )

    evictions, binds = net_changes(snapshot, session)
    waits = _Waits(snapshot, evictions, session.mig_changes)
    decisions = Decisions(
        evictions=evictions,
        # lists, not generators, make the tuples: a generator's every step is a call
        binds=tuple([waits.bind(bind) for bind in binds]),
        mig_changes=tuple([waits.mig(change) for change in session.mig_changes]),
        departments=tuple([status(d) for d in snapshot.policy.departments]),
        projects=tuple([status(p) for p in snapshot.policy.projects]),
        pending_reasons=tuple(
            [
                (job.key, session.pending_reasons.get(job.key, "waiting for GPUs"))
                for job in sorted(pending, key=attrgetter("key"))
            ]
        ),
    )
    return decisions, session.usage


def net_changes(snapshot: Snapshot, session: Session) -> tuple[tuple[Evict, ...], tuple[Bind, ...]]:
    """What changed for each job's pods between the snapshot and the end of the cycle.

    An action may undo an earlier action's work in the same cycle (allocate binds a job
    that reclaim then evicts); the cluster only needs the net result: the pods that ran
    and no longer run (or moved) are evicted, with the last reason given for the job;
    the pods that run now and did not before are bound. Evictions keep the order they
    were taken in.
    """
    before = {job.key: job for job in snapshot.jobs}
    last = {evict.job: evict for evict in session.evictions}
    evictions: dict[str, Evict] = {}
    for evict in session.evictions:
        if evict.job in evictions:
            continue
        now = session.jobs.get(evict.job)
        kept = set(now.placement) if now is not None else set()
        gone = tuple(p for p in before[evict.job].placement if p not in kept)
        if gone:
            reason = last[evict.job]
            evictions[evict.job] = Evict(evict.job, reason.reason, reason.by, gone)
    binds: dict[str, Bind] = {}
    for bind in session.binds:
        now = session.jobs.get(bind.job)
        if now is None or bind.job in binds:
            continue
        had = set(before[bind.job].placement)
        new = tuple(p for p in now.placement if p not in had)
        if new:
            binds[bind.job] = Bind(bind.job, new)
    return tuple(evictions.values()), tuple(binds.values())


class _Waits:
    """What a bind or a MIG change must wait for: the pods that held its GPUs (or its MIG
    instance) when the cycle began and are leaving (evicted now, or releasing already).
    MIG changes on one GPU are carried out in the order listed, so a create needs no more.
    A job's own old pods count too: in a cluster they are other pods, still terminating.
    """

    def __init__(
        self, snapshot: Snapshot, evictions: tuple[Evict, ...], changes: list[MigChange]
    ) -> None:
        self.holders: dict[tuple, set[str]] = {}
        # the creates per instance, in the order made: a bind looks up its own instead of
        # scanning every MIG change of the cycle
        self.creates: dict[tuple, list[tuple[int, MigChange]]] = {}
        for position, change in enumerate(changes):
            if change.create:
                key = (change.node, change.gpu, change.instance)
                self.creates.setdefault(key, []).append((position, change))
        leaving = [(evict.job, pod) for evict in evictions for pod in evict.pods]
        leaving += [(releasing.job, releasing.pod) for releasing in snapshot.releasing]
        for job, pod in leaving:
            for slot in _slots(pod):
                self.holders.setdefault(slot, set()).add(job)

    def _leaving(self, pods: tuple[PodPlacement, ...]) -> tuple[str, ...]:
        found = {h for pod in pods for slot in _slots(pod) for h in self.holders.get(slot, ())}
        return tuple(sorted(found))

    def bind(self, bind: Bind) -> Bind:
        instances = {(p.node, p.gpus[0], p.mig) for p in bind.pods if p.mig is not None}
        found = sorted(c for i in instances for c in self.creates.get(i, ()))
        created = tuple(self.mig(change) for _, change in found)
        return Bind(bind.job, bind.pods, self._leaving(bind.pods), created)

    def mig(self, change: MigChange) -> MigChange:
        if change.create:
            return change
        pod = PodPlacement(change.node, (change.gpu,), mig=change.instance)
        return MigChange(change.node, change.gpu, change.instance, False, self._leaving((pod,)))


def _slots(pod: PodPlacement) -> list[tuple]:
    """What a pod occupies: its whole or shared GPUs, or its MIG instance."""
    if pod.mig is not None:
        return [(pod.node, pod.gpus[0], pod.mig)]
    return [(pod.node, gpu) for gpu in pod.gpus]
