"""KAI parity: the orders the engine serves and evicts in, evicting only what is needed,
moving victims that fit elsewhere, consolidation, and quota checked after victims leave.

Each scenario pins one rule of README "Scheduling" (KAI Scheduler's `proportion` plugin and
its allocate, reclaim, preempt and consolidation actions are the reference); the property at
the end checks on random clusters that no eviction of a cycle was unnecessary.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.engine import apply_decisions, schedule, settle
from gitops_sched.engine.types import (
    GPU_EPSILON,
    Decisions,
    EvictReason,
    GpuRequest,
    Job,
    PodPlacement,
    RequestKind,
    Snapshot,
)
from gitops_sched.hardware.mig import compute_share
from tests.conftest import examples
from tests.engine_builders import allocated, department, job, nodes, policy, project, snapshot
from tests.strategies import job_lists, node_lists, policies, workload_mixes

VICTIM_REASONS = (EvictReason.RECLAIM, EvictReason.PREEMPT, EvictReason.CONSOLIDATE)


# -- building and reading scenarios -----------------------------------------------------------


def on(node: str, *gpus: int, fraction: float = 0.0, index: int = 0) -> PodPlacement:
    return PodPlacement(node, gpus, fraction=fraction, index=index)


def running(name: str, proj: str, gpu, *pods: PodPlacement, started: float = 0.0, **kw) -> Job:
    """A job already placed on `pods`, started at `started`."""
    return job(name, proj, gpu, placement=pods, started_at=started, **kw)


def memory_job(name: str, proj: str, mib: int, *pods: PodPlacement, **kw) -> Job:
    """A `gpuMemory` request of `mib` MiB per pod (running where `pods` say, if any)."""
    base = job(name, proj, 1, placement=pods, **kw)
    return replace(base, request=GpuRequest(RequestKind.MEMORY, memory_mib=mib))


def settled(snap: Snapshot) -> tuple[Snapshot, list[Decisions]]:
    final, history = settle(snap)
    assert not history[-1].changed, "the engine did not settle"
    return final, history


def evictions(history: list[Decisions]) -> list[tuple[str, EvictReason]]:
    return [(e.job, e.reason) for d in history for e in d.evictions]


def evicted(history: list[Decisions]) -> list[str]:
    return [e.job for d in history for e in d.evictions]


def bound(history: list[Decisions]) -> list[str]:
    return [b.job for d in history for b in d.binds]


def placement(state: Snapshot, name: str) -> tuple[PodPlacement, ...]:
    return next(j.placement for j in state.jobs if j.name == name)


def nodes_of(state: Snapshot, name: str) -> set[str]:
    return {pod.node for pod in placement(state, name)}


def is_running(state: Snapshot, name: str) -> bool:
    return bool(placement(state, name))


# -- allocate: which queue is served first ----------------------------------------------------


def test_allocate_serves_higher_rank_queues_first():
    # one GPU, two projects both within their deserved quota with the job: rank decides,
    # whatever the submission order or the names say
    pol = policy(project("a-low", 1), project("z-high", 1, over_quota_rank=1))
    work = [job("a-first", "a-low", submitted=0), job("z-second", "z-high", submitted=1)]
    final, history = settled(snapshot(pol, nodes("n", 1, gpus=1), work))
    assert bound(history) == ["z-second"]
    assert not is_running(final, "a-first")


def test_allocate_serves_higher_ranks_before_queues_below_their_fair_share():
    # `high` (rank 1, no claim on spare GPUs) runs 2 GPUs on a fair share of 1; `low` runs 1
    # of its fair share of 2; both would pass their deserved quota with the job. The free
    # GPU goes to `high`: KAI serves queues below their fair share first only when they
    # are below in every resource, and GPU-only work is never over its (zero) CPU and
    # memory share, so rank decides. The reclaim threshold keeps reclaim out of it.
    pol = policy(
        project("high", 1, over_quota_rank=1, weight=0),
        project("low", 1),
        reclaim_threshold=1.5,
    )
    work = [
        running("h-1", "high", 1, on("n-0", 0)),
        running("h-2", "high", 1, on("n-0", 1)),
        running("l-1", "low", 1, on("n-0", 2)),
        job("h-3", "high", submitted=10),
        job("l-2", "low", submitted=20),
    ]
    final, history = settled(snapshot(pol, nodes("n", 1, gpus=4), work))
    assert bound(history) == ["h-3"]
    assert not evicted(history)
    assert not is_running(final, "l-2")


def test_allocate_breaks_equal_queues_by_the_oldest_pending_work():
    # same rank, fair share, ratio and quota; two free GPUs, room for one 2-GPU job: the
    # queue whose pending work was submitted first is served, although its name sorts last
    pol = policy(project("a", 2), project("b", 2))
    work = [
        running("a-run", "a", 1, on("n-0", 0)),
        running("b-run", "b", 1, on("n-0", 1)),
        job("a-new", "a", 2, submitted=10),
        job("b-new", "b", 2, submitted=5),
    ]
    final, history = settled(snapshot(pol, nodes("n", 1, gpus=4), work))
    assert bound(history) == ["b-new"]
    assert not is_running(final, "a-new")


def test_allocate_prefers_the_smaller_allocatable_share_among_equal_ratios():
    # KAI allocate_test.go "Both queues has the same share, give the one with smaller job":
    # both within their quota with the job and at the same share of it with and without
    # (4 of 4 and 2 of 2; 2 of 4 and 1 of 2): the weaker queue, with the smaller
    # allocatable share, is served first (KAI's prioritizeBasedOnAllocatableShare)
    pol = policy(project("q0", 4, weight=0, age=0), project("q1", 2, weight=0, age=1))
    work = [
        running("q0-run", "q0", 2, on("n-0", 0, 1)),
        running("q1-run", "q1", 1, on("n-0", 2)),
        job("q0-new", "q0", 2, submitted=1),
        job("q1-new", "q1", 1, submitted=2),
    ]
    decisions = schedule(snapshot(pol, nodes("n", 1, gpus=5), work))
    assert [b.job for b in decisions.binds] == ["q1-new"]


def test_allocate_serves_equal_queues_by_age_whatever_their_quotas():
    # both run 3 GPUs of an allocatable share of 4 (quota 1 with weight 3, quota 3 with
    # weight 1): equal in every item before age, so the older queue is served first
    pol = policy(project("a", 1, weight=3, age=0), project("b", 3, weight=1, age=1))
    work = [
        *(running(f"a-{i}", "a", 1, on("n-0", i)) for i in range(3)),
        *(running(f"b-{i}", "b", 1, on("n-0", 3 + i)) for i in range(3)),
        job("a-new", "a", 2, submitted=2),
        job("b-new", "b", 2, submitted=1),
    ]
    final, history = settled(snapshot(pol, nodes("n", 1, gpus=8), work))
    assert bound(history) == ["a-new"]
    assert not is_running(final, "b-new")


# -- reclaim: which victims go first ----------------------------------------------------------


def test_reclaim_takes_the_youngest_of_equal_victims():
    # b is over its fair share with four equal 1-GPU jobs; the one that started last goes
    # (least work lost), even though another was submitted later
    pol = policy(project("b", 1), project("d", 3))
    work = [
        running("b-oldest", "b", 1, on("n-0", 0), started=0, submitted=0),
        running("b-restarted", "b", 1, on("n-0", 1), started=100, submitted=1),
        running("b-middle", "b", 1, on("n-0", 2), started=50, submitted=2),
        running("b-early", "b", 1, on("n-0", 3), started=10, submitted=3),
        job("d-1", "d", submitted=4),
    ]
    snap = replace(snapshot(pol, nodes("n", 1, gpus=4), work), now=200.0)
    decisions = schedule(snap)
    assert [(e.job, e.reason) for e in decisions.evictions] == [
        ("b-restarted", EvictReason.RECLAIM)
    ]
    assert [b.job for b in decisions.binds] == ["d-1"]


def test_reclaim_takes_from_lower_rank_queues_first():
    # b (rank 0) and c (rank 1) are both over their fair share; d claims its quota of 6:
    # b gives back all it may before c gives anything, though c is as far over and younger
    pol = policy(project("b", 1), project("c", 1, over_quota_rank=1), project("d", 6))
    work = [
        *(running(f"b-{i}", "b", 1, on("n-0", i), started=0) for i in range(4)),
        *(running(f"c-{i}", "c", 1, on("n-0", 4 + i), started=100) for i in range(4)),
        *(job(f"d-{i}", "d") for i in range(6)),
    ]
    _, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=8), work), now=200.0))
    owners = [name.split("-")[0] for name in evicted(history)]
    assert owners == ["b", "b", "b", "c", "c", "c"]
    assert [allocated(history[-1], p) for p in ("b", "c", "d")] == [1, 1, 6]


def test_a_queue_whose_first_jobs_cannot_reclaim_still_reclaims_for_later_ones():
    # d's first two jobs may only use group z, where nothing may be evicted (x's
    # inference); its later 1-GPU job reclaims from b on group a in the same cycle, and is
    # not left waiting behind them for good
    pol = policy(project("x", 4), project("b", 0), project("d", 4))
    work = [
        running("serve", "x", 4, on("z-0", 0, 1, 2, 3), type="inference"),
        *(running(f"b-{i}", "b", 1, on("a-0", i), started=i) for i in range(4)),
        job("d-z2", "d", 2, node_groups=("z",), submitted=10),
        job("d-z1", "d", 1, node_groups=("z",), submitted=11),
        job("d-one", "d", 1, submitted=12),
    ]
    snap = replace(snapshot(pol, (*nodes("a", 1, gpus=4), *nodes("z", 1, gpus=4)), work), now=9.0)
    decisions = schedule(snap)
    assert [(e.job, e.reason) for e in decisions.evictions] == [("b-3", EvictReason.RECLAIM)]
    assert [b.job for b in decisions.binds] == ["d-one"]


# -- evict only what is needed ----------------------------------------------------------------


def test_only_needed_victims_are_evicted():
    # d needs 4 GPUs on one node; b's youngest job (on n-0, next to x's inference) is
    # taken first but the job lands on n-1 once b's two older jobs there are gone: the
    # youngest is returned and never stopped
    pol = policy(project("x", 3), project("b", 1), project("d", 4))
    work = [
        running("serve", "x", 3, on("n-0", 0, 1, 2), type="inference"),
        running("b-young", "b", 1, on("n-0", 3), started=100, submitted=3),
        running("b-mid", "b", 2, on("n-1", 0, 1), started=50, submitted=2),
        running("b-old", "b", 2, on("n-1", 2, 3), started=0, submitted=1),
        job("d-big", "d", 4),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 2, gpus=4), work), now=200.0))
    assert sorted(evicted(history)) == ["b-mid", "b-old"]
    assert placement(final, "b-young") == (on("n-0", 3),)
    assert nodes_of(final, "d-big") == {"n-1"}


def test_a_victim_that_fits_elsewhere_is_moved_not_stopped():
    # d's 4-GPU job needs n-0 cleared; of b's two jobs there, the older one (first in
    # b's job order: victims are placed again in allocation order) fits on n-1's two free
    # GPUs and is moved (evicted and bound again in the same cycle); the youngest has
    # nowhere left to go and is stopped
    pol = policy(project("x", 2), project("b", 0), project("d", 6))
    work = [
        running("serve", "x", 2, on("n-1", 0, 1), type="inference"),
        running("b-young", "b", 2, on("n-0", 0, 1), started=100, submitted=1),
        running("b-old", "b", 2, on("n-0", 2, 3), started=0, submitted=0),
        job("d-big", "d", 4),
    ]
    snap = replace(snapshot(pol, nodes("n", 2, gpus=4), work), now=200.0)
    decisions = schedule(snap)
    assert sorted((e.job, e.reason) for e in decisions.evictions) == [
        ("b-old", EvictReason.RECLAIM),
        ("b-young", EvictReason.RECLAIM),
    ]
    assert sorted(b.job for b in decisions.binds) == ["b-old", "d-big"]
    after = apply_decisions(snap, decisions)
    assert nodes_of(after, "b-old") == {"n-1"}
    assert nodes_of(after, "d-big") == {"n-0"}
    assert not is_running(after, "b-young")


def test_reclaim_moves_work_it_may_not_stop():
    # consolidation inside reclaim: b may lose only what is over its quota of 2 (b-young),
    # but d still needs b-old's GPUs on n-0; b-old may be moved to n-1, so it is (d, of the
    # higher over-quota rank, comes before b: b-old does not take its GPUs back first)
    pol = policy(project("x", 2), project("b", 2), project("d", 4, over_quota_rank=1))
    work = [
        running("serve", "x", 2, on("n-1", 0, 1), type="inference"),
        running("b-young", "b", 2, on("n-0", 0, 1), started=100),
        running("b-old", "b", 2, on("n-0", 2, 3), started=0),
        job("d-big", "d", 4),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 2, gpus=4), work), now=200.0))
    assert sorted(evicted(history)) == ["b-old", "b-young"]
    assert nodes_of(final, "b-old") == {"n-1"}
    assert nodes_of(final, "d-big") == {"n-0"}
    assert [allocated(history[-1], p) for p in ("b", "d")] == [2, 4]


def test_preempt_moves_a_lower_priority_job_that_fits_elsewhere():
    # the inference job needs n-0 whole; of its project's two train jobs there, the older
    # fits on n-1 and is moved; the younger is preempted
    pol = policy(project("p", 6), project("x", 2))
    work = [
        running("other", "x", 2, on("n-1", 0, 1), type="inference"),
        running("t-young", "p", 2, on("n-0", 0, 1), started=100),
        running("t-old", "p", 2, on("n-0", 2, 3), started=0),
        job("serve", "p", 4, "inference"),
    ]
    snap = replace(snapshot(pol, nodes("n", 2, gpus=4), work), now=200.0)
    decisions = schedule(snap)
    assert sorted((e.job, e.reason) for e in decisions.evictions) == [
        ("t-old", EvictReason.PREEMPT),
        ("t-young", EvictReason.PREEMPT),
    ]
    after = apply_decisions(snap, decisions)
    assert nodes_of(after, "t-old") == {"n-1"}
    assert nodes_of(after, "serve") == {"n-0"}
    assert not is_running(after, "t-young")


# -- consolidation ----------------------------------------------------------------------------


def test_consolidation_needs_no_fair_share_condition():
    # p (no claim on spare GPUs) asks for 4 idle GPUs split 2 + 2 across nodes: q's younger
    # job is moved so the idle GPUs can be used, although p goes past its fair share
    pol = policy(project("p", 1, weight=0), project("q", 7))
    work = [
        running("q-old", "q", 2, on("n-0", 0, 1), started=0),
        running("q-young", "q", 2, on("n-1", 0, 1), started=100),
        job("p-big", "p", 4),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 2, gpus=4), work), now=200.0))
    assert evictions(history) == [("q-young", EvictReason.CONSOLIDATE)]
    assert nodes_of(final, "p-big") == {"n-1"}
    assert nodes_of(final, "q-young") == {"n-0"}
    assert all(j.running for j in final.jobs)


def test_consolidation_moves_in_victim_order_not_the_fewest_moves():
    # clearing n-0 takes two moves of the youngest jobs, n-1 or n-2 one move of an older
    # one: KAI's consolidation takes victims in victim order (the newest first), so a2
    # then a1 go, and the older b keeps running where it is
    pol = policy(project("p", 4), project("q", 8))
    work = [
        running("a1", "q", 1, on("n-0", 0), started=200),
        running("a2", "q", 1, on("n-0", 1), started=200),
        running("b", "q", 2, on("n-1", 0, 1), started=10),
        running("c", "q", 3, on("n-2", 0, 1, 2), started=0),
        job("big", "p", 4),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 3, gpus=4), work), now=300.0))
    assert sorted(evictions(history)) == [
        ("a1", EvictReason.CONSOLIDATE),
        ("a2", EvictReason.CONSOLIDATE),
    ]
    assert nodes_of(final, "big") == {"n-0"}
    assert placement(final, "b") == (on("n-1", 0, 1),)
    assert all(j.running for j in final.jobs)


def test_consolidation_moves_the_lower_priority_job_before_the_younger_one():
    # inside a queue the lowest priority goes first, before the newest
    pol = policy(project("p", 4), project("q", 8))
    work = [
        running("young", "q", 2, on("n-0", 0, 1), started=200),
        running("low", "q", 2, on("n-1", 0, 1), started=0, priority=10),
        job("big", "p", 4),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 2, gpus=4), work), now=300.0))
    assert evictions(history) == [("low", EvictReason.CONSOLIDATE)]
    assert nodes_of(final, "big") == {"n-1"}
    assert all(j.running for j in final.jobs)


def test_consolidation_takes_from_the_queue_that_gives_up_work_first():
    # q is over its deserved quota, r within it: q's job is moved although r's is younger
    pol = policy(project("p", 4), project("q", 1), project("r", 4))
    work = [
        running("q-old", "q", 2, on("n-0", 0, 1), started=0),
        running("r-young", "r", 2, on("n-1", 0, 1), started=200),
        job("big", "p", 4),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 2, gpus=4), work), now=300.0))
    assert evictions(history) == [("q-old", EvictReason.CONSOLIDATE)]
    assert nodes_of(final, "big") == {"n-0"}


def test_consolidation_breaks_a_tie_on_start_by_submission_not_by_node():
    # both started together; the one submitted last moves, though its node sorts last
    pol = policy(project("p", 4), project("q", 8))
    work = [
        running("first", "q", 2, on("n-0", 0, 1), started=0, submitted=0),
        running("last", "q", 2, on("n-1", 0, 1), started=0, submitted=1),
        job("big", "p", 4, submitted=2),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 2, gpus=4), work), now=300.0))
    assert evictions(history) == [("last", EvictReason.CONSOLIDATE)]
    assert nodes_of(final, "big") == {"n-1"}


def test_consolidation_moves_fractions_to_make_room():
    # 0.7 of a GPU is free in total (0.4 + 0.5) but on no single GPU: the younger 0.3
    # share moves next to the 0.5 one
    pol = policy(project("p", 1), project("q", 1))
    work = [
        running("fa", "q", 0.3, on("n-0", 0, fraction=0.3), started=0),
        running("fb", "q", 0.3, on("n-0", 0, fraction=0.3), started=100),
        running("fc", "q", 0.5, on("n-0", 1, fraction=0.5), started=0),
        job("f-new", "p", 0.7),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=2), work), now=200.0))
    assert evictions(history) == [("fb", EvictReason.CONSOLIDATE)]
    assert placement(final, "fb") == (on("n-0", 1, fraction=0.3),)
    assert placement(final, "f-new") == (on("n-0", 0, fraction=0.7),)


def test_consolidation_moves_gpu_memory_work_to_make_room():
    # a quarter of a 32 GiB GPU is 8 GiB: the younger 8 GiB pod moves to the other GPU
    pol = policy(project("p", 1), project("q", 1))
    work = [
        memory_job("ma", "q", 8192, on("n-0", 0, fraction=0.25), started_at=0.0),
        memory_job("mb", "q", 8192, on("n-0", 0, fraction=0.25), started_at=100.0),
        running("fc", "q", 0.5, on("n-0", 1, fraction=0.5), started=0),
        job("f-new", "p", 0.75),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=2), work), now=200.0))
    assert evictions(history) == [("mb", EvictReason.CONSOLIDATE)]
    assert placement(final, "mb") == (on("n-0", 1, fraction=0.25),)
    assert placement(final, "f-new") == (on("n-0", 0, fraction=0.75),)


def test_consolidation_makes_room_for_a_gang():
    # a gang of two 4-GPU pods: n-2 is free, n-0 and n-1 half used; one move frees n-0
    pol = policy(project("p", 8), project("q", 4))
    work = [
        running("q-a", "q", 2, on("n-0", 0, 1), started=100),
        running("q-b", "q", 2, on("n-1", 0, 1), started=0),
        job("gang", "p", 4, pods=2),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 3, gpus=4), work), now=200.0))
    assert evictions(history) == [("q-a", EvictReason.CONSOLIDATE)]
    assert nodes_of(final, "gang") == {"n-0", "n-2"}
    assert nodes_of(final, "q-a") == {"n-1"}


# -- quota after the victims leave ------------------------------------------------------------


def test_preempt_succeeds_when_the_hard_limit_is_freed_by_its_victims():
    # p is at its hard limit of 2 with a train job; its inference job is refused by the
    # limit, not by room (6 GPUs are free) -- evicting the train job frees the quota
    pol = policy(project("p", 2, limit=2), project("q", 6))
    work = [running("train", "p", 2, on("n-0", 0, 1)), job("serve", "p", 1, "inference")]
    final, history = settled(snapshot(pol, nodes("n", 1, gpus=8), work))
    assert evictions(history) == [("train", EvictReason.PREEMPT)]
    assert is_running(final, "serve")
    reasons = dict(history[-1].pending_reasons)
    assert "hard limit" in reasons["train"]


def test_reclaim_succeeds_when_the_department_limit_is_freed_by_its_victims():
    # p2 fills its department's hard limit of 4 with over-quota work; p1, under its quota,
    # is refused by that limit although GPUs are free: reclaiming from p2 makes room in it
    pol = policy(
        project("p1", 2, "d"),
        project("p2", 2, "d"),
        project("other", 4, "o"),
        departments=(department("d", 4, limit=4), department("o", 4)),
    )
    work = [
        *(running(f"p2-{i}", "p2", 1, on("n-0", i), started=i) for i in range(4)),
        job("p1-1", "p1"),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=8), work), now=10.0))
    assert evictions(history) == [("p2-3", EvictReason.RECLAIM)]
    assert is_running(final, "p1-1")
    assert allocated(history[-1], "d") == 4


# -- property: every eviction was needed ------------------------------------------------------


def _share(job: Job, pod: PodPlacement, model: str) -> float:
    if job.request.kind is RequestKind.WHOLE:
        return float(len(pod.gpus))
    if job.request.kind is RequestKind.MIG:
        return compute_share(model, pod.mig.profile)
    return pod.fraction


def _occupancy(state: Snapshot) -> tuple[dict, dict]:
    """Per GPU: the jobs holding it whole, and the sum of shares; per MIG instance: holder."""
    whole: dict[tuple[str, int], float] = defaultdict(float)
    mig: dict[tuple[str, int, object], str] = {}
    for held in state.jobs:
        for pod in held.placement:
            if pod.mig is not None:
                mig[pod.node, pod.gpus[0], pod.mig] = held.key
            elif held.request.kind is RequestKind.WHOLE:
                for gpu in pod.gpus:
                    whole[pod.node, gpu] += 1.0
            else:
                whole[pod.node, pod.gpus[0]] += pod.fraction
    return whole, mig


def _slots_free(after: Snapshot, victim: Job, pods: tuple[PodPlacement, ...]) -> bool:
    """Whether `pods` of the victim could run again exactly where they ran."""
    used, mig = _occupancy(after)
    nodes = {node.name: node for node in after.nodes}
    for pod in pods:
        if pod.mig is not None:
            gpu = nodes[pod.node].gpus[pod.gpus[0]]
            if pod.mig not in gpu.mig_instances or (pod.node, pod.gpus[0], pod.mig) in mig:
                return False
        elif victim.request.kind is RequestKind.WHOLE:
            if any(used[pod.node, gpu] > GPU_EPSILON for gpu in pod.gpus):
                return False
            for gpu in pod.gpus:
                used[pod.node, gpu] = 1.0
        else:
            used[pod.node, pod.gpus[0]] += pod.fraction
            if used[pod.node, pod.gpus[0]] > 1 + GPU_EPSILON:
                return False
    return True


def _restoring_breaks_a_rule(
    after: Snapshot, decisions: Decisions, victim: Job, pods: tuple[PodPlacement, ...], reason
) -> bool:
    """Whether running the victim's pods again breaks a quota rule: a hard limit or
    over-quota denial of its project or department, or (preempt) its project's fair share."""
    models = {node.name: node.gpu_model for node in after.nodes}
    amount = sum(_share(victim, pod, models[pod.node]) for pod in pods)
    status = {s.name: s for s in (*decisions.projects, *decisions.departments)}
    spec = {q.name: q for q in (*after.policy.projects, *after.policy.departments)}
    project = spec[victim.project]
    for queue in (project, spec.get(project.parent)):
        if queue is None:
            continue
        total = status[queue.name].allocated + amount
        if queue.limit is not None and total > queue.limit + GPU_EPSILON:
            return True
        if not queue.over_quota_allowed and total > queue.deserved + GPU_EPSILON:
            return True
    if reason is EvictReason.PREEMPT:
        share = status[project.name].fair_share
        return status[project.name].allocated + amount > share + GPU_EPSILON
    return False


