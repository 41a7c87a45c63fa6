"""The engine's plain data: what a cycle sees (a snapshot) and what it decides.

Everything is a frozen dataclass so a snapshot can be shared, hashed and compared;
the engine never reads a clock, a cluster or a GPU: `simulate`, `plan` and the
in-cluster scheduler all build a `Snapshot` and apply the `Decisions`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from operator import attrgetter
from typing import cast

from gitops_sched.hardware.mig import MigInstance

GPU_EPSILON = 1e-9  # fractions are floats; compare sums with this slack


class RequestKind(StrEnum):
    WHOLE = "whole"  # `count` whole GPUs per pod
    FRACTION = "fraction"  # `fraction` of one GPU's memory per pod
    MEMORY = "memory"  # `memory_mib` of one GPU per pod (a fraction once placed)
    MIG = "mig"  # one MIG instance of `mig_profile` per pod
    NONE = "none"  # no GPU

    # hashed as its value, as `str` is: Enum's own hash (of the name, in Python) is most
    # of the cost of hashing a job's shape, which the actions do per job tried
    __hash__ = str.__hash__


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What each pod of a workload needs."""

    kind: RequestKind
    count: int = 0
    fraction: float = 0.0
    memory_mib: int = 0
    mig_profile: str = ""


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    memory_mib: int
    mig_enabled: bool = False
    mig_instances: tuple[MigInstance, ...] = ()  # instances that exist on the GPU now
    mig_static: bool = False  # a fixed layout: the engine never creates or destroys instances
    # not the engine's to use (another scheduler's pod, a reservation pod going): never
    # placed on, not counted in the capacity fair share splits
    held: bool = False
    # free, but set up for sharing already (a reservation pod holds it for fractions, none
    # placed yet: left by a restart or a failed bind): a fraction goes here before a GPU
    # nobody holds, so the cluster keeps no GPU reserved for nothing
    reserved: bool = False


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    node_group: str
    gpu_model: str
    gpus: tuple[Gpu, ...]
    topology: str = ""  # value of the node group's topology label ("" = none)
    schedulable: bool = True
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """Where one pod runs: whole GPU indexes, or a share of one GPU, or a MIG instance."""

    node: str
    gpus: tuple[int, ...] = ()
    fraction: float = 0.0  # share of gpus[0] for fraction/memory requests
    mig: MigInstance | None = None  # on gpus[0]
    index: int = 0  # the pod's ordinal in its job: elastic pods are given up highest first


@dataclass(frozen=True, slots=True)
class Job:
    """A workload as the engine sees it: `pods` identical pods, `min_available` of which
    must run together (a gang); the rest are elastic.

    Identified by `key` (namespace/name): two projects may both have a "train" job. Its
    running pods are `placement`; the others are pending work, so a gang whose pods are
    partly running still asks for the missing ones.
    """

    name: str
    project: str
    type: str  # train | interactive | inference
    priority: int
    preemptible: bool
    request: GpuRequest
    pods: int = 1
    min_available: int = 1
    node_groups: tuple[str, ...] = ()  # allowed node groups; empty = any GPU node
    submitted: float = 0  # submission order (or time): earlier first among equals
    placement: tuple[PodPlacement, ...] = ()  # the running pods, by index; empty = pending
    started_at: float | None = None  # when it started running
    idle_since: float | None = None  # GPU idle since (from NVML); None = busy or unknown
    namespace: str = ""
    uid: str = ""  # the cluster's UID, where there is one
    # since when fewer than `min_available` pods run (kept between cycles by the caller)
    short_since: float | None = None
    # derived, worked out once per object (asked hundreds of thousands of times a cycle):
    key: str = field(init=False, repr=False, compare=False)
    running: bool = field(init=False, repr=False, compare=False)  # some pods hold GPUs
    missing: int = field(init=False, repr=False, compare=False)  # pods not running: pending
    # how many pods the next placement must start together: the rest of the gang, or one
    # elastic pod once the gang runs; 0 when every pod runs
    next_pods: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = f"{self.namespace}/{self.name}" if self.namespace else self.name
        object.__setattr__(self, "key", key)
        self._count_pods()

    def _count_pods(self) -> None:
        running = len(self.placement)
        missing = self.pods - running
        # the slots' own setters: a frozen dataclass refuses plain assignment, and
        # object.__setattr__ looks the name up first
        _SET_RUNNING(self, running > 0)
        _SET_MISSING(self, missing)
        _SET_NEXT_PODS(self, min(missing, max(self.min_available - running, 1)))

    @property
    def short(self) -> bool:
        """Partly running: fewer than `min_available` pods run (a gang in flight)."""
        return 0 < self.pods - self.missing < self.min_available  # running pods, no len()

    def starts_short(self, count: int) -> bool:
        """Whether starting `count` more pods would leave it short of its gang (an elastic
        pod started, or given back, after its gang has gone)."""
        return self.pods - self.missing + count < min(self.min_available, self.pods)

    def with_pods(self, pods: tuple[PodPlacement, ...], now: float) -> Job:
        """The job with `pods` started too, in index order; it keeps its start if it ran."""
        placement = tuple(sorted((*self.placement, *pods), key=_POD_INDEX))
        started = self.started_at if self.running else now
        return self._with(placement=placement, started_at=started)

    def without_pods(self, pods: tuple[PodPlacement, ...]) -> Job:
        """The job without `pods`; left with none, it is pending: no start, no idle time."""
        left = () if pods is self.placement else tuple(p for p in self.placement if p not in pods)
        if left:
            return self._with(placement=left)
        return self._with(placement=(), started_at=None, idle_since=None)

    def with_node_groups(self, groups: tuple[str, ...]) -> Job:
        """The job limited to `groups` (engine.pools tries a job group by group)."""
        return self._with(node_groups=groups)

    def _with(self, **changed: object) -> Job:
        """`replace` for the fields a cycle changes (pods, times, node groups tried), tens
        of thousands of times a cycle: the other fields and the key are copied as they
        are (_copy), not passed through __init__ again (Job checks nothing there); the pod
        counts are worked out again."""
        job = _copy(self)
        for name, value in changed.items():
            _SLOTS[name].__set__(job, value)
        job._count_pods()
        return job

    def tracking_short(self, now: float) -> Job:
        """The job with `short_since` kept up: the time it became short (`now` if it just
        did), None when it is not short."""
        since = (now if self.short_since is None else self.short_since) if self.short else None
        return self if since == self.short_since else replace(self, short_since=since)


