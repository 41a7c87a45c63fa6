"""The engine's scheduling outcomes from DESIGN.md, on plain snapshots."""

from __future__ import annotations

from dataclasses import replace

from gitops_sched.engine import apply_decisions, schedule, settle
from gitops_sched.engine.types import EvictReason, PodPlacement
from gitops_sched.hardware.mig import MigInstance
from tests.engine_builders import allocated, department, job, jobs, nodes, policy, project, snapshot

DGX = nodes("dgx", 2)
NETAPP = policy(
    project("team-a", 4), project("team-b", 2), project("team-c", 2), project("team-d", 8)
)


def settled(snap):
    final, history = settle(snap)
    assert not history[-1].changed, "the engine did not settle"
    return final, history


def test_spare_gpus_split_by_quota_when_one_team_is_idle():
    work = jobs("a", "team-a", 10) + jobs("b", "team-b", 10) + jobs("c", "team-c", 10)
    _, history = settled(snapshot(NETAPP, DGX, work))
    last = history[-1]
    assert [allocated(last, p) for p in ("team-a", "team-b", "team-c", "team-d")] == [8, 4, 4, 0]


def test_under_quota_team_reclaims_one_workload_at_a_time_from_the_most_over_quota():
    first = jobs("a", "team-a", 4) + jobs("b", "team-b", 10) + jobs("c", "team-c", 10)
    state, history = settled(snapshot(NETAPP, DGX, first))
    assert [allocated(history[-1], p) for p in ("team-b", "team-c")] == [6, 6]
    state = replace(state, jobs=state.jobs + tuple(jobs("d", "team-d", 4)))
    state, history = settled(state)
    evicted = [e for d in history for e in d.evictions]
    assert all(e.reason is EvictReason.RECLAIM for e in evicted)
    owners = [e.job.split("-")[0] for e in evicted]
    assert owners == ["b", "c", "b", "c"]
    last = history[-1]
    assert [allocated(last, p) for p in ("team-a", "team-b", "team-c", "team-d")] == [4, 4, 4, 4]
    pending = {name for name, _ in last.pending_reasons}
    assert {e.job for e in evicted} <= pending  # evicted train work went back to the queue


def test_interactive_fractions_survive_reclaim():
    notebooks = [
        job("nb-b1", "team-b", 0.6, "interactive"),
        job("nb-b2", "team-b", 0.4, "interactive"),
        job("nb-c1", "team-c", 0.5, "interactive"),
        job("nb-c2", "team-c", 0.3, "interactive"),
        job("nb-c3", "team-c", 0.2, "interactive"),
    ]
    work = notebooks + jobs("b", "team-b", 10) + jobs("c", "team-c", 10) + jobs("a", "team-a", 4)
    state, _ = settled(snapshot(NETAPP, DGX, work))
    shared = {}
    for j in state.jobs:
        for pod in j.placement:
            if pod.fraction:
                shared.setdefault((pod.node, pod.gpus[0]), []).append(pod.fraction)
    assert sorted(sorted(v) for v in shared.values()) == [[0.2, 0.3, 0.5], [0.4, 0.6]]
    state = replace(state, jobs=state.jobs + tuple(jobs("d", "team-d", 8)))
    _, history = settled(state)
    evicted = {e.job for d in history for e in d.evictions}
    assert not evicted & {n.name for n in notebooks}
    assert allocated(history[-1], "team-d") == 8


def test_quota_three_to_one_gets_three_quarters_of_idle_gpus():
    pol = policy(project("big", 3), project("small", 1))
    work = jobs("big", "big", 20) + jobs("small", "small", 20)
    _, history = settled(snapshot(pol, DGX, work))
    spare = 16 - 4
    assert allocated(history[-1], "big") == 3 + spare * 0.75
    assert allocated(history[-1], "small") == 1 + spare * 0.25


def test_department_quota_caps_its_projects_under_contention():
    pol = policy(
        project("x1", 4, "x"),
        project("x2", 4, "x"),
        project("y1", 8, "y"),
        departments=(department("x", 8), department("y", 8)),
    )
    state, _ = settled(snapshot(pol, DGX, jobs("x1", "x1", 10) + jobs("x2", "x2", 10)))
    state = replace(state, jobs=state.jobs + tuple(jobs("y", "y1", 10)))
    _, history = settled(state)
    last = history[-1]
    assert allocated(last, "x") == 8
    assert allocated(last, "y") == 8


def test_interactive_over_deserved_quota_stays_pending_with_reason():
    pol = policy(project("p", 2), project("q", 14))
    work = [job("nb1", "p", 2, "interactive"), job("nb2", "p", 1, "interactive")]
    _, history = settled(snapshot(pol, DGX, work))
    reasons = dict(history[-1].pending_reasons)
    assert "nb1" not in reasons
    assert "deserved quota" in reasons["nb2"]