def unneeded_evictions(before: Snapshot, decisions: Decisions) -> list[str]:
    """Evictions of this cycle that nothing needed: a consolidation victim not placed again,
    or a stopped victim whose GPUs are still free at the end of the cycle and whose return
    breaks no quota rule (so the job it made room for did not need it)."""
    jobs = {j.key: j for j in before.jobs}
    after = apply_decisions(before, decisions)
    rebound = {b.job for b in decisions.binds}
    found = []
    for evict in decisions.evictions:
        if evict.reason not in VICTIM_REASONS or evict.job in rebound:
            continue
        if evict.reason is EvictReason.CONSOLIDATE:
            found.append(f"{evict.job}: moved for consolidation but not placed again")
            continue
        victim = jobs[evict.job]
        pods = evict.pods or victim.placement
        if _slots_free(after, victim, pods) and not _restoring_breaks_a_rule(
            after, decisions, victim, pods, evict.reason
        ):
            found.append(f"{evict.job}: evicted ({evict.reason}) by {evict.by} but not needed")
    return found


@st.composite
def contended(draw: st.DrawFn, max_jobs: int = 16) -> Snapshot:
    """A random cluster settled with preemptible train work, then more work of every type
    submitted an hour later: where reclaim, preempt and consolidation have victims."""
    pol = draw(policies())
    cluster = draw(node_lists(max_nodes=4))
    kinds = draw(workload_mixes())
    names = [p.name for p in pol.projects]
    first = draw(job_lists(names, cluster, min_size=1, max_size=max_jobs, kinds=kinds))
    first = tuple(replace(j, type="train", preemptible=True) for j in first)
    more = draw(
        job_lists(names, cluster, first=100, min_size=1, max_size=max_jobs // 2, kinds=kinds)
    )
    warm, _ = settle(Snapshot(pol, cluster, first))
    return replace(warm, jobs=warm.jobs + more, now=3600.0)


@settings(max_examples=examples(60), deadline=None)
@given(contended())
def test_every_eviction_in_a_cycle_was_needed(snap: Snapshot) -> None:
    for _ in range(20):
        decisions = schedule(snap)
        assert unneeded_evictions(snap, decisions) == []
        if not decisions.changed:
            break
        snap = apply_decisions(snap, decisions)
