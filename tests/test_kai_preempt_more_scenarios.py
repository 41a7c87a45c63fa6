"""KAI Scheduler's preempt, consolidation and stale-gang scenarios, GPU-only: the whole-session
(integration) tests and the elastic preempt action tests.

Each test rebuilds one scenario of KAI's tests (named in its first comment) in this project's
terms, as `tests/test_kai_action_scenarios.py` does: KAI's leaf queue is a project of one
department without a quota limit, its deserved GPUs the project's quota, no over-quota weight;
KAI's priorities are our job types (train 50, preemptible interactive 75, build = non-preemptible
interactive 100, inference 125). KAI's fake nodes give every GPU 100 units of memory, so a
`gpuMemory` request of 50 is half a GPU here too.

KAI's integration tests run every action for several sessions: each session's "Releasing"
victims come back as pending work, its "Pipelined" and "Binding" pods start, and the expected
outcome must hold after the second session and stay for five more. Here that is `settle`:
cycles until one changes nothing (evicted pods leave at once, as in KAI's test loop); the tests
check the first cycle's decisions, every eviction over all cycles (nothing is taken twice, no
loop), and what runs where at the end. KAI's action-level tests (the elastic preempt file) run
one action once: one `schedule` here.
"""

from __future__ import annotations

from dataclasses import replace

from gitops_sched.engine import schedule
from gitops_sched.engine.types import Decisions, EvictReason, Job, Node, Policy, Snapshot
from tests.engine_builders import job, snapshot
from tests.test_engine_kai_parity import (
    memory_job,
    nodes_of,
    on,
    placement,
    running,
    settled,
)
from tests.test_kai_action_scenarios import (
    binds,
    build,
    cluster,
    evictions,
    pods_lost,
    queues,
    waits_for,
)
from tests.test_kai_action_scenarios import (
    memory_node as node,  # KAI's fake node: GPUs of 100 units of memory each
)

# -- building and reading KAI's sessions ------------------------------------------------------


def sessions(pol: Policy, node_list: tuple[Node, ...], work: list[Job]):
    """KAI's test loop: the first cycle's decisions, every cycle's, and the settled state."""
    final, history = settled(snapshot(pol, node_list, work))
    return history[0], history, final


def all_evictions(history: list[Decisions]) -> list[tuple[str, EvictReason]]:
    return sorted((e.job, e.reason) for d in history for e in d.evictions)


def running_jobs(state: Snapshot) -> set[str]:
    return {j.name for j in state.jobs if j.placement}


# -- integration_tests/preempt/preempt_test.go ------------------------------------------------


