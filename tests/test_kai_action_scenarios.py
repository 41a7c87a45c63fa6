"""KAI Scheduler's own action scenarios (allocate, preempt, consolidation), GPU-only.

Each test rebuilds one scenario of KAI's action tests in this project's terms: KAI's
leaf queue is a project, its default parent queue a department with room for everything
(KAI's test department has no quota limit); a queue's deserved GPUs are the project's
quota and, as KAI's test queues set no over-quota weight, the weight is 0 (no spare
GPUs) unless the scenario sets one. KAI's job priorities map to our types: train (50),
preemptible interactive (75, `preemptible=True`), build = non-preemptible interactive
(100), inference (125). One `schedule` is KAI's one session; KAI's "Pipelined" onto a
node whose victims are "Releasing" is our bind that waits for those evictions.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gitops_sched.engine import schedule
from gitops_sched.engine.types import (
    Decisions,
    EvictReason,
    Job,
    QueueSpec,
    ReleasingPod,
)
from tests.engine_builders import department, job, nodes, policy, project, snapshot
from tests.test_engine_kai_parity import on, running

# -- building KAI's scenarios -----------------------------------------------------------------


def queues(*specs: tuple[str, float]) -> tuple[QueueSpec, ...]:
    """KAI's test queues in creation order: (name, deserved GPUs), no over-quota weight."""
    return tuple(
        project(name, deserved, department="default", weight=0, age=i)
        for i, (name, deserved) in enumerate(specs)
    )


def cluster(*projects: QueueSpec, **kw):
    """KAI's default department: no quota limit, so it never decides anything."""
    return policy(*projects, departments=(department("default", 1000),), **kw)


def node(name: str, gpus: int):
    return replace(nodes(name, 1, gpus=gpus)[0], name=name)


def memory_node(name: str, gpus: int):
    """A node of KAI's tests as a GPU-memory request sees it: 100 MiB per GPU."""
    return replace(nodes(name, 1, gpus=gpus, memory_mib=100)[0], name=name)


def pods_lost(decisions: Decisions, reason: EvictReason) -> dict[str, set[int]]:
    """Each evicted job -> the indexes of the pods it loses, all evicted for `reason`."""
    assert all(e.reason == reason for e in decisions.evictions)
    lost: dict[str, set[int]] = {}
    for e in decisions.evictions:
        lost.setdefault(e.job, set()).update(pod.index for pod in e.pods)
    return lost


def build(name: str, proj: str, gpu=1, **kw) -> Job:
    """KAI's build job (priority 100): non-preemptible interactive work."""
    return job(name, proj, gpu, "interactive", **kw)


def preemptible_interactive(name: str, proj: str, gpu=1, **kw) -> Job:
    """KAI's preemptible interactive job (priority 75)."""
    return job(name, proj, gpu, "interactive", priority=75, preemptible=True, **kw)


def binds(decisions: Decisions) -> dict[str, set[str]]:
    """Each bound job -> the nodes its pods go to."""
    return {b.job: {pod.node for pod in b.pods} for b in decisions.binds}


def evictions(decisions: Decisions) -> list[tuple[str, EvictReason]]:
    return sorted((e.job, e.reason) for e in decisions.evictions)


def waits_for(decisions: Decisions, name: str) -> set[str]:
    return {w for b in decisions.binds if b.job == name for w in b.waits_for}


# -- allocate ---------------------------------------------------------------------------------


def test_free_gpus_go_first_to_the_queue_within_its_quota_then_to_the_older_queue():
    # KAI allocate_test.go: "1 job running on node0 from queue0, 3 pending jobs from queue1
    # and 1 pending job from queue0 - allocate them according to their the queue shares"
    pol = cluster(*queues(("queue0", 1), ("queue1", 1)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        job("pending_job0", "queue0", 1),
        job("pending_job1", "queue1", 1),
        job("pending_job2", "queue1", 1),
        job("pending_job3", "queue1", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2), node("node1", 2)), work))
    assert binds(decisions) == {
        "pending_job0": {"node1"},
        "pending_job1": {"node0"},
        "pending_job2": {"node1"},
    }
    assert not decisions.evictions