def test_inference_preempts_lower_priority_train_of_the_same_project():
    pol = policy(project("p", 8), project("q", 8))
    state, _ = settled(snapshot(pol, nodes("n", 1), jobs("t", "p", 8) + jobs("u", "q", 0)))
    state = replace(state, jobs=(*state.jobs, job("serve", "p", 2, "inference")))
    _, history = settled(state)
    evicted = [e for d in history for e in d.evictions]
    assert {e.reason for e in evicted} == {EvictReason.PREEMPT}
    assert len(evicted) == 2
    assert "serve" not in dict(history[-1].pending_reasons)


def test_gang_starts_all_pods_together_or_none():
    pol = policy(project("p", 16))
    blocker = job("blocker", "p", 5)
    gang = job("gang", "p", 4, pods=3)  # 12 GPUs, only 11 free
    _, history = settled(snapshot(pol, DGX, [blocker, gang]))
    assert "gang" in dict(history[-1].pending_reasons)
    assert [b.job for d in history for b in d.binds] == ["blocker"]


def test_gang_prefers_one_topology_domain():
    pol = policy(project("p", 32))
    cluster = nodes("n", 4, topology=("rack-1", "rack-1", "rack-2", "rack-2"))
    first = job("first", "p", 8)  # fills n-0 in rack-1
    gang = job("gang", "p", 8, pods=2)
    final, _ = settled(snapshot(pol, cluster, [first, gang]))
    placed = {j.name: j.placement for j in final.jobs}
    assert {p.node for p in placed["gang"]} == {"n-2", "n-3"}


def test_bin_packing_fills_used_node_first():
    pol = policy(project("p", 16))
    final, _ = settled(snapshot(pol, DGX, [job("one", "p", 2), job("two", "p", 2)]))
    assert {p.node for j in final.jobs for p in j.placement} == {"dgx-0"}


def test_consolidation_moves_preemptible_work_when_only_fragmentation_blocks():
    pol = policy(project("p", 8), project("q", 8))
    cluster = nodes("n", 2, gpus=4)
    state = snapshot(pol, cluster, [])
    # two 2-GPU jobs end up on different nodes: 4 free GPUs, but no node has 4
    a, b = job("a", "p", 2), job("b", "q", 2)
    placed_a = replace(a, placement=(_pod("n-0", 0, 1),))
    placed_b = replace(b, placement=(_pod("n-1", 0, 1),))
    state = replace(state, jobs=(placed_a, placed_b, job("big", "p", 4)))
    final, history = settled(state)
    moves = [e for d in history for e in d.evictions]
    assert [e.reason for e in moves] == [EvictReason.CONSOLIDATE]
    assert all(j.running for j in final.jobs)


def test_consolidation_moves_only_the_gang_pod_on_the_node_it_frees():
    # the gang's pod 0 is all that may move off n-3 (the one-GPU jobs are inference); its
    # pod 1 on n-0 keeps running where it is (moved with its gang, it used to restart --
    # onto its own GPUs, under the other index)
    pods = (PodPlacement("n-3", (0, 1), index=0), PodPlacement("n-0", (0, 1), index=1))
    gang = replace(job("gang", "p", 2, pods=2), placement=pods, started_at=0.0)
    singles = [
        replace(job(f"one-{node}-{gpu}", "p", 1, type="inference"), placement=(_pod(node, gpu),))
        for node, gpu in (("n-0", 2), ("n-0", 3), ("n-1", 3), ("n-2", 2), ("n-2", 3))
    ]
    pol = policy(project("p", 100), consolidation=True)
    state = snapshot(pol, nodes("n", 4, gpus=4), [gang, *singles, job("wide", "p", 4)])
    decisions = schedule(state)
    assert [(e.job, e.reason, e.pods) for e in decisions.evictions] == [
        ("gang", EvictReason.CONSOLIDATE, (pods[0],))
    ]
    assert [(b.job, b.pods) for b in decisions.binds] == [
        ("wide", (_pod("n-3", 0, 1, 2, 3),)),
        ("gang", (_pod("n-2", 0, 1),)),
    ]


