"""More of KAI Scheduler's reclaim scenarios, GPU-only: fractions, consolidation beside
reclaim, and elastic jobs, as this engine decides them.

Built as tests/test_kai_reclaim_scenarios.py builds them (a KAI leaf queue is a project of
one department, its deserved GPUs the quota, its GPU over-quota weight the weight -- 0 where
KAI's test sets none -- queues aged and jobs submitted in KAI's order; a job KAI leaves
"Releasing" is evicted here, one it "Pipelines" is bound, waiting for those evictions).

KAI's integration tests (`actions/integration_tests`) run every action for a few sessions,
treating evicted pods as pending again and pipelined ones as pending to be placed once the
GPUs are free, and check the state they end in: here the snapshot is settled (cycles until
one changes nothing, evicted work queued again) and the final state is checked. KAI's
action tests (`actions/reclaim`) run the reclaim action once: here one cycle.
"""

from __future__ import annotations

from dataclasses import replace

from gitops_sched.engine.types import (
    Decisions,
    EvictReason,
    Job,
    PodPlacement,
    ReleasingPod,
    Snapshot,
)
from tests.engine_builders import job, policy, snapshot
from tests.test_engine_kai_parity import evictions, on, placement, running, settled
from tests.test_kai_action_scenarios import node, pods_lost
from tests.test_kai_reclaim_scenarios import binds, cycle, queues, reclaimed


def where(state: Snapshot) -> dict[str, set[str]]:
    """Each job -> the nodes its pods run on (empty: pending)."""
    return {j.name: {pod.node for pod in j.placement} for j in state.jobs}


def elastic(name: str, proj: str, gpu, *pods: PodPlacement, min_available: int = 1) -> Job:
    """A running elastic job: `pods` run, `min_available` of them its gang."""
    return running(name, proj, gpu, *pods, pods=len(pods), min_available=min_available)


def pods_on(*gpus: int, node_name: str = "node0") -> tuple[PodPlacement, ...]:
    """One 1-GPU pod per GPU, pod i on the i-th GPU given."""
    return tuple(on(node_name, gpu, index=i) for i, gpu in enumerate(gpus))


def reclaimed_pods(decisions: Decisions) -> dict[str, set[int]]:
    """Each reclaimed job -> the indexes of the pods it gives up."""
    return pods_lost(decisions, EvictReason.RECLAIM)


def bound_pods(decisions: Decisions) -> dict[str, set[int]]:
    """Each bound job -> the indexes of the pods bound."""
    return {b.job: {pod.index for pod in b.pods} for b in decisions.binds}


# -- integration_tests/reclaim/reclaimFractional_test.go --------------------------------------


def test_a_whole_gpu_job_reclaims_the_half_gpu_over_its_neighbours_quota():
    # KAI reclaimFractional_test.go: "reclaim fractional train by whole GPU job"
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 0.5, on("node0", 1, fraction=0.5)),
        job("pending_job0", "queue1", 1),
    ]
    pol = policy(*queues(("queue0", 1, 0), ("queue1", 1, 0)))
    final, history = settled(snapshot(pol, (node("node0", 2),), work))
    assert evictions(history) == [("running_job1", EvictReason.RECLAIM)]
    assert where(final) == {
        "running_job0": {"node0"},
        "running_job1": set(),
        "pending_job0": {"node0"},
    }


def test_a_fraction_reclaims_one_of_two_halves_and_shares_the_gpu_with_the_other():
    # KAI reclaimFractional_test.go: "reclaim fractional train by fractional train GPU job -
    # reclaim only part of fractional jobs"
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 0.5, on("node0", 1, fraction=0.5)),
        running("running_job2", "queue0", 0.5, on("node0", 1, fraction=0.5)),
        job("pending_job0", "queue1", 0.4),
    ]
    pol = policy(*queues(("queue0", 1, 0), ("queue1", 1, 0)))
    final, history = settled(snapshot(pol, (node("node0", 2),), work))
    assert evictions(history) == [("running_job2", EvictReason.RECLAIM)]
    assert where(final) == {
        "running_job0": {"node0"},
        "running_job1": {"node0"},
        "running_job2": set(),
        "pending_job0": {"node0"},
    }
    assert placement(final, "pending_job0")[0].gpus == placement(final, "running_job1")[0].gpus


def test_a_fraction_reclaims_both_halves_of_a_gpu_when_it_needs_more_than_one():
    # KAI reclaimFractional_test.go: "reclaim fractional train by fractional GPU job, reclaim
    # all fractional jobs of 1 GPU"
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 0.5, on("node0", 1, fraction=0.5)),
        running("running_job2", "queue0", 0.5, on("node0", 1, fraction=0.5)),
        job("pending_job0", "queue1", 0.8),
    ]
    pol = policy(*queues(("queue0", 1, 0), ("queue1", 1, 0)))
    final, history = settled(snapshot(pol, (node("node0", 2),), work))
    assert sorted(evictions(history)) == [
        ("running_job1", EvictReason.RECLAIM),
        ("running_job2", EvictReason.RECLAIM),
    ]
    assert where(final) == {
        "running_job0": {"node0"},
        "running_job1": set(),
        "running_job2": set(),
        "pending_job0": {"node0"},
    }
    assert placement(final, "pending_job0")[0].gpus == (1,)


