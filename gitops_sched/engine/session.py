"""A cycle's working state: who uses which GPU, what each queue holds, what was decided.

Actions try changes inside a `statement()`: every change logs how to undo itself, so a
rejected "what if" (evict these two, place that gang) leaves no trace. Only the
session mutates; the snapshot it starts from stays frozen.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial

from gitops_sched.engine.fairshare import fair_shares
from gitops_sched.engine.history import past_usage
from gitops_sched.engine.memo import Memo
from gitops_sched.engine.pools import NO_SHARE_PENALTY, Pools, share_items
from gitops_sched.engine.requests import placed_pod_gpus, pod_gpus
from gitops_sched.engine.types import (
    GPU_EPSILON,
    Bind,
    Evict,
    EvictReason,
    Job,
    MigChange,
    PodPlacement,
    QueueSpec,
    ReleasingPod,
    RequestKind,
    Snapshot,
)
from gitops_sched.engine.usage import NodeUse, Usage
from gitops_sched.hardware.mig import MigInstance


@dataclass(frozen=True, slots=True)
class Victim:
    """What one eviction takes: a whole job, or one elastic pod above its gang."""

    job: str  # key
    pods: tuple[PodPlacement, ...] | None  # None: every pod the job still runs
    groups: frozenset[str]  # node groups it runs on
    move_only: bool = False  # may be moved to make room, never stopped
    mig: bool = False  # its pods hold MIG instances (else plain GPUs, or none)


def _share_ratio(held: float, allocatable: float) -> float:
    """See Session.share_ratio."""
    if allocatable <= GPU_EPSILON:
        return held * NO_SHARE_PENALTY
    return held / allocatable


def _key(job: Job) -> str:
    return job.key


def job_order(job: Job) -> tuple:
    """Within a project: higher priority first; then a job running fewer pods than its
    gang (new work, or a gang in flight) before one running just its gang, before one
    running more (an elastic job's further pods are spare capacity: KAI's elastic
    plugin); then earlier submission, then name."""
    running, gang = job.pods - job.missing, min(job.min_available, job.pods)
    return (-job.priority, (running >= gang) + (running > gang), job.submitted, job.key)


def victim_order(job: Job) -> tuple:
    """Cheapest to lose first: lowest priority, then the youngest -- the latest start (least
    work lost), then the latest submission -- then the key. KAI's victim order is its job
    order reversed; it ages jobs by creation, the engine by start first."""
    started = job.started_at if job.started_at is not None else float("-inf")
    return (job.priority, -started, -job.submitted, job.key)


def releasing_holder(index: int, job: str) -> str:
    """The name a releasing pod holds its GPUs under (a job's new pods may run beside it)."""
    return f"releasing:{index}:{job}"


class Statement:
    """`with session.statement() as commit:` -- the changes made inside are undone on exit
    unless `commit()` was called, the decisions they added with them; a committed statement
    inside another hands its undo log to the outer one. A class, not a generator context
    manager: actions open hundreds of thousands of statements a cycle."""

    __slots__ = ("committed", "outer", "session")

    def __init__(self, session: Session) -> None:
        self.session = session

    def __enter__(self) -> Callable[[], None]:
        session = self.session
        self.outer = session._undo
        session._undo = []
        self.committed = False
        return self.commit

    def commit(self) -> None:
        self.committed = True

    def __exit__(self, *_: object) -> None:
        session = self.session
        undo, session._undo = session._undo, self.outer
        assert undo is not None, "opened by __enter__"
        if self.committed:
            if self.outer is not None:
                self.outer.extend(undo)
            return
        for action in undo[::-1]:
            action()


Facts = tuple[float, int, float, float]  # see Session._facts


class _Parents(dict[str, str]):
    """Project -> its department; "" for a project the policy does not name."""

    def __missing__(self, project: str) -> str:
        return ""


# one piece of work allocation order may serve (InOrder): the job, what placing it adds to
# its project and department, its place among its project's entries (lowest first)
Entry = tuple[Job, float, tuple]


class Session:
    """Mutable state of one scheduling cycle over an immutable `Snapshot`."""

    def __init__(self, snapshot: Snapshot, carried: Usage | None = None) -> None:
        """`carried`: the usage the last cycle of a settle ended with, the snapshot being
        that cycle's decisions applied (engine.apply.settle): brought up to it, not built
        again (Usage.carry)."""
        self.snapshot = snapshot
        self.now = snapshot.now
        policy = snapshot.policy
        self.projects: dict[str, QueueSpec] = {p.name: p for p in policy.projects}
        self.departments: dict[str, QueueSpec] = {d.name: d for d in policy.departments}
        self._parent = _Parents({p.name: p.parent for p in policy.projects})
        # a project's department ("" for none): the lookup itself, not a method that calls
        # it, as the actions ask about a million times a cycle
        self.department_of: Callable[[str], str] = self._parent.__getitem__
        self.jobs: dict[str, Job] = {job.key: job for job in sorted(snapshot.jobs, key=_key)}
        running = [(j.key, j.project, pod) for j in self.jobs.values() for pod in j.placement]
        # releasing pods hold their GPUs under their own names until `release_all`
        self.releasing: dict[str, ReleasingPod] = {
            releasing_holder(i, r.job): r for i, r in enumerate(snapshot.releasing)
        }
        held = [(name, r.project, r.pod) for name, r in self.releasing.items()]
        if carried is None or held:
            self.usage = Usage(snapshot.nodes, running + held)
        else:
            self.usage = carried.carry(snapshot.nodes, running)
        self.nodes = self.usage.nodes
        self._candidates: dict[tuple[str, ...], list[NodeUse]] = {}
        self._groups: dict[tuple[str, ...], list[str]] = {}
        self.allocated: dict[str, float] = dict.fromkeys([*self.projects, *self.departments], 0.0)
        self.fixed: dict[str, float] = dict(self.allocated)  # non-preemptible part
        self.evictions: list[Evict] = []
        self.binds: list[Bind] = []
        self.mig_changes: list[MigChange] = []
        self.pending_reasons: dict[str, str] = {}
        self._undo: list[Callable[[], None]] | None = None
        self._nominal: dict[tuple, tuple[str, int]] = {}
        self._largest: dict[str, list[tuple[int, int, str]]] | None = None  # see nominal_gpu
        self._pod_wanted: dict[str, float] = {}  # job -> one pod's GPUs on its nominal GPU
        # project -> whether no quota rule bounds its preemptible work (admission.bounds)
        self.unbounded: dict[str, bool] = {}
        # every job's place in queue order, see pending_by_project
        self._in_job_order: dict[str, int] | None = None
        self._ordered_keys: list[str] = []  # the jobs' keys by that place
        self._pending = {key for key, job in self.jobs.items() if job.missing > 0}
        # job -> (the job as last counted, its placed GPUs): victim scans ask again and
        # again about jobs that have not changed (a changed job is a new object)
        self._placed: dict[str, tuple[Job, float]] = {}
        # job -> (the job as last seen, its victims): see actions.victims.VictimPool
        self.victim_cache: dict[str, tuple[Job, list[Victim]]] = {}
        self.pools: Pools | None = None  # per-node-group quotas, built below where any
        # each running job's pods' GPUs, counted once here: the pools count them again
        counted: dict[str, list[float]] = {}
        for job in self.jobs.values():
            if job.running:
                counted[job.key], total = self._account(job, job.placement, +1)
                self._placed[job.key] = (job, total)  # as placed_gpus sums them
        self.capacity = float(sum(self.usage.capacity.values()))  # as nodes_capacity counts
        demand = {name: self.allocated[name] for name in self.projects}
        for job in self.pending():
            if job.project in demand:
                demand[job.project] += self.wanted_gpus(job, job.missing)
        self.demand = demand  # GPUs each project holds and asks for: what fair share splits
        # fairness over time: each project's decayed past usage, a share of the window
        self.past_usage: dict[str, float] = {}
        history_weight = 0.0
        if policy.fairness is not None:
            history_weight = policy.fairness.history_weight
            self.past_usage = past_usage(snapshot.history, policy.fairness, self.now, self.capacity)
        self.fair_share = fair_shares(
            self.capacity,
            policy.departments,
            policy.projects,
            demand,
            usage=self.past_usage,
            history_weight=history_weight,
        )
        # queue -> _facts, asked for by every order key
        self._queue_facts: Memo[str, Facts] = Memo(self._facts)
        # (queue, gain) -> (its allocation then, _serve_level): serve_key is asked again and
        # again about a queue whose allocation has not moved, with the same gain
        self._levels: dict[tuple[str, float], tuple[float, tuple]] = {}
        if any(p.pool_quotas for p in policy.projects):
            self.pools = Pools(self, counted)

    # -- queries ---------------------------------------------------------------------------

    def pending(self) -> list[Job]:
        """Jobs with pods not running: new ones, gangs in flight, elastic ones below `pods`."""
        return [j for j in self.jobs.values() if j.missing > 0]

    def running(self) -> list[Job]:
        return [j for j in self.jobs.values() if j.running]

    def pending_by_project(self) -> dict[str, list[Job]]:
        """Pending jobs per project in queue order: priority, then submission, then name.

        Actions ask for it several times a cycle; a job's place in that order never changes
        within a cycle (only whether it is pending), so the jobs are numbered in that order
        once and each ask sorts the pending ones by number (every job the session ever
        holds is numbered).
        """
        if self._in_job_order is None:
            ordered = sorted(self.jobs.values(), key=job_order)
            self._in_job_order = {job.key: at for at, job in enumerate(ordered)}
            self._ordered_keys = [job.key for job in ordered]
        # numbers sorted as they are, with no key call per job; a job's number names it
        order, keys, jobs = self._in_job_order, self._ordered_keys, self.jobs
        queues: defaultdict[str, list[Job]] = defaultdict(list)  # one call a job, not two
        for at in sorted([order[key] for key in self._pending]):
            job = jobs[keys[at]]
            queues[job.project].append(job)
        return dict(queues)

    def _facts(self, queue: str) -> Facts:
        """(deserved, rank, age, allocatable share) of a project or department, fixed for
        the cycle and asked for by every order key: worked out once per queue, on the
        first ask of _queue_facts."""
        spec = self.projects.get(queue) or self.departments.get(queue)
        allocatable = self.fair_share.get(queue, 0.0)
        if spec is None:
            return (0.0, 0, 0.0, allocatable)
        allocatable = max(spec.deserved, allocatable)
        if spec.limit is not None:
            allocatable = min(allocatable, spec.limit)
        return (spec.deserved, spec.over_quota_rank, spec.age, allocatable)

    def allocatable(self, queue: str) -> float:
        """What a queue may hold before it counts as over its share: max(deserved, fair
        share), capped by its hard limit (KAI's allocatable share). Fixed for the cycle."""
        return self._queue_facts[queue][3]

    def share_ratio(self, queue: str, gain: float = 0.0) -> float:
        """Allocated (plus `gain`) over the allocatable share: the queue orders' measure
        (KAI's dominant resource share, GPUs only). A queue with no allocatable share
        holding GPUs gets the largest, growing with what it holds (KAI multiplies)."""
        return _share_ratio(self.allocated.get(queue, 0.0) + gain, self._queue_facts[queue][3])

    def _serve_level(self, queue: str, gain: float) -> tuple:
        """A queue's place among its siblings in allocation order, lowest first, as KAI's
        proportion plugin orders queues: those still within their deserved quota with the
        job; higher over-quota rank; not holding GPUs with no allocatable share; the lowest
        share_ratio with the job, then without it; the smaller allocatable share (KAI's
        prioritizeBasedOnAllocatableShare: the weaker queue); the older queue
        (QueueSpec.age: KAI's creation time).

        KAI puts queues over their fair share last only when over in every resource; the
        engine schedules GPUs alone (a queue's CPU and memory are 0 of a 0 share, never
        over), so that check never separates queues and rank comes first."""
        deserved, rank, age, allocatable = self._queue_facts[queue]
        now = self.allocated.get(queue, 0.0)
        over = now + gain > deserved + GPU_EPSILON
        return (over, -rank, *share_items(now, gain, allocatable), allocatable, age)

    def serve_key(self, queue: str, gain: float, age: float) -> tuple:
        """A project's place among the projects of its department in allocation order, or
        a department's among the departments, `gain` the GPUs of its next job (of its first
        project, for a department: KAI orders the queue tree level by level, each queue
        by the best job under it): _serve_level, then `age` (the earliest submission of
        its pending work), then the name."""
        now = self.allocated.get(queue, 0.0)
        known = self._levels.get((queue, gain))
        if known is None or known[0] != now:
            known = self._levels[(queue, gain)] = (now, self._serve_level(queue, gain))
        return (*known[1], age, queue)

    def serve_order(self, queues: dict[str, list[Job]]) -> list[str]:
        """Projects with pending work (in queue order, see pending_by_project), in the
        order they are served: departments by serve_key with the next job of their first
        project, then projects inside each by serve_key with their first job."""
        wanted = self.wanted_gpus
        keys = {
            name: self.serve_key(name, wanted(jobs[0]), min([j.submitted for j in jobs]))
            for name, jobs in queues.items()
        }
        first: dict[str, str] = {}  # department -> its first project
        for name in sorted(queues, key=keys.__getitem__):
            first.setdefault(self.department_of(name), name)
        departments = {
            department: self.serve_key(department, wanted(queues[name][0]), keys[name][-2])
            for department, name in first.items()
        }
        return sorted(queues, key=lambda n: (departments[self.department_of(n)], keys[n]))

    def serves_before(
        self, first: Entry, second: Entry, known: dict[str, tuple] | None = None
    ) -> bool:
        """Whether allocation order (InOrder) serves `first` before `second`, two entries
        left alone, without building an InOrder: inside one project by their places, inside
        one department by their projects' keys, else by their departments' levels.

        `known` keeps `second`'s key and level for the next call about the same `second`
        while nothing changed its project's or department's allocation (reclaim asks
        about one claimant against victim after victim of other projects)."""
        (job, gain, place), (other, other_gain, other_place) = first, second
        if job.project == other.project:
            return bool(place < other_place)
        department, theirs = self.department_of(job.project), self.department_of(other.project)
        known = {} if known is None else known
        if department == theirs:
            mine = self.project_order_key(job.project, job, gain)
            if "project" not in known:
                known["project"] = self.project_order_key(other.project, other, other_gain)
            return mine < known["project"]
        level = (self.department_order_level(department, job, gain), department)
        if "department" not in known:
            known["department"] = (self.department_order_level(theirs, other, other_gain), theirs)
        return level < known["department"]

    def surely_before(self, queue: str, key: tuple, over_per_group: bool = False) -> bool:
        """Whether the queue, giving back any part of what it holds (its order key then
        judged with that part as its gain, as ranks_ahead does), comes before a sibling
        whose order key is `key` (project_order_key or department_order_level): decided
        by _serve_level's first items, which read only what it holds with the gain. A
        margin above that covers the rounding of taking the part out and adding it back,
        as the items only grow with what is held. `over_per_group`: the first item (over
        its deserved quota) is judged in the node groups of the part (Pools.in_groups),
        so it is taken at its latest, over. Not for a queue whose share items are judged
        per group, nor one with no allocation yet."""
        if queue not in self.allocated:
            return False
        deserved, rank, _, allocatable = self._queue_facts[queue]
        held = self.allocated[queue]
        held += 1e-9 * (held if held > 1.0 else 1.0)  # max(1.0, held), with no call
        over = over_per_group or held > deserved + GPU_EPSILON
        share, ratio, _ = share_items(held, 0.0, allocatable)
        return (over, -rank, share, ratio) < key[:4]

    def project_order_key(self, project: str, job: Job, gain: float) -> tuple:
        """A project's key among its department's in InOrder, with `job` (adding `gain`)
        its first entry: _serve_level, then the name; with per-group quotas, within
        deserved quota in the job's node groups (engine.pools)."""
        key = (*self._serve_level(project, gain), project)
        if self.pools is not None:
            key = self.pools.in_groups(key, job, gain, False)
        return key

    def department_order_level(self, department: str, job: Job, gain: float) -> tuple:
        """A department's level in InOrder, `job` (adding `gain`) the first entry of its
        first project: judged by its own totals, as project_order_key."""
        level = self._serve_level(department, gain)
        if self.pools is not None:
            level = self.pools.in_groups(level, job, gain, True)
        return level

    def _victim_level(self, queue: str) -> tuple:
        """A queue's place among its siblings in the order they give up work, lowest first:
        _serve_level without a job, reversed -- those over their deserved quota first,
        lower over-quota rank first, those holding GPUs with no allocatable share, the
        highest share_ratio, the larger allocatable share, the newest queue."""
        deserved, rank, age, allocatable = self._queue_facts[queue]
        held = self.allocated.get(queue, 0.0)
        return (
            held <= deserved + GPU_EPSILON,
            rank,
            held <= GPU_EPSILON or allocatable > GPU_EPSILON,
            -_share_ratio(held, allocatable),
            -allocatable,
            -age,
        )

    def victim_key(self, queue: str) -> tuple:
        """A project's or department's place among its siblings in the order they give up
        work (_victim_level), then its name, which the key ends with."""
        return (*self._victim_level(queue), queue)

    def victim_queue_key(self, name: str) -> tuple:
        """The order projects give up work in (lowest first), KAI's queue order reversed,
        level by level: the department first, then the project inside it (victim_key)."""
        return (self.victim_key(self.department_of(name)), self.victim_key(name))

    def usage_of(self, queue: str) -> float:
        """A queue's decayed past usage (fairness over time); a department's is the sum
        of its projects'."""
        if not self.past_usage:
            return 0.0
        if queue in self.past_usage or queue in self.projects:
            return self.past_usage.get(queue, 0.0)
        return sum(u for p, u in self.past_usage.items() if self._parent.get(p) == queue)

    def ratio(self, queue: str, gain: float = 0.0) -> float:
        """Allocated (plus `gain`) over fair share: what reclaim compares between a
        claimant above its fair share and the queues it takes from."""
        share = self.fair_share.get(queue, 0.0)
        allocated = self.allocated.get(queue, 0.0) + gain
        if share <= GPU_EPSILON:
            return float("inf") if allocated > GPU_EPSILON else 0.0
        return allocated / share

    def nominal_gpu(self, job: Job) -> tuple[str, int]:
        """(model, memory MiB) of the largest GPU the job may use, for pending accounting:
        of the largest, the first by node name (then GPU index)."""
        key = (job.node_groups, job.request.kind is RequestKind.MIG)
        nominal = self._nominal.get(key)
        if nominal is None:
            largest = self._largest_per_group()
            groups = job.node_groups or tuple(largest)
            memory, _, model = max(
                [largest[g][key[1]] for g in groups if g in largest], default=(0, 0, "")
            )
            nominal = self._nominal[key] = (model, memory)
        return nominal

    def _largest_per_group(self) -> dict[str, list[tuple[int, int, str]]]:
        """Node group -> for plain GPUs ([0]) and MIG ones ([1]), (memory MiB, minus the
        place of its node by name, model) of the first largest GPU: one pass over the
        nodes, not one per set of node groups a job names."""
        if self._largest is None:
            self._largest = {}
            for place, use in enumerate(self.nodes.values()):
                best = self._largest.setdefault(use.node.node_group, [(0, 0, ""), (0, 0, "")])
                for gpu in use.node.gpus:  # not use.gpus: that would build every GpuUse
                    if gpu.memory_mib > best[gpu.mig_enabled][0]:
                        best[gpu.mig_enabled] = (gpu.memory_mib, -place, use.node.gpu_model)
        return self._largest

    def placed_gpus(self, job: Job, pods: tuple[PodPlacement, ...] | None = None) -> float:
        """GPUs the job's running pods (or `pods`) count for against quota."""
        if pods is not None:
            return sum(self.pods_gpus(job, pods))
        counted = self._placed.get(job.key)
        if counted is None or counted[0] is not job:
            counted = (job, sum(self.pods_gpus(job, job.placement)))
            self._placed[job.key] = counted
        return counted[1]

    def wanted_gpus(self, job: Job, pods: int | None = None) -> float:
        """GPUs `pods` more pods (default: the next placement's) would count for, on the
        largest GPU the job may use."""
        count = job.next_pods if pods is None else pods
        per_pod = self._pod_wanted.get(job.key)
        if per_pod is None:
            # a job's request and node groups never change within a cycle, only its pods
            per_pod = self._pod_wanted[job.key] = pod_gpus(job, None, *self.nominal_gpu(job))
        return per_pod * count

    def pod_gpus(self, job: Job, pod: PodPlacement) -> float:
        """GPUs one running pod of the job counts for against quota."""
        request = job.request
        if request.kind is RequestKind.WHOLE:  # most pods: the node does not matter
            return float(request.count)
        use = self.nodes.get(pod.node)
        return placed_pod_gpus(job, pod, use.node if use else None)

    def pods_gpus(self, job: Job, pods: tuple[PodPlacement, ...]) -> list[float]:
        """pod_gpus of each of `pods`, with no call per pod where the node does not
        matter (most pods)."""
        if job.request.kind is RequestKind.WHOLE:
            return [float(job.request.count)] * len(pods)
        return [self.pod_gpus(job, pod) for pod in pods]

    def candidate_nodes(self, job: Job) -> list[NodeUse]:
        """Schedulable nodes of the job's allowed node groups, by name (cached per groups)."""
        groups = job.node_groups
        if groups not in self._candidates:
            allowed = set(groups)
            self._candidates[groups] = [
                n
                for n in self.nodes.values()
                if n.node.schedulable and (not allowed or n.node.node_group in allowed)
            ]
        return self._candidates[groups]

    def groups_of(self, job: Job) -> list[str]:
        """The node groups a job may use that have schedulable nodes, sorted (cached per
        groups: the indexed groups are fixed once the session is built)."""
        groups = job.node_groups
        if groups not in self._groups:
            index = self.usage.free_index
            self._groups[groups] = sorted(set(groups) & set(index) if groups else index)
        return self._groups[groups]

    def free_whole(self, job: Job) -> int:
        return sum([self.usage.free_total.get(g, 0) for g in self.groups_of(job)])

    def nodes_with_free(
        self,
        job: Job,
        count: int,
        domain: str | None = None,
        groups: Iterable[str] | None = None,
    ) -> Iterator[NodeUse]:
        """Schedulable allowed nodes (of the topology `domain`, of `groups` -- some of
        groups_of(job) -- if given) with at least `count` free whole GPUs, fullest first,
        then by name. Lazy over the live index: change no usage while iterating."""
        usage = self.usage
        groups = self.groups_of(job) if groups is None else groups
        if domain is None:
            indexes = [usage.free_index[g] for g in groups]
        else:
            indexes = [usage.free_in_domain.get((g, domain), {}) for g in groups]
        top = max([max(index, default=0) for index in indexes], default=0)
        if len(indexes) == 1:  # most jobs: one node group, no merge
            index, nodes = indexes[0], self.nodes
            for free in range(count, top + 1):
                for name in index.get(free, ()):
                    yield nodes[name]
            return
        for free in range(count, top + 1):
            buckets = [bucket for index in indexes if (bucket := index.get(free))]
            names = buckets[0] if len(buckets) == 1 else heapq.merge(*buckets)
            for name in names:
                yield self.nodes[name]

    # -- changes (undoable) ----------------------------------------------------------------

    def statement(self) -> Statement:
        """Changes inside are undone on exit unless the yielded `commit` was called."""
        return Statement(self)

    def _log(self, action: Callable[[], None]) -> None:
        """Keep how to undo a change, inside a statement: mostly a partial, not a lambda
        (one call less when it runs). A bind, an eviction or a MIG change logs one action,
        which also takes back the decision it added."""
        if self._undo is not None:
            self._undo.append(action)

    def bind(
        self, job: Job, pods: tuple[PodPlacement, ...], started_at: float | None = None
    ) -> None:
        """Start `pods` more pods of the job (their `index` says which); `started_at` keeps
        the start of a victim given its place back."""
        previous = self.jobs[job.key]
        placed = previous.with_pods(pods, self.now if started_at is None else started_at)
        self._put(placed)
        self._occupy(placed, pods)
        self.binds.append(Bind(job.key, pods))
        self._log(partial(self._unbind, previous, placed, pods))

    def _unbind(self, previous: Job, placed: Job, pods: tuple[PodPlacement, ...]) -> None:
        self.binds.pop()
        self._release(placed, pods)
        self._put(previous)

    def hold(self, job: Job, pod: PodPlacement, gpus: bool = True) -> None:
        """Reserve one pod's GPUs and quota while the rest of its gang is being placed;
        `gpus=False` counts its quota only (nothing is placed after it), so the sums
        of quota come out the same to the last bit either way."""
        taken = (pod,) if gpus else ()
        self._occupy(job, (pod,), taken)
        self._log(partial(self._release, job, (pod,), taken))

    def unhold(
        self, job: Job, pods: tuple[PodPlacement, ...], gpus: tuple[PodPlacement, ...] | None = None
    ) -> None:
        """Give back held `pods`: their quota, and the GPUs of `gpus` (default: all)."""
        self._release(job, pods, gpus)
        self._log(partial(self._occupy, job, pods, gpus))

    def evict(
        self,
        job: Job,
        reason: EvictReason,
        by: str = "",
        pods: tuple[PodPlacement, ...] | None = None,
    ) -> Job:
        """Free the GPUs of `pods` (default: all the job's running pods); they are pending
        again. Returns the job as it is now."""
        current = self.jobs[job.key]
        pods = current.placement if pods is None else pods
        self._release(current, pods)
        after = current.without_pods(pods)
        self._put(after)
        self.evictions.append(Evict(job.key, reason, by, pods))
        self._log(partial(self._unevict, current, pods))
        return after

    def _unevict(self, current: Job, pods: tuple[PodPlacement, ...]) -> None:
        self.evictions.pop()
        self._put(current)
        self._occupy(current, pods)

    def stop(self, job: Job, reason: EvictReason) -> None:
        """Evict for good (time limit, idle): the job leaves the session, not re-queued."""
        self.evict(job, reason)
        removed = self.jobs.pop(job.key)
        self._pending.discard(job.key)
        self._log(partial(self._put, removed))

    def release_all(self) -> bool:
        """Treat releasing pods' GPUs as free from now on (pipelining): what is placed on
        them binds once they have left. False when nothing was releasing."""
        for holder, pod in self.releasing.items():
            self.usage.give_back(holder, pod.pod)
            self._log(partial(self.usage.take, holder, pod.project, pod.pod))
        released, self.releasing = self.releasing, {}
        self._log(lambda: setattr(self, "releasing", released))
        return bool(released)

    def create_mig(self, node: str, gpu: int, instance: MigInstance) -> None:
        self.usage.add_instance(node, gpu, instance)
        self.mig_changes.append(MigChange(node, gpu, instance, create=True))
        self._log(partial(self._unchange_mig, self.usage.remove_instance, node, gpu, instance))

    def destroy_mig(self, node: str, gpu: int, instance: MigInstance) -> None:
        self.usage.remove_instance(node, gpu, instance)
        self.mig_changes.append(MigChange(node, gpu, instance, create=False))
        self._log(partial(self._unchange_mig, self.usage.add_instance, node, gpu, instance))

    def _unchange_mig(
        self,
        undo: Callable[[str, int, MigInstance], None],
        node: str,
        gpu: int,
        instance: MigInstance,
    ) -> None:
        self.mig_changes.pop()
        undo(node, gpu, instance)

    def put_job(self, job: Job) -> None:
        """Hold `job` in place of the one of its key, unlogged (engine.pools.restricted)."""
        self._put(job)

    def _put(self, job: Job) -> None:
        self.jobs[job.key] = job
        if job.missing > 0:
            self._pending.add(job.key)
        else:
            self._pending.discard(job.key)

    def _occupy(
        self, job: Job, pods: tuple[PodPlacement, ...], gpus: tuple[PodPlacement, ...] | None = None
    ) -> None:
        """Count the pods' quota and take the GPUs of `gpus` (default: of every pod)."""
        self._account(job, pods, +1)
        for pod in pods if gpus is None else gpus:
            self.usage.take(job.key, job.project, pod)

    def _release(
        self, job: Job, pods: tuple[PodPlacement, ...], gpus: tuple[PodPlacement, ...] | None = None
    ) -> None:
        self._account(job, pods, -1)
        for pod in pods if gpus is None else gpus:
            self.usage.give_back(job.key, pod)

    def _account(
        self, job: Job, pods: tuple[PodPlacement, ...], sign: int
    ) -> tuple[list[float], float]:
        """Count (sign +1) or uncount (-1) the pods' GPUs for the job's queues; each pod's
        GPUs, as worked out, and their sum."""
        amounts = self.pods_gpus(job, pods)  # each pod's, for the pools too
        total = sum(amounts)
        amount = sign * total
        allocated, fixed = self.allocated, self.fixed
        for queue in (job.project, self._parent[job.project]):
            if queue in allocated:
                allocated[queue] += amount
                if not job.preemptible:
                    fixed[queue] += amount
        if self.pools is not None:
            self.pools.account(job, pods, sign, amounts)
        return amounts, total


class InOrder:
    """Entries served one at a time in allocation order, as KAI's solvers place a
    preemptor and its victims together: the first department by its totals with its first
    entry's gain (Session.department_order_level), the first project inside it likewise
    (Session.project_order_key), that project's first entry (the lowest place; the first
    given on a tie).

    Entries are named by ids (in the order given) and read through `entry`. Serving an
    entry changes the allocation of its own project and department only, and changes no
    job but its own (nothing else of the session may change between pops), so each `pop`
    works out again the keys of the project and department of the entry popped before,
    and reads again only the entries of the job it served: a reclaim that took thousands
    of victims serves them in O(n log n), not O(n^2).
    """

    def __init__(self, session: Session, entry: Callable[[int], Entry], ids: Iterable[int]):
        self.session = session
        self.entry = entry
        self.entries = {at: entry(at) for at in ids}
        self.project_of = {at: job.project for at, (job, _, _) in self.entries.items()}
        self.of_job: dict[str, list[int]] = {}  # job -> its entries' ids
        # project -> its entries left, a heap by (place, id); a place that has changed since
        # it was pushed is found stale when it comes up (see _first)
        self.waiting: dict[str, list[tuple[tuple, int]]] = {}
        for at, (job, _, place) in self.entries.items():
            self.of_job.setdefault(job.key, []).append(at)
            self.waiting.setdefault(job.project, []).append((place, at))
        for heap in self.waiting.values():
            heapq.heapify(heap)
        self.departments: dict[str, list[str]] = {}  # department -> its projects
        for project in self.waiting:
            self.departments.setdefault(session.department_of(project), []).append(project)
        self.projects: dict[str, tuple[tuple, int, Entry]] = {}  # (key, first entry, it)
        self.levels: dict[str, tuple] = {}  # department -> (level, name, key, first entry)
        self.served: int | None = None  # the entry popped last
        for project in self.waiting:
            self._project(project)
        for department in self.departments:
            self._department(department)

    def _first(self, project: str) -> int | None:
        """The id of the project's first entry left, stale heap items dropped."""
        heap = self.waiting[project]
        while heap:
            place, at = heap[0]
            current = self.entries.get(at)
            if current is not None and current[2] == place:
                return at
            heapq.heappop(heap)
        return None

    def _project(self, project: str) -> None:
        """Work out the project's first entry and key (none left: drop it)."""
        at = self._first(project)
        if at is None:
            del self.waiting[project], self.projects[project]
            return
        entry = self.entries[at]
        job, gain, _ = entry
        self.projects[project] = (self.session.project_order_key(project, job, gain), at, entry)

    def _department(self, department: str) -> None:
        """Work out the department's first project and level (none left: drop it)."""
        projects = [p for p in self.departments[department] if p in self.projects]
        self.departments[department] = projects
        if not projects:
            del self.departments[department], self.levels[department]
            return
        key, at, (job, gain, _) = min([self.projects[p] for p in projects])
        level = self.session.department_order_level(department, job, gain)
        self.levels[department] = (level, department, key, at)

    def _reread(self, served: int) -> None:
        """Read again the entries left of the job whose entry was served: serving it changed
        that job (its places may have moved) and nothing else."""
        job = self.entries.pop(served)[0]
        for at in self.of_job[job.key]:
            if at in self.entries:
                self.entries[at] = entry = self.entry(at)
                heapq.heappush(self.waiting[job.project], (entry[2], at))

    def pop(self) -> int:
        """The id of the entry served first, taken out."""
        if self.served is not None:
            project = self.project_of[self.served]
            self._reread(self.served)
            self._project(project)
            self._department(self.session.department_of(project))
        at = min(self.levels.values())[-1]
        self.served = at
        return at
