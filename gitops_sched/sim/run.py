"""Drive the engine through a simulation: initial state, then each step, settling after each.

What gets submitted: step 0 places the file's `running` workloads; when there is no
events file, or the file has no steps, step 0 also submits every repo workload that
`running` does not list, in file order (the repo as a whole arriving on an empty cluster;
one listed as stopped or deleted stays so).
A file with steps says itself what arrives: the repo's workloads are submitted only
where a `submit:` step names them. Submission order is the engine's tie-breaker, so a
result lists its workloads in it too (`SimulationResult.queue`): fed back as `running:`,
they queue in the same order, and with how long each has run (`WorkloadState.running_for`:
the youngest is evicted first), so the settled state stays settled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from gitops_sched.bridge.build import job_from_workload, nodes_from_repo, policy_from_repo
from gitops_sched.config.diagnostics import Location
from gitops_sched.config.model import Repo, Workload
from gitops_sched.engine.apply import STOPPING, settle
from gitops_sched.engine.history import record
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import (
    Decisions,
    GpuRequest,
    Job,
    PodPlacement,
    QueueStatus,
    Snapshot,
)
from gitops_sched.engine.why import PendingReasons
from gitops_sched.sim.events import (
    PROJECT_FIELDS,
    Advance,
    Delete,
    Expect,
    Idle,
    Placed,
    SetNodes,
    Simulation,
    Step,
    Submit,
)

TOLERANCE = 1e-6  # expected numbers match within this (GPU shares are floats)
NODE_DOWN = "node-down"


@dataclass(frozen=True)
class LogEntry:
    """One decision: a bind, an eviction, or a MIG instance created or destroyed."""

    step: int
    cycle: int  # from 1 within the step's settling; 0 for the step's own evictions (node-down)
    time: float
    action: str  # bind | evict | mig-create | mig-destroy
    workload: str  # "" for MIG changes
    reason: str = ""  # evictions: reclaim, preempt, consolidate, time-limit, idle, node-down
    by: str = ""  # the workload an eviction made room for
    pods: tuple[PodPlacement, ...] = ()  # binds: where; evictions: where from; MIG: the GPU


@dataclass(frozen=True)
class WorkloadState:
    workload: Workload
    request: GpuRequest  # per pod
    status: str  # running | pending | stopped | deleted
    pods: tuple[PodPlacement, ...]
    document: dict | None  # the Workload document, for workloads that are not the repo's
    submitted: int  # its place in the order of submission (of its last submission)
    running_for: float | None  # seconds since it started; None: it runs no pod
    idle_for: float | None  # seconds its GPUs have gone unused; None: busy or not running
    # why it is pending (engine.why) or stopped: worked out when asked (`plan` rarely asks)
    why: Callable[[], str] = field(default=lambda: "", repr=False, compare=False)

    @property
    def reason(self) -> str:
        """Pending: engine.why's one line; stopped: time-limit or idle; else ""."""
        return self.why()


def _pending_text(reasons: PendingReasons, job: Job) -> str:
    return reasons.of(job).text


@dataclass(frozen=True)
class ExpectationFailure:
    step: int
    location: Location  # of the expected value
    subject: str  # project | workload
    name: str
    field: str
    expected: Any
    actual: Any  # None where there is nothing to compare (a project without status)


@dataclass(frozen=True)
class SimulationResult:
    name: str
    snapshot: Snapshot  # the final state
    departments: tuple[QueueStatus, ...]
    projects: tuple[QueueStatus, ...]
    workloads: tuple[WorkloadState, ...]  # by name
    log: tuple[LogEntry, ...]
    expectations: int  # fields checked
    failures: tuple[ExpectationFailure, ...]
    # the last cycle's decisions: none (`changed` False) when the run ended settled, its
    # `snapshot` then a state the engine decides nothing on
    last: Decisions = field(default_factory=Decisions, repr=False, compare=False)

    @property
    def settled(self) -> Snapshot | None:
        """The final state when the run ended on a cycle that decided nothing, else None."""
        return None if self.last.changed else self.snapshot

    @property
    def queue(self) -> list[WorkloadState]:
        """The workloads in the order they were submitted: the order a continuation from
        this state (`running:`) must queue them in to decide as this run did."""
        return sorted(self.workloads, key=lambda state: state.submitted)


