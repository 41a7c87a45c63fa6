"""Scale benchmark of the scheduling engine (not a test): prints one JSON object.

    .venv/bin/python benchmarks/schedule_scale.py [--sections cycle kai-fill scaling repo]
        [--quick] [--seed 1] [--nodes 1000] [--repeat 3] [--profile-dir DIR] ...

Four sections, all run unless `--sections` names some; `--quick` uses the smaller sizes
of ``SIZES`` (a size given on the command line wins):

* ``cycle`` (the top-level figures): one cycle of the generated state described below.
* ``kai_fill``: KAI Scheduler's fill, `--kai-nodes` (500) whole-GPU nodes of
  `--gpus-per-node` GPUs and `--kai-jobs` (4,000) pending one-GPU train jobs spread evenly
  over `--kai-projects` projects of one department, nothing running: ``engine.settle``
  from empty, its time and cycles (and the first cycle alone).
* ``scaling``: one cycle of the generated state at `--scale-steps` sizes, nodes and jobs
  doubling from `--scale-nodes` x `--scale-jobs-per-node` (250 x 2,500 to 4,000 x
  40,000). Departments and projects stay `--departments` / `--projects`, so each
  project's quota and queue grow with the size; `--scale-queues grow` makes them grow
  with the nodes instead, as many per node as the cycle section has, so that every size
  is the same cluster at another scale. A row's cycle time is the best of
  `--scale-repeat` (5). The growth exponent is the least-squares slope of log(cycle
  time) over log(jobs) (goal <= 1.1); ``step_exponents`` are the slopes between
  neighbouring sizes. Each row also has:

  - ``cycle_cpu_s``: the best CPU time of this process (``growth_exponent_cpu``), which
    other processes on a shared machine stretch less than the wall time;
  - ``calls``: the Python function calls of one cycle (cProfile's count), the work done,
    the same on every machine and run (``growth_exponent_calls``): what the engine's
    algorithms do as the state grows, without the machine;
  - ``load_s``: the time to parse the same state (JSON text to ``Snapshot``, the collector
    paused as in a cycle), timed in turn with the cycle as the cycle section does, and
    ``cycle_over_load`` (the median of those rounds' ratios): parsing is linear work, so
    how it grows (``growth_exponent_load``) shows what the machine's memory adds as the
    state outgrows its caches.
* ``repo_settle``: the 1,000-project / 10,000-workload repo of benchmarks/compile_scale.py
  (its generator, imported), validated (best of `--repeat`) and then ``sim.run.simulate``
  with no simulation file (every workload arrives on the empty cluster; the bridge builds
  policy, nodes and jobs; ``engine.settle`` cycles): its time, CPU time, cycles, what each
  cycle decided, and the ratio to validate (goal <= 3x). Best of `--repo-repeat` (1).
  ``converged``: one more cycle over the final state changes nothing.

What the cycle and scaling sections build, deterministically from `--seed`
(``random.Random(seed)`` only, no clock):

* Nodes (`--nodes` x `--gpus-per-node`) in five node groups: whole-GPU ``v100``
  (V100-SXM2-32GB, 18%), ``a100-40`` (24%) and ``a100-80`` (24%); ``shared-a100-40``
  (17%), where the fraction and GPU-memory workloads go; ``mig-a100-80`` (17%,
  A100-SXM4-80GB with MIG enabled). Every MIG GPU gets a layout drawn from a pool built
  with ``gitops_sched.hardware.mig.find_placement`` (some GPUs stay empty), each layout
  checked with ``is_valid_layout``. Nodes sit in racks of 16 (the topology label); 0.5% of
  the nodes are cordoned and stay empty.
* `--departments` departments and `--projects` projects. Department quotas are integers
  that sum to the schedulable capacity, project quotas sum to their department's; about
  5% of projects have no quota, 5% may not go over quota, 10% have a hard limit, 10% a
  higher over-quota rank, and some have interactive time limits and idle timeouts.
* `--workloads` jobs. Kinds: whole 1/2/4/8-GPU train (preemptible; 10% at a higher
  priority), gangs of 2/4/8 pods of 4 or 8 GPUs (some elastic), whole-GPU interactive and
  inference (non-preemptible, so within the project's quota), fractions and GPU-memory
  requests on the shared group, and MIG instances on the MIG group. A job's project is
  drawn in proportion to its quota.

How the running part is built: placements are constructed directly (the engine is not
used to make them). Running workloads are drawn one by one from a "steady state" mix
(more fractions and MIG than the arrivals, since big whole-GPU jobs are the ones that
wait) and placed by a small first-fit placer that keeps per-GPU bookkeeping: whole GPUs
on the fullest node of an allowed group that fits them, fractions on the first partly
used shared GPU with room (else a fresh one), MIG pods on an idle pre-created instance of
the requested profile. A draw that does not fit (no room, or a non-preemptible job over
its project's quota, a hard limit, a no-over-quota project) is discarded and another is
drawn, until `--running-fraction` of `--workloads` run; if the cluster fills up first,
fewer run and the JSON says so under ``state.warning``. The rest are pending, drawn from
the arrival mix (mostly whole-GPU train). The result is checked independently (no GPU
over-committed, every MIG pod on an existing instance, every layout valid, node groups
respected, non-preemptible work within quota) before anything is timed.

What the cycle section measures (best of `--repeat`, `time.perf_counter`, GC left on):

* ``load_s``: ``json.loads`` of the serialised state plus building the frozen
  ``Snapshot`` dataclasses from it (what "loading the state" costs the in-cluster
  scheduler); the two parts are also reported on their own.
* ``fair_share_s``: ``fairshare.fair_shares`` over the state, with each project's demand
  computed as ``Session`` does (allocated GPUs plus pending GPUs on the nominal GPU);
  ``demand_s`` is the time to compute that demand.
* ``cycle_s``: one ``schedule(snapshot)``; ``decisions`` counts what it decided.
* ``ratio_cycle_over_load``: the cycle's time over the load's. The two are timed in turn,
  a load then a cycle in each of `--repeat` rounds (``alternating_best``), not one's rounds
  after the other's: this machine's speed drifts by a quarter minutes apart, which moves a
  ratio of figures taken minutes apart more than the code does. The figure is the median
  of the rounds' own ratios (``ratio_cycle_over_load_rounds``): each round pairs a load and
  a cycle taken seconds apart. ``ratio_cycle_over_load_of_bests`` is ``cycle_s`` over
  ``load_s`` (the best of each, which may come from different minutes: a burst of other
  work is likelier to fall inside a 1.5 s cycle than inside a 0.4 s load, so it swings
  more), and ``ratio_cycle_over_load_cpu`` the same of the best CPU times.
* ``phases_s`` (one extra cycle, unless ``--no-phases``): ``Session`` construction and each
  action of ``cycle.ACTIONS`` timed separately.

``--profile FILE`` also writes cProfile stats of one more ``schedule`` call to FILE.
``--profile-dir DIR`` profiles one more run of each section (cycle and the largest
scaling size: ``schedule``; KAI fill: ``settle``; repo: ``simulate``) into
DIR/<section>.prof and lists the `--top` functions by cumulative and by self time, as
file:line, under the section's ``hotspots``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import math
import os
import platform
import pstats
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any

from gitops_sched.engine import schedule, settle
from gitops_sched.engine.codec import snapshot_from_dict, snapshot_to_dict
from gitops_sched.engine.cycle import ACTIONS
from gitops_sched.engine.fairshare import fair_shares
from gitops_sched.engine.requests import pod_gpus
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import (
    GPU_EPSILON,
    Decisions,
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
from gitops_sched.gcpause import paused_gc
from gitops_sched.hardware.gpus import GPU_MODELS
from gitops_sched.hardware.mig import (
    MigInstance,
    compute_share,
    find_placement,
    is_valid_layout,
    mig_profiles,
)

NOW = 1_000_000.0  # the snapshot's clock; started_at / idle_since are relative to it
RACK_SIZE = 16
CORDONED_SHARE = 0.005
MIG_EMPTY_SHARE = 0.08  # MIG GPUs with no instance created yet
MIG_LAYOUT_POOL = 96
MIN_SHARE = 0.1  # smallest fraction a shared-GPU workload asks for
MAX_CONSECUTIVE_MISSES = 20_000  # running draws that did not fit, in a row: the cluster is full


@dataclass(frozen=True)
class GroupSpec:
    name: str
    model: str
    share: float  # of the nodes
    kind: str  # whole | shared | mig


GROUPS = (
    GroupSpec("v100", "V100-SXM2-32GB", 0.18, "whole"),
    GroupSpec("a100-40", "A100-SXM4-40GB", 0.24, "whole"),
    GroupSpec("a100-80", "A100-SXM4-80GB", 0.24, "whole"),
    GroupSpec("shared-a100-40", "A100-SXM4-40GB", 0.17, "shared"),
    GroupSpec("mig-a100-80", "A100-SXM4-80GB", 0.17, "mig"),
)
SHARED = next(g for g in GROUPS if g.kind == "shared")
MIG = next(g for g in GROUPS if g.kind == "mig")
WHOLE_CHOICES = ((), ("v100",), ("a100-40",), ("a100-80",), ("a100-40", "a100-80"))
BIG_CHOICES = (("a100-80",), ("a100-40", "a100-80"))
MIG_PROFILE_WEIGHTS = {  # for MIG workloads and for the pre-created layouts alike
    "1g.10gb": 55,
    "1g.20gb": 10,
    "2g.20gb": 18,
    "3g.40gb": 11,
    "4g.40gb": 3,
    "7g.80gb": 3,
}
# category -> weight; running work is what fitted, pending work is what arrives
RUNNING_MIX = {
    "train": 22,
    "gang": 1,
    "interactive": 6,
    "inference": 4,
    "fraction": 36,
    "mig": 31,
}
PENDING_MIX = {
    "train": 72,
    "gang": 4,
    "interactive": 6,
    "inference": 3,
    "fraction": 8,
    "mig": 7,
}


# -- generation ----------------------------------------------------------------------------


def apportion(total: int, weights: list[float]) -> list[int]:
    """Integers proportional to `weights` that sum to `total` (largest remainder)."""
    weight_sum = sum(weights)
    exact = [total * w / weight_sum for w in weights]
    parts = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (parts[i] - exact[i], i))
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def mig_layout_pool(rng: random.Random, model: str) -> list[tuple[MigInstance, ...]]:
    names = [name for name in MIG_PROFILE_WEIGHTS if name in mig_profiles(model)]
    weights = [MIG_PROFILE_WEIGHTS[name] for name in names]
    pool: list[tuple[MigInstance, ...]] = []
    while len(pool) < MIG_LAYOUT_POOL:
        layout: list[MigInstance] = []
        target, misses = rng.randint(4, 7), 0
        while len(layout) < target and misses < 3:
            profile = rng.choices(names, weights)[0]
            start = find_placement(model, layout, profile)
            if start is None:
                misses += 1
                continue
            layout.append(MigInstance(profile, start))
        ordered = tuple(sorted(layout, key=lambda i: i.start))
        if not is_valid_layout(model, ordered):
            raise AssertionError(f"generated an invalid MIG layout {ordered}")
        pool.append(ordered)
    return pool


def make_nodes(
    rng: random.Random,
    count: int,
    gpus_per_node: int,
    groups: tuple[GroupSpec, ...] = GROUPS,
    cordoned_share: float = CORDONED_SHARE,
) -> list[Node]:
    sizes = apportion(count, [g.share for g in groups])
    layouts = mig_layout_pool(rng, MIG.model) if any(g.kind == "mig" for g in groups) else []
    cordoned = set(rng.sample(range(count), round(count * cordoned_share)))
    nodes: list[Node] = []
    for group, size in zip(groups, sizes):
        memory = GPU_MODELS[group.model].memory_mib
        for i in range(size):
            if group.kind == "mig":
                gpus = tuple(
                    Gpu(
                        index,
                        memory,
                        mig_enabled=True,
                        mig_instances=() if rng.random() < MIG_EMPTY_SHARE else rng.choice(layouts),
                    )
                    for index in range(gpus_per_node)
                )
            else:
                gpus = tuple(Gpu(index, memory) for index in range(gpus_per_node))
            rack = f"{group.name}-rack-{i // RACK_SIZE:03d}"
            nodes.append(
                Node(
                    name=f"{group.name}-{i:04d}",
                    node_group=group.name,
                    gpu_model=group.model,
                    gpus=gpus,
                    topology=rack,
                    schedulable=len(nodes) not in cordoned,
                    labels=(
                        ("nvidia.com/gpu.product", group.model),
                        ("topology.kubernetes.io/rack", rack),
                    ),
                )
            )
    return nodes


def make_policy(rng: random.Random, capacity: int, departments: int, projects: int) -> Policy:
    if projects < departments:
        raise SystemExit("--projects must be at least --departments")
    dept_quota = apportion(capacity, [rng.lognormvariate(0, 0.6) for _ in range(departments)])
    depts = tuple(
        QueueSpec(f"dept-{d:03d}", float(q), over_quota_weight=float(max(q, 1)))
        for d, q in enumerate(dept_quota)
    )
    # every department gets one project, the rest go in proportion to department quota
    parent = list(range(departments)) + rng.choices(
        range(departments), weights=[q + 1 for q in dept_quota], k=projects - departments
    )
    members: dict[int, list[int]] = {}
    for p, d in enumerate(parent):
        members.setdefault(d, []).append(p)
    quota = [0] * projects
    for d, kids in members.items():
        weights = [rng.lognormvariate(0, 0.8) for _ in kids]
        for i in range(1, len(kids)):  # the first project of a department always has quota
            if rng.random() < 0.05:
                weights[i] = 0.0
        for p, q in zip(kids, apportion(dept_quota[d], weights)):
            quota[p] = q
    specs = []
    for p in range(projects):
        q = float(quota[p])
        specs.append(
            QueueSpec(
                name=f"proj-{p:04d}",
                deserved=q,
                over_quota_weight=q if q else 1.0,
                over_quota_allowed=not (q and rng.random() < 0.05),
                over_quota_rank=1 if rng.random() < 0.10 else 0,
                limit=float(math.ceil(q * 1.5) + 1) if rng.random() < 0.10 else None,
                parent=depts[parent[p]].name,
                interactive_time_limit_s=8 * 3600 if rng.random() < 0.3 else None,
                idle_timeout_s=2 * 3600 if rng.random() < 0.3 else None,
            )
        )
    return Policy(departments=depts, projects=tuple(specs))


@dataclass(frozen=True)
class Draft:
    """A workload before it has a name, project, submission time or placement."""

    category: str
    type: str
    priority: int
    preemptible: bool
    request: GpuRequest
    pods: int = 1
    min_available: int = 1
    node_groups: tuple[str, ...] = ()


def draft(rng: random.Random, category: str) -> Draft:
    if category == "train":
        count = rng.choices((1, 2, 4, 8), (55, 20, 15, 10))[0]
        groups = rng.choice(BIG_CHOICES) if count == 8 else rng.choice(WHOLE_CHOICES)
        priority = 80 if rng.random() < 0.10 else 50
        return Draft(
            category, "train", priority, True, GpuRequest(RequestKind.WHOLE, count), 1, 1, groups
        )
    if category == "gang":
        pods = rng.choice((2, 4, 8))
        count = rng.choice((4, 8))
        minimum = pods if rng.random() < 0.8 else pods // 2
        request = GpuRequest(RequestKind.WHOLE, count)
        return Draft(category, "train", 50, True, request, pods, minimum, rng.choice(BIG_CHOICES))
    if category == "interactive":
        request = GpuRequest(RequestKind.WHOLE, 1)
        return Draft(category, "interactive", 100, False, request, 1, 1, rng.choice(WHOLE_CHOICES))
    if category == "inference":
        pods = rng.choice((1, 1, 2, 3))
        request = GpuRequest(RequestKind.WHOLE, 1)
        return Draft(category, "inference", 125, False, request, pods, 1, rng.choice(WHOLE_CHOICES))
    job_type = rng.choices(("interactive", "inference", "train"), (40, 30, 30))[0]
    priority, preemptible = {"interactive": (100, False), "inference": (125, False)}.get(
        job_type, (50, True)
    )
    if category == "fraction":
        if rng.random() < 0.7:
            fraction = rng.choice((0.1, 0.2, 0.25, 0.25, 0.5, 0.5))
            request = GpuRequest(RequestKind.FRACTION, fraction=fraction)
        else:
            request = GpuRequest(RequestKind.MEMORY, memory_mib=rng.choice((5120, 10240, 20480)))
        return Draft(category, job_type, priority, preemptible, request, 1, 1, (SHARED.name,))
    if category == "mig":
        profile = rng.choices(list(MIG_PROFILE_WEIGHTS), list(MIG_PROFILE_WEIGHTS.values()))[0]
        request = GpuRequest(RequestKind.MIG, mig_profile=profile)
        return Draft(category, job_type, priority, preemptible, request, 1, 1, (MIG.name,))
    raise ValueError(category)


class Placer:
    """First-fit bookkeeping of the cluster while the running workloads are built."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.free = [[True] * len(n.gpus) for n in nodes]  # whole GPU free
        self.used = [[0.0] * len(n.gpus) for n in nodes]  # shared fraction in use
        width = 1 + max(len(n.gpus) for n in nodes)
        # group -> free whole GPUs -> node indexes (dicts as ordered sets: deterministic)
        self.buckets: dict[str, list[dict[int, None]]] = {
            g.name: [{} for _ in range(width)] for g in GROUPS if g.kind != "mig"
        }
        self.partial: dict[tuple[int, int], None] = {}  # shared GPUs with room left
        self.idle_mig: dict[str, dict[tuple[int, int, MigInstance], None]] = {}
        for i, node in enumerate(nodes):
            if not node.schedulable:
                continue
            if node.node_group in self.buckets:
                self.buckets[node.node_group][len(node.gpus)][i] = None
            for gpu in node.gpus:
                for instance in gpu.mig_instances:
                    self.idle_mig.setdefault(instance.profile, {})[i, gpu.index, instance] = None
        self.whole_groups = tuple(self.buckets)

    def _count(self, node: int) -> int:
        return sum(self.free[node])

    def _take(self, node: int, gpu: int) -> None:
        group = self.buckets[self.nodes[node].node_group]
        free = self._count(node)
        del group[free][node]
        self.free[node][gpu] = False
        group[free - 1][node] = None

    def _give(self, node: int, gpu: int) -> None:
        group = self.buckets[self.nodes[node].node_group]
        free = self._count(node)
        del group[free][node]
        self.free[node][gpu] = True
        group[free + 1][node] = None

    def _fullest_fitting(self, groups: Iterable[str], count: int) -> int | None:
        for free in range(count, len(next(iter(self.buckets.values())))):
            for group in groups:
                bucket = self.buckets[group][free]
                if bucket:
                    return next(iter(bucket))
        return None

    def whole(self, groups: tuple[str, ...], count: int, pods: int) -> list[PodPlacement] | None:
        groups = groups or self.whole_groups
        taken: list[tuple[int, list[int]]] = []
        for _ in range(pods):
            node = self._fullest_fitting(groups, count)
            if node is None:  # a gang that does not fit whole: give back what its pods took
                for held, gpus in taken:
                    for gpu in gpus:
                        self._give(held, gpu)
                return None
            gpus = [g for g, free in enumerate(self.free[node]) if free][:count]
            for gpu in gpus:
                self._take(node, gpu)
            taken.append((node, gpus))
        return [PodPlacement(self.nodes[node].name, tuple(gpus)) for node, gpus in taken]

    def shared(self, share: float) -> PodPlacement | None:
        for node, gpu in self.partial:
            if self.used[node][gpu] + share <= 1.0 + GPU_EPSILON:
                break
        else:
            node = self._fullest_fitting((SHARED.name,), 1)
            if node is None:
                return None
            gpu = self.free[node].index(True)
            self._take(node, gpu)
            self.partial[node, gpu] = None
        self.used[node][gpu] += share
        if 1.0 - self.used[node][gpu] < MIN_SHARE - GPU_EPSILON:
            del self.partial[node, gpu]
        return PodPlacement(self.nodes[node].name, (gpu,), fraction=share)

    def mig(self, profile: str) -> PodPlacement | None:
        idle = self.idle_mig.get(profile)
        if not idle:
            return None
        node, gpu, instance = next(iter(idle))
        del idle[node, gpu, instance]
        return PodPlacement(self.nodes[node].name, (gpu,), mig=instance)