def test_a_queues_jobs_are_placed_in_submission_order_on_the_fullest_node():
    # KAI allocate_test.go: "1 job running on node0, 3 pending jobs - allocate them
    # according to their order"
    pol = cluster(*queues(("queue1", 2)))
    work = [
        running("running_job0", "queue1", 2, on("node0", 0, 1)),
        job("pending_job0", "queue1", 4),
        job("pending_job1", "queue1", 2),
        job("pending_job2", "queue1", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4), node("node1", 4)), work))
    assert binds(decisions) == {"pending_job0": {"node1"}, "pending_job1": {"node0"}}


def test_non_preemptible_work_goes_first_and_fits_the_quota_train_work_does_not_use():
    # KAI allocate_test.go: "1 job running on node0, 3 pending jobs - only build job should
    # be allocated" (the running train job does not count against the build job's quota)
    pol = cluster(*queues(("queue1", 2)))
    work = [
        running("running_job0", "queue1", 2, on("node0", 0, 1)),
        job("pending_job0", "queue1", 4),
        job("pending_job1", "queue1", 2),
        build("pending_job2", "queue1", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert binds(decisions) == {"pending_job2": {"node0"}}
    assert not decisions.evictions


def test_non_preemptible_work_past_the_quota_waits_and_train_work_takes_the_gpus():
    # KAI allocate_test.go: "1 job running on node0, 3 pending jobs, not enough deserved
    # GPUs for build job - allocate train job"
    pol = cluster(*queues(("queue1", 1)))
    work = [
        running("running_job0", "queue1", 2, on("node0", 0, 1)),
        job("pending_job0", "queue1", 4),
        job("pending_job1", "queue1", 2),
        build("pending_job2", "queue1", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert binds(decisions) == {"pending_job1": {"node0"}}


def test_the_queue_that_stays_within_its_quota_is_served_before_one_that_would_pass_it():
    # KAI allocate_test.go: "Both queues have deserved of 2, overall 4 gpus, queue0 will
    # pass the deserved if its pending jobs will be allocated - allocate a job from queue1"
    pol = cluster(*queues(("queue0", 2), ("queue1", 2)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue1", 1, on("node0", 1)),
        job("pending_job0", "queue0", 2),
        job("pending_job1", "queue1", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert binds(decisions) == {"pending_job1": {"node0"}}
    assert not decisions.evictions


def test_between_queues_equal_with_the_job_the_one_using_less_of_its_share_now_goes_first():
    # KAI allocate_test.go: "queue0 has deserved of 3, queue 1 has deserved of 2, they will
    # both have a share of 1 if allocated their task, yet for fair convergence - queue1
    # should allocate the task"
    pol = cluster(*queues(("queue0", 3), ("queue1", 2)))
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        job("pending_job0", "queue0", 1),
        job("pending_job1", "queue1", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert binds(decisions) == {"pending_job1": {"node0"}}
    assert not decisions.evictions


def test_between_queues_over_their_quota_with_equal_shares_the_older_queue_goes_first():
    # KAI allocate_test.go: "Both queues has exactly the same share - give priority to the
    # created 1st (queue0)"
    pol = cluster(*queues(("queue0", 2), ("queue1", 2)))
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        running("running_job1", "queue1", 2, on("node0", 2, 3)),
        job("pending_job0", "queue0", 1, submitted=2),
        job("pending_job1", "queue1", 1, submitted=1),  # not the oldest work: the queue decides
    ]
    decisions = schedule(snapshot(pol, (node("node0", 5),), work))
    assert binds(decisions) == {"pending_job0": {"node0"}}
    assert not decisions.evictions


def test_a_queue_with_a_quota_is_served_before_a_queue_without_one():
    # KAI allocate_test.go: "queue0 has no deserved GPUs, queue1 has deserved - allocate
    # jobs queue1"
    pol = cluster(*queues(("queue0", 0), ("queue1", 1)))
    work = [job("pending_job0", "queue0", 1), job("pending_job1", "queue1", 1)]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert binds(decisions) == {"pending_job1": {"node0"}}


def test_preemptible_interactive_work_may_run_over_the_quota():
    # KAI allocate_test.go: "2 running jobs and 1 pending, allocate preemptible interactive
    # with over quota"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        preemptible_interactive("running_job1", "queue0", 2, placement=(on("node0", 2, 3),)),
        preemptible_interactive("pending_job0", "queue0", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 5),), work))
    assert binds(decisions) == {"pending_job0": {"node0"}}


@pytest.mark.parametrize("earlier", [job, build], ids=["train", "build"])
def test_inference_is_served_before_earlier_work_of_its_queue(earlier) -> None:
    # KAI allocate_test.go: "Allocate inference before train" and "... before build"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        earlier("pending_job0", "queue0", 1),
        job("pending_job1", "queue0", 1, "inference"),
        earlier("pending_job2", "queue0", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert binds(decisions) == {"pending_job1": {"node0"}}


# -- allocate: gangs and fractions ------------------------------------------------------------


def test_a_gang_that_cannot_place_every_pod_places_none():
    # KAI allocateGang_test.go: "Don't allocate gang job if not all tasks are allocatable"
    pol = cluster(*queues(("queue0", 2)))
    work = [build("pending_job0", "queue0", 2, pods=2)]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert not decisions.binds


def test_a_non_preemptible_gang_past_the_quota_waits_although_the_gpus_are_free():
    # KAI allocateGang_test.go: "Don't allocate gang interactive job if it will go over quota"
    pol = cluster(*queues(("queue0", 3)))
    work = [build("pending_job0", "queue0", 2, pods=2)]
    decisions = schedule(snapshot(pol, (node("node0", 10),), work))
    assert not decisions.binds


def test_a_gang_is_pipelined_onto_gpus_still_being_released():
    # KAI allocateGang_test.go: "Pipeline if resource aren't currently allocatable"
    pol = cluster(*queues(("queue0", 3)))
    gone = ReleasingPod("running_job0", "queue0", on("node0", 0))
    work = [job("pending_job0", "queue0", 2, pods=2)]
    snap = replace(snapshot(pol, (node("node0", 4),), work), releasing=(gone,))
    decisions = schedule(snap)
    assert binds(decisions) == {"pending_job0": {"node0"}}
    assert waits_for(decisions, "pending_job0") == {"running_job0"}
    assert not decisions.evictions


def test_a_shared_gpu_request_packs_onto_the_gpu_already_shared():
    # KAI allocateFractionalGpu_test.go: "1 shared gpu job running, 1 pending interactive
    # shared gpu job, allocate to same gpu - even if multiple nodes, to check
    # gpusharingorder plugin"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        running("running_shared_gpu_job0", "queue0", 0.5, on("node1", 0, fraction=0.5)),
        build("pending_shared_gpu_job1", "queue0", 0.5),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 1), node("node1", 1)), work))
    assert [(b.job, b.pods) for b in decisions.binds] == [
        ("pending_shared_gpu_job1", (on("node1", 0, fraction=0.5),))
    ]


def test_a_non_preemptible_shared_gpu_request_past_the_quota_waits():
    # KAI allocateFractionalGpu_test.go: "1 shared gpu job running, 1 pending interactive
    # shared gpu job - queue will be overused, don't allocate" (the first of the two)
    pol = cluster(*queues(("queue0", 0.5)))
    work = [
        build("running_shared_gpu_job0", "queue0", 0.5, placement=(on("node0", 0, fraction=0.5),)),
        build("pending_shared_gpu_job1", "queue0", 0.5),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert not decisions.binds


# -- preempt ----------------------------------------------------------------------------------


def test_preempt_evicts_the_one_whole_gpu_job_rather_than_two_shared_ones():
    # KAI preempt_test.go: "3 train job running, 1 build job pending for the same queue -
    # no need to preempt both"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        running("running_job1", "queue0", 1, on("node0", 1)),
        running("running_job2", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        build("pending_job0", "queue0", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert evictions(decisions) == [("running_job1", EvictReason.PREEMPT)]
    assert binds(decisions) == {"pending_job0": {"node0"}}
    assert waits_for(decisions, "pending_job0") == {"running_job1"}


def test_build_work_preempts_its_queues_train_job_and_waits_for_it():
    # KAI preempt_test.go: "1 train job running, 1 build job pending for the same queue -
    # preempt"
    pol = cluster(*queues(("queue0", 1)))
    work = [running("running_job0", "queue0", 1, on("node0", 0)), build("pending_job0", "queue0")]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert evictions(decisions) == [("running_job0", EvictReason.PREEMPT)]
    assert binds(decisions) == {"pending_job0": {"node0"}}
    assert waits_for(decisions, "pending_job0") == {"running_job0"}


def test_train_work_never_preempts_train_work_of_its_queue():
    # KAI preempt_test.go: "1 train job running, 1 train job pending for the same queue -
    # don't preempt"
    pol = cluster(*queues(("queue0", 1)))
    work = [running("running_job0", "queue0", 1, on("node0", 0)), job("pending_job0", "queue0")]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert not decisions.evictions
    assert not decisions.binds


def test_build_work_never_preempts_another_queue_at_its_quota():
    # KAI preempt_test.go: "1 train job running, 1 build job pending for the different queue
    # - don't preempt"
    pol = cluster(*queues(("queue0", 1), ("queue1", 1)))
    work = [running("running_job0", "queue0", 1, on("node0", 0)), build("pending_job0", "queue1")]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert not decisions.evictions
    assert not decisions.binds


def test_preempt_takes_only_from_the_claimants_own_queue():
    # KAI preempt_test.go: "2 train jobs running require 2 GPUs, 1 build job with 2 GPUs
    # pending - preempt"
    pol = cluster(*queues(("queue0", 2), ("queue1", 2)))
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        running("running_job1", "queue1", 2, on("node0", 2, 3)),
        build("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert evictions(decisions) == [("running_job0", EvictReason.PREEMPT)]
    assert binds(decisions) == {"pending_job0": {"node0"}}


def test_build_work_preempts_train_before_preemptible_interactive_work():
    # KAI preempt_test.go: "1 train, 1 preemptible interactive jobs running, 1 build job with
    # 1 GPUs pending for the same queue - preempt train"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        preemptible_interactive("running_job1", "queue0", 1, placement=(on("node0", 1),)),
        build("pending_job0", "queue0", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert evictions(decisions) == [("running_job0", EvictReason.PREEMPT)]
    assert binds(decisions) == {"pending_job0": {"node0"}}


def test_of_two_equal_preemptible_interactive_jobs_the_younger_is_preempted():
    # KAI preempt_test.go: "2 preemptible interactive jobs running, 1 build job with 1 GPUs
    # pending for the same queue - preempt"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        preemptible_interactive("running_job0", "queue0", 1, placement=(on("node0", 0),)),
        preemptible_interactive("running_job1", "queue0", 1, placement=(on("node0", 1),)),
        build("pending_job0", "queue0", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert evictions(decisions) == [("running_job1", EvictReason.PREEMPT)]
    assert binds(decisions) == {"pending_job0": {"node0"}}


def test_preemptible_interactive_work_preempts_train_work():
    # KAI preempt_test.go: "1 train job, 1 preemptible interactive job with 1 GPUs pending
    # for the same queue - preempt"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        preemptible_interactive("pending_job0", "queue0", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert evictions(decisions) == [("running_job0", EvictReason.PREEMPT)]
    assert binds(decisions) == {"pending_job0": {"node0"}}


def test_inference_never_preempts_non_preemptible_interactive_work():
    # KAI preempt_test.go: "Inference shouldn't preempt interactive"
    pol = cluster(*queues(("queue0", 10)))
    work = [
        build("running_job0", "queue0", 1, placement=(on("node0", 0),)),
        job("pending_job0", "queue0", 1, "inference"),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert not decisions.evictions
    assert not decisions.binds


def test_interactive_work_never_preempts_inference():
    # KAI preempt_test.go: "Interactive shouldn't preempt inference"
    pol = cluster(*queues(("queue0", 10)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0), type="inference"),
        build("pending_job0", "queue0", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert not decisions.evictions
    assert not decisions.binds


def test_inference_preempts_train_work():
    # KAI preempt_test.go: "Inference should preempt train"
    pol = cluster(*queues(("queue0", 10)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        job("pending_job0", "queue0", 1, "inference"),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert evictions(decisions) == [("running_job0", EvictReason.PREEMPT)]
    assert binds(decisions) == {"pending_job0": {"node0"}}


# -- consolidation ----------------------------------------------------------------------------


def test_consolidation_moves_only_the_job_that_makes_room():
    # KAI consolidation_test.go: "3 jobs are running on different GPUs, 1 job pending -
    # Consolidate and verify not all preemptors are evicted as well"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 3, on("node0", 0, 1, 2)),
        running("running_job1", "queue0", 1, on("node1", 0)),
        running("running_job2", "queue0", 2, on("node1", 1, 2)),
        job("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4), node("node1", 4)), work))
    assert evictions(decisions) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert binds(decisions) == {"running_job1": {"node0"}, "pending_job0": {"node1"}}
    assert waits_for(decisions, "pending_job0") == {"running_job1"}


def test_consolidation_does_nothing_when_the_idle_gpus_are_too_few():
    # KAI consolidation_test.go: "2 jobs of 1 task running on different GPUs, 1 job of 3
    # gpus is pending - can't Consolidate"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 3, on("node0", 0, 1, 2)),
        running("running_job1", "queue0", 3, on("node1", 0, 1, 2)),
        job("pending_job0", "queue0", 3),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4), node("node1", 4)), work))
    assert not decisions.evictions
    assert not decisions.binds


def test_consolidation_never_moves_non_preemptible_work():
    # KAI consolidation_test.go: "2 build jobs are running on different GPUs - never
    # consoliate"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        build("running_job0", "queue0", 1, placement=(on("node0", 0),)),
        build("running_job1", "queue0", 1, placement=(on("node1", 0),)),
        build("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2), node("node1", 2)), work))
    assert not decisions.evictions
    assert not decisions.binds


def test_consolidation_moves_train_work_and_keeps_preemptible_interactive_work_running():
    # KAI consolidation_test.go: "2 jobs of 1 task running on different GPUs, 1 task is
    # preemptible interactive job, 1 job of 2 gpus is pending - consolidate without killing
    # the preemptible interactive"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        preemptible_interactive("running_job1", "queue0", 2, placement=(on("node1", 0, 1),)),
        job("pending_job0", "queue0", 3),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4), node("node1", 4)), work))
    assert evictions(decisions) == [("running_job0", EvictReason.CONSOLIDATE)]
    assert binds(decisions) == {"running_job0": {"node1"}, "pending_job0": {"node0"}}


def test_consolidation_moves_another_queues_job_to_make_room():
    # KAI consolidation_test.go: "2 queues with different share, pending job will attempt
    # to reallocate before the reallocated jobs - 1 running job from queue0, 2 running jobs
    # from queue1, 1 pending job from queue0 - consolidate"
    pol = cluster(*queues(("queue0", 1), ("queue1", 1)))
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        running("running_job1", "queue1", 1, on("node0", 2)),
        running("running_job2", "queue1", 3, on("node1", 0, 1, 2)),
        job("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4), node("node1", 4)), work))
    assert evictions(decisions) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert binds(decisions) == {"running_job1": {"node1"}, "pending_job0": {"node0"}}


def test_consolidation_moves_a_shared_gpu_job_to_free_a_whole_gpu():
    # KAI consolidation_test.go: "2 jobs of 0.5 task running on different GPUs, 1 job of 1
    # gpus is pending - Consolidate and run the pending job"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        running("running_job1", "queue0", 0.5, on("node0", 1, fraction=0.5)),
        job("pending_job0", "queue0", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert evictions(decisions) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert {b.job: b.pods for b in decisions.binds} == {
        "running_job1": (on("node0", 0, fraction=0.5),),
        "pending_job0": (on("node0", 1),),
    }


def test_consolidation_passes_over_full_nodes_and_moves_the_younger_half_node_job():
    # KAI consolidation_test.go: "jump over full nodes pods"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 4, on("node0", 0, 1, 2, 3)),
        running("running_job1", "queue0", 2, on("node1", 0, 1)),
        running("running_job2", "queue0", 2, on("node2", 0, 1)),
        running("running_job3", "queue0", 4, on("node3", 0, 1, 2, 3)),
        job("pending_job0", "queue0", 3),
    ]
    cl = tuple(node(f"node{i}", 4) for i in range(4))
    decisions = schedule(snapshot(pol, cl, work))
    assert evictions(decisions) == [("running_job2", EvictReason.CONSOLIDATE)]
    assert binds(decisions) == {"running_job2": {"node1"}, "pending_job0": {"node2"}}


def test_consolidation_moves_one_pod_of_an_elastic_job():
    # KAI consolidation_test.go: "1 elastic job running on different GPUs, 1 job of 3 gpus
    # is pending - Consolidate and run the pending job"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running(
            "running_job0",
            "queue0",
            2,
            on("node0", 0, 1, index=0),
            on("node1", 0, 1, index=1),
            pods=2,
            min_available=1,
        ),
        job("pending_job0", "queue0", 3),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4), node("node1", 3)), work))
    assert evictions(decisions) == [("running_job0", EvictReason.CONSOLIDATE)]
    assert binds(decisions) == {"running_job0": {"node0"}, "pending_job0": {"node1"}}


def test_consolidation_makes_room_for_an_elastic_jobs_missing_pod():
    # KAI consolidation_test.go: "2 elastic jobs running on different GPUs, 1 job of 3 gpus
    # is pending - consolidate"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running(
            "running_job0",
            "queue0",
            1,
            on("node0", 0, index=0),
            on("node0", 1, index=1),
            on("node0", 2, index=2),
            on("node1", 0, index=3),
            pods=4,
            min_available=1,
        ),
        running("running_job1", "queue0", 3, on("node1", 1, 2, 3), pods=2, min_available=1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4), node("node1", 6)), work))
    assert evictions(decisions) == [("running_job0", EvictReason.CONSOLIDATE)]
    assert binds(decisions) == {"running_job0": {"node0"}, "running_job1": {"node1"}}