def nodes_of(pods: tuple[PodPlacement, ...]) -> str:
    """The nodes a workload runs on, as expectations and tables spell them."""
    return ",".join(sorted({pod.node for pod in pods}))


def simulate(
    repo: Repo, simulation: Simulation | None = None, settled: SimulationResult | None = None
) -> SimulationResult:
    """Run the simulation (None: the repo's workloads on the repo's nodes) to its end.

    `settled`: a run that ended settled (plan's base): a state equal to its end is not
    cycled again. The engine decides on the snapshot alone, so it would decide nothing
    there again, with the same status; a change that leaves the engine's input as it was
    costs no cycle."""
    if simulation is None:
        name = repo.cluster.name if repo.cluster else ""
        simulation = Simulation(name, nodes_from_repo(repo), running=(), steps=())
    start = Snapshot(
        policy_from_repo(repo),
        simulation.nodes,
        (),
        now=simulation.start,
        history=simulation.history,
    )
    run = _Run(repo, start, known=settled)
    arriving = list(simulation.running)
    if not simulation.steps:
        listed = {placed.workload.name for placed in simulation.running} | simulation.ended
        arriving += [Placed(w, ()) for w in repo.workloads if w.name not in listed]
    run.submit(arriving)
    run.settle(0)
    for step in simulation.steps:
        run.step(step)
    return run.result(simulation.name)


