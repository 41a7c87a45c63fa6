"""Properties of the scheduling engine on random clusters and workloads (hypothesis).

Every test settles a random snapshot (see `tests/strategies.py`) and checks what a correct
scheduler must never do, whatever the cluster: over-commit a GPU, break a MIG layout, evict
non-preemptible work, let interactive/inference work past the deserved quota, exceed capacity
or hard limits, depend on input order, or keep changing its mind once settled.
"""

from __future__ import annotations

import gc
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gitops_sched.engine import apply_decisions, schedule, settle
from gitops_sched.engine.actions import reclaim, victims
from gitops_sched.engine.apply import STOPPING
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
from gitops_sched.hardware.mig import compute_share, is_valid_layout
from tests.conftest import examples
from tests.strategies import (
    guaranteed_quota_snapshots,
    job_lists,
    jobs_of,
    node_lists,
    policies,
    pool_quota_snapshots,
    snapshots,
    two_waves,
)

MAX_CYCLES = 50
SHARED = (RequestKind.FRACTION, RequestKind.MEMORY)  # requests placed as a share of one GPU
Step = tuple[Snapshot, Decisions]  # a snapshot and the decisions its cycle took


# -- running the engine -----------------------------------------------------------------------


def settle_steps(snapshot: Snapshot) -> tuple[list[Step], Snapshot]:
    """Settle, and replay it: every cycle's input snapshot with its decisions, and the result."""
    settled, history = settle(snapshot, max_cycles=MAX_CYCLES)
    steps: list[Step] = []
    for decisions in history:
        steps.append((snapshot, decisions))
        if decisions.changed:
            snapshot = apply_decisions(snapshot, decisions)
    assert snapshot == settled
    return steps, settled


def submit(snapshot: Snapshot, jobs: tuple[Job, ...], advance: float = 0.0) -> Snapshot:
    return replace(snapshot, jobs=snapshot.jobs + jobs, now=snapshot.now + advance)


def two_settles(snapshot: Snapshot, more: tuple[Job, ...]) -> tuple[list[Step], list[Snapshot]]:
    """Settle, submit `more` an hour later, settle again: all cycles, and every snapshot seen."""
    first, settled = settle_steps(snapshot)
    second, final = settle_steps(submit(settled, more, advance=3600.0))
    steps = first + second
    return steps, [s for s, _ in steps] + [final]


# -- reading a snapshot -----------------------------------------------------------------------


def nodes_by_name(snapshot: Snapshot) -> dict[str, Node]:
    return {node.name: node for node in snapshot.nodes}


def pod_gpus(job: Job, pod: PodPlacement, node: Node) -> float:
    """What one placed pod counts for: whole GPUs, its fraction, or its MIG compute share."""
    if job.request.kind is RequestKind.WHOLE:
        return float(len(pod.gpus))
    if job.request.kind is RequestKind.MIG:
        return compute_share(node.gpu_model, pod.mig.profile)
    return pod.fraction


def allocated(
    snapshot: Snapshot, include: Callable[[Job], bool] = lambda job: True
) -> dict[str, float]:
    """GPUs held per project and department by running jobs that `include` accepts."""
    nodes = nodes_by_name(snapshot)
    parent = {p.name: p.parent for p in snapshot.policy.projects}
    totals: dict[str, float] = defaultdict(float)
    for job in snapshot.jobs:
        if not include(job):
            continue
        amount = sum(pod_gpus(job, pod, nodes[pod.node]) for pod in job.placement)
        totals[job.project] += amount
        totals[parent[job.project]] += amount
    return totals


def pods_per_gpu(snapshot: Snapshot) -> dict[tuple[str, int], list[tuple[Job, PodPlacement]]]:
    users: dict[tuple[str, int], list[tuple[Job, PodPlacement]]] = defaultdict(list)
    for job in snapshot.jobs:
        for pod in job.placement:
            for index in pod.gpus:
                users[pod.node, index].append((job, pod))
    return users


# -- what must hold in every snapshot ---------------------------------------------------------


def assert_no_gpu_overcommitted(snapshot: Snapshot) -> None:
    """A whole GPU holds one pod and nothing else; fractions on a GPU add up to at most 1."""
    for (node, index), users in pods_per_gpu(snapshot).items():
        whole = [job.name for job, pod in users if job.request.kind is RequestKind.WHOLE]
        where = f"{node} GPU {index}: {[job.name for job, _ in users]}"
        assert len(whole) <= 1, f"whole GPU shared by several pods on {where}"
        assert not whole or len(users) == 1, f"whole GPU shared with others on {where}"
        shared = sum(pod.fraction for job, pod in users if job.request.kind in SHARED)
        assert shared <= 1 + GPU_EPSILON, f"fractions sum to {shared} on {where}"


