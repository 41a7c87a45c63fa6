"""Quotas per node group (Run:ai's node pools, KAI's queue per node pool).

A project that gives its quota per node group (`QueueSpec.pool_quotas`) is judged per
group, in the group of the node a job lands on: its deserved quota there is guaranteed
there and only there (8 H100s and 4 A100s never make 12 A100s), non-preemptible work must
fit in it, `overQuota: denied` caps it, reclaim and preempt weigh what it holds in that
group against that group's deserved quota and fair share, and a victim's project is judged
in the groups the victim runs on. A job that may use several groups is tried group by
group (`tries`), those where its project has the most deserved quota left first.

A project's fair share in a group is the group's own split (`fairshare.split`, as KAI
splits each node pool among its queues): the group's GPUs, less those that projects with
one quota hold there, go first to each project's deserved quota in the group, then by
those quotas as weights (a project with no quota in the group has a weight of 1), each
project asking for what it holds and asks for there, capped by its fair share over the
cluster (cluster -> departments -> projects, unchanged). Work that may run in several
groups asks in each. Departments keep one quota over every group, and so does a project
without per-group quotas. A repo with no per-group quota builds none of this
(`Session.pools` is None).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Protocol
from weakref import proxy

from gitops_sched.engine.fairshare import Claim, split
from gitops_sched.engine.history import group_usage
from gitops_sched.engine.memo import Memo
from gitops_sched.engine.types import (
    GPU_EPSILON,
    Job,
    PodPlacement,
    QueueSpec,
    QueueStatus,
    Snapshot,
)
from gitops_sched.engine.usage import NodeUse, Usage

# KAI's multiplier for a queue holding GPUs with no allocatable share: such queues sort
# after every other, the more they hold the later
NO_SHARE_PENALTY = 1000.0


def share_items(held: float, gain: float, allocatable: float) -> tuple[bool, float, float]:
    """A queue's share items in allocation order, as KAI's proportion plugin orders queues:
    holding GPUs with no allocatable share (such a queue sorts after the others, the more it
    holds the later), then what it holds over its allocatable share with `gain` and
    without. Session._serve_level and Pools.in_groups judge by the same items."""
    after = held + gain
    if allocatable <= GPU_EPSILON:
        return after > GPU_EPSILON, after * NO_SHARE_PENALTY, held * NO_SHARE_PENALTY
    return False, after / allocatable, held / allocatable


class Session(Protocol):
    """What this module uses of the cycle's `engine.session.Session` (which builds Pools:
    named here, not imported, so that the engine's modules import in one direction)."""

    projects: dict[str, QueueSpec]
    nodes: dict[str, NodeUse]
    usage: Usage
    jobs: dict[str, Job]
    fair_share: dict[str, float]
    pools: Pools | None
    snapshot: Snapshot

    def placed_gpus(self, job: Job, pods: tuple[PodPlacement, ...] | None = None) -> float: ...

    def pod_gpus(self, job: Job, pod: PodPlacement) -> float: ...

    def pods_gpus(self, job: Job, pods: tuple[PodPlacement, ...]) -> list[float]: ...

    def wanted_gpus(self, job: Job, pods: int | None = None) -> float: ...

    def pending(self) -> list[Job]: ...

    def groups_of(self, job: Job) -> list[str]: ...

    def department_of(self, project: str) -> str: ...

    def put_job(self, job: Job) -> None: ...