def test_a_fraction_that_would_take_its_project_past_its_quota_reclaims_nothing():
    # KAI reclaimFractional_test.go: "reclaim fractional train by fractional GPU job will go
    # over quota - don't reclaim" (queue1 holds 0.5 of its 1: 0.8 more is past it)
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 0.5, on("node0", 1, fraction=0.5)),
        running("running_job2", "queue1", 0.5, on("node0", 1, fraction=0.5)),
        job("pending_job0", "queue1", 0.8),
    ]
    pol = policy(*queues(("queue0", 1, 0), ("queue1", 1, 0)))
    final, history = settled(snapshot(pol, (node("node0", 2),), work))
    assert not evictions(history)
    assert where(final) == {
        "running_job0": {"node0"},
        "running_job1": {"node0"},
        "running_job2": {"node0"},
        "pending_job0": set(),
    }


def test_a_whole_gpu_job_within_its_quota_is_pipelined_onto_a_released_share_before_a_fraction():
    # KAI reclaimFractional_test.go: "verify whole gpu job is being pipelined to a gpu causing
    # a fractional not be pipelined to this node (due to a bug we had)" (the releasing half
    # belongs to a train job queued again, as KAI's next session sees it)
    gone = ReleasingPod("releasing_job1", "queue0", on("node0", 2, fraction=0.5))
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        job("releasing_job1", "queue0", 0.5),
        job("pending_job0", "queue0", 0.5),
        job("pending_job1", "queue1", 1),
    ]
    pol = policy(*queues(("queue0", 2, 0), ("queue1", 1, 0)))
    snap = replace(snapshot(pol, (node("node0", 3),), work), releasing=(gone,))
    final, history = settled(snap)
    assert binds(history[0]) == {"pending_job1": ({"node0"}, {"releasing_job1"})}
    assert not evictions(history)
    assert where(final) == {
        "running_job0": {"node0"},
        "releasing_job1": set(),
        "pending_job0": set(),
        "pending_job1": {"node0"},
    }


# -- integration_tests/consolidation_and_reclaim/consolidation_and_reclaim_test.go ------------


def test_reclaim_moves_one_job_beside_its_sibling_and_stops_another_to_free_a_whole_node():
    # KAI consolidation_and_reclaim_test.go: "4 jobs of queue0 - 3 running 1 pending will
    # consolidate, 1 pending job from queue1 - reclaim" (queue0 keeps its quota of 4 on
    # node0; its pending 3-GPU job waits)
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        running("running_job1", "queue0", 2, on("node1", 0, 1)),
        running("running_job2", "queue0", 1, on("node1", 2)),
        job("pending_job0", "queue0", 3),
        job("pending_job1", "queue1", 4),
    ]
    pol = policy(*queues(("queue0", 4, 0), ("queue1", 4, 0)))
    final, history = settled(snapshot(pol, (node("node0", 4), node("node1", 4)), work))
    assert ("running_job2", EvictReason.RECLAIM) in evictions(history)
    assert {name for name, _ in evictions(history)} == {"running_job1", "running_job2"}
    assert where(final) == {
        "running_job0": {"node0"},
        "running_job1": {"node0"},
        "running_job2": set(),
        "pending_job0": set(),
        "pending_job1": {"node1"},
    }


# -- actions/reclaim/reclaim_elastic_test.go --------------------------------------------------


def test_reclaim_takes_one_extra_pod_of_an_elastic_job():
    # KAI reclaim_elastic_test.go: "Reclaim single task from elastic job"
    work = [elastic("running-job", "queue0", 1, *pods_on(0, 1)), job("pending-job", "queue1")]
    decisions = cycle(queues(("queue0", 1, 1), ("queue1", 1, 1)), (node("node0", 2),), work)
    assert reclaimed_pods(decisions) == {"running-job": {1}}
    assert binds(decisions) == {"pending-job": ({"node0"}, {"running-job"})}


def test_reclaim_takes_as_many_extra_pods_of_an_elastic_job_as_it_needs():
    # KAI reclaim_elastic_test.go: "Reclaim several tasks from elastic job"
    work = [
        elastic("running-job", "queue0", 1, *pods_on(0, 1, 2, 3)),
        job("pending-job", "queue1", 2),
    ]
    decisions = cycle(queues(("queue0", 1, 1), ("queue1", 1, 1)), (node("node0", 4),), work)
    assert reclaimed_pods(decisions) == {"running-job": {2, 3}}
    assert binds(decisions) == {"pending-job": ({"node0"}, {"running-job"})}