# -- preempt: gangs ---------------------------------------------------------------------------


def test_preempt_evicts_nothing_when_the_gang_cannot_be_placed_whole():
    # KAI preemptGang_test.go: "Don't preempt if not all tasks can be allocated"
    pol = cluster(project("queue0", 2, department="default", weight=2))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        build("pending_job0", "queue0", 1, pods=2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert not decisions.evictions
    assert not decisions.binds


def test_a_gang_preempts_train_work_when_every_pod_then_fits():
    # KAI preemptGang_test.go: "Preempt if all tasks can be allocated"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        build("pending_job0", "queue0", 1, pods=2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert evictions(decisions) == [("running_job0", EvictReason.PREEMPT)]
    assert binds(decisions) == {"pending_job0": {"node0"}}
    assert waits_for(decisions, "pending_job0") == {"running_job0"}


def test_a_gang_past_its_quota_preempts_nothing():
    # KAI preemptGang_test.go: "don't preempt if will go over quota"
    pol = cluster(*queues(("queue0", 3)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        build("pending_job0", "queue0", 2, pods=2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert not decisions.evictions
    assert not decisions.binds


def test_preempt_takes_a_running_gang_whole():
    # KAI preemptGang_test.go: "preempt gang job"
    pol = cluster(*queues(("queue0", 3)))
    work = [
        running(
            "running_job0",
            "queue0",
            2,
            on("node0", 0, 1, index=0),
            on("node0", 2, 3, index=1),
            pods=2,
        ),
        build("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert evictions(decisions) == [("running_job0", EvictReason.PREEMPT)]
    assert {len(e.pods) for e in decisions.evictions} == {2}
    assert binds(decisions) == {"pending_job0": {"node0"}}


# -- allocate: more --------------------------------------------------------------------------


def test_non_preemptible_work_fits_a_quota_used_only_by_preemptible_interactive_work():
    # KAI allocate_test.go: "1 running jobs and 1 build pending, allocate build interactive
    # with over quota"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        preemptible_interactive("running_job0", "queue0", 2, placement=(on("node0", 0, 1),)),
        build("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 5),), work))
    assert binds(decisions) == {"pending_job0": {"node0"}}


def test_preemptible_inference_may_run_in_a_queue_without_quota():
    # KAI allocate_test.go: "Allocate inference over quota" (KAI's test session makes
    # inference preemptible)
    pol = cluster(*queues(("queue0", 0), ("queue1", 1)))
    work = [job("pending_job0", "queue0", 1, "inference", preemptible=True)]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert binds(decisions) == {"pending_job0": {"node0"}}


def test_a_shared_gpu_gang_past_the_projects_limit_waits():
    # KAI allocateFractionalGpu_test.go: "allocate job with multiple pods but does not allow
    # it because project goes over allowance"
    pol = cluster(
        project("queue0", 1, department="department-a", weight=1, limit=1),
    )
    pol = replace(pol, departments=(department("department-a", 1, limit=1),))
    work = [job("pending_job0", "queue0", 0.5, pods=3)]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert not decisions.binds


def test_a_shared_gpu_gang_past_the_departments_limit_waits():
    # KAI allocateFractionalGpu_test.go: "allocate job with multiple pods but does not allow
    # it because department to go over allowance"
    pol = cluster(project("queue0", 1, department="department-a", weight=1))
    pol = replace(pol, departments=(department("department-a", 1, limit=1),))
    work = [job("pending_job0", "queue0", 0.5, pods=3)]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert not decisions.binds


def test_a_non_preemptible_whole_gpu_fits_next_to_a_shared_one_within_the_quota():
    # KAI allocateFractionalGpu_test.go: "Verify allocated fractional GPU jobs are counted
    # in the overall number of GPUs the default department will have"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        build("running_job0", "queue0", 0.5, placement=(on("node0", 1, fraction=0.5),)),
        build("pending_job0", "queue0", 1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert [(b.job, b.pods) for b in decisions.binds] == [("pending_job0", (on("node0", 0),))]


def test_shared_gpu_train_work_runs_over_a_quota_that_non_preemptible_shares_fill():
    # KAI allocateFractionalGpu_test.go: "Allow allocation of fractional training when over
    # quota with fractional jobs" (the first of the two)
    pol = cluster(*queues(("queue0", 1)))
    work = [
        build("running_job0", "queue0", 0.5, placement=(on("node0", 0, fraction=0.5),)),
        build("running_job1", "queue0", 0.5, placement=(on("node0", 0, fraction=0.5),)),
        job("pending_job0", "queue0", 0.5),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert [(b.job, b.pods) for b in decisions.binds] == [
        ("pending_job0", (on("node0", 1, fraction=0.5),))
    ]


def test_a_fraction_waits_for_a_share_being_released_rather_than_open_a_new_gpu():
    # KAI allocateFractionalGpu_test.go: "Pipeline fractional interactive gpu task when a
    # task is evicting - dont allocate a new gpu"
    pol = cluster(*queues(("queue0", 2)))
    gone = ReleasingPod("releasing_job0", "queue0", on("node0", 0, fraction=0.5))
    work = [
        build("running_job0", "queue0", 0.5, placement=(on("node0", 0, fraction=0.5),)),
        build("pending_job0", "queue0", 0.5),
    ]
    snap = replace(snapshot(pol, (node("node0", 2),), work), releasing=(gone,))
    decisions = schedule(snap)
    assert [(b.job, b.pods) for b in decisions.binds] == [
        ("pending_job0", (on("node0", 0, fraction=0.5),))
    ]
    assert waits_for(decisions, "pending_job0") == {"releasing_job0"}