def test_consolidation_moves_what_can_leave_not_what_only_shares_room_would_take():
    # a-0 is full and "want" may use only group g0. "newer", first in victim order, may run
    # only in g0 too, whose one room is what two half-GPU shares leave on a-1: no whole GPU,
    # so it has nowhere to go. "older" may also run on b-0's free GPU. Counting the shares'
    # room as a place for "newer" made a-0's plan move it, fail, and hide the plan that
    # moves "older" instead.
    cluster = nodes("a", 2, gpus=2, group="g0") + nodes("b", 1, gpus=1, group="g1")
    older = job("older", "p", 1, node_groups=("g0", "g1"))
    newer = job("newer", "p", 1, node_groups=("g0",))
    shares = [
        replace(job(f"share-{gpu}", "p", 0.5, type="inference"), placement=(_share("a-1", gpu),))
        for gpu in (0, 1)
    ]
    work = [
        replace(older, placement=(_pod("a-0", 0),), started_at=0.0),
        replace(newer, placement=(_pod("a-0", 1),), started_at=1.0),
        *shares,
        job("want", "p", 1, node_groups=("g0",)),
    ]
    decisions = schedule(snapshot(policy(project("p", 8), consolidation=True), cluster, work))
    assert [(e.job, e.reason) for e in decisions.evictions] == [("older", EvictReason.CONSOLIDATE)]
    assert sorted((b.job, b.pods) for b in decisions.binds) == [
        ("older", (_pod("b-0", 0),)),
        ("want", (_pod("a-0", 0),)),
    ]


def test_mig_request_creates_an_instance_and_a_later_one_reuses_it():
    pol = policy(project("p", 8))
    cluster = nodes("a100", 1, gpus=1, model="A100-SXM4-80GB", memory_mib=81920, mig=True)
    state, history = settled(snapshot(pol, cluster, [job("m1", "p", "3g.40gb")]))
    created = [c for d in history for c in d.mig_changes]
    assert [(c.instance.profile, c.create) for c in created] == [("3g.40gb", True)]
    state = replace(state, jobs=())  # m1 finished: the instance stays
    assert state.nodes[0].gpus[0].mig_instances == (created[0].instance,)
    state = replace(state, jobs=(job("m2", "p", "3g.40gb"),))
    final, history = settled(state)
    assert not [c for d in history for c in d.mig_changes]
    assert final.jobs[0].placement[0].mig == created[0].instance


def test_mig_idle_instance_of_another_profile_is_destroyed_when_space_is_needed():
    pol = policy(project("p", 8))
    idle = (MigInstance("4g.40gb", 0), MigInstance("3g.40gb", 4))
    cluster = nodes(
        "a100", 1, gpus=1, model="A100-SXM4-80GB", memory_mib=81920, mig=True, instances=idle
    )
    _, history = settled(snapshot(pol, cluster, [job("big", "p", "7g.80gb")]))
    changes = [(c.instance.profile, c.create) for d in history for c in d.mig_changes]
    assert sorted(changes) == [("3g.40gb", False), ("4g.40gb", False), ("7g.80gb", True)]


def test_reclaim_passes_over_mig_work_a_whole_gpu_claimant_cannot_use():
    # q's 42 MIG instances are cheaper to lose than its whole GPU (younger, same priority),
    # but evicting them frees no plain GPU: p reclaims the whole GPU at once, stopping no
    # MIG work that could not make room for it.
    pol = policy(project("p", 1), project("q", 0))
    plain = nodes("plain", 1, gpus=1)
    instances = tuple(MigInstance("1g.10gb", start) for start in range(7))
    a100 = nodes(
        "a100", 1, gpus=6, model="A100-SXM4-80GB", memory_mib=81920, mig=True, instances=instances
    )
    whole = replace(job("whole", "q", 1), placement=(_pod("plain-0", 0),), started_at=0.0)
    slices = [
        replace(
            job(f"slice-{gpu}-{start}", "q", "1g.10gb"),
            placement=(PodPlacement("a100-0", (gpu,), mig=instance),),
            started_at=1.0,
        )
        for gpu in range(6)
        for start, instance in enumerate(instances)
    ]
    claimant = job("claimant", "p", 1)
    decisions = schedule(snapshot(pol, (*plain, *a100), [whole, *slices, claimant], now=10.0))
    assert [(e.job, e.reason) for e in decisions.evictions] == [("whole", EvictReason.RECLAIM)]
    assert [(b.job, b.pods) for b in decisions.binds] == [("claimant", (_pod("plain-0", 0),))]