def test_an_elastic_claimant_reclaims_for_its_gang_only():
    # KAI reclaim_elastic_test.go: "Reclaim only over quota task from elastic Job" (KAI's
    # task priorities put the pods of the gang first: here the lowest indexes)
    work = [
        elastic("running-job", "queue0", 1, *pods_on(0, 1)),
        job("pending-job", "queue1", 1, pods=3, min_available=1),
    ]
    decisions = cycle(queues(("queue0", 1, 0), ("queue1", 1, 0)), (node("node0", 2),), work)
    assert reclaimed_pods(decisions) == {"running-job": {1}}
    assert binds(decisions) == {"pending-job": ({"node0"}, {"running-job"})}
    assert bound_pods(decisions) == {"pending-job": {0}}


def test_reclaim_takes_an_elastic_job_whole_from_a_project_without_quota():
    # KAI reclaim_elastic_test.go: "Reclaim all tasks from elastic job"
    work = [elastic("running-job", "queue0", 1, *pods_on(0, 1)), job("pending-job", "queue1", 2)]
    decisions = cycle(queues(("queue0", 0, 0), ("queue1", 2, 1)), (node("node0", 2),), work)
    assert reclaimed_pods(decisions) == {"running-job": {0, 1}}
    assert binds(decisions) == {"pending-job": ({"node0"}, {"running-job"})}


def test_reclaim_takes_a_whole_job_and_one_extra_pod_of_an_elastic_one():
    # KAI reclaim_elastic_test.go: "Reclaim all tasks from job and a single task from
    # elastic job"
    work = [
        elastic("running-job0", "queue0", 1, *pods_on(0, 1)),
        running("running-job1", "queue0", 1, on("node0", 2)),
        job("pending-job", "queue1", 2),
    ]
    decisions = cycle(queues(("queue0", 0, 0), ("queue1", 3, 1)), (node("node0", 3),), work)
    assert reclaimed_pods(decisions) == {"running-job0": {1}, "running-job1": {0}}
    assert binds(decisions) == {"pending-job": ({"node0"}, {"running-job0", "running-job1"})}


def test_reclaim_takes_an_elastic_job_and_a_plain_one_whole_when_it_needs_every_gpu():
    # KAI reclaim_elastic_test.go: "Reclaim from several running jobs (and of them is
    # elastic)"
    work = [
        elastic("running-job0", "queue0", 1, *pods_on(0, 1)),
        running("running-job1", "queue0", 1, on("node0", 2)),
        job("pending-job", "queue1", 3),
    ]
    decisions = cycle(queues(("queue0", 0, 0), ("queue1", 3, 1)), (node("node0", 3),), work)
    assert reclaimed_pods(decisions) == {"running-job0": {0, 1}, "running-job1": {0}}
    assert binds(decisions) == {"pending-job": ({"node0"}, {"running-job0", "running-job1"})}


def test_a_running_elastic_job_reclaims_an_extra_pod_of_another_for_its_own_next_pod():
    # KAI reclaim_elastic_test.go: "Elastic job reclaims single task from another elastic job"
    work = [
        elastic("running-job0", "queue0", 1, *pods_on(0, 1)),
        running("pending-job", "queue1", 1, on("node0", 2), pods=2, min_available=1),
    ]
    decisions = cycle(queues(("queue0", 0, 0), ("queue1", 1, 1)), (node("node0", 3),), work)
    assert reclaimed_pods(decisions) == {"running-job0": {1}}
    assert binds(decisions) == {"pending-job": ({"node0"}, {"running-job0"})}
    assert bound_pods(decisions) == {"pending-job": {1}}


def test_an_elastic_job_at_its_quota_keeps_its_gang_for_a_claimant_needing_more():
    # KAI reclaim_elastic_test.go: "Don't reclaim elastic job which is in quota" (its one
    # extra pod frees one GPU of the two asked; its gang of 2 is within its quota)
    work = [
        elastic("running-job-0", "queue2", 1, *pods_on(0, 1, 2), min_available=2),
        job("pending-job", "queue0", 2),
    ]
    decisions = cycle(queues(("queue0", 2, 1), ("queue2", 2, 1)), (node("node0", 3),), work)
    assert not reclaimed(decisions)
    assert not decisions.binds


def test_reclaim_takes_a_spare_pod_of_each_elastic_job_before_any_jobs_gang():
    # KAI reclaim_elastic_test.go: "Reclaim tasks from several elastic jobs": pods past a
    # gang are spare capacity, every job's before any gang
    work = [
        elastic("running-job0", "queue0", 1, *pods_on(0, 1)),
        elastic("running-job1", "queue0", 1, *pods_on(2, 3)),
        job("pending-job", "queue1", 2),
    ]
    decisions = cycle(queues(("queue0", 0, 0), ("queue1", 2, 1)), (node("node0", 4),), work)
    assert reclaimed_pods(decisions) == {"running-job0": {1}, "running-job1": {1}}
    assert binds(decisions) == {"pending-job": ({"node0"}, {"running-job0", "running-job1"})}