def assert_mig_consistent(snapshot: Snapshot) -> None:
    """MIG pods sit on existing instances of valid layouts on MIG GPUs, one pod per instance."""
    for node in snapshot.nodes:
        for gpu in node.gpus:
            assert is_valid_layout(node.gpu_model, gpu.mig_instances), (node.name, gpu)
            assert gpu.mig_enabled or not gpu.mig_instances, (node.name, gpu)
    nodes = nodes_by_name(snapshot)
    for (node, index), users in pods_per_gpu(snapshot).items():
        gpu = nodes[node].gpus[index]
        instances = [pod.mig for job, pod in users if job.request.kind is RequestKind.MIG]
        where = f"{node} GPU {index}"
        assert len(instances) == len(set(instances)), f"MIG instance shared on {where}: {users}"
        for instance in instances:
            assert gpu.mig_enabled, f"MIG pod on non-MIG {where}"
            assert instance in gpu.mig_instances, f"{instance} does not exist on {where}"


def assert_pods_match_requests(snapshot: Snapshot) -> None:
    """Each pod has the shape of its request, on its allowed node groups; no whole or shared
    pod on a MIG-enabled GPU; a running job holds between min_available and pods pods."""
    nodes = nodes_by_name(snapshot)
    for job in snapshot.jobs:
        if not job.running:
            continue
        request = job.request
        assert job.min_available <= len(job.placement) <= job.pods, job
        for pod in job.placement:
            node = nodes[pod.node]
            assert not job.node_groups or node.node_group in job.node_groups, (job, node.name)
            assert len(set(pod.gpus)) == len(pod.gpus), job
            assert all(0 <= i < len(node.gpus) for i in pod.gpus), job
            gpus = [node.gpus[i] for i in pod.gpus]
            if request.kind is RequestKind.MIG:
                assert len(gpus) == 1 and pod.mig is not None, job
                assert pod.mig.profile == request.mig_profile, job
                continue
            assert pod.mig is None and not any(g.mig_enabled for g in gpus), (job, pod)
            if request.kind is RequestKind.WHOLE:
                assert len(gpus) == request.count and not pod.fraction, (job, pod)
            elif request.kind is RequestKind.FRACTION:
                assert len(gpus) == 1 and math.isclose(pod.fraction, request.fraction), job
            else:
                needed = request.memory_mib / gpus[0].memory_mib
                assert len(gpus) == 1 and needed - GPU_EPSILON <= pod.fraction <= 1, (job, pod)


def assert_within_capacity_and_limits(snapshot: Snapshot) -> None:
    """Allocated GPUs fit the cluster; hard limits and over-quota denial are respected."""
    held = allocated(snapshot)
    total = sum(held[p.name] for p in snapshot.policy.projects)
    capacity = sum(len(node.gpus) for node in snapshot.nodes)
    assert total <= capacity + GPU_EPSILON, (total, capacity)
    for queue in (*snapshot.policy.departments, *snapshot.policy.projects):
        if queue.limit is not None:
            assert held[queue.name] <= queue.limit + GPU_EPSILON, (queue, held[queue.name])
    for project in snapshot.policy.projects:
        if not project.over_quota_allowed:
            assert held[project.name] <= project.deserved + GPU_EPSILON, (project, held)


def assert_fixed_work_within_deserved(snapshot: Snapshot) -> None:
    """Non-preemptible (interactive, inference, opted-out train) work fits the deserved quota."""
    fixed = allocated(snapshot, include=lambda job: not job.preemptible)
    for project in snapshot.policy.projects:
        assert fixed[project.name] <= project.deserved + GPU_EPSILON, (project, fixed)


def assert_decisions_well_formed(before: Snapshot, decisions: Decisions) -> None:
    """Evictions hit running jobs (stops only interactive ones); binds hit jobs with pods
    not running (pending, gangs in flight, elastic) or just evicted ones; nobody is evicted
    or bound twice in one cycle."""
    jobs = {job.key: job for job in before.jobs}
    evicted = [e.job for e in decisions.evictions]
    bound = [b.job for b in decisions.binds]
    assert len(evicted) == len(set(evicted)), decisions.evictions
    assert len(bound) == len(set(bound)), bound
    for evict in decisions.evictions:
        assert jobs[evict.job].running, evict
        if evict.reason in STOPPING:
            assert jobs[evict.job].type == "interactive", evict
            assert evict.job not in bound, evict
    for name in bound:
        assert jobs[name].missing > 0 or name in evicted, name