_SLOTS = {f.name: getattr(Job, f.name) for f in fields(Job)}  # by name, for what _with changes


def _copier() -> Callable[[Job], Job]:
    """A function copying a Job's fields and key into a new Job, one line per slot, made
    from the dataclass's fields as `dataclasses` makes __init__: each slot is set through
    its own setter (a frozen dataclass refuses plain assignment), bound once. A loop or
    `map` over the slots costs a call through a wrapper per slot, 2.7 times as long, and
    Job._with runs tens of thousands of times a cycle."""
    copied = (*(f.name for f in fields(Job) if f.init), "key")
    scope: dict[str, object] = {"_new": object.__new__, "_Job": Job}
    lines = ["def _copy(self):", "    job = _new(_Job)"]
    for name in copied:
        scope[f"_set_{name}"] = getattr(Job, name).__set__
        lines.append(f"    _set_{name}(job, self.{name})")
    lines.append("    return job")
    exec("\n".join(lines), scope)  # the names come from Job's own fields, nothing else
    return cast(Callable[[Job], Job], scope["_copy"])


_copy = _copier()
_POD_INDEX = attrgetter("index")  # a pod's ordinal, the order of a job's placement
_SET_RUNNING = _SLOTS["running"].__set__
_SET_MISSING = _SLOTS["missing"].__set__
_SET_NEXT_PODS = _SLOTS["next_pods"].__set__


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A department or a project: its guaranteed quota and its claim on spare GPUs."""

    name: str
    deserved: float  # GPU quota
    over_quota_weight: float
    over_quota_allowed: bool = True
    over_quota_rank: int = 0
    limit: float | None = None  # hard cap on allocated GPUs
    parent: str = ""  # the department of a project; "" for a department
    interactive_time_limit_s: int | None = None
    idle_timeout_s: int | None = None
    # a preemptible job that started less than this long ago is no victim of preempt
    # (resp. reclaim): KAI's preemptMinRuntime / reclaimMinRuntime, resolved for a project
    preempt_min_runtime_s: float = 0.0
    reclaim_min_runtime_s: float = 0.0
    # breaks ties between otherwise equal queues: the lower (older) is served first and
    # gives up work last (KAI: the queue's creation time); names only after it
    age: float = 0.0
    # a project's deserved GPUs per node group (Run:ai's node pools): when set, deserved
    # quota, fair share, reclaim and preempt are judged per node group, the group of the
    # node a job lands on; empty = one quota over every group it may use
    pool_quotas: tuple[tuple[str, float], ...] = ()


STALE_GANG_GRACE_S = 60.0  # KAI's default before a gang short of pods is evicted whole


@dataclass(frozen=True)
class Policy:
    departments: tuple[QueueSpec, ...]
    projects: tuple[QueueSpec, ...]
    reclaim_threshold: float = 0.0
    consolidation: bool = True
    stale_gang_grace_s: float = STALE_GANG_GRACE_S
    fairness: Fairness | None = None  # fairness over time; None: past usage counts for nothing


@dataclass(frozen=True)
class ReleasingPod:
    """A pod that was told to stop and still holds its GPUs until it has terminated.

    Its GPUs are taken now and free soon: a job may be pipelined onto them (its binds
    wait until they are free), but nothing else is placed there.
    """

    job: str  # the key of the job it belonged to
    project: str
    pod: PodPlacement


@dataclass(frozen=True)
class Snapshot:
    """Everything one scheduling cycle may look at."""

    policy: Policy
    nodes: tuple[Node, ...]
    jobs: tuple[Job, ...]
    now: float = 0.0
    releasing: tuple[ReleasingPod, ...] = ()
    history: UsageHistory = field(default_factory=lambda: UsageHistory())  # see Fairness


class EvictReason(StrEnum):
    RECLAIM = "reclaim"  # another project below its fair share takes GPUs back
    PREEMPT = "preempt"  # higher-priority work of the same project
    CONSOLIDATE = "consolidate"  # moved to defragment (re-queued, placed again)
    TIME_LIMIT = "time-limit"  # interactive work past the project's limit
    IDLE = "idle"  # interactive work idle past the project's timeout
    STALE_GANG = "stale-gang"  # a gang short of `min_available` pods past the grace period


@dataclass(frozen=True, slots=True)
class MigChange:
    node: str
    gpu: int
    instance: MigInstance
    create: bool  # False: destroy
    # jobs (keys) whose pods must have left the GPU first (evicted or releasing)
    waits_for: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Bind:
    """Pods of a job to bind; only once `waits_for` jobs' pods have left the GPUs they
    take (evicted this cycle, or releasing) and the MIG instances they use exist."""

    job: str  # the job's key
    pods: tuple[PodPlacement, ...]
    waits_for: tuple[str, ...] = ()
    waits_for_mig: tuple[MigChange, ...] = ()

    @property
    def pipelined(self) -> bool:
        return bool(self.waits_for or self.waits_for_mig)


@dataclass(frozen=True, slots=True)
class Evict:
    job: str  # the job's key
    reason: EvictReason
    by: str = ""  # the job it made room for, if any
    pods: tuple[PodPlacement, ...] = ()  # the pods that go: all the job's, or elastic ones


@dataclass(frozen=True, slots=True)
class QueueStatus:
    name: str
    deserved: float
    fair_share: float
    allocated: float
    queued: float  # GPUs asked by pending work
    # a project with per-node-group quotas: the same per node group (name = the group)
    pools: tuple[QueueStatus, ...] = ()
    usage: float = 0.0  # decayed past usage over the capacity of the window (see Fairness)


@dataclass(frozen=True)
class Decisions:
    """One cycle's output, in the order the actions took them."""

    evictions: tuple[Evict, ...] = ()
    binds: tuple[Bind, ...] = ()
    mig_changes: tuple[MigChange, ...] = ()
    departments: tuple[QueueStatus, ...] = ()
    projects: tuple[QueueStatus, ...] = ()
    pending_reasons: tuple[tuple[str, str], ...] = field(default=())  # (job, why) for pending

    @property
    def changed(self) -> bool:
        return bool(self.evictions or self.binds or self.mig_changes)


