"""Why a job is pending, in one line: the words `simulate` and `explain` both print.

The cycle's own reason says which rule stopped the job (a quota rule, or "no room");
this module looks at the cluster the cycle left behind to say which of the usual causes
it is: it can never fit, it is over its quota or limit, its gang is short of room, free
GPUs are scattered (fragmentation), no MIG slot is left, or its project has had its fair
share and nothing can be reclaimed for it. Every number it gives is the state's: what the
job needs, what is free where it may run, fair shares, and what taking a holder's work
would leave it (tests/test_pending_reasons.py checks them on random clusters).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from gitops_sched.engine.actions.allocate import gang_reason, no_room_reason
from gitops_sched.engine.actions.consolidate import pod_need, room_in_total
from gitops_sched.engine.actions.reclaim import Floor, loss_refused, within_deserved
from gitops_sched.engine.actions.victims import VictimPool, ranks_ahead
from gitops_sched.engine.admission import may_reclaim, quota_blocker
from gitops_sched.engine.apply import apply_decisions
from gitops_sched.engine.fit import NeverFit, never_fits
from gitops_sched.engine.placement import pods_that_fit
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import (
    GPU_EPSILON,
    Decisions,
    EvictReason,
    Job,
    RequestKind,
    Snapshot,
)
from gitops_sched.hardware.gpus import gpus_text

MAX_HOLDERS = 3  # the projects whose work on its nodes a "nothing to reclaim" reason weighs


class PendingKind(StrEnum):
    NEVER_FIT = "never-fit"
    QUOTA = "quota"
    LIMIT = "limit"
    GANG = "gang"
    FRAGMENTATION = "fragmentation"
    NO_MIG_SLOT = "no-mig-slot"
    FAIR_SHARE = "fair-share"
    NODES_DOWN = "nodes-down"


@dataclass(frozen=True)
class Pending:
    kind: PendingKind
    text: str  # the one line simulate's Reason column and explain print
    fit_now: int = 0  # of the pods it waits to start together, how many would fit now
    free: float = 0.0  # free GPUs (and room on shared ones) on the nodes it may use


class PendingReasons:
    """pending_reason for the pending jobs of one cluster state: a session over it (as the
    next cycle would start) built on the first question, and each job shape answered once."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._session: Session | None = None
        self._answers: dict[tuple, Pending] = {}
        self._misfits: dict[tuple, NeverFit | None] = {}  # never_fits by what it looks at
        self._holdings: Holdings | None = None

    @property
    def session(self) -> Session:
        if self._session is None:
            self._session = Session(self.snapshot)
        return self._session

    def of(self, job: Job) -> Pending:
        job = self.session.jobs[job.key]
        shape = (
            job.request,
            job.node_groups,
            job.project,
            job.preemptible,
            job.next_pods,
            len(job.placement),
            job.min_available,
        )
        if shape not in self._answers:
            fit = (job.request, min(job.min_available, job.pods), job.node_groups)
            if fit not in self._misfits:
                self._misfits[fit] = never_fits(job, self.snapshot.nodes)
            self._answers[shape] = _pending_reason(
                self.session, job, self._misfits[fit], self.holdings
            )
        return self._answers[shape]

    def holdings(self) -> Holdings:
        """What holds each node's GPUs, counted once for every job that asks."""
        if self._holdings is None:
            self._holdings = Holdings(self.session)
        return self._holdings


class Holdings:
    """Who holds the GPUs of each node, counted once per cluster state: non-preemptible
    work, and preemptible work by project (summed per set of node groups a job may use);
    and the victims reclaim would take, in its order (one VictimPool: nothing is evicted
    while reasons are worked out)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.fixed: dict[str, float] = {}  # node -> GPUs of non-preemptible work
        self.preemptible: dict[str, dict[str, float]] = {}  # node -> project -> GPUs
        for running in session.running():
            for pod in running.placement:
                gpus = session.placed_gpus(running, (pod,))
                if running.preemptible:
                    there = self.preemptible.setdefault(pod.node, {})
                    there[running.project] = there.get(running.project, 0.0) + gpus
                else:
                    self.fixed[pod.node] = self.fixed.get(pod.node, 0.0) + gpus
        self.pool = VictimPool(session, EvictReason.RECLAIM)
        self._on: dict[tuple[str, ...], tuple[float, dict[str, float]]] = {}

    def on(self, job: Job) -> tuple[float, dict[str, float]]:
        """On the nodes the job may use: GPUs of non-preemptible work, and of each
        project's preemptible work, the most first."""
        if job.node_groups not in self._on:
            nodes = [use.name for use in self.session.candidate_nodes(job)]
            by_project: dict[str, float] = {}
            for node in nodes:
                for project, gpus in self.preemptible.get(node, {}).items():
                    by_project[project] = by_project.get(project, 0.0) + gpus
            ordered = dict(sorted(by_project.items(), key=lambda item: (-item[1], item[0])))
            fixed = sum(self.fixed.get(node, 0.0) for node in nodes)
            self._on[job.node_groups] = (fixed, ordered)
        return self._on[job.node_groups]