def draft_gpus(d: Draft) -> float:
    """GPUs the draft counts for on its node group (what `requests.pod_gpus` gives)."""
    if d.request.kind is RequestKind.WHOLE:
        return float(d.request.count * d.pods)
    if d.request.kind is RequestKind.FRACTION:
        return d.request.fraction
    if d.request.kind is RequestKind.MEMORY:
        return min(1.0, d.request.memory_mib / GPU_MODELS[SHARED.model].memory_mib)
    return compute_share(MIG.model, d.request.mig_profile)


@dataclass
class Generated:
    snapshot: Snapshot
    summary: dict[str, Any]


def make_job(draw: Draft, n: int, project: str, **running: Any) -> Job:
    """The n-th workload, of a drawn kind, in `project` (placed where `running` says)."""
    return Job(
        name=f"wl-{n:05d}",
        project=project,
        type=draw.type,
        priority=draw.priority,
        preemptible=draw.preemptible,
        request=draw.request,
        pods=draw.pods,
        min_available=draw.min_available,
        node_groups=draw.node_groups,
        submitted=n,
        **running,
    )


def generate(args: argparse.Namespace) -> Generated:
    rng = random.Random(args.seed)
    nodes = make_nodes(rng, args.nodes, args.gpus_per_node)
    capacity = sum(len(n.gpus) for n in nodes if n.schedulable)
    policy = make_policy(rng, capacity, args.departments, args.projects)
    projects = {p.name: p for p in policy.projects}
    names = list(projects)
    cum_weights = []
    running_total = 0.0
    for p in policy.projects:
        running_total += p.deserved + 0.5  # no-quota projects still submit some work
        cum_weights.append(running_total)

    def pick_project() -> str:
        return rng.choices(names, cum_weights=cum_weights)[0]

    def mixer(mix: dict[str, int]) -> Callable[[], Draft]:
        categories, weights = list(mix), list(mix.values())
        return lambda: draft(rng, rng.choices(categories, weights)[0])

    placer = Placer(nodes)
    allocated = Counter[str]()
    fixed = Counter[str]()
    target = round(args.workloads * args.running_fraction)
    jobs: list[Job] = []
    misses = consecutive = 0
    next_running = mixer(RUNNING_MIX)
    while len(jobs) < target and consecutive < MAX_CONSECUTIVE_MISSES:
        d, project = next_running(), pick_project()
        amount, spec = draft_gpus(d), projects[project]
        over = (
            (not d.preemptible and fixed[project] + amount > spec.deserved + GPU_EPSILON)
            or (spec.limit is not None and allocated[project] + amount > spec.limit + GPU_EPSILON)
            or (not spec.over_quota_allowed and allocated[project] + amount > spec.deserved)
        )
        pods: list[PodPlacement] | None = None
        if not over:
            if d.request.kind is RequestKind.WHOLE:
                pods = placer.whole(d.node_groups, d.request.count, d.pods)
            elif d.request.kind is RequestKind.MIG:
                pod = placer.mig(d.request.mig_profile)
                pods = None if pod is None else [pod]
            else:
                pod = placer.shared(amount)
                pods = None if pod is None else [pod]
        if pods is None:
            misses += 1
            consecutive += 1
            continue
        consecutive = 0
        allocated[project] += amount
        if not d.preemptible:
            fixed[project] += amount
        n = len(jobs)
        interactive = d.type == "interactive"
        jobs.append(
            make_job(
                d,
                n,
                project,
                placement=tuple(pods),
                started_at=NOW - rng.uniform(0, (12 * 3600) if interactive else (7 * 86400)),
                idle_since=NOW - rng.uniform(0, 4 * 3600)
                if interactive and rng.random() < 0.25
                else None,
            )
        )
    running = len(jobs)
    next_pending = mixer(PENDING_MIX)
    while len(jobs) < args.workloads:
        d, n = next_pending(), len(jobs)
        jobs.append(make_job(d, n, pick_project()))
    snapshot = Snapshot(policy=policy, nodes=tuple(nodes), jobs=tuple(jobs), now=NOW)
    verify(snapshot)
    kinds = Counter(
        f"{'running' if j.running else 'pending'}/{j.request.kind.value}/{j.type}"
        f"{'/multi-pod' if j.pods > 1 else ''}"
        for j in jobs
    )
    used = sum(allocated.values())
    summary: dict[str, Any] = {
        "nodes": len(nodes),
        "nodes_by_group": dict(Counter(n.node_group for n in nodes)),
        "cordoned_nodes": sum(not n.schedulable for n in nodes),
        "gpus": sum(len(n.gpus) for n in nodes),
        "schedulable_gpus": capacity,
        "mig_instances": sum(len(g.mig_instances) for n in nodes for g in n.gpus),
        "departments": len(policy.departments),
        "projects": len(policy.projects),
        "quota_sum": sum(p.deserved for p in policy.projects),
        "workloads": len(jobs),
        "running": running,
        "pending": len(jobs) - running,
        "running_pods": sum(len(j.placement) for j in jobs),
        "running_gpus": round(used, 3),
        "running_gpu_share": round(used / capacity, 4) if capacity else 0.0,
        "running_draws_discarded": misses,
        "workloads_by_kind": dict(sorted(kinds.items())),
    }
    if running < target:
        summary["warning"] = (
            f"the cluster filled up: {running} running instead of {target} "
            f"({MAX_CONSECUTIVE_MISSES} draws in a row did not fit)"
        )
    return Generated(snapshot, summary)