USAGE_BUCKETS = 12  # a fairness window is kept as this many buckets of GPU-seconds


@dataclass(frozen=True, slots=True)
class Fairness:
    """Fairness over time, KAI's time-aware fairness (its usage parameters windowSize and
    halfLifePeriod, and the proportion plugin's kValue): a project's past usage, decayed
    and relative to its weight, lowers its part of the spare GPUs; deserved quota is
    never touched. The engine reads no clock: usage comes in as `Snapshot.history`."""

    history_weight: float = 1.0  # KAI's kValue: how much past usage counts
    window_s: float = 86400.0  # usage older than this is forgotten
    half_life_s: float = 0.0  # usage this old counts half; 0: no decay inside the window

    @property
    def bucket_s(self) -> float:
        """The width of one bucket of the window."""
        return self.window_s / USAGE_BUCKETS


@dataclass(frozen=True)
class UsageHistory:
    """GPU-seconds each project used, per bucket of the fairness window: by project name,
    (bucket start, GPU-seconds) oldest first. Buckets start at multiples of the bucket
    width, so a restarted scheduler adds to the buckets it wrote before."""

    projects: tuple[tuple[str, tuple[tuple[float, float], ...]], ...] = ()
    # a project with per-node-group quotas also per node group it held GPUs in, by
    # (project, group): its over-quota share in a group goes by its usage there
    node_groups: tuple[tuple[tuple[str, str], tuple[tuple[float, float], ...]], ...] = ()