def _pending_reason(
    session: Session, job: Job, misfit: NeverFit | None, holdings: Callable[[], Holdings]
) -> Pending:
    """Why the job (pending in `session`, a cycle's start over the settled cluster) waits;
    `misfit`: never_fits's answer for it; `holdings`: who holds the GPUs, when asked."""
    if misfit is not None:
        return Pending(PendingKind.NEVER_FIT, f"can never fit: {misfit.why}")
    blocker = quota_blocker(session, job)
    if blocker is not None:
        kind = PendingKind.LIMIT if "limit" in blocker else PendingKind.QUOTA
        label = "over limit" if kind is PendingKind.LIMIT else "over quota"
        return Pending(kind, gang_reason(job, f"{label}: {blocker}"))
    if not session.candidate_nodes(job):
        return Pending(PendingKind.NODES_DOWN, gang_reason(job, "every node it may use is down"))
    count = job.next_pods
    fit = pods_that_fit(session, job, count)
    free = room_in_total(session, job) if job.request.kind is not RequestKind.MIG else 0.0
    no_room = no_room_reason(job)
    if job.request.kind is RequestKind.MIG:
        kind, why = PendingKind.NO_MIG_SLOT, f"no MIG slot: {_no_mig_slot(job)}"
    elif free >= pod_need(session, job) * count - GPU_EPSILON:
        kind, why = PendingKind.FRAGMENTATION, f"fragmentation: {_fragmented(job, fit, free)}"
    elif 0 < fit < count:
        kind, why = PendingKind.GANG, f"waiting for gang: {fit} of {count} pods fit now"
    else:
        kind, why = PendingKind.FAIR_SHARE, _fair_share(session, job, free, holdings)
    return Pending(kind, gang_reason(job, f"{why} ({no_room})"), fit, free)


def _no_mig_slot(job: Job) -> str:
    profile = job.request.mig_profile
    return f"no free {profile} instance, and no room to create one on the MIG GPUs it may use"


def _fragmented(job: Job, fit: int, free: float) -> str:
    return (
        f"{gpus_text(free)} GPUs free on the nodes it may use, but scattered: "
        f"only {fit} of {job.next_pods} pods fit"
    )


def _fair_share(session: Session, job: Job, free: float, holdings: Callable[[], Holdings]) -> str:
    """Less room than it needs where it may run: its project has had its fair share (or
    is within the reclaim threshold of it), or it may reclaim but nothing there may be
    taken for it; `free`: the room on the nodes it may use."""
    project = job.project
    held = session.allocated.get(project, 0.0)
    share = session.fair_share.get(project, 0.0)
    numbers = _holds(project, held, share)
    wanted = session.wanted_gpus(job)
    room = f"it needs {gpus_text(wanted)} GPUs and the nodes it may use have {gpus_text(free)} free"
    if not may_reclaim(session, job):
        if held + wanted > share + GPU_EPSILON:
            more = (
                "" if held >= share - GPU_EPSILON else f", {gpus_text(wanted)} more would pass it"
            )
            return f"fair share reached: {numbers}{more}; {room}"
        threshold = session.snapshot.policy.reclaim_threshold
        return (
            f"within the reclaim threshold: {numbers}, not more than {gpus_text(threshold)} "
            f"below it, which evicts nobody; {room}"
        )
    holders = _holders(session, job, wanted, holdings())
    return f"nothing to reclaim: {numbers}; {room}; {holders}"


def _holds(queue: str, held: float, share: float) -> str:
    return f"{queue} holds {gpus_text(held)} of its fair share of {gpus_text(share)} GPUs"