@dataclass
class _Run:
    """The state of a run between steps; each method is one kind of event."""

    repo: Repo
    snapshot: Snapshot
    workloads: dict[str, Workload] = field(default_factory=dict)  # all submitted, by name
    names: dict[str, str] = field(default_factory=dict)  # job key -> workload name
    order: dict[str, int] = field(default_factory=dict)  # name -> its job's `submitted`
    requests: dict[str, GpuRequest] = field(default_factory=dict)
    ended: dict[str, tuple[str, str]] = field(default_factory=dict)  # -> (status, reason)
    last: Decisions = field(default_factory=Decisions)
    log: list[LogEntry] = field(default_factory=list)
    failures: list[ExpectationFailure] = field(default_factory=list)
    checked: int = 0
    submitted: int = 0
    # the repo's own workload objects; the others came from the simulation file
    own: set[int] = field(default_factory=set)
    known: SimulationResult | None = None  # a run that ended settled (see `simulate`)

    def __post_init__(self) -> None:
        self.own = {id(workload) for workload in self.repo.workloads}

    def step(self, step: Step) -> None:
        match step.action:
            case Submit(workloads):
                self.submit(Placed(workload, ()) for workload in workloads)
            case Delete(names):
                self.delete(names)
            case SetNodes(names, up):
                self.set_nodes(step.number, names, up)
            case Advance(seconds):
                self.advance(seconds)
            case Idle(workloads):
                self.idle(dict(workloads))
            case Expect():
                self.expect(step, step.action)
                return  # looks only: nothing to settle
        self.settle(step.number)

    def advance(self, seconds: int) -> None:
        """Time passes with the cluster as it is: with fairness over time, each project's
        GPUs held all along are added to its past usage (engine.history), per node group
        for a project with per-group quotas."""
        now, fairness = self.snapshot.now, self.snapshot.policy.fairness
        history = self.snapshot.history
        if fairness is not None:
            session = Session(self.snapshot)
            held = {name: session.allocated[name] for name in session.projects}
            by_group = dict(session.pools.allocated) if session.pools is not None else {}
            history = record(history, fairness, now, now + seconds, held, by_group)
        self.snapshot = replace(self.snapshot, now=now + seconds, history=history)

    def submit(self, arriving: Iterable[Placed]) -> None:
        """Workloads (with the pods they run already, if any, and since when) queued in this
        order; the snapshot's jobs grow once for all of them."""
        jobs = [self._job(placed) for placed in arriving]
        self.snapshot = replace(self.snapshot, jobs=(*self.snapshot.jobs, *jobs))

    def _job(self, placed: Placed) -> Job:
        workload, now = placed.workload, self.snapshot.now
        job = job_from_workload(self.repo, workload, self.submitted)
        if placed.pods:  # a gang in flight among them: its grace period starts now
            job = job.with_pods(placed.pods, now - placed.running_for).tracking_short(now)
            if placed.idle_for is not None:  # as an `idle:` step, never before it started
                idle_since = max(now - placed.idle_for, now - placed.running_for)
                job = replace(job, idle_since=idle_since)
        self.order[workload.name] = self.submitted
        self.submitted += 1
        self.names[job.key] = workload.name
        self.workloads[workload.name] = workload
        self.requests[workload.name] = job.request
        self.ended.pop(workload.name, None)
        return job

    def delete(self, names: tuple[str, ...]) -> None:
        jobs = tuple(job for job in self.snapshot.jobs if job.name not in names)
        self.snapshot = replace(self.snapshot, jobs=jobs)
        self.ended.update((name, ("deleted", "")) for name in names)

    def set_nodes(self, step: int, names: tuple[str, ...], up: bool) -> None:
        """A node going down takes its pods with them: they are queued again. A gang whose
        other pods run elsewhere is left in flight (see the stale-gang grace period)."""
        nodes = tuple(
            replace(node, schedulable=up) if node.name in names else node
            for node in self.snapshot.nodes
        )
        jobs = []
        for job in self.snapshot.jobs:
            lost = tuple(pod for pod in job.placement if pod.node in names)
            if not up and lost:
                self._evicted(step, 0, job.name, NODE_DOWN, "", lost)
                job = job.without_pods(lost).tracking_short(self.snapshot.now)
            jobs.append(job)
        self.snapshot = replace(self.snapshot, nodes=nodes, jobs=tuple(jobs))

    def idle(self, seconds_ago: dict[str, int]) -> None:
        """Running workloads' GPUs unused since `seconds_ago` before now (not before they
        started), as the node agent's IDLE_SINCE says it; pending ones have no GPUs to leave
        unused."""
        now = self.snapshot.now
        jobs = tuple(
            replace(job, idle_since=max(now - seconds_ago[name], job.started_at))
            if job.started_at is not None and (name := self.names[job.key]) in seconds_ago
            else job
            for job in self.snapshot.jobs
        )
        self.snapshot = replace(self.snapshot, jobs=jobs)

    def settle(self, step: int) -> None:
        if self.known is not None and self.known.settled == self.snapshot:
            self.last = self.known.last  # what settle would find: one cycle, no decision
            return
        self.snapshot, history = settle(self.snapshot)
        for cycle, decisions in enumerate(history, 1):
            self._record(step, cycle, decisions)
        self.last = history[-1]

    def _record(
        self,
        step: int,
        cycle: int,
        decisions: Decisions,
    ) -> None:
        """Log a cycle's decisions, with workload names (the engine speaks in job keys)."""
        now = self.snapshot.now
        for evict in decisions.evictions:
            name, by = self.names[evict.job], self.names.get(evict.by, evict.by)
            self._evicted(step, cycle, name, evict.reason.value, by, evict.pods)
            if evict.reason in STOPPING:
                self.ended[name] = ("stopped", evict.reason.value)
        for change in decisions.mig_changes:
            action = "mig-create" if change.create else "mig-destroy"
            pod = PodPlacement(change.node, (change.gpu,), mig=change.instance)
            self.log.append(LogEntry(step, cycle, now, action, "", pods=(pod,)))
        for bind in decisions.binds:
            name = self.names[bind.job]
            self.log.append(LogEntry(step, cycle, now, "bind", name, pods=bind.pods))

    def _evicted(
        self, step: int, cycle: int, job: str, reason: str, by: str, pods: tuple[PodPlacement, ...]
    ) -> None:
        self.log.append(LogEntry(step, cycle, self.snapshot.now, "evict", job, reason, by, pods))

    def states(self, names: Iterable[str]) -> dict[str, WorkloadState]:
        """The workloads' states now; one pass over the jobs, however many are asked for."""
        jobs = {job.name: job for job in self.snapshot.jobs}
        reasons = PendingReasons(self.snapshot)
        return {name: self._state(name, jobs.get(name), reasons) for name in names}

    def _state(self, name: str, job: Job | None, reasons: PendingReasons) -> WorkloadState:
        workload = self.workloads[name]
        started, idle = (job.started_at, job.idle_since) if job else (None, None)
        why: Callable[[], str]  # str() is "", partial(str, text)() is text
        if job is None:
            status, reason = self.ended[name]
            why = partial(str, reason)
        elif len(job.placement) >= job.min_available:
            status, why = "running", str
        else:
            status, why = "pending", partial(_pending_text, reasons, job)
        return WorkloadState(
            workload=workload,
            request=self.requests[name],
            status=status,
            pods=job.placement if job else (),
            document=None if id(workload) in self.own else workload.doc.data,
            submitted=self.order[name],
            running_for=None if started is None else self.snapshot.now - started,
            idle_for=None if idle is None else self.snapshot.now - idle,
            why=why,
        )

    def expect(self, step: Step, expect: Expect) -> None:
        statuses = {status.name: status for status in self.last.projects}
        for name, fields in expect.projects.items():
            status = statuses.get(name)
            for key, want in fields.items():
                if key == "nodeGroups":
                    self._expect_groups(step, expect, name, status, want)
                    continue
                got = getattr(status, PROJECT_FIELDS[key]) if status else None
                ok = got is not None and abs(got - want) <= TOLERANCE
                self._check(step, expect, ("project", name, key), want, got, ok)
        states = self.states(expect.workloads)
        for name, texts in expect.workloads.items():
            state = states[name]
            actual = {"status": state.status, "node": nodes_of(state.pods), "reason": state.reason}
            for key, text in texts.items():
                seen = actual[key]
                ok = text.lower() in seen.lower() if key == "reason" else seen == text
                self._check(step, expect, ("workload", name, key), text, seen, ok)

    def _expect_groups(
        self,
        step: Step,
        expect: Expect,
        name: str,
        status: QueueStatus | None,
        groups: dict[str, dict[str, float]],
    ) -> None:
        """A project's expected numbers per node group (`nodeGroups:`): a group the project
        has no status in (one quota over all groups) reads as missing."""
        pools = {pool.name: pool for pool in status.pools} if status else {}
        for group, fields in groups.items():
            pool = pools.get(group)
            for key, want in fields.items():
                got = getattr(pool, PROJECT_FIELDS[key]) if pool else None
                ok = got is not None and abs(got - want) <= TOLERANCE
                what = ("project", name, f"nodeGroups.{group}.{key}")
                self._check(step, expect, what, want, got, ok)

    def _check(
        self, step: Step, expect: Expect, what: tuple[str, str, str], want: Any, got: Any, ok: bool
    ) -> None:
        """Count one expected value; a miss records where it is written."""
        self.checked += 1
        if not ok:
            where = expect.locations.get(what, step.location)
            self.failures.append(ExpectationFailure(step.number, where, *what, want, got))

    def result(self, name: str) -> SimulationResult:
        return SimulationResult(
            name=name,
            snapshot=self.snapshot,
            departments=self.last.departments,
            projects=self.last.projects,
            workloads=tuple(self.states(sorted(self.workloads)).values()),
            log=tuple(self.log),
            expectations=self.checked,
            failures=tuple(self.failures),
            last=self.last,
        )