def test_build_work_stops_the_one_whole_gpu_train_job_and_the_shares_keep_running():
    # KAI integration preempt_test.go: "3 train job running, 1 build job pending - no need to
    # preempt two jobs"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        running("running_job1", "queue0", 1, on("node0", 1)),
        running("running_job2", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        build("pending_job0", "queue0", 1),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert evictions(first) == [("running_job1", EvictReason.PREEMPT)]
    assert waits_for(first, "pending_job0") == {"running_job1"}
    assert all_evictions(history) == [("running_job1", EvictReason.PREEMPT)]
    assert running_jobs(final) == {"running_job0", "running_job2", "pending_job0"}
    assert placement(final, "running_job0") == (on("node0", 0, fraction=0.5),)
    assert placement(final, "running_job2") == (on("node0", 0, fraction=0.5),)
    assert placement(final, "pending_job0") == (on("node0", 1),)


def test_build_work_within_its_quota_stops_a_bigger_train_job_that_then_waits():
    # KAI integration preempt_test.go: "1 train job running, 1 build job pending - preempt"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        build("pending_job0", "queue0", 1),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert evictions(first) == [("running_job0", EvictReason.PREEMPT)]
    assert binds(first) == {"pending_job0": {"node0"}}
    assert all_evictions(history) == [("running_job0", EvictReason.PREEMPT)]
    assert running_jobs(final) == {"pending_job0"}
    assert nodes_of(final, "pending_job0") == {"node0"}


def test_build_work_stops_every_train_job_of_its_queue_it_needs_the_gpus_of():
    # KAI integration preempt_test.go: "3 jobs running for queue0 on 4 GPUs, 1 pending build job
    # for queue0, deserved of queue1 is 4 - preempt"
    pol = cluster(*queues(("queue0", 4)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 2, on("node0", 1, 2)),
        running("running_job2", "queue0", 1, on("node0", 3)),
        build("pending_job0", "queue0", 4),
    ]
    first, history, final = sessions(pol, (node("node0", 4),), work)
    stopped = [(f"running_job{i}", EvictReason.PREEMPT) for i in range(3)]
    assert evictions(first) == stopped
    assert waits_for(first, "pending_job0") == {"running_job0", "running_job1", "running_job2"}
    assert all_evictions(history) == stopped
    assert running_jobs(final) == {"pending_job0"}
    assert nodes_of(final, "pending_job0") == {"node0"}


def test_build_work_that_fits_no_node_stops_nothing():
    # KAI integration preempt_test.go: "3 jobs running for queue0 on 4 GPUs, 1 pending build job
    # for queue0, no node can contain build job - don't preempt"
    pol = cluster(*queues(("queue0", 4)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 2, on("node1", 0, 1)),
        running("running_job2", "queue0", 1, on("node0", 1)),
        build("pending_job0", "queue0", 4),
    ]
    first, history, final = sessions(pol, (node("node0", 2), node("node1", 2)), work)
    assert not first.evictions and not first.binds
    assert len(history) == 1
    assert running_jobs(final) == {"running_job0", "running_job1", "running_job2"}


def test_build_work_past_its_quota_stops_nothing():
    # KAI integration preempt_test.go: "3 jobs running for queue0 on 4 GPUs, 1 pending build job
    # for queue0, deserved of queue1 is 3 - don't preempt"
    pol = cluster(*queues(("queue0", 3)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 2, on("node0", 1, 2)),
        running("running_job2", "queue0", 1, on("node0", 3)),
        build("pending_job0", "queue0", 4),
    ]
    first, history, final = sessions(pol, (node("node0", 4),), work)
    assert not first.evictions and not first.binds
    assert len(history) == 1
    assert running_jobs(final) == {"running_job0", "running_job1", "running_job2"}


def test_nothing_pending_nothing_changes():
    # KAI integration preempt_test.go: "No jobs pending - don't preempt"
    pol = cluster(*queues(("queue0", 3)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        build("running_job1", "queue0", 2, placement=(on("node0", 1, 2),)),
        running("running_job2", "queue0", 1, on("node0", 3)),
    ]
    first, history, final = sessions(pol, (node("node0", 4),), work)
    assert not first.changed
    assert len(history) == 1
    assert running_jobs(final) == {"running_job0", "running_job1", "running_job2"}


# -- integration_tests/preempt/preemptFractional_test.go --------------------------------------


def test_a_build_gpu_memory_request_stops_the_train_share_on_the_gpu_it_then_takes():
    # KAI integration preemptFractional_test.go: "Preempt fractional train by fractional
    # interactive GPU memory request job"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        memory_job("running_job1", "queue0", 50, on("node0", 1, fraction=0.5), started_at=0.0),
        replace(
            memory_job("pending_job0", "queue0", 60),
            type="interactive",
            priority=100,
            preemptible=False,
        ),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert evictions(first) == [("running_job1", EvictReason.PREEMPT)]
    assert waits_for(first, "pending_job0") == {"running_job1"}
    assert all_evictions(history) == [("running_job1", EvictReason.PREEMPT)]
    assert running_jobs(final) == {"running_job0", "pending_job0"}
    assert placement(final, "running_job0") == (on("node0", 0),)
    assert [pod.gpus for pod in placement(final, "pending_job0")] == [(1,)]


def test_a_build_whole_gpu_request_stops_a_train_share():
    # KAI integration preemptFractional_test.go: "Preempt fractional train by whole GPU job"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 1)),
        running("running_job1", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        build("pending_job0", "queue0", 1),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert evictions(first) == [("running_job1", EvictReason.PREEMPT)]
    assert all_evictions(history) == [("running_job1", EvictReason.PREEMPT)]
    assert running_jobs(final) == {"running_job0", "pending_job0"}
    assert placement(final, "running_job0") == (on("node0", 1),)
    assert placement(final, "pending_job0") == (on("node0", 0),)


def test_a_build_share_too_big_for_the_gpus_free_half_stops_the_train_share_there():
    # KAI integration preemptFractional_test.go: "Preempt fractional train by fractional
    # interactive GPU job"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 0.5, on("node0", 1, fraction=0.5)),
        build("pending_job0", "queue0", 0.6),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert evictions(first) == [("running_job1", EvictReason.PREEMPT)]
    assert all_evictions(history) == [("running_job1", EvictReason.PREEMPT)]
    assert running_jobs(final) == {"running_job0", "pending_job0"}
    assert placement(final, "pending_job0") == (on("node0", 1, fraction=0.6),)


# -- integration_tests/preempt/preemptGang_test.go --------------------------------------------


def test_a_build_gang_stops_the_train_job_holding_the_gpus_it_needs():
    # KAI integration preemptGang_test.go: "Classic gang preempt"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        build("pending_job0", "queue0", 1, pods=2),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert evictions(first) == [("running_job0", EvictReason.PREEMPT)]
    assert binds(first) == {"pending_job0": {"node0"}}
    assert all_evictions(history) == [("running_job0", EvictReason.PREEMPT)]
    assert running_jobs(final) == {"pending_job0"}
    assert len(placement(final, "pending_job0")) == 2


def test_a_gang_missing_one_pod_stops_the_younger_train_job_for_it():
    # KAI integration preemptGang_test.go: "Some of the pods are running and some are pending-
    # preempt those who are needed in order to allocate all the pods of gang job"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 1, on("node0", 1)),
        build("pending_job0", "queue0", 1, pods=2, placement=(on("node0", 2, index=0),)),
    ]
    first, history, final = sessions(pol, (node("node0", 3),), work)
    assert evictions(first) == [("running_job1", EvictReason.PREEMPT)]
    assert waits_for(first, "pending_job0") == {"running_job1"}
    assert all_evictions(history) == [("running_job1", EvictReason.PREEMPT)]
    assert running_jobs(final) == {"running_job0", "pending_job0"}
    assert placement(final, "running_job0") == (on("node0", 0),)
    assert sorted(pod.index for pod in placement(final, "pending_job0")) == [0, 1]


def test_build_work_stops_a_running_train_gang_whole():
    # KAI integration preemptGang_test.go: "preempt gang job"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        running(
            "running_gang_job0",
            "queue0",
            1,
            on("node0", 0, index=0),
            on("node0", 1, index=1),
            pods=2,
        ),
        build("pending_job0", "queue0", 1),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert evictions(first) == [("running_gang_job0", EvictReason.PREEMPT)]
    assert {len(e.pods) for e in first.evictions} == {2}
    assert all_evictions(history) == [("running_gang_job0", EvictReason.PREEMPT)]
    assert running_jobs(final) == {"pending_job0"}


# -- preempt/preempt_elastic_test.go (the preempt action once: one cycle) ---------------------


def inference(name: str, proj: str, gpu=1, **kw) -> Job:
    return job(name, proj, gpu, "inference", **kw)


def elastic(name: str, proj: str, gpu, node_name: str, *gpu_lists: tuple[int, ...]) -> Job:
    """A train job of one pod per GPU list, all running on `node_name`, `minAvailable` 1."""
    pods = [on(node_name, *gpus, index=i) for i, gpus in enumerate(gpu_lists)]
    return running(name, proj, gpu, *pods, pods=len(pods), min_available=1)


def evicted_pods(decisions: Decisions) -> dict[str, set[int]]:
    """Each evicted job -> the indexes of the pods it loses (all by preempt)."""
    return pods_lost(decisions, EvictReason.PREEMPT)


def test_inference_takes_one_extra_pod_of_an_elastic_train_job():
    # KAI preempt_elastic_test.go: "Inference job preempts single task from elastic train job"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        elastic("running_job0", "queue0", 1, "node0", (0,), (1,)),
        inference("pending_job0", "queue0"),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert evicted_pods(decisions) == {"running_job0": {1}}
    assert binds(decisions) == {"pending_job0": {"node0"}}
    assert waits_for(decisions, "pending_job0") == {"running_job0"}


def test_inference_takes_as_many_extra_pods_of_an_elastic_job_as_it_needs_highest_first():
    # KAI preempt_elastic_test.go: "Inference job preempts several tasks from elastic train job"
    pol = cluster(*queues(("queue0", 4)))
    work = [
        elastic("running_job0", "queue0", 1, "node0", (0,), (1,), (2,), (3,)),
        inference("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert evicted_pods(decisions) == {"running_job0": {2, 3}}
    assert binds(decisions) == {"pending_job0": {"node0"}}


def test_inference_takes_an_elastic_job_whole_when_it_needs_every_gpu():
    # KAI preempt_elastic_test.go: "Inference job preempts all tasks from elastic train job"
    pol = cluster(*queues(("queue0", 4)))
    work = [
        elastic("running_job0", "queue0", 1, "node0", (0,), (1,)),
        inference("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert evicted_pods(decisions) == {"running_job0": {0, 1}}
    assert binds(decisions) == {"pending_job0": {"node0"}}


def test_inference_takes_the_younger_job_and_an_extra_pod_of_the_elastic_one():
    # KAI preempt_elastic_test.go: "Inference job preempts running job and a single task from
    # elastic train job"
    pol = cluster(*queues(("queue0", 3)))
    work = [
        elastic("running_job0", "queue0", 1, "node0", (0,), (1,)),
        running("running_job1", "queue0", 1, on("node0", 2)),
        inference("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 3),), work))
    assert evicted_pods(decisions) == {"running_job0": {1}, "running_job1": {0}}
    assert binds(decisions) == {"pending_job0": {"node0"}}


def test_inference_needing_the_whole_node_takes_every_job_elastic_or_not():
    # KAI preempt_elastic_test.go: "Inference job preempts several jobs (one of them is elastic)"
    pol = cluster(*queues(("queue0", 4)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        elastic("running_job1", "queue0", 1, "node0", (1,), (2,)),
        running("running_job2", "queue0", 1, on("node0", 3)),
        inference("pending_job0", "queue0", 4),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert evicted_pods(decisions) == {
        "running_job0": {0},
        "running_job1": {0, 1},
        "running_job2": {0},
    }
    assert binds(decisions) == {"pending_job0": {"node0"}}


def test_an_elastic_inference_job_missing_a_pod_takes_an_extra_pod_of_a_train_job():
    # KAI preempt_elastic_test.go: "Elastic inference job preempts task from train job in favor
    # of a single task"
    pol = cluster(*queues(("queue0", 3)))
    work = [
        elastic("running_job0", "queue0", 1, "node0", (0,), (1,)),
        inference(
            "pending_job0",
            "queue0",
            1,
            pods=2,
            min_available=1,
            placement=(on("node0", 2, index=0),),
        ),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 3),), work))
    assert evicted_pods(decisions) == {"running_job0": {1}}
    assert [(b.job, [p.index for p in b.pods]) for b in decisions.binds] == [("pending_job0", [1])]
    assert waits_for(decisions, "pending_job0") == {"running_job0"}


def test_inference_takes_one_pod_of_an_elastic_job_and_moves_the_other_to_a_free_gpu():
    # KAI preempt_elastic_test.go: "Inference job preempts single task, moves one task from
    # elastic train job"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        elastic("running_job0", "queue0", 1, "node0", (0,), (1,)),
        inference("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 2), node("node1", 1)), work))
    assert evicted_pods(decisions) == {"running_job0": {0, 1}}
    assert binds(decisions) == {"running_job0": {"node1"}, "pending_job0": {"node0"}}
    moved = next(b for b in decisions.binds if b.job == "running_job0")
    assert [p.index for p in moved.pods] == [0]


# -- integration_tests/consolidation/consolidation_test.go ------------------------------------


def test_consolidation_moves_the_younger_job_beside_the_older_to_free_a_node():
    # KAI integration consolidation_test.go: "1 train job of 1 GPU running on node0, 1 train job
    # of 1 GPU running on node 0, 1 pending job of 2 GPUs - consolidate"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 1, on("node1", 0)),
        job("pending_job0", "queue0", 2),
    ]
    first, history, final = sessions(pol, (node("node0", 2), node("node1", 2)), work)
    assert evictions(first) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert binds(first) == {"running_job1": {"node0"}, "pending_job0": {"node1"}}
    assert all_evictions(history) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert nodes_of(final, "running_job0") == {"node0"}
    assert nodes_of(final, "running_job1") == {"node0"}
    assert nodes_of(final, "pending_job0") == {"node1"}


def test_consolidation_never_moves_build_work():
    # KAI integration consolidation_test.go: "1 build job of 1 GPU running on node0, 1 build job
    # of 1 GPU running on node 0, 1 pending job of 2 GPUs - don't consolidate"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        build("running_job0", "queue0", 1, placement=(on("node0", 0),)),
        build("running_job1", "queue0", 1, placement=(on("node1", 0),)),
        job("pending_job0", "queue0", 2),
    ]
    first, history, final = sessions(pol, (node("node0", 2), node("node1", 2)), work)
    assert not first.changed
    assert len(history) == 1
    assert running_jobs(final) == {"running_job0", "running_job1"}
    assert nodes_of(final, "running_job1") == {"node1"}


# -- integration_tests/consolidation/consolidationFractional_test.go --------------------------


def test_consolidation_moves_a_gpu_memory_job_onto_the_other_ones_gpu_to_free_a_gpu():
    # KAI integration consolidationFractional_test.go: "consolidate job that requested memory
    # and insert another job that required memory"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        memory_job("running_job0", "queue0", 20, on("node0", 0, fraction=0.2), started_at=0.0),
        memory_job("running_job1", "queue0", 20, on("node0", 1, fraction=0.2), started_at=0.0),
        memory_job("pending_job0", "queue0", 90),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert evictions(first) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert all_evictions(history) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert [pod.gpus for pod in placement(final, "running_job0")] == [(0,)]
    assert [pod.gpus for pod in placement(final, "running_job1")] == [(0,)]
    assert [pod.gpus for pod in placement(final, "pending_job0")] == [(1,)]


def test_consolidation_moves_a_share_onto_the_other_share_for_a_bigger_share():
    # KAI integration consolidationFractional_test.go: "consolidate fractional GPUs and insert
    # a fractional train job"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        running("running_job0", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        running("running_job1", "queue0", 0.5, on("node0", 1, fraction=0.5)),
        job("pending_job0", "queue0", 0.7),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert evictions(first) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert all_evictions(history) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert placement(final, "running_job0") == (on("node0", 0, fraction=0.5),)
    assert placement(final, "running_job1") == (on("node0", 0, fraction=0.5),)
    assert placement(final, "pending_job0") == (on("node0", 1, fraction=0.7),)


def test_consolidation_moves_a_share_onto_the_other_share_for_a_whole_gpu():
    # KAI integration consolidationFractional_test.go: "consolidate fractional GPUs and insert
    # a whole train job"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        running("running_job0", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        running("running_job1", "queue0", 0.5, on("node0", 1, fraction=0.5)),
        job("pending_job0", "queue0", 1),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert evictions(first) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert all_evictions(history) == [("running_job1", EvictReason.CONSOLIDATE)]
    assert placement(final, "running_job1") == (on("node0", 0, fraction=0.5),)
    assert placement(final, "pending_job0") == (on("node0", 1),)


def test_shares_that_do_not_fit_one_gpu_together_are_not_moved_for_a_whole_gpu():
    # KAI integration consolidationFractional_test.go: "can't consolidate fractional GPUs and
    # insert a whole train job"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        running("running_job0", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        running("running_job1", "queue0", 0.6, on("node0", 1, fraction=0.6)),
        job("pending_job0", "queue0", 1),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert not first.changed
    assert len(history) == 1
    assert running_jobs(final) == {"running_job0", "running_job1"}


def test_shares_that_do_not_fit_one_gpu_together_are_not_moved_for_a_bigger_share():
    # KAI integration consolidationFractional_test.go: "can't consolidate fractional GPUs and
    # insert a fractional train job"
    pol = cluster(*queues(("queue0", 1)))
    work = [
        running("running_job0", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        running("running_job1", "queue0", 0.6, on("node0", 1, fraction=0.6)),
        job("pending_job0", "queue0", 0.8),
    ]
    first, history, final = sessions(pol, (node("node0", 2),), work)
    assert not first.changed
    assert len(history) == 1
    assert running_jobs(final) == {"running_job0", "running_job1"}


# -- integration_tests/stalegangeviction/stalegangeviction_test.go ----------------------------


def stale_gang_of(kind) -> list[Job]:
    """A 2-pod gang with one pod running (KAI's test sessions wait no grace period) and a
    train job filling the node's other GPU."""
    return [
        kind(
            "running_job0",
            "queue0",
            1,
            pods=2,
            placement=(on("node0", 0, index=0),),
            short_since=0.0,
        ),
        running("running_job1", "queue0", 1, on("node0", 1)),
    ]


def test_a_train_gang_left_short_of_pods_is_stopped_whole_and_waits():
    # KAI integration stalegangeviction_test.go: "Evict stale gang job of train"
    pol = replace(cluster(*queues(("queue0", 1))), stale_gang_grace_s=0.0)
    first, history, final = sessions(pol, (node("node0", 2),), stale_gang_of(job))
    assert evictions(first) == [("running_job0", EvictReason.STALE_GANG)]
    assert all_evictions(history) == [("running_job0", EvictReason.STALE_GANG)]
    assert running_jobs(final) == {"running_job1"}
    assert nodes_of(final, "running_job1") == {"node0"}


def test_a_build_gang_left_short_of_pods_is_stopped_whole_and_waits():
    # KAI integration stalegangeviction_test.go: "Evict stale gang job of build"
    pol = replace(cluster(*queues(("queue0", 1))), stale_gang_grace_s=0.0)
    first, history, final = sessions(pol, (node("node0", 2),), stale_gang_of(build))
    assert evictions(first) == [("running_job0", EvictReason.STALE_GANG)]
    assert all_evictions(history) == [("running_job0", EvictReason.STALE_GANG)]
    assert running_jobs(final) == {"running_job1"}


def test_inference_takes_a_spare_pod_of_each_elastic_job_before_any_jobs_gang():
    # KAI preempt_elastic_test.go: "Inference job preempts single task from several elastic
    # train jobs": pods past a gang are spare capacity, every job's before any gang
    pol = cluster(*queues(("queue0", 4)))
    work = [
        elastic("running_job0", "queue0", 1, "node0", (0,), (1,)),
        elastic("running_job1", "queue0", 1, "node0", (2,), (3,)),
        inference("pending_job0", "queue0", 2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 4),), work))
    assert evicted_pods(decisions) == {"running_job0": {1}, "running_job1": {1}}
    assert binds(decisions) == {"pending_job0": {"node0"}}
