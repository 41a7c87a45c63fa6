"""The engine on a live cluster's terms: jobs by namespace/name, gangs in flight, elastic
pods, stale gangs, pods still releasing their GPUs, pipelined binds, static MIG."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.engine import apply_decisions, schedule, settle
from gitops_sched.engine.types import (
    GPU_EPSILON,
    EvictReason,
    Gpu,
    Job,
    Node,
    PodPlacement,
    ReleasingPod,
    Snapshot,
)
from gitops_sched.hardware.mig import MigInstance
from tests.conftest import examples
from tests.engine_builders import allocated, job, nodes, policy, project, snapshot
from tests.strategies import snapshots

ONE_NODE = nodes("n", 1, gpus=4)


def running(j: Job, *pods: PodPlacement, at: float = 0.0) -> Job:
    placement = tuple(replace(p, index=i) for i, p in enumerate(pods))
    return replace(j, placement=placement, started_at=at)


def on(node: str, *gpus: int) -> PodPlacement:
    return PodPlacement(node, gpus)


# -- identity ---------------------------------------------------------------------------------


def test_jobs_with_the_same_name_in_two_namespaces_are_two_jobs():
    pol = policy(project("a", 2), project("b", 2))
    work = [
        job("train", "a", 2, namespace="project-a"),
        job("train", "b", 2, namespace="project-b"),
    ]
    decisions = schedule(snapshot(pol, ONE_NODE, work))
    assert sorted(b.job for b in decisions.binds) == ["project-a/train", "project-b/train"]
    gpus = [g for b in decisions.binds for p in b.pods for g in p.gpus]
    assert sorted(gpus) == [0, 1, 2, 3]


# -- gangs in flight and elastic jobs ---------------------------------------------------------


def test_a_partly_running_gang_gets_its_missing_pods():
    pol = policy(project("a", 4))
    gang = running(job("g", "a", 1, pods=4), on("n-0", 0), on("n-0", 1))
    decisions = schedule(snapshot(pol, ONE_NODE, [gang]))
    (bind,) = decisions.binds
    assert [p.index for p in bind.pods] == [2, 3]
    assert sorted(g for p in bind.pods for g in p.gpus) == [2, 3]
    assert not decisions.evictions


def test_a_partly_running_gang_reclaims_for_its_missing_pods():
    pol = policy(project("a", 3), project("b", 1))
    gang = running(job("g", "a", 1, pods=3), on("n-0", 0), on("n-0", 1))
    hog = [running(job(f"b-{i}", "b", 1), on("n-0", 2 + i)) for i in range(2)]
    decisions = schedule(snapshot(pol, ONE_NODE, [gang, *hog]))
    assert [(e.job, e.reason) for e in decisions.evictions] == [("b-1", EvictReason.RECLAIM)]
    assert [p.index for b in decisions.binds if b.job == "g" for p in b.pods] == [2]


def test_stale_gang_is_evicted_after_grace():
    pol = replace(policy(project("a", 2), project("b", 2)), stale_gang_grace_s=60.0)
    full = [running(job(f"b-{i}", "b", 1, priority=200), on("n-0", 2 + i)) for i in range(2)]
    gang = replace(running(job("g", "a", 1, pods=3), on("n-0", 0), on("n-0", 1)), short_since=0.0)
    before = schedule(snapshot(pol, ONE_NODE, [gang, *full], now=59.0))
    assert not before.evictions  # still inside the grace period: waits for its third pod
    after = schedule(snapshot(pol, ONE_NODE, [gang, *full], now=60.0))
    (evict,) = after.evictions
    assert (evict.job, evict.reason, len(evict.pods)) == ("g", EvictReason.STALE_GANG, 2)


def test_a_gang_left_short_by_its_node_keeps_the_time_it_became_short():
    pol = policy(project("a", 2))
    gang = running(job("g", "a", 1, pods=2), on("n-0", 0), on("n-1", 0))
    state = snapshot(pol, nodes("n", 2, gpus=1), [gang])
    down = replace(state, nodes=(state.nodes[0], replace(state.nodes[1], schedulable=False)))
    short = replace(down, jobs=(replace(gang, placement=gang.placement[:1]),), now=10.0)
    nothing = schedule(short)
    later = apply_decisions(short, nothing)
    assert later.jobs[0].short_since == 10.0
    stale = schedule(replace(later, now=70.0))
    assert [e.reason for e in stale.evictions] == [EvictReason.STALE_GANG]


def test_elastic_job_runs_as_many_pods_as_fit_at_or_above_min_available():
    pol = policy(project("a", 4))
    elastic = job("e", "a", 1, pods=6, min_available=2)
    final, _ = settle(snapshot(pol, ONE_NODE, [elastic]))
    assert [p.index for p in final.jobs[0].placement] == [0, 1, 2, 3]


def test_elastic_extra_pods_are_reclaimed_one_at_a_time_highest_index_first():
    pol = policy(project("a", 2), project("b", 2))
    elastic = running(job("e", "a", 1, pods=4, min_available=2), *(on("n-0", g) for g in range(4)))
    final, history = settle(snapshot(pol, ONE_NODE, [elastic, job("b-0", "b", 1)]))
    evictions = [e for d in history for e in d.evictions]
    assert [(e.job, [p.index for p in e.pods]) for e in evictions] == [("e", [3])]
    assert [p.index for p in final.jobs[0].placement] == [0, 1, 2]


def test_a_gang_whose_min_does_not_fit_starts_no_pod():
    pol = policy(project("a", 8))
    decisions = schedule(snapshot(pol, ONE_NODE, [job("g", "a", 1, pods=6, min_available=5)]))
    assert not decisions.binds
    assert "5 pods" in dict(decisions.pending_reasons)["g"]


# -- releasing pods and pipelining ------------------------------------------------------------


def test_free_gpus_are_used_before_releasing_ones():
    pol = policy(project("a", 4))
    releasing = (ReleasingPod("old", "a", on("n-0", 0)),)
    state = replace(snapshot(pol, ONE_NODE, [job("x", "a", 1)]), releasing=releasing)
    (bind,) = schedule(state).binds
    assert bind.pods[0].gpus != (0,) and not bind.pipelined


def test_a_job_is_pipelined_onto_gpus_being_released():
    pol = policy(project("a", 4))
    others = [running(job(f"r-{i}", "a", 1, preemptible=False), on("n-0", i)) for i in (1, 2, 3)]
    releasing = (ReleasingPod("old", "a", on("n-0", 0)),)
    state = replace(snapshot(pol, ONE_NODE, [*others, job("x", "a", 1)]), releasing=releasing)
    (bind,) = schedule(state).binds
    assert (bind.job, bind.pods[0].gpus, bind.waits_for) == ("x", (0,), ("old",))


def test_a_new_pod_waits_for_its_own_jobs_old_pod_still_releasing():
    pol = policy(project("a", 4))
    others = [running(job(f"r-{i}", "a", 1, preemptible=False), on("n-0", i)) for i in (1, 2, 3)]
    releasing = (ReleasingPod("x", "a", on("n-0", 0)),)  # x's evicted pod, terminating
    state = replace(snapshot(pol, ONE_NODE, [*others, job("x", "a", 1)]), releasing=releasing)
    (bind,) = schedule(state).binds
    assert (bind.job, bind.pods[0].gpus, bind.waits_for) == ("x", (0,), ("x",))


def test_a_bind_after_reclaim_waits_for_its_victims():
    pol = policy(project("a", 2), project("b", 2))
    hog = [running(job(f"b-{i}", "b", 1), on("n-0", i)) for i in range(4)]
    decisions = schedule(snapshot(pol, ONE_NODE, [*hog, job("a-0", "a", 2)]))
    (bind,) = decisions.binds
    victims = {e.job for e in decisions.evictions}
    assert set(bind.waits_for) == victims and len(victims) == 2


def test_a_mig_bind_waits_for_the_instance_it_creates():
    a100 = nodes("m", 1, gpus=1, model="A100-80GB", memory_mib=81920, mig=True)
    decisions = schedule(snapshot(policy(project("a", 1)), a100, [job("x", "a", "1g.10gb")]))
    (bind,) = decisions.binds
    (create,) = decisions.mig_changes
    assert bind.waits_for_mig == (create,) and create.create


# -- static MIG -------------------------------------------------------------------------------


def static_a100(instances: tuple[MigInstance, ...]) -> tuple[Node, ...]:
    gpu = Gpu(0, 81920, mig_enabled=True, mig_instances=instances, mig_static=True)
    return (Node("s-0", "s", "A100-80GB", (gpu,)),)


def test_static_mig_uses_declared_instances_and_never_creates_one():
    layout = (MigInstance("3g.40gb", 0), MigInstance("3g.40gb", 4))
    pol = policy(project("a", 1))
    work = [job("fits", "a", "3g.40gb"), job("other", "a", "1g.10gb")]
    final, history = settle(snapshot(pol, static_a100(layout), work))
    assert not any(d.mig_changes for d in history)
    placed = {j.name: j.placement for j in final.jobs}
    assert placed["fits"][0].mig in layout and not placed["other"]


def test_static_mig_never_destroys_an_idle_instance():
    layout = (MigInstance("1g.10gb", 0),)
    pol = policy(project("a", 1))
    final, history = settle(snapshot(pol, static_a100(layout), [job("big", "a", "3g.40gb")]))
    assert not any(d.mig_changes for d in history)
    assert final.nodes[0].gpus[0].mig_instances == layout


# -- properties -------------------------------------------------------------------------------


@st.composite
def live_snapshots(draw: st.DrawFn) -> Snapshot:
    """A settled cluster where some running pods were told to stop and are still releasing,
    some GPUs have a static MIG layout, and more work has arrived."""
    first = draw(snapshots(max_jobs=15))
    settled, _ = settle(first)
    jobs, releasing = [], []
    for j in settled.jobs:
        if j.running and draw(st.integers(0, 3)) == 0:
            releasing += [ReleasingPod(j.key, j.project, pod) for pod in j.placement]
            j = replace(j, placement=(), started_at=None)
        jobs.append(j)
    nodes = tuple(
        replace(n, gpus=tuple(replace(g, mig_static=g.mig_enabled) for g in n.gpus))
        if draw(st.booleans())
        else n
        for n in settled.nodes
    )
    return replace(settled, nodes=nodes, jobs=tuple(jobs), releasing=tuple(releasing))


@settings(max_examples=examples(60), deadline=None)
@given(live_snapshots())
def test_no_gpu_is_double_booked_with_releasing_pods_and_static_layouts_never_change(
    state: Snapshot,
) -> None:
    decisions = schedule(state)
    evicted = {(e.job, p) for e in decisions.evictions for p in e.pods}
    use: dict[tuple[str, int], list[tuple[str, float, bool]]] = {}

    def hold(holder: str, pod: PodPlacement, leaving: bool) -> None:
        share = pod.fraction if (pod.fraction or pod.mig) else 1.0
        for g in pod.gpus:
            use.setdefault((pod.node, g), []).append((holder, share, leaving))

    for j in state.jobs:
        for pod in j.placement:
            hold(j.key, pod, (j.key, pod) in evicted)
    for r in state.releasing:
        hold(r.job, r.pod, True)
    for bind in decisions.binds:
        for pod in bind.pods:
            for g in pod.gpus:
                holders = use.get((pod.node, g), [])
                staying = [h for h in holders if not h[2]]
                leaving = {h[0] for h in holders if h[2]}  # its own old pods included
                if pod.mig is None and pod.fraction == 0:
                    assert not staying, (bind, holders)  # a whole GPU is nobody else's
                else:
                    assert sum(h[1] for h in staying) + (pod.fraction or 0) <= 1 + GPU_EPSILON
                if pod.mig is None:
                    assert leaving <= set(bind.waits_for), (bind, holders)
    static = {(n.name, g.index) for n in state.nodes for g in n.gpus if g.mig_static}
    assert not [c for c in decisions.mig_changes if (c.node, c.gpu) in static]


@settings(max_examples=examples(40), deadline=None)
@given(snapshots(max_jobs=15))
def test_settled_elastic_and_gang_jobs_run_at_least_min_available_or_nothing(
    first: Snapshot,
) -> None:
    final, history = settle(first)
    assert not history[-1].changed
    for j in final.jobs:
        assert not j.running or len(j.placement) >= j.min_available or j.short_since is not None
        assert len({p.index for p in j.placement}) == len(j.placement) <= j.pods
    for status in history[-1].projects:
        assert allocated(history[-1], status.name) >= 0