class Pools:
    """Per (project, node group): deserved quota, what it holds (and of that what is not
    preemptible), fair share. Only projects with per-group quotas are tracked."""

    def __init__(self, session: Session, counted: dict[str, list[float]]) -> None:
        """`counted`: each running job's pods' GPUs (Session.pod_gpus), as the session
        counted them for its own queues."""
        # weakly: the session holds its pools, and a cycle between them would keep the
        # cycle's objects for the garbage collector (see engine.memo)
        self.session: Session = proxy(session)
        # a project's department: the session's lookup itself (a dict's, holding no session),
        # not through the proxy, as `account` asks for each change of each job
        self.department_of: Callable[[str], str] = session.department_of
        self.quotas: dict[str, dict[str, float]] = {
            p.name: dict(p.pool_quotas) for p in session.projects.values() if p.pool_quotas
        }
        # (project, group) -> what it holds there, and of that what is not preemptible;
        # defaultdicts, so that `account` adds with no call (they are read with .get)
        self.allocated: defaultdict[tuple[str, str], float] = defaultdict(float)
        self.fixed: defaultdict[tuple[str, str], float] = defaultdict(float)
        # (department, group) -> what all its projects hold there (see department_in)
        self.department_held: defaultdict[tuple[str, str], float] = defaultdict(float)
        self.group = {name: use.node.node_group for name, use in session.nodes.items()}
        # every group a pod can be counted in: its node's, or "" on a node not known
        self.known_groups = sorted({*self.group.values(), ""})
        # group -> GPUs projects with one quota hold there (see _shares)
        others: defaultdict[str, float] = defaultdict(float)
        for job in session.jobs.values():
            if job.running:
                self.account(job, job.placement, +1, counted[job.key], others)
        self.capacity = {group: float(gpus) for group, gpus in session.usage.capacity.items()}
        self.demand = self._demand()
        self.usage, self.history_weight = self._usage()
        self.fair_share = self._shares(others)
        self.department_bounds = self._department_bounds()
        self.pooled_departments = {d for d, _ in self.department_bounds}
        # whether allocation order reads what a project's work holds per group: the memo's
        # lookup itself, as victim orders ask about every victim
        self.reads: Callable[[str], bool] = Memo(self._reads).__getitem__

    def account(
        self,
        job: Job,
        pods: tuple[PodPlacement, ...],
        sign: int,
        amounts: list[float] | None = None,
        others: defaultdict[str, float] | None = None,
    ) -> None:
        """Count (sign +1) or uncount (-1) the pods in the groups of their nodes: for the
        project, if it has per-group quotas, and for its department whatever it has.
        `amounts`: each pod's GPUs (Session.pods_gpus), where the caller has them;
        `others`: group -> GPUs of projects with one quota, counted in it too."""
        pooled = job.project in self.quotas
        department = self.department_of(job.project)
        if amounts is None:
            amounts = self.session.pods_gpus(job, pods)
        for pod, gpus in zip(pods, amounts, strict=True):
            group = self.group.get(pod.node, "")
            amount = sign * gpus
            self.department_held[(department, group)] += amount
            if not pooled:
                if others is not None:
                    others[group] += amount
                continue
            key = (job.project, group)
            self.allocated[key] += amount
            if not job.preemptible:
                self.fixed[key] += amount

    def uncounted(
        self, job: Job, pods: tuple[PodPlacement, ...], amounts: list[float]
    ) -> Callable[[], None]:
        """Uncount the pods (account, sign -1) for a look at the order without them; the
        returned call puts every number it changed back as it was, to the last bit."""
        department = self.department_of(job.project)
        groups = {self.group.get(pod.node, "") for pod in pods}
        saved = [(self.department_held, (department, g)) for g in groups]
        saved += [
            (table, (job.project, g)) for table in (self.allocated, self.fixed) for g in groups
        ]
        values = [table.get(key) for table, key in saved]
        self.account(job, pods, -1, amounts)

        def restore() -> None:
            for (table, key), value in zip(saved, values, strict=True):
                if value is None:
                    table.pop(key, None)
                else:
                    table[key] = value

        return restore

    def _demand(self) -> dict[tuple[str, str], float]:
        """What each project holds in each group plus what its pending work may ask there
        (capped by the group's size)."""
        demand = dict(self.allocated)
        for key, wanted in pool_queues(self.session, self.session.pending(), self).items():
            demand[key] = demand.get(key, 0.0) + wanted
        return {key: min(value, self.capacity.get(key[1], 0.0)) for key, value in demand.items()}

    def _usage(self) -> tuple[dict[tuple[str, str], float], float]:
        """Fairness over time per group: each project's decayed past usage in each group
        (a share of the group's GPUs over the window) and the policy's history weight;
        ({}, 0) without fairness over time."""
        snapshot = self.session.snapshot
        fairness = snapshot.policy.fairness
        if fairness is None:
            return {}, 0.0
        usage = group_usage(snapshot.history, fairness, snapshot.now, self.capacity)
        return usage, fairness.history_weight

    def groups(self, project: str) -> list[str]:
        """The groups a project has a quota in, holds or asks for GPUs in, by name."""
        found = set(self.quotas.get(project, ()))
        for group in self.known_groups:  # a few, not every (project, group) counted
            key = (project, group)
            if (
                self.demand.get(key, 0.0) > GPU_EPSILON
                or self.allocated.get(key, 0.0) > GPU_EPSILON
            ):
                found.add(group)
        return sorted(found)

    def _shares(self, others: dict[str, float]) -> dict[tuple[str, str], float]:
        """Each node group's GPUs, less what projects with one quota hold there (`others`,
        per group), split among the projects with per-group quotas (see module doc)."""
        session = self.session
        shares: dict[tuple[str, str], float] = {}
        for group in sorted(self.capacity):
            claims = []
            for project in self.quotas:
                spec = session.projects[project]
                deserved = self.quotas[project].get(group, 0.0)
                pool = QueueSpec(
                    name=project,
                    deserved=deserved,
                    over_quota_weight=deserved or 1.0,  # no quota there: a small claim
                    over_quota_allowed=spec.over_quota_allowed and spec.over_quota_weight > 0,
                    over_quota_rank=spec.over_quota_rank,
                    age=spec.age,
                )
                asks = min(self.demand.get((project, group), 0.0), session.fair_share[project])
                claims.append(Claim(pool, asks, self.usage.get((project, group), 0.0)))
            left = max(self.capacity[group] - others.get(group, 0.0), 0.0)
            for claim, share in zip(claims, split(left, claims, None, self.history_weight)):
                shares[(claim.spec.name, group)] = share
        return shares

    def _department_bounds(self) -> dict[tuple[str, str], tuple[float, float, float]]:
        """(department, group) -> its projects' (deserved, allocatable, fair share) there:
        fixed for the session, so department_in, asked for every order key, adds a few
        numbers instead of walking every project."""
        bounds: dict[tuple[str, str], tuple[float, float, float]] = {}
        for project, quotas in self.quotas.items():
            department = self.department_of(project)
            for group in sorted(set(quotas) | set(self.capacity)):
                quota = quotas.get(group, 0.0)
                share = self.fair_share.get((project, group), 0.0)
                deserved, allocatable, shared = bounds.get((department, group), (0.0, 0.0, 0.0))
                bounds[(department, group)] = (
                    deserved + quota,
                    allocatable + max(quota, share),
                    shared + share,
                )
        return bounds

    # these sum lists, not generators: a generator's every step is a call

    def deserved(self, project: str, groups: frozenset[str] | tuple[str, ...]) -> float:
        quotas = self.quotas[project]
        return sum([quotas.get(g, 0.0) for g in groups])

    def held(self, project: str, groups: frozenset[str] | tuple[str, ...]) -> float:
        return sum([self.allocated.get((project, g), 0.0) for g in groups])

    def share(self, project: str, groups: frozenset[str] | tuple[str, ...]) -> float:
        return sum([self.fair_share.get((project, g), 0.0) for g in groups])

    def allocatable(self, project: str, groups: frozenset[str] | tuple[str, ...]) -> float:
        """max(deserved, fair share) in each of the groups, added up."""
        quotas = self.quotas[project]
        return sum(
            [max(quotas.get(g, 0.0), self.fair_share.get((project, g), 0.0)) for g in groups]
        )

    def department_in(
        self, department: str, groups: frozenset[str]
    ) -> tuple[float, float, float, float]:
        """The department as reclaim judges it in `groups`: (held, deserved, allocatable,
        fair share) -- what all its projects hold there, against the per-group quotas (and
        shares) of its projects there; a project with one quota has none in a group."""
        held = sum([self.department_held.get((department, g), 0.0) for g in groups])
        deserved = allocatable = share = 0.0
        for group in sorted(groups):  # one order of addition: the same sums every run
            found = self.department_bounds.get((department, group))
            if found is not None:
                deserved += found[0]
                allocatable += found[1]
                share += found[2]
        return held, deserved, allocatable, share

    def in_groups(self, key: tuple, job: Job, gain: float, department: bool) -> tuple:
        """A serve-order key (Session._serve_level) of the job's project (or department)
        whose first item, over its deserved quota with the job, is judged in the job's node
        groups where the project has per-group quotas: the group it is tried in, else
        those its pods run on (a victim), else those it may use. A department with such
        projects is judged there by them (see department_in) whatever project the job is
        of, as reclaim judges whether it may lose work (reclaim._pool_department_floor):
        a department holding more in a group than its projects deserve there (the work of
        its projects without per-group quotas counted too) comes after one within what
        it deserves there, so a project's deserved quota in a group is guaranteed there
        against work that only its department's totals would keep. A project's share items
        and allocatable share are judged in those groups too, against its fair share
        there: so a project whose usage of a group lowered its share there (fairness over
        time) ranks after one that did not, in that group, even where their shares over
        the cluster are equal."""
        if job.project not in self.quotas and not (
            department and self.has_pooled(self.department_of(job.project))
        ):
            return key
        groups = self.job_groups(job)
        if department:
            held, deserved, _, _ = self.department_in(self.department_of(job.project), groups)
        else:
            held = self.held(job.project, groups)
            deserved = self.deserved(job.project, groups)
            allocatable = self.allocatable(job.project, groups)
            shares = share_items(held, gain, allocatable)
            key = (*key[:2], *shares, allocatable, *key[6:])
        return (held + gain > deserved + GPU_EPSILON, *key[1:])

    def _reads(self, project: str) -> bool:
        """Whether allocation order (in_groups) reads what the project's work holds per
        group: the project has per-group quotas, or its department has projects that do."""
        if project in self.quotas:
            return True
        return self.department_of(project) in self.pooled_departments

    def has_pooled(self, department: str) -> bool:
        """Whether any project of the department has per-group quotas."""
        return department in self.pooled_departments

    def job_groups(self, job: Job) -> frozenset[str]:
        """The node groups a job is judged in (see in_groups)."""
        if len(job.node_groups) == 1:
            return frozenset(job.node_groups)
        if job.placement:
            return frozenset(self.group.get(pod.node, "") for pod in job.placement)
        return frozenset(self.session.groups_of(job))

    def may_give_any(self, project: str, guaranteed: bool) -> bool:
        """Whether the project holds more than its deserved quota (more than its
        allocatable share, if not `guaranteed`) in some group: work it may lose."""
        for group in self.groups(project):
            held = self.held(project, (group,))
            bound = self.deserved if guaranteed else self.allocatable
            if held > bound(project, (group,)) + GPU_EPSILON:
                return True
        return False

    def statuses(self, project: str, queued: dict[tuple[str, str], float]) -> tuple:
        """The project's QueueStatus per group (empty for a project with one quota), its
        past usage there included (fairness over time)."""
        if project not in self.quotas:
            return ()
        return tuple(
            QueueStatus(
                name=group,
                deserved=self.quotas[project].get(group, 0.0),
                fair_share=self.fair_share.get((project, group), 0.0),
                allocated=self.allocated.get((project, group), 0.0),
                queued=queued.get((project, group), 0.0),
                usage=self.usage.get((project, group), 0.0),
            )
            for group in self.groups(project)
        )