def _holders(session: Session, job: Job, gain: float, holdings: Holdings) -> str:
    """What holds the GPUs on the nodes the job may use: non-preemptible work, its own
    project's, and the other projects' preemptible work, the MAX_HOLDERS holding most
    with the reclaim rule that keeps their work from it (see actions.reclaim)."""
    fixed, by_project = holdings.on(job)
    own = by_project.get(job.project, 0.0)
    held = [f"non-preemptible work holds {gpus_text(fixed)}"] if fixed > GPU_EPSILON else []
    if own > GPU_EPSILON:
        held.append(f"{job.project}'s own work {gpus_text(own)}")
    parts = [f"of the GPUs there, {', '.join(held)}"] if held else []
    others = [project for project in by_project if project != job.project]
    allowed = set(job.node_groups) or None
    guaranteed = within_deserved(session, job, gain)
    takeable: dict[str, float] = {}
    for project in others[:MAX_HOLDERS]:
        refusal = _refusal(session, job, gain, holdings.pool, project, allowed, guaranteed)
        if isinstance(refusal, str):
            parts.append(refusal)
            continue
        if refusal > GPU_EPSILON:
            takeable[project] = refusal
        wait = holdings.pool.protected_for(project, allowed)
        if wait is not None:
            parts.append(
                f"{project}'s work there is within its minimum runtime for {gpus_text(wait)}s more"
            )
    if takeable:
        names = ", ".join(takeable)
        parts.append(
            f"the {gpus_text(sum(takeable.values()))} GPUs of work it may take ({names}) do "
            "not make room for it"
        )
    if len(others) > MAX_HOLDERS:
        parts.append(f"and {len(others) - MAX_HOLDERS} more projects' work there")
    return "; ".join(parts) or "no work there may be taken"


def _refusal(
    session: Session,
    job: Job,
    gain: float,
    pool: VictimPool,
    project: str,
    allowed: set[str] | None,
    guaranteed: bool,
) -> str | float:
    """Why reclaim stops taking the project's work (its victims in the order reclaim
    takes them) for the job: the floor a queue would break, with the numbers; or, if it
    may lose all of them, the GPUs it would give."""
    taken = 0.0
    counted: dict[str, float] = {}  # job -> its GPUs taken so far (elastic pods first)
    index = pool.first_usable(project, 0, allowed)
    if index is not None and ranks_ahead(session, job, gain, pool.victims(project)[index]):
        return (
            f"{project} would rank ahead of {job.project} in allocation order once it lost "
            "its work, so that work would take its GPUs back first"
        )
    while index is not None:
        victim = pool.victims(project)[index]
        amount = pool.gpus(victim) - (counted.get(victim.job, 0.0) if victim.pods is None else 0)
        refused = loss_refused(session, job, gain, project, amount, guaranteed, taken)
        if refused is not None:
            return _broken_floor(session, job, gain, project, taken, amount, *refused)
        taken += amount
        counted[victim.job] = counted.get(victim.job, 0.0) + amount
        index = pool.first_usable(project, index + 1, allowed)
    return taken


def _broken_floor(
    session: Session,
    job: Job,
    gain: float,
    project: str,
    taken: float,
    amount: float,
    queue: str,
    floor: Floor,
) -> str:
    """Why `queue` may not lose the next `amount` GPUs of the project's work, `taken`
    being gone already (see actions.reclaim._floor_broken), with the numbers."""
    held = session.allocated.get(queue, 0.0) - taken
    after = f"after taking {gpus_text(taken)} GPUs of {project}'s work, " if taken else ""
    if floor is Floor.DESERVED:
        deserved = (session.projects.get(queue) or session.departments[queue]).deserved
        return (
            f"{after}{queue} holds {gpus_text(held)} GPUs, not over its deserved quota of "
            f"{gpus_text(deserved)}, and {job.project} takes only work over quota"
        )
    if floor is Floor.SHARE:
        return (
            f"{after}{queue} holds {gpus_text(held)} GPUs, not more than its share of "
            f"{gpus_text(session.allocatable(queue))} (the larger of its deserved quota and fair "
            "share), and may lose no more"
        )
    left = _holds(queue, held - amount, session.fair_share.get(queue, 0.0))
    said = f"taking {gpus_text(taken + amount)} GPUs of {project}'s work would leave {queue} with"
    said += left.removeprefix(f"{queue} holds")
    claimant = job.project if queue == project else session.department_of(job.project)
    part = (held - amount) / session.fair_share[queue]
    return (
        f"{said} ({part:.3g} of it), not more than {claimant}'s "
        f"{session.ratio(claimant, gain):.3g} of its own with the job"
    )


def in_words(snapshot: Snapshot, decisions: Decisions) -> Decisions:
    """The cycle's decisions with each pending reason in the words `simulate` and `explain`
    print, worked out over the cluster as the cycle leaves it (as `simulate` does over its
    settled state), so a pod in the cluster is told what a what-if would say."""
    if not decisions.pending_reasons:
        return decisions
    after = apply_decisions(snapshot, decisions)
    reasons = PendingReasons(after)
    jobs = {job.key: job for job in after.jobs}
    worded = tuple(
        (key, reasons.of(jobs[key]).text if key in jobs else why)
        for key, why in decisions.pending_reasons
    )
    return replace(decisions, pending_reasons=worded)