# -- properties -------------------------------------------------------------------------------


@settings(max_examples=examples(60), deadline=None)
@given(two_waves())
def test_settling_never_overcommits_a_gpu(case: tuple[Snapshot, tuple[Job, ...]]) -> None:
    _, seen = two_settles(*case)
    for snapshot in seen:
        assert_no_gpu_overcommitted(snapshot)


@settings(max_examples=examples(60), deadline=None)
@given(two_waves())
def test_mig_pods_use_their_own_existing_instance_of_a_valid_layout(
    case: tuple[Snapshot, tuple[Job, ...]],
) -> None:
    _, seen = two_settles(*case)
    for snapshot in seen:
        assert_mig_consistent(snapshot)


@settings(max_examples=examples(60), deadline=None)
@given(two_waves())
def test_pods_match_their_request_gang_size_and_node_groups(
    case: tuple[Snapshot, tuple[Job, ...]],
) -> None:
    _, seen = two_settles(*case)
    for snapshot in seen:
        assert_pods_match_requests(snapshot)


@settings(max_examples=examples(60), deadline=None)
@given(two_waves())
def test_allocation_stays_within_capacity_hard_limits_and_over_quota_denial(
    case: tuple[Snapshot, tuple[Job, ...]],
) -> None:
    _, seen = two_settles(*case)
    for snapshot in seen:
        assert_within_capacity_and_limits(snapshot)


@settings(max_examples=examples(60), deadline=None)
@given(two_waves())
def test_non_preemptible_work_never_exceeds_the_deserved_quota(
    case: tuple[Snapshot, tuple[Job, ...]],
) -> None:
    _, seen = two_settles(*case)
    for snapshot in seen:
        assert_fixed_work_within_deserved(snapshot)


@settings(max_examples=examples(60), deadline=None)
@given(two_waves())
def test_non_preemptible_work_is_only_stopped_for_time_limits_or_idleness(
    case: tuple[Snapshot, tuple[Job, ...]],
) -> None:
    steps, _ = two_settles(*case)
    for before, decisions in steps:
        jobs = {job.name: job for job in before.jobs}
        for evict in decisions.evictions:
            assert jobs[evict.job].preemptible or evict.reason in STOPPING, evict


@settings(max_examples=examples(60), deadline=None)
@given(two_waves())
def test_decisions_evict_running_jobs_and_bind_pending_ones(
    case: tuple[Snapshot, tuple[Job, ...]],
) -> None:
    steps, _ = two_settles(*case)
    for before, decisions in steps:
        assert_decisions_well_formed(before, decisions)


@settings(max_examples=examples(100), deadline=None)
@given(guaranteed_quota_snapshots())
def test_every_project_gets_its_deserved_quota_when_the_cluster_fits_all_quotas(
    snapshot: Snapshot,
) -> None:
    _, settled = settle_steps(snapshot)
    held = allocated(settled)
    for project in snapshot.policy.projects:
        demand = sum(job.pods for job in snapshot.jobs if job.project == project.name)
        owed = min(math.floor(project.deserved + GPU_EPSILON), demand)
        assert held[project.name] >= owed, (project.name, held[project.name], owed)


@settings(max_examples=examples(60), deadline=None)
@given(snapshots())
def test_schedule_is_deterministic(snapshot: Snapshot) -> None:
    assert schedule(snapshot) == schedule(snapshot)


@settings(max_examples=examples(40), deadline=None)
@given(st.one_of(snapshots(), pool_quota_snapshots()))
def test_a_settle_leaves_nothing_for_the_garbage_collector(snapshot: Snapshot) -> None:
    # settle pauses the collector: an object of the engine's that only the collector
    # frees (one in a reference cycle, such as a session and its own memo or pools) is
    # kept until the settle ends, each cycle's session on top of the last
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds stays in gc.garbage
    try:
        settle(snapshot)
        gc.collect()
        kept = sorted({type(o).__qualname__ for o in gc.garbage if _engine_object(o)})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert kept == []


def _engine_object(o: object) -> bool:
    return type(o).__module__.startswith("gitops_sched.")