def pool_queues(
    session: Session, pending: list[Job], pools: Pools | None = None
) -> dict[tuple[str, str], float]:
    """GPUs pending work of projects with per-group quotas asks for, per (project, node
    group it may use): a job that may use several groups is queued in each."""
    pools = pools or session.pools
    queued: dict[tuple[str, str], float] = {}
    for job in pending:
        if pools is not None and job.project in pools.quotas:
            wanted = session.wanted_gpus(job, job.missing)
            for group in session.groups_of(job):
                key = (job.project, group)
                queued[key] = queued.get(key, 0.0) + wanted
    return queued


def ran_in(session: Session, job: Job, pods: tuple[PodPlacement, ...]) -> Job:
    """The job limited to the node groups `pods` ran in: how allocation order judges a
    victim that is offered its place back where per-group quotas exist (Pools.in_groups:
    its project, if it has them, and its department). Only for ordering: the session
    keeps the job as it is."""
    pools = session.pools
    if pools is None or not pods:
        return job
    groups = tuple(sorted({pools.group.get(pod.node, "") for pod in pods}))
    return job.with_node_groups(groups)


def pool_of(session: Session, job: Job) -> str | None:
    """The node group a job of a project with per-group quotas is being tried in (see
    `tries`); None when the job is judged by its project's totals."""
    pools = session.pools
    if pools is None or job.project not in pools.quotas or len(job.node_groups) != 1:
        return None
    return job.node_groups[0]