def verify(snapshot: Snapshot) -> None:
    """Independent check of the running state: raise if anything is over-committed."""
    nodes = {n.name: n for n in snapshot.nodes}
    projects = {p.name: p for p in snapshot.policy.projects}
    for node in snapshot.nodes:
        for gpu in node.gpus:
            if not is_valid_layout(node.gpu_model, gpu.mig_instances):
                raise AssertionError(f"{node.name}/{gpu.index}: invalid MIG layout")
    whole: dict[tuple[str, int], str] = {}
    shares: dict[tuple[str, int], float] = {}
    mig_users: dict[tuple[str, int, MigInstance], str] = {}
    fixed = Counter[str]()
    for job in snapshot.jobs:
        if not job.running:
            continue
        if len(job.placement) != job.pods:
            raise AssertionError(f"{job.name}: {len(job.placement)} pods placed of {job.pods}")
        amount = 0.0
        for pod in job.placement:
            node = nodes[pod.node]
            if job.node_groups and node.node_group not in job.node_groups:
                raise AssertionError(f"{job.name}: {node.name} is outside its node groups")
            if not node.schedulable:
                raise AssertionError(f"{job.name}: placed on cordoned {node.name}")
            gpu = node.gpus[pod.gpus[0]]
            amount += pod_gpus(job, pod, node.gpu_model, gpu.memory_mib)
            if pod.mig is not None:
                key3 = (node.name, gpu.index, pod.mig)
                if pod.mig not in gpu.mig_instances or key3 in mig_users:
                    raise AssertionError(f"{job.name}: MIG instance missing or taken")
                mig_users[key3] = job.name
                continue
            if len(pod.gpus) != (job.request.count if pod.fraction == 0 else 1):
                raise AssertionError(f"{job.name}: wrong GPU count on {node.name}")
            for index in pod.gpus:
                key = (node.name, index)
                if node.gpus[index].mig_enabled or key in whole:
                    raise AssertionError(f"{job.name}: GPU {key} is taken or MIG")
                if pod.fraction:
                    shares[key] = shares.get(key, 0.0) + pod.fraction
                    if shares[key] > 1.0 + GPU_EPSILON:
                        raise AssertionError(f"{job.name}: GPU {key} shared beyond 1")
                elif key in shares:
                    raise AssertionError(f"{job.name}: whole GPU {key} is shared")
                else:
                    whole[key] = job.name
        if not job.preemptible:
            fixed[job.project] += amount
    for name, amount in fixed.items():
        if amount > projects[name].deserved + GPU_EPSILON:
            raise AssertionError(f"{name}: non-preemptible work above its quota")
    capacity = sum(len(n.gpus) for n in snapshot.nodes if n.schedulable)
    if abs(sum(d.deserved for d in snapshot.policy.departments) - capacity) > GPU_EPSILON:
        raise AssertionError("department quotas do not sum to capacity")


