"""Hypothesis strategies for the scheduling engine: random policies, clusters and workloads.

`snapshots()` is the general one: 1-3 departments over 1-6 projects, 1-6 nodes in one or two
node groups (A100-80GB, mostly MIG-enabled and sometimes already partitioned, or V100 whole
GPUs), optional topology domains, and 0-25 jobs of every type and request kind. A snapshot
starts either with everything pending or "warm": a prefix of the jobs already settled by the
engine, with the rest submitted afterwards. `two_waves()` adds a second batch of jobs to submit
after the first settles. `guaranteed_quota_snapshots()` is the restricted world in which every
project with demand must reach its deserved quota (1-GPU preemptible train jobs, one node
group, total deserved within capacity, no limits). `pool_quota_snapshots()` is the same
world over two node groups, where projects give their quota per group.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import TypeVar

from hypothesis import strategies as st

from gitops_sched.engine import settle
from gitops_sched.engine.types import (
    Gpu,
    GpuRequest,
    Job,
    Node,
    PodPlacement,
    Policy,
    QueueSpec,
    RequestKind,
    Snapshot,
)
from gitops_sched.hardware.mig import MigInstance, is_valid_layout, mig_profiles

A100 = "A100-SXM4-80GB"
V100 = "V100-SXM2-32GB"
GPU_MEMORY_MIB = {A100: 81920, V100: 32768}
MIG_PROFILES = tuple(sorted(mig_profiles(A100)))
FRACTIONS = (0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75)
MEMORY_MIB = (4096, 8192, 10240, 16384, 20480, 32768, 40960)
JOB_TYPES = ("train", "interactive", "inference")
PRIORITIES = (50, 75, 100, 125)
REQUEST_KINDS = (RequestKind.WHOLE, RequestKind.FRACTION, RequestKind.MEMORY, RequestKind.MIG)
SHARED_KINDS = (RequestKind.FRACTION, RequestKind.MEMORY)
T = TypeVar("T", bound=Hashable)


@functools.cache
def ints(low: int, high: int) -> st.SearchStrategy[int]:
    """`st.integers(low, high)`, one object per range: a strategy made afresh at every draw
    is validated afresh, which was half the time of generating a snapshot."""
    return st.integers(low, high)


def one_of(values: Sequence[T]) -> st.SearchStrategy[T]:
    """`st.sampled_from(values)`, one object per sequence of values (see `ints`)."""
    return _sampled(tuple(values))


@functools.cache
def _sampled(values: tuple[T, ...]) -> st.SearchStrategy[T]:
    return st.sampled_from(values)


@functools.cache
def just_or(value: T, other: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """`st.one_of(st.just(value), other)`, one object per pair (see `ints`)."""
    return st.one_of(st.just(value), other)


@functools.cache
def halves(low: float, high: float) -> st.SearchStrategy[float]:
    """Integers or halves in [low, high]: the GPU quotas a config may write."""
    return st.integers(round(2 * low), round(2 * high)).map(lambda n: n / 2)


def rarely(draw: st.DrawFn, one_in: int = 4) -> bool:
    """True about once in `one_in` draws; shrinks to False."""
    return draw(ints(0, one_in - 1)) == one_in - 1


# -- policy ---------------------------------------------------------------------------------


def projects_of(
    draw: st.DrawFn,
    departments: Sequence[str],
    count: int,
    quota: st.SearchStrategy[float],
    limits: bool = True,
    time_limits: bool = True,
) -> tuple[QueueSpec, ...]:
    projects = []
    for i in range(count):
        deserved = draw(quota)
        limit = None
        if limits and rarely(draw):
            limit = deserved + draw(halves(0, 4))
        projects.append(
            QueueSpec(
                name=f"proj-{i}",
                deserved=deserved,
                over_quota_weight=deserved if not rarely(draw, 3) else draw(halves(0, 4)),
                over_quota_allowed=not rarely(draw),
                over_quota_rank=draw(ints(0, 2)),
                limit=limit,
                parent=draw(one_of(departments)),
                interactive_time_limit_s=draw(one_of((None, 60, 3600))) if time_limits else None,
                idle_timeout_s=draw(one_of((None, 300))) if time_limits else None,
            )
        )
    return tuple(projects)


def departments_over(
    draw: st.DrawFn, names: Sequence[str], projects: Sequence[QueueSpec], limits: bool = True
) -> tuple[QueueSpec, ...]:
    """Each department's quota holds its projects' quotas (as `validate` demands), plus spare."""
    departments = []
    for name in names:
        deserved = sum(p.deserved for p in projects if p.parent == name) + draw(halves(0, 2))
        limit = deserved + draw(halves(0, 4)) if limits and rarely(draw, 6) else None
        departments.append(
            QueueSpec(
                name=name,
                deserved=deserved,
                over_quota_weight=deserved if not rarely(draw, 3) else draw(halves(0, 4)),
                limit=limit,
            )
        )
    return tuple(departments)


@st.composite
def policies(draw: st.DrawFn, max_departments: int = 3, max_projects: int = 6) -> Policy:
    names = [f"dept-{i}" for i in range(draw(ints(1, max_departments)))]
    projects = projects_of(draw, names, draw(ints(1, max_projects)), halves(0, 4))
    return Policy(
        departments=departments_over(draw, names, projects),
        projects=projects,
        consolidation=not rarely(draw, 5),
    )


# -- nodes ----------------------------------------------------------------------------------


def mig_layouts(draw: st.DrawFn) -> tuple[MigInstance, ...]:
    """A valid set of A100-80GB instances: random (profile, start) pairs kept while valid."""
    layout: list[MigInstance] = []
    for profile in draw(st.lists(one_of(MIG_PROFILES), max_size=4)):
        start = draw(one_of(mig_profiles(A100)[profile].placements))
        if is_valid_layout(A100, [*layout, MigInstance(profile, start)]):
            layout.append(MigInstance(profile, start))
    return tuple(sorted(layout, key=lambda i: i.start))


def gpus_of(draw: st.DrawFn, model: str, count: int) -> tuple[Gpu, ...]:
    gpus = []
    for index in range(count):
        mig = model == A100 and not rarely(draw)
        instances = mig_layouts(draw) if mig and rarely(draw, 2) else ()
        gpus.append(Gpu(index, GPU_MEMORY_MIB[model], mig_enabled=mig, mig_instances=instances))
    return tuple(gpus)


@st.composite
def node_lists(
    draw: st.DrawFn,
    max_nodes: int = 6,
    max_gpus: int = 8,
    models: Sequence[str] = (A100, V100),
    max_groups: int = 2,
) -> tuple[Node, ...]:
    """1-`max_nodes` nodes in 1-`max_groups` groups, each group one GPU model."""
    group_models = draw(st.lists(one_of(models), min_size=1, max_size=max_groups))
    groups = [f"pool-{i}" for i in range(len(group_models))]
    racks = {g: draw(st.booleans()) for g in groups}
    count = draw(ints(len(groups), max(len(groups), max_nodes)))
    nodes = []
    for i in range(count):
        g = i if i < len(groups) else draw(ints(0, len(groups) - 1))
        model = group_models[g]
        topology = f"{groups[g]}-rack-{draw(ints(0, 1))}" if racks[groups[g]] else ""
        gpus = gpus_of(draw, model, draw(ints(1, max_gpus)))
        nodes.append(Node(f"node-{i}", groups[g], model, gpus, topology=topology))
    return tuple(nodes)


# -- jobs -----------------------------------------------------------------------------------


def mig_groups(nodes: Sequence[Node]) -> tuple[str, ...]:
    return tuple(sorted({n.node_group for n in nodes if any(g.mig_enabled for g in n.gpus)}))


def requests(draw: st.DrawFn, kinds: Sequence[RequestKind]) -> GpuRequest:
    kind = draw(one_of(kinds))
    if kind is RequestKind.WHOLE:
        return GpuRequest(kind, count=draw(ints(1, 4)))
    if kind is RequestKind.FRACTION:
        return GpuRequest(kind, fraction=draw(one_of(FRACTIONS)))
    if kind is RequestKind.MEMORY:
        return GpuRequest(kind, memory_mib=draw(one_of(MEMORY_MIB)))
    return GpuRequest(kind, mig_profile=draw(one_of(MIG_PROFILES)))


def job_of(
    draw: st.DrawFn,
    name: str,
    submitted: int,
    projects: Sequence[str],
    nodes: Sequence[Node],
    kinds: Sequence[RequestKind] = REQUEST_KINDS,
) -> Job:
    mig = mig_groups(nodes)
    request = requests(draw, [k for k in kinds if mig or k is not RequestKind.MIG])
    type_ = draw(one_of(JOB_TYPES))
    if request.kind is RequestKind.MIG:
        node_groups = mig
    elif rarely(draw, 3):
        node_groups = (draw(one_of(sorted({n.node_group for n in nodes}))),)
    else:
        node_groups = ()
    pods = draw(ints(1, 3))
    return Job(
        name=name,
        project=draw(one_of(projects)),
        type=type_,
        priority=draw(one_of(PRIORITIES)),
        preemptible=(type_ == "train") != rarely(draw, 5),
        request=request,
        pods=pods,
        min_available=draw(ints(1, pods)),
        node_groups=node_groups,
        submitted=submitted,
        idle_since=0.0 if type_ == "interactive" and rarely(draw) else None,
    )


@st.composite
def jobs_of(
    draw: st.DrawFn, name: str, submitted: int, projects: Sequence[str], nodes: Sequence[Node]
) -> Job:
    """`job_of` as a strategy."""
    return job_of(draw, name, submitted, projects, nodes)


@st.composite
def job_lists(
    draw: st.DrawFn,
    projects: Sequence[str],
    nodes: Sequence[Node],
    first: int = 0,
    min_size: int = 0,
    max_size: int = 25,
    kinds: Sequence[RequestKind] = REQUEST_KINDS,
) -> tuple[Job, ...]:
    """Jobs named job-<first>..., with distinct `submitted` values from `first` on."""
    count = draw(ints(min_size, max_size))
    order = draw(st.permutations(range(count)))
    return tuple(
        job_of(draw, f"job-{first + i:02d}", first + order[i], projects, nodes, kinds)
        for i in range(count)
    )


@st.composite
def warm_or_cold(draw: st.DrawFn, policy: Policy, nodes: tuple[Node, ...], jobs: tuple[Job, ...]):
    """All jobs pending, or a settled prefix with the rest submitted later (and time passed)."""
    if not jobs or not draw(st.booleans()):
        return Snapshot(policy, nodes, jobs)
    cut = draw(ints(1, len(jobs)))
    settled, _ = settle(Snapshot(policy, nodes, jobs[:cut]))
    now = draw(one_of((0.0, 100.0, 10_000.0)))
    return replace(settled, jobs=settled.jobs + jobs[cut:], now=now)


def workload_mixes() -> st.SearchStrategy[tuple[RequestKind, ...]]:
    """Every request kind, or whole GPUs only (where reclaim and consolidation get busy)."""
    return st.sampled_from((REQUEST_KINDS, (RequestKind.WHOLE,)))


@st.composite
def snapshots(
    draw: st.DrawFn, max_jobs: int = 25, kinds: Sequence[RequestKind] | None = None
) -> Snapshot:
    policy = draw(policies())
    nodes = draw(node_lists())
    kinds = draw(workload_mixes()) if kinds is None else kinds
    projects = [p.name for p in policy.projects]
    jobs = draw(job_lists(projects, nodes, max_size=max_jobs, kinds=kinds))
    return draw(warm_or_cold(policy, nodes, jobs))


@st.composite
def two_waves(draw: st.DrawFn, max_jobs: int = 25) -> tuple[Snapshot, tuple[Job, ...]]:
    """A snapshot, and more jobs to submit once it has settled (named and submitted later)."""
    kinds = draw(workload_mixes())
    snapshot = draw(snapshots(max_jobs=max_jobs, kinds=kinds))
    first = len(snapshot.jobs) + 100
    projects = [p.name for p in snapshot.policy.projects]
    more = draw(
        job_lists(projects, snapshot.nodes, first=first, max_size=max_jobs // 2, kinds=kinds)
    )
    return snapshot, more


# -- the guaranteed-quota world --------------------------------------------------------------


@st.composite
def guaranteed_quota_snapshots(draw: st.DrawFn, max_jobs: int = 25) -> Snapshot:
    """One node group, no limits, total deserved within capacity, 1-GPU preemptible train jobs.

    Here nothing but other projects' over-quota work can stand between a project and its
    deserved quota, and that work is always reclaimable.
    """
    nodes = draw(node_lists(models=(V100,), max_groups=1))
    capacity = sum(len(n.gpus) for n in nodes)
    names = [f"dept-{i}" for i in range(draw(ints(1, 3)))]
    projects = list(
        projects_of(draw, names, draw(ints(1, 6)), halves(0, 4), limits=False, time_limits=False)
    )
    left = float(capacity)
    for i, project in enumerate(projects):  # clip quotas so their total fits the cluster
        projects[i] = replace(project, deserved=min(project.deserved, left))
        left -= projects[i].deserved
    departments = departments_over(draw, names, projects, limits=False)
    spare = capacity - sum(d.deserved for d in departments)
    if spare < 0:  # drop the departments' own spare quota when it does not fit
        departments = tuple(
            replace(d, deserved=sum(p.deserved for p in projects if p.parent == d.name))
            for d in departments
        )
    policy = Policy(departments, tuple(projects))
    return draw(warm_or_cold(policy, nodes, train_jobs(draw, policy, max_jobs)))


def train_jobs(
    draw: st.DrawFn,
    policy: Policy,
    max_jobs: int,
    node_groups: Sequence[tuple[str, ...]] = ((),),
    max_gpus: int = 1,
) -> tuple[Job, ...]:
    """0-`max_jobs` pending preemptible train jobs of the policy's projects, in a random
    submission order, each on one of `node_groups` and asking for 1-`max_gpus` whole GPUs
    on one node."""
    count = draw(ints(0, max_jobs))
    order = draw(st.permutations(range(count)))
    return tuple(
        Job(
            name=f"job-{i:02d}",
            project=draw(one_of([p.name for p in policy.projects])),
            type="train",
            priority=draw(one_of(PRIORITIES)),
            preemptible=True,
            request=GpuRequest(RequestKind.WHOLE, count=draw(ints(1, max_gpus))),
            node_groups=draw(one_of(node_groups)),
            submitted=order[i],
        )
        for i in range(count)
    )


# -- quotas per node group ------------------------------------------------------------------


@st.composite
def pool_quota_snapshots(draw: st.DrawFn, max_jobs: int = 25, max_gpus: int = 1) -> Snapshot:
    """Two node groups of V100s; 1-4 projects in 1-2 departments with quotas per group that
    fit each group, and 0-2 projects with no quota (over-quota work only); preemptible train
    jobs of 1-`max_gpus` GPUs, each pinned to one group or free to use both.

    With 1-GPU jobs (the default), nothing but other projects' work over their quota in a
    group can stand between a project and its deserved quota in that group, and that work
    is always reclaimable. Larger ones need room on one node: reclaim then moves work.
    """
    groups = ("pool-0", "pool-1")
    nodes = []
    for g in groups:
        for i in range(draw(ints(1, 2))):
            gpus = tuple(Gpu(k, GPU_MEMORY_MIB[V100]) for k in range(draw(ints(1, 4))))
            nodes.append(Node(f"{g}-{i}", g, V100, gpus))
    left = {g: float(sum(len(n.gpus) for n in nodes if n.node_group == g)) for g in groups}
    names = [f"dept-{i}" for i in range(draw(ints(1, 2)))]
    projects = []
    for i in range(draw(ints(1, 4))):
        quotas = []
        for g in groups:
            quota = min(float(draw(ints(0, 3))), left[g])
            left[g] -= quota
            quotas.append((g, quota))
        projects.append(
            QueueSpec(
                f"p{i}",
                sum(q for _, q in quotas),
                draw(one_of([1.0, 2.0])),
                parent=draw(one_of(names)),
                pool_quotas=tuple(quotas),
                age=float(i),
            )
        )
    for i in range(draw(ints(0, 2))):
        parent = draw(one_of(names))
        projects.append(QueueSpec(f"free{i}", 0.0, 1.0, parent=parent, age=10.0 + i))
    departments = tuple(
        QueueSpec(d, sum(p.deserved for p in projects if p.parent == d), 1.0, age=float(i))
        for i, d in enumerate(names)
    )
    policy = Policy(departments, tuple(projects))
    jobs = train_jobs(draw, policy, max_jobs, [(), (groups[0],), (groups[1],)], max_gpus)
    return draw(warm_or_cold(policy, tuple(nodes), jobs))


def scattered(
    draw: st.DrawFn, free: set[tuple[str, int]], size: int, pods: int
) -> tuple[PodPlacement, ...] | None:
    """A running job's pods of `size` GPUs each, on distinct drawn nodes (a gang over
    several nodes when `pods` > 1), each on its node's lowest free GPUs, taken out of
    `free` (node, GPU); None, with `free` as it was, when they do not fit."""
    placed: list[PodPlacement] = []
    for index in range(pods):
        others = sorted({node for node, _ in free} - {pod.node for pod in placed})
        if not others:
            break
        node = draw(st.sampled_from(others))
        slots = sorted(gpu for at, gpu in free if at == node)[:size]
        if len(slots) < size:
            break
        free -= {(node, gpu) for gpu in slots}
        placed.append(PodPlacement(node, tuple(slots), index=index))
    if len(placed) == pods:
        return tuple(placed)
    free |= {(pod.node, gpu) for pod in placed for gpu in pod.gpus}
    return None