@settings(max_examples=examples(60), deadline=None)
@given(two_waves())
def test_reclaim_skipping_departments_that_may_lose_nothing_decides_the_same(
    case: tuple[Snapshot, tuple[Job, ...]],
) -> None:
    # reclaim leaves out of its scans the projects of departments that may lose nothing
    # (a speed-up); scanning every project and refusing them one by one decides the same
    first, later = case
    settled, _ = settle(first)
    snapshot = replace(settled, jobs=(*settled.jobs, *later))
    skipping = schedule(snapshot)
    every_department = mock.patch.object(
        reclaim._VictimQueues, "_department_may_give", lambda self, department: (True, True)
    )
    with every_department:
        assert schedule(snapshot) == skipping


@st.composite
def crowded_by_priority(draw: st.DrawFn) -> Snapshot:
    """A settled cluster of whole-GPU work of a few projects, then more work of them at
    every priority: where preempt gets busy."""
    policy = draw(policies(max_departments=1, max_projects=3))
    nodes = draw(node_lists(max_nodes=3))
    projects = [p.name for p in policy.projects]
    whole = (RequestKind.WHOLE,)
    first = draw(job_lists(projects, nodes, min_size=5, kinds=whole))
    settled, _ = settle(Snapshot(policy, nodes, first))
    later = draw(job_lists(projects, nodes, first=100, min_size=3, max_size=12, kinds=whole))
    return replace(settled, jobs=(*settled.jobs, *later))


@settings(max_examples=examples(60), deadline=None)
@given(crowded_by_priority())
def test_preempt_telling_its_ceiling_before_placing_decides_the_same(snapshot: Snapshot) -> None:
    # preempt does not place whole GPUs that would take the project past its ceiling (a
    # speed-up); placing them and undoing them when accept refuses binds and evicts the same
    told = schedule(snapshot)
    placing_everything = mock.patch.object(victims, "_surely_refused", lambda *_: False)
    with placing_everything:
        placed = schedule(snapshot)
    assert (placed.binds, placed.evictions) == (told.binds, told.evictions)


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_schedule_ignores_the_order_of_jobs_and_nodes(data: st.DataObject) -> None:
    snapshot = data.draw(snapshots())
    shuffled = replace(
        snapshot,
        jobs=tuple(data.draw(st.permutations(snapshot.jobs))),
        nodes=tuple(data.draw(st.permutations(snapshot.nodes))),
    )
    assert outcome(schedule(shuffled)) == outcome(schedule(snapshot))


def outcome(decisions: Decisions) -> tuple[set, set, set, dict]:
    """What a cycle does, regardless of the order it lists it in."""
    return (
        set(decisions.binds),
        set(decisions.evictions),
        set(decisions.mig_changes),
        dict(decisions.pending_reasons),
    )


@settings(max_examples=examples(60), deadline=None)
@given(two_waves())
def test_settle_reaches_a_fixed_point(case: tuple[Snapshot, tuple[Job, ...]]) -> None:
    snapshot, more = case
    settled = assert_settles(snapshot)
    assert_settles(submit(settled, more, advance=3600.0))


def assert_settles(snapshot: Snapshot) -> Snapshot:
    """Settling stops before MAX_CYCLES on a snapshot whose next cycle changes nothing."""
    steps, settled = settle_steps(snapshot)
    assert len(steps) < MAX_CYCLES, f"still changing after {len(steps)} cycles"
    assert not steps[-1][1].changed
    assert not schedule(settled).changed
    return settled


@settings(max_examples=examples(60), deadline=None)
@given(snapshots())
def test_settled_status_reports_the_placed_gpus_and_shares_within_demand(
    snapshot: Snapshot,
) -> None:
    steps, settled = settle_steps(snapshot)
    status = steps[-1][1]
    held = allocated(settled)
    capacity = sum(len(node.gpus) for node in settled.nodes)
    for queue in (*status.departments, *status.projects):
        assert math.isclose(queue.allocated, held[queue.name], abs_tol=1e-6), (queue, held)
        assert queue.fair_share <= queue.allocated + queue.queued + 1e-6, queue
    # quotas are never scaled down (KAI): oversubscribed deserved quotas may pass capacity
    deserved = sum(min(d.deserved, d.allocated + d.queued) for d in status.departments)
    assert sum(d.fair_share for d in status.departments) <= max(capacity, deserved) + 1e-6