# -- measurements --------------------------------------------------------------------------


def project_demand(snapshot: Snapshot) -> dict[str, float]:
    """Allocated plus pending GPUs per project, the way `Session.__init__` counts them."""
    nodes = {n.name: n for n in snapshot.nodes}
    demand = {p.name: 0.0 for p in snapshot.policy.projects}
    nominal: dict[tuple, tuple[str, int]] = {}
    for job in snapshot.jobs:
        if job.project not in demand:
            continue
        if job.running:
            amount = 0.0
            for pod in job.placement:
                node = nodes.get(pod.node)
                if node is None:
                    amount += pod_gpus(job, pod, "", 0)
                else:
                    memory = node.gpus[pod.gpus[0]].memory_mib if pod.gpus else 0
                    amount += pod_gpus(job, pod, node.gpu_model, memory)
            demand[job.project] += amount
            continue
        key = (job.node_groups, job.request.kind is RequestKind.MIG)
        if key not in nominal:
            best = ("", 0)
            for node in snapshot.nodes:
                if job.node_groups and node.node_group not in job.node_groups:
                    continue
                for gpu in node.gpus:
                    if gpu.mig_enabled == key[1] and gpu.memory_mib > best[1]:
                        best = (node.gpu_model, gpu.memory_mib)
            nominal[key] = best
        model, memory = nominal[key]
        demand[job.project] += pod_gpus(job, None, model, memory) * job.pods
    return demand