def tries(session: Session, job: Job) -> list[tuple[str, ...] | None]:
    """The node groups to try the job in, one at a time, for a project with per-group
    quotas: those where the project has the most deserved quota left first, then as the
    job lists them (every group with nodes, by name, if it names none). [None]: try it
    as it is."""
    pools = session.pools
    if pools is None or job.project not in pools.quotas:
        return [None]
    groups = session.groups_of(job)
    if not groups or (len(groups) == 1 and tuple(groups) == job.node_groups):
        return [None]  # one group to try (or none with nodes: the job says why as it is)
    order = {g: i for i, g in enumerate(job.node_groups or groups)}

    def left(group: str) -> float:
        return pools.deserved(job.project, (group,)) - pools.held(job.project, (group,))

    ranked = sorted(groups, key=lambda g: (-max(left(g), 0.0), order.get(g, len(order))))
    return [(group,) for group in ranked]


def restricted(session: Session, job: Job, groups: tuple[str, ...] | None) -> _Restricted:
    """`with restricted(session, job, groups) as each:` -- the job as the session holds it,
    limited to `groups` while inside (None: as it is); it leaves with its own node groups
    and whatever pods it gained. Only outside any statement: an undo logged inside is
    settled before the limit is lifted."""
    return _Restricted(session, job.key, groups)


class _Restricted:
    """restricted's context manager: a class, not a generator, as allocate, reclaim and
    preempt enter one per job and node group tried (tens of thousands a cycle)."""

    __slots__ = ("groups", "key", "original", "session")

    def __init__(self, session: Session, key: str, groups: tuple[str, ...] | None) -> None:
        self.session, self.key, self.groups = session, key, groups

    def __enter__(self) -> Job:
        jobs = self.session.jobs
        if self.groups is not None:
            current = jobs[self.key]
            self.original = current.node_groups
            self.session.put_job(current.with_node_groups(self.groups))
        return jobs[self.key]

    def __exit__(self, *_: object) -> None:
        if self.groups is None:
            return
        current = self.session.jobs.get(self.key)
        if current is not None:
            self.session.put_job(current.with_node_groups(self.original))