def lone_pod_options(job: Job, nodes: tuple[Node, ...]) -> list[float]:
    """What the job's single pod would count for on each GPU of an empty cluster it fits."""
    request, options = job.request, []
    for node in nodes:
        if job.node_groups and node.node_group not in job.node_groups:
            continue
        plain = [gpu.memory_mib for gpu in node.gpus if not gpu.mig_enabled]
        has_mig = any(gpu.mig_enabled for gpu in node.gpus)
        if request.kind is RequestKind.WHOLE and len(plain) >= request.count:
            options.append(float(request.count))
        elif request.kind is RequestKind.FRACTION and plain:
            options.append(request.fraction)
        elif request.kind is RequestKind.MEMORY:
            options += [request.memory_mib / mib for mib in plain if mib >= request.memory_mib]
        elif request.kind is RequestKind.MIG and has_mig:
            options.append(compute_share(node.gpu_model, request.mig_profile))
    return options


def admissible(job: Job, amount: float, policy: Policy) -> bool:
    """The design's quota rules for a job alone in the cluster: non-preemptible work within the
    deserved quota, hard limits, no over quota where it is denied."""
    project = next(p for p in policy.projects if p.name == job.project)
    department = next(d for d in policy.departments if d.name == project.parent)
    for queue in (project, department):
        if not job.preemptible and amount > queue.deserved + GPU_EPSILON:
            return False
        if queue.limit is not None and amount > queue.limit + GPU_EPSILON:
            return False
    return project.over_quota_allowed or amount <= project.deserved + GPU_EPSILON


@st.composite
def lone_jobs(draw: st.DrawFn) -> Snapshot:
    """One single-pod job on an empty cluster."""
    policy, nodes = draw(policies()), draw(node_lists())
    job = draw(jobs_of("job-00", 0, [p.name for p in policy.projects], nodes))
    return Snapshot(policy, nodes, (replace(job, pods=1, min_available=1, idle_since=None),))


MEMORY_FITS_THE_QUOTA_ONLY_ON_THE_A100 = Snapshot(
    Policy((QueueSpec("dept-0", 0.5, 0.5),), (QueueSpec("proj-0", 0.5, 0.5, parent="dept-0"),)),
    (
        Node("node-0", "pool-0", "V100-SXM2-32GB", (Gpu(0, 32768),)),  # 24 GiB = 0.75 here
        Node("node-1", "pool-1", "A100-SXM4-80GB", (Gpu(0, 81920),)),  # and 0.3 here
    ),
    (
        Job(
            name="job-00",
            project="proj-0",
            type="interactive",
            priority=50,
            preemptible=False,
            request=GpuRequest(RequestKind.MEMORY, memory_mib=24576),
        ),
    ),
)


@settings(max_examples=examples(100), deadline=None)
@example(MEMORY_FITS_THE_QUOTA_ONLY_ON_THE_A100)
@given(lone_jobs())
def test_a_lone_job_on_an_empty_cluster_runs_where_some_gpu_fits_it_within_quota(
    snapshot: Snapshot,
) -> None:
    job = snapshot.jobs[0]
    steps, settled = settle_steps(snapshot)
    options = lone_pod_options(job, snapshot.nodes)
    expected = any(admissible(job, amount, snapshot.policy) for amount in options)
    assert settled.jobs[0].running == expected, (options, steps[-1][1].pending_reasons)


@settings(max_examples=examples(60), deadline=None)
@given(snapshots())
def test_a_job_changed_in_a_cycle_is_the_job_replace_makes(snapshot: Snapshot) -> None:
    # Job._with copies a job slot by slot (a speed-up of dataclasses.replace): every field,
    # the key and the pod counts must come out as replace makes them
    settled, _ = settle(snapshot)
    for job in settled.jobs:
        assert_same_job(job.with_node_groups(("g",)), replace(job, node_groups=("g",)))
        emptied = replace(job, placement=(), started_at=None, idle_since=None)
        assert_same_job(job.without_pods(job.placement), emptied)
        pods = (PodPlacement("n", (0,), index=job.pods),)
        started = job.started_at if job.running else 7.0
        placed = replace(job, placement=(*job.placement, *pods), started_at=started)
        assert_same_job(job.with_pods(pods, 7.0), placed)


def assert_same_job(made: Job, expected: Job) -> None:
    """Every slot, the derived ones (key, pod counts) too, which == leaves out."""
    for name in Job.__slots__:
        assert getattr(made, name) == getattr(expected, name), name
