"""The engine's plain data: what a cycle sees (a snapshot) and what it decides.

Everything is a frozen dataclass so a snapshot can be shared, hashed and compared;
the engine never reads a clock, a cluster or a GPU: `simulate`, `plan` and the
in-cluster scheduler all build a `Snapshot` and apply the `Decisions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gitops_sched.hardware.mig import MigInstance

GPU_EPSILON = 1e-9  # fractions are floats; compare sums with this slack


class RequestKind(StrEnum):
    WHOLE = "whole"  # `count` whole GPUs per pod
    FRACTION = "fraction"  # `fraction` of one GPU's memory per pod
    MEMORY = "memory"  # `memory_mib` of one GPU per pod (a fraction once placed)
    MIG = "mig"  # one MIG instance of `mig_profile` per pod
    NONE = "none"  # no GPU


@dataclass(frozen=True)
class GpuRequest:
    """What each pod of a workload needs."""

    kind: RequestKind
    count: int = 0
    fraction: float = 0.0
    memory_mib: int = 0
    mig_profile: str = ""


@dataclass(frozen=True)
class Gpu:
    index: int
    memory_mib: int
    mig_enabled: bool = False
    mig_instances: tuple[MigInstance, ...] = ()  # instances that exist on the GPU now
    mig_static: bool = False  # a fixed layout: the engine never creates or destroys instances


@dataclass(frozen=True)
class Node:
    name: str
    node_group: str
    gpu_model: str
    gpus: tuple[Gpu, ...]
    topology: str = ""  # value of the node group's topology label ("" = none)
    schedulable: bool = True
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PodPlacement:
    """Where one pod runs: whole GPU indexes, or a share of one GPU, or a MIG instance."""

    node: str
    gpus: tuple[int, ...] = ()
    fraction: float = 0.0  # share of gpus[0] for fraction/memory requests
    mig: MigInstance | None = None  # on gpus[0]


@dataclass(frozen=True)
class Job:
    """A workload as the engine sees it: a gang of `pods` identical pods."""

    name: str
    project: str
    type: str  # train | interactive | inference
    priority: int
    preemptible: bool
    request: GpuRequest
    pods: int = 1
    min_available: int = 1
    node_groups: tuple[str, ...] = ()  # allowed node groups; empty = any GPU node
    submitted: int = 0  # submission order (or time): earlier first among equals
    placement: tuple[PodPlacement, ...] = ()  # empty = pending
    started_at: float | None = None  # when it started running
    idle_since: float | None = None  # GPU idle since (from NVML); None = busy or unknown

    @property
    def running(self) -> bool:
        return bool(self.placement)


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Policy:
    departments: tuple[QueueSpec, ...]
    projects: tuple[QueueSpec, ...]
    reclaim_threshold: float = 0.0
    consolidation: bool = True


@dataclass(frozen=True)
class Snapshot:
    """Everything one scheduling cycle may look at."""

    policy: Policy
    nodes: tuple[Node, ...]
    jobs: tuple[Job, ...]
    now: float = 0.0


class EvictReason(StrEnum):
    RECLAIM = "reclaim"  # another project below its fair share takes GPUs back
    PREEMPT = "preempt"  # higher-priority work of the same project
    CONSOLIDATE = "consolidate"  # moved to defragment (re-queued, placed again)
    TIME_LIMIT = "time-limit"  # interactive work past the project's limit
    IDLE = "idle"  # interactive work idle past the project's timeout


@dataclass(frozen=True)
class Bind:
    job: str
    pods: tuple[PodPlacement, ...]


@dataclass(frozen=True)
class Evict:
    job: str
    reason: EvictReason
    by: str = ""  # the job it made room for, if any


@dataclass(frozen=True)
class MigChange:
    node: str
    gpu: int
    instance: MigInstance
    create: bool  # False: destroy


@dataclass(frozen=True)
class QueueStatus:
    name: str
    deserved: float
    fair_share: float
    allocated: float
    queued: float  # GPUs asked by pending work


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