def test_reclaim_under_a_department_limit_takes_mig_work_for_its_quota():
    # the department's hard limit is its whole GPU's worth of q's MIG instances: evicting
    # them frees no plain GPU, but the quota p's job needs -- the free one is there
    pol = policy(
        project("p", 1, department="d"),
        project("q", 0, department="d"),
        departments=(department("d", 1, limit=1.0),),
    )
    plain = nodes("plain", 1, gpus=1)
    instances = tuple(MigInstance("1g.10gb", start) for start in range(7))
    a100 = nodes(
        "a100", 1, gpus=1, model="A100-SXM4-80GB", memory_mib=81920, mig=True, instances=instances
    )
    slices = [
        replace(
            job(f"slice-{start}", "q", "1g.10gb"),
            placement=(PodPlacement("a100-0", (0,), mig=instance),),
            started_at=1.0,
        )
        for start, instance in enumerate(instances)
    ]
    claimant = job("claimant", "p", 1)
    decisions = schedule(snapshot(pol, (*plain, *a100), [*slices, claimant], now=10.0))
    assert sorted(e.job for e in decisions.evictions) == [s.name for s in slices]
    assert [(b.job, b.pods) for b in decisions.binds] == [("claimant", (_pod("plain-0", 0),))]


def _spread(nodes_count: int) -> list:
    """q0's one-GPU jobs filling `nodes_count` 8-GPU nodes round-robin, the youngest last."""
    return [
        replace(
            job(f"small-{i}", "q0", 1),
            placement=(_pod(f"n-{i % nodes_count}", i // nodes_count),),
            started_at=float(i),
        )
        for i in range(8 * nodes_count)
    ]


def test_a_whole_node_job_reclaims_one_node_of_small_jobs_spread_over_many():
    # the youngest jobs are one per node: a node is free only once 7 x 40 + 1 of them are
    # taken, far past any cap on victims a try may take (it starved for ever at 32). As
    # KAI's by-node solver, only the 8 jobs of the node it frees stop.
    pol = policy(project("q0", 0), project("q1", 8))
    work = [*_spread(40), job("big", "q1", 8)]
    decisions = schedule(snapshot(pol, nodes("n", 40, gpus=8), work, now=1000.0))
    assert [(b.job, b.pods[0].node) for b in decisions.binds] == [("big", "n-39")]
    assert {e.job for e in decisions.evictions} == {f"small-{i}" for i in range(39, 320, 40)}


def test_reclaim_leaves_victims_off_the_freed_node_where_they_ran():
    # 15 victims are taken before n-1 is free; the 7 on n-0 stay. Before, the older victims
    # of n-1 moved into n-0 one by one, each stopping a younger one there: 15 pods disturbed
    # for a node of 8
    pol = policy(project("q0", 0), project("q1", 8))
    decisions = schedule(snapshot(pol, nodes("n", 2, gpus=8), [*_spread(2), job("big", "q1", 8)]))
    assert [(b.job, b.pods[0].node) for b in decisions.binds] == [("big", "n-1")]
    assert {e.job for e in decisions.evictions} == {f"small-{i}" for i in range(1, 16, 2)}


def test_preempt_leaves_victims_off_the_freed_node_where_they_ran():
    # the same within one project: the high-priority job stops the 8 jobs of the node it
    # takes, and the 7 victims taken on n-0 stay (before, 7 of n-1 moved there instead)
    work = [*_spread(2), replace(job("big", "q0", 8, type="inference"), priority=100)]
    decisions = schedule(snapshot(policy(project("q0", 16)), nodes("n", 2, gpus=8), work))
    assert [(b.job, b.pods[0].node) for b in decisions.binds] == [("big", "n-1")]
    assert [(e.job, e.reason) for e in decisions.evictions] == [
        (f"small-{i}", EvictReason.PREEMPT) for i in range(15, 0, -2)
    ]


def test_interactive_is_stopped_after_the_time_limit():
    pol = policy(project("p", 8, interactive_time_limit_s=3600), project("q", 8))
    state, _ = settled(snapshot(pol, DGX, [job("nb", "p", 1, "interactive")]))
    decisions = schedule(replace(state, now=3599))
    assert not decisions.evictions
    decisions = schedule(replace(state, now=3600))
    assert [(e.job, e.reason) for e in decisions.evictions] == [("nb", EvictReason.TIME_LIMIT)]
    assert apply_decisions(replace(state, now=3600), decisions).jobs == ()


def _pod(node, *gpus):
    return PodPlacement(node, tuple(gpus))


def _share(node, gpu, fraction=0.5):
    return PodPlacement(node, (gpu,), fraction=fraction)


def test_reclaim_threshold_tolerates_small_imbalance():
    def run(threshold):
        pol = policy(project("p", 2), project("q", 2), reclaim_threshold=threshold)
        state, _ = settled(snapshot(pol, nodes("n", 1, gpus=6), jobs("q", "q", 6)))
        # p is owed 3 of the 6 GPUs (fair share) and is within deserved quota for 2 of them
        state = replace(state, jobs=(*state.jobs, *jobs("p", "p", 3)))
        _, history = settled(state)
        return allocated(history[-1], "p")

    assert run(0) == 3
    assert run(1.5) == 2  # the third GPU is above deserved and only 1 below fair share