def timed_runs(repeat: int, fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """The best wall time and the best CPU time (this process) of `repeat` runs; the result.

    On a shared machine the CPU time is the steadier of the two: other processes' load
    stretches wall time, not this process's CPU time.
    """
    wall, cpu, result = math.inf, math.inf, None
    for _ in range(repeat):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu, result


def function_calls(fn: Callable[[], Any]) -> int:
    """The Python function calls of one run of `fn` (cProfile's count): the work done,
    the same on every machine and every run, unlike its time."""
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    return sum(row[1] for row in pstats.Stats(profiler).stats.values())  # type: ignore[attr-defined]


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    wall, _, result = timed_runs(repeat, fn)
    return wall, result


@dataclass
class Alternated:
    """What alternating_best measured of each function: its best wall and CPU time, each
    round's wall time, its last result."""

    wall: float = math.inf
    cpu: float = math.inf
    rounds: list[float] = field(default_factory=list)
    result: Any = None


def alternating_best(repeat: int, *fns: Callable[[], Any]) -> list[Alternated]:
    """`repeat` rounds, each running every function once in turn: figures to compare,
    taken minutes apart on a machine whose speed drifts, move with the drift; taken in
    the same rounds they meet the same machine."""
    found = [Alternated() for _ in fns]
    for _ in range(repeat):
        for fn, seen in zip(fns, found):
            wall, cpu, seen.result = timed_runs(1, fn)
            seen.wall, seen.cpu = min(seen.wall, wall), min(seen.cpu, cpu)
            seen.rounds.append(wall)
    return found


def paired_ratio(first: Alternated, second: Alternated) -> tuple[float, list[float]]:
    """`second`'s time over `first`'s in each round of alternating_best, and their median:
    each round pairs two runs seconds apart, where the best of each may come from
    different minutes."""
    rounds = [round(b / a, 3) for a, b in zip(first.rounds, second.rounds)]
    return round(statistics.median(rounds), 3), rounds


def count_decisions(decisions: Decisions) -> dict[str, Any]:
    reasons = Counter(e.reason.value for e in decisions.evictions)
    return {
        "binds": len(decisions.binds),
        "bound_pods": sum(len(b.pods) for b in decisions.binds),
        "evictions": len(decisions.evictions),
        "evictions_by_reason": dict(sorted(reasons.items())),
        "mig_changes": len(decisions.mig_changes),
        "mig_creates": sum(c.create for c in decisions.mig_changes),
        "mig_destroys": sum(not c.create for c in decisions.mig_changes),
        "pending_after": len(decisions.pending_reasons),
    }


def phases(snapshot: Snapshot, shares: dict[str, float]) -> tuple[dict[str, float], bool]:
    """Session construction and each action timed on its own (one run)."""
    out: dict[str, float] = {}
    gc.collect()
    start = time.perf_counter()
    session = Session(snapshot)
    out["session_init"] = time.perf_counter() - start
    same = session.fair_share.keys() == shares.keys() and all(
        abs(session.fair_share[k] - v) <= 1e-6 for k, v in shares.items()
    )
    for action in ACTIONS:
        start = time.perf_counter()
        action(session)
        out[action.__name__] = time.perf_counter() - start
    return {k: round(v, 6) for k, v in out.items()}, same


@paused_gc()
def load_state(text: str) -> Snapshot:
    """What loading the state costs the in-cluster scheduler: JSON to a Snapshot."""
    return snapshot_from_dict(json.loads(text))


def cycle_section(args: argparse.Namespace) -> dict[str, Any]:
    """The original figures: load, demand, fair share and one cycle of the generated state."""
    start = time.perf_counter()
    generated = generate(args)
    generate_s = time.perf_counter() - start
    start = time.perf_counter()
    text = json.dumps(snapshot_to_dict(generated.snapshot), separators=(",", ":"))
    serialise_s = time.perf_counter() - start

    parse_s, _ = best_of(args.repeat, lambda: json.loads(text))
    data = json.loads(text)
    build_s, _ = best_of(args.repeat, lambda: snapshot_from_dict(data))
    snapshot = load_state(text)
    if snapshot != generated.snapshot:
        raise AssertionError("the serialised state does not load back to the same snapshot")

    demand_s, demand = best_of(args.repeat, lambda: project_demand(snapshot))
    capacity = float(sum(len(n.gpus) for n in snapshot.nodes if n.schedulable))
    policy = snapshot.policy
    fair_share_s, shares = best_of(
        args.repeat, lambda: fair_shares(capacity, policy.departments, policy.projects, demand)
    )
    load, cycle = alternating_best(
        args.repeat, partial(load_state, text), partial(schedule, snapshot)
    )
    load_s, cycle_s, decisions = load.wall, cycle.wall, cycle.result
    ratio, rounds = paired_ratio(load, cycle)

    result: dict[str, Any] = {
        "state": {**generated.summary, "json_bytes": len(text.encode())},
        "generate_s": round(generate_s, 6),
        "serialise_s": round(serialise_s, 6),
        "load_s": round(load_s, 6),
        "load_parts_s": {"json_loads": round(parse_s, 6), "dataclasses": round(build_s, 6)},
        "demand_s": round(demand_s, 6),
        "fair_share_s": round(fair_share_s, 6),
        "cycle_s": round(cycle_s, 6),
        "ratio_cycle_over_load": ratio,
        "ratio_cycle_over_load_rounds": rounds,
        "ratio_cycle_over_load_of_bests": round(cycle_s / load_s, 3),
        "ratio_cycle_over_load_cpu": round(cycle.cpu / load.cpu, 3),
        "decisions": count_decisions(decisions),
    }
    if not args.no_phases:
        result["phases_s"], result["fair_share_matches_session"] = phases(snapshot, shares)
    if args.profile:
        profile(args.profile, args.top, lambda: schedule(snapshot))
        result["profile"] = args.profile
    if args.profile_dir:
        result["hotspots"] = profile_into(args, "cycle", lambda: schedule(snapshot))
    return result


# -- the KAI fill, the scaling table and the benchmark repo's settle ------------------------

KAI_GROUP = GroupSpec("a100-80", "A100-SXM4-80GB", 1.0, "whole")
ONE_GPU_TRAIN = Draft("train", "train", 50, True, GpuRequest(RequestKind.WHOLE, 1))
GOAL_EXPONENT = 1.1
GOAL_SETTLE_OVER_VALIDATE = 3.0


def kai_fill_snapshot(args: argparse.Namespace) -> Snapshot:
    """KAI Scheduler's fill: whole-GPU nodes, nothing running, one-GPU jobs spread evenly
    over `--kai-projects` projects of one department, quotas splitting the cluster evenly."""
    rng = random.Random(args.seed)
    nodes = make_nodes(rng, args.kai_nodes, args.gpus_per_node, (KAI_GROUP,), cordoned_share=0)
    capacity = sum(len(n.gpus) for n in nodes)
    department = QueueSpec("dept-000", float(capacity), float(capacity))
    quotas = apportion(capacity, [1.0] * args.kai_projects)
    projects = tuple(
        QueueSpec(f"proj-{p:04d}", float(q), float(q), parent=department.name)
        for p, q in enumerate(quotas)
    )
    jobs = tuple(
        make_job(ONE_GPU_TRAIN, n, projects[n % len(projects)].name) for n in range(args.kai_jobs)
    )
    return Snapshot(Policy((department,), projects), tuple(nodes), jobs, now=NOW)


def settle_summary(history: list[Decisions]) -> dict[str, Any]:
    """Cycles a settle took, whether the last one changed nothing, and what each decided."""
    return {
        "cycles": len(history),
        "converged": not history[-1].changed,
        "per_cycle": [
            {
                "binds": len(d.binds),
                "evictions": dict(sorted(Counter(e.reason.value for e in d.evictions).items())),
                "mig_changes": len(d.mig_changes),
            }
            for d in history
        ],
        "pending_after": len(history[-1].pending_reasons),
    }


def kai_fill_section(args: argparse.Namespace) -> dict[str, Any]:
    snapshot = kai_fill_snapshot(args)
    first_cycle_s, _ = best_of(args.repeat, lambda: schedule(snapshot))
    settle_s, (final, history) = best_of(args.repeat, lambda: settle(snapshot))
    result = {
        "nodes": len(snapshot.nodes),
        "gpus": sum(len(n.gpus) for n in snapshot.nodes),
        "projects": len(snapshot.policy.projects),
        "jobs": len(snapshot.jobs),
        "settle_s": round(settle_s, 6),
        "first_cycle_s": round(first_cycle_s, 6),
        "running_after": sum(j.running for j in final.jobs),
        **settle_summary(history),
    }
    if args.profile_dir:
        result["hotspots"] = profile_into(args, "kai-fill", lambda: settle(snapshot))
    return result


def scaling_sizes(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(nodes, jobs), both doubling from `--scale-nodes` x (`--scale-jobs-per-node` each)."""
    return [
        (args.scale_nodes << i, (args.scale_nodes << i) * args.scale_jobs_per_node)
        for i in range(args.scale_steps)
    ]


def growth_exponent(sizes: list[float], seconds: list[float]) -> float | None:
    """Least-squares slope of log(seconds) over log(size): 1 is linear, 2 quadratic."""
    if len(sizes) < 2:
        return None
    xs, ys = [math.log(x) for x in sizes], [math.log(y) for y in seconds]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread


def scaling_section(args: argparse.Namespace) -> dict[str, Any]:
    """One cycle of `generate`'s state (the same mix as the cycle section) at each size."""
    rows: list[dict[str, Any]] = []
    snapshot = None
    for nodes, jobs in scaling_sizes(args):
        sized = argparse.Namespace(**{**vars(args), "nodes": nodes, "workloads": jobs})
        if args.scale_queues == "grow":
            sized.departments = max(1, round(args.departments * nodes / args.nodes))
            sized.projects = max(1, round(args.projects * nodes / args.nodes))
        start = time.perf_counter()
        generated = generate(sized)
        generate_s = time.perf_counter() - start
        snapshot = generated.snapshot
        text = json.dumps(snapshot_to_dict(snapshot), separators=(",", ":"))
        load, cycle = alternating_best(
            args.scale_repeat, partial(load_state, text), partial(schedule, snapshot)
        )
        del text
        cycle_s, cycle_cpu_s, load_s = cycle.wall, cycle.cpu, load.wall
        counts = count_decisions(cycle.result)
        calls = function_calls(partial(schedule, snapshot))
        rows.append(
            {
                "nodes": nodes,
                "gpus": generated.summary["gpus"],
                "departments": sized.departments,
                "projects": sized.projects,
                "jobs": jobs,
                "running": generated.summary["running"],
                "generate_s": round(generate_s, 3),
                "cycle_s": round(cycle_s, 6),
                "cycle_cpu_s": round(cycle_cpu_s, 6),
                "calls": calls,
                "load_s": round(load_s, 6),
                "cycle_over_load": paired_ratio(load, cycle)[0],
                "us_per_job": round(cycle_s / jobs * 1e6, 2),
                **{k: counts[k] for k in ("binds", "evictions", "mig_changes", "pending_after")},
            }
        )
    sizes = [r["jobs"] for r in rows]
    exponent = growth_exponent(sizes, [r["cycle_s"] for r in rows])
    exponent_cpu = growth_exponent(sizes, [r["cycle_cpu_s"] for r in rows])
    exponent_load = growth_exponent(sizes, [r["load_s"] for r in rows])
    exponent_calls = growth_exponent(sizes, [r["calls"] for r in rows])
    result: dict[str, Any] = {
        "queues": args.scale_queues,
        "rows": rows,
        "step_exponents": [
            round(growth_exponent([a["jobs"], b["jobs"]], [a["cycle_s"], b["cycle_s"]]), 3)
            for a, b in pairwise(rows)
        ],
        "growth_exponent": None if exponent is None else round(exponent, 3),
        "growth_exponent_cpu": None if exponent_cpu is None else round(exponent_cpu, 3),
        "growth_exponent_load": None if exponent_load is None else round(exponent_load, 3),
        "growth_exponent_calls": None if exponent_calls is None else round(exponent_calls, 3),
        "goal": {
            "max_exponent": GOAL_EXPONENT,
            "met": exponent is not None and exponent <= GOAL_EXPONENT,
        },
    }
    if args.profile_dir and snapshot is not None:
        result["hotspots"] = profile_into(args, "scaling", partial(schedule, snapshot))
    return result


def compile_scale_module() -> Any:
    """benchmarks/compile_scale.py, whose generator writes the benchmark repo."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import compile_scale

    return compile_scale


def repo_params(args: argparse.Namespace) -> argparse.Namespace:
    """compile_scale's generator options for the repo section's repo."""
    return argparse.Namespace(
        seed=args.seed,
        departments=args.repo_departments,
        projects=args.repo_projects,
        workloads=args.repo_workloads,
    )


def repo_section(args: argparse.Namespace) -> dict[str, Any]:
    """`simulate` of compile_scale's repo: every workload arrives on the empty cluster."""
    from gitops_sched.sim.run import simulate

    compile_scale = compile_scale_module()
    with tempfile.TemporaryDirectory(prefix="schedule-scale-repo-") as tmp:
        compile_scale.write_repo(compile_scale.generate(repo_params(args)), Path(tmp))
        validate_s, repo = best_of(args.repeat, lambda: compile_scale.validate(Path(tmp)))
    simulate_s, cpu_s, sim = timed_runs(args.repo_repeat, lambda: simulate(repo))
    # settle's last cycle changes nothing and logs nothing: it settled if one more cycle
    # over the final state changes nothing too
    converged = not schedule(sim.snapshot).changed
    logged = Counter((entry.cycle, entry.action, entry.reason) for entry in sim.log)
    busy = max((cycle for cycle, _, _ in logged), default=0)
    per_cycle = []
    for cycle in range(1, busy + 1):
        evictions = {r: n for (c, a, r), n in logged.items() if c == cycle and a == "evict"}
        per_cycle.append(
            {
                "binds": logged[cycle, "bind", ""],
                "evictions": dict(sorted(evictions.items())),
                "mig_changes": logged[cycle, "mig-create", ""] + logged[cycle, "mig-destroy", ""],
            }
        )
    states = Counter(state.status for state in sim.workloads)
    ratio = simulate_s / validate_s
    result: dict[str, Any] = {
        "departments": len(repo.departments),
        "projects": len(repo.projects),
        "workloads": len(repo.workloads),
        "nodes": len(sim.snapshot.nodes),
        "gpus": sum(len(n.gpus) for n in sim.snapshot.nodes),
        "validate_s": round(validate_s, 4),
        "settle_s": round(simulate_s, 4),
        "settle_cpu_s": round(cpu_s, 4),
        "ratio_settle_over_validate": round(ratio, 3),
        "cycles": busy + converged,
        "converged": converged,
        "workloads_by_status": dict(sorted(states.items())),
        "per_cycle": per_cycle,
        "goal": {"max_ratio": GOAL_SETTLE_OVER_VALIDATE, "met": ratio <= GOAL_SETTLE_OVER_VALIDATE},
    }
    if args.profile_dir:
        result["hotspots"] = profile_into(args, "repo", lambda: simulate(repo))
    return result


# -- profiles ------------------------------------------------------------------------------


def profile(path: str, top: int, fn: Callable[[], Any]) -> dict[str, list[dict[str, Any]]]:
    """cProfile `fn` once into `path`; the `top` functions by cumulative and by self time."""
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    profiler.dump_stats(path)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

    def rows(column: int) -> list[dict[str, Any]]:
        ranked = sorted(stats.items(), key=lambda item: -item[1][column])[:top]
        return [
            {
                "function": f"{file.removeprefix(root)}:{line}({name})",
                "calls": calls,
                "self_s": round(self_s, 4),
                "cumulative_s": round(cumulative_s, 4),
            }
            for (file, line, name), (_, calls, self_s, cumulative_s, _) in ranked
        ]

    return {"by_cumulative": rows(3), "by_self": rows(2)}


def profile_into(args: argparse.Namespace, name: str, fn: Callable[[], Any]) -> dict[str, Any]:
    os.makedirs(args.profile_dir, exist_ok=True)
    path = os.path.join(args.profile_dir, f"{name}.prof")
    return {"file": path, **profile(path, args.top, fn)}


# -- command line --------------------------------------------------------------------------

SECTIONS = ("cycle", "kai-fill", "scaling", "repo")
# integer options: name -> (default, help)
OPTIONS: dict[str, tuple[int, str]] = {
    "seed": (1, "seed of every generator (random.Random only)"),
    "gpus_per_node": (8, "GPUs per generated node"),
    "repeat": (3, "best of this many runs"),
    "scale_repeat": (5, "best of this many cycles at each size of the scaling table"),
    "repo_repeat": (1, "best of this many settles of the repo (the slow one)"),
    "top": (15, "hotspots listed per profile"),
    "kai_projects": (4, "projects sharing the KAI fill's jobs"),
    "scale_nodes": (250, "nodes at the scaling table's first size"),
    "scale_jobs_per_node": (10, "jobs per node at every size of the scaling table"),
}
# sizes: name -> (full run, --quick); given on the command line, they win over both
SIZES: dict[str, tuple[int, int]] = {
    "nodes": (1000, 250),
    "workloads": (20_000, 5_000),
    "departments": (50, 12),
    "projects": (500, 125),
    "kai_nodes": (500, 125),
    "kai_jobs": (4_000, 1_000),
    "scale_steps": (5, 3),
    "repo_departments": (50, 10),
    "repo_projects": (1_000, 100),
    "repo_workloads": (10_000, 1_000),
}


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--quick", action="store_true", help="the smaller sizes of SIZES")
    parser.add_argument("--running-fraction", type=float, default=0.5)
    parser.add_argument("--no-phases", action="store_true", help="skip the per-action run")
    parser.add_argument(
        "--scale-queues",
        choices=("fixed", "grow"),
        default="fixed",
        help="departments and projects of the scaling table: as given, or per node",
    )
    parser.add_argument("--profile", metavar="FILE", help="write cProfile stats of one cycle")
    parser.add_argument("--profile-dir", metavar="DIR", help="cProfile each section into DIR")
    for name, (default, text) in OPTIONS.items():
        parser.add_argument(option(name), type=int, default=default, help=text)
    for name, (full, quick) in SIZES.items():
        parser.add_argument(option(name), type=int, help=f"default {full} ({quick} with --quick)")
    args = parser.parse_args(argv)
    for name, (full, quick) in SIZES.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.repeat < 1 or args.repo_repeat < 1:
        parser.error("--repeat and --repo-repeat must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    hidden = ("profile", "profile_dir", "top", "no_phases")
    result: dict[str, Any] = {
        "benchmark": "schedule_scale",
        "params": {k: v for k, v in vars(args).items() if k not in hidden},
    }
    if "cycle" in args.sections:
        result |= cycle_section(args)
    if "kai-fill" in args.sections:
        result["kai_fill"] = kai_fill_section(args)
    if "scaling" in args.sections:
        result["scaling"] = scaling_section(args)
    if "repo" in args.sections:
        result["repo_settle"] = repo_section(args)
    result["machine"] = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
