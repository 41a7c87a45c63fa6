"""More of KAI Scheduler's allocate scenarios, GPU-only: its allocate integration tests
(whole and shared GPUs, all actions in each session) and its elastic and GPU-memory
allocate action tests.

Built as tests/test_kai_action_scenarios.py builds KAI's action scenarios (a leaf queue is
a project, KAI's default parent queue a department with room for everything, a queue's
deserved GPUs its quota and weight 0 unless the scenario sets one; KAI's build jobs are
non-preemptible interactive work). KAI's integration tests run sessions with every action
until they check, then five more to see nothing changes: here the first `schedule` is
KAI's first session and `settle` runs the cycles that follow until none changes anything,
so the state it ends in is the one KAI's test checks. An action test runs one allocate:
one `schedule` here. KAI's test nodes report 100 MiB per GPU, so a GPU-memory request of
50 is half a GPU.
"""

from __future__ import annotations

from gitops_sched.engine import schedule
from gitops_sched.engine.types import Decisions, EvictReason, Snapshot
from tests.engine_builders import department, job, policy, project, snapshot
from tests.test_engine_kai_parity import is_running, memory_job, on, placement, running, settled
from tests.test_kai_action_scenarios import (
    binds,
    build,
    cluster,
    evictions,
    memory_node,
    node,
    queues,
    waits_for,
)

# -- running KAI's sessions -------------------------------------------------------------------


def sessions(snap: Snapshot) -> tuple[Decisions, Snapshot]:
    """KAI's first session (one cycle) and the state the sessions after it settle in."""
    final, history = settled(snap)
    return history[0], final


def pods_of(decisions: Decisions, name: str):
    return next(b.pods for b in decisions.binds if b.job == name)


def started_pods(decisions: Decisions) -> dict[str, list[int]]:
    """Each bound job -> the indexes of the pods it starts (an elastic pod binds alone)."""
    started: dict[str, list[int]] = {}
    for b in decisions.binds:
        started.setdefault(b.job, []).extend(pod.index for pod in b.pods)
    return {name: sorted(indexes) for name, indexes in started.items()}


# -- allocate (integration): limits and quotas ------------------------------------------------


def test_a_project_at_its_limit_runs_one_job_and_the_next_waits():
    # KAI integration allocate_test.go: "allocate job but does not allow to project to go
    # over allowance"
    pol = policy(
        project("queue0", 2, department="department-a", weight=2, limit=2),
        departments=(department("department-a", 2),),
    )
    work = [job("pending_job0", "queue0", 2), job("pending_job1", "queue0", 2)]
    first, final = sessions(snapshot(pol, (node("node0", 4),), work))
    assert binds(first) == {"pending_job0": {"node0"}}
    assert is_running(final, "pending_job0")
    assert not is_running(final, "pending_job1")


def test_a_department_at_its_limit_runs_one_job_and_the_next_waits():
    # KAI integration allocate_test.go: "allocate job but does not allow to department to
    # go over allowance"
    pol = policy(
        project("queue0", 2, department="department-a", weight=0),
        departments=(department("department-a", 2, limit=2),),
    )
    work = [job("pending_job0", "queue0", 2), job("pending_job1", "queue0", 2)]
    first, final = sessions(snapshot(pol, (node("node0", 4),), work))
    assert binds(first) == {"pending_job0": {"node0"}}
    assert is_running(final, "pending_job0")
    assert not is_running(final, "pending_job1")


def test_train_work_runs_over_the_quota_beside_non_preemptible_work_within_it():
    # KAI integration allocate_test.go: "allocate pending jobs, allow over quota for train
    # jobs (with interactive jobs)"
    pol = cluster(*queues(("queue0", 1), ("queue1", 1)))
    work = [build("pending_job0", "queue0", 1), job("pending_job1", "queue0", 1)]
    first, final = sessions(snapshot(pol, (node("node0", 2),), work))
    assert binds(first) == {"pending_job0": {"node0"}, "pending_job1": {"node0"}}
    assert is_running(final, "pending_job0") and is_running(final, "pending_job1")


def test_non_preemptible_work_over_the_quota_waits_on_an_idle_node():
    # KAI integration allocate_test.go: "don't allocate over quota build jobs"
    pol = cluster(*queues(("queue0", 1), ("queue1", 1)))
    work = [build("pending_job0", "queue0", 2)]
    first, final = sessions(snapshot(pol, (node("node0", 4),), work))
    assert not first.binds
    assert not is_running(final, "pending_job0")


def test_non_preemptible_work_over_the_departments_quota_waits_on_an_idle_node():
    # KAI integration allocate_test.go: "Don't allow allocation of interactive jobs above
    # the department's deserved GPUs"
    pol = policy(
        project("queue0", 2, department="d1", weight=0),
        project("queue1", 2, department="d2", weight=0, age=1),
        departments=(department("d1", 1), department("d2", 1, age=1)),
    )
    work = [build("pending_job0", "queue0", 2)]
    first, final = sessions(snapshot(pol, (node("node0", 4),), work))
    assert not first.binds
    assert not is_running(final, "pending_job0")


def test_build_work_within_the_quota_preempts_train_work_over_the_limit_and_then_runs():
    # KAI integration allocate_test.go: "try to allocate interactive after train when
    # over-quota - train should be preempted for interactive to run" (two sessions)
    pol = cluster(project("queue0", 1, department="default", weight=1, limit=1))
    work = [
        running("running_job_train", "queue0", 1, on("node0", 0)),
        build("pending_job_interactive", "queue0", 1),
    ]
    first, final = sessions(snapshot(pol, (node("node0", 2),), work))
    assert evictions(first) == [("running_job_train", EvictReason.PREEMPT)]
    assert binds(first) == {"pending_job_interactive": {"node0"}}
    assert waits_for(first, "pending_job_interactive") == {"running_job_train"}
    assert is_running(final, "pending_job_interactive")
    assert not is_running(final, "running_job_train")


def test_train_work_waits_when_non_preemptible_work_fills_the_projects_limit():
    # KAI integration allocate_test.go: "try to allocate train after interactive when
    # over-quota - train should not run"
    pol = cluster(project("queue0", 1, department="default", weight=1, limit=1))
    work = [
        build("pending_job_interactive0", "queue0", 1, placement=(on("node0", 0),)),
        job("pending_job_train1", "queue0", 1),
    ]
    first, final = sessions(snapshot(pol, (node("node0", 2),), work))
    assert not first.binds
    assert not first.evictions
    assert is_running(final, "pending_job_interactive0")
    assert not is_running(final, "pending_job_train1")


# -- allocate (integration): which queue goes first -------------------------------------------


def test_between_equal_queues_the_older_queue_gets_the_last_gpu():
    # KAI integration allocate_test.go: "allocate according to creation time when share is
    # equal"
    pol = cluster(*queues(("queue0", 1), ("queue1", 1)))
    work = [build("pending_job0", "queue0", 1), build("pending_job1", "queue1", 1)]
    first, final = sessions(snapshot(pol, (node("node0", 1),), work))
    assert binds(first) == {"pending_job0": {"node0"}}
    assert not is_running(final, "pending_job1")


def test_the_queue_of_higher_rank_gets_the_last_gpu():
    # KAI integration allocate_test.go: "allocate according to priority" (KAI's queue
    # priority is our over-quota rank)
    pol = cluster(
        project("queue0", 1, department="default", weight=0, age=0),
        project("queue1", 1, department="default", weight=0, age=1, over_quota_rank=1),
    )
    work = [build("pending_job0", "queue0", 1), build("pending_job1", "queue1", 1)]
    first, final = sessions(snapshot(pol, (node("node0", 1),), work))
    assert binds(first) == {"pending_job1": {"node0"}}
    assert not is_running(final, "pending_job0")


def test_the_queue_left_with_the_smaller_share_of_its_quota_gets_the_last_gpu():
    # KAI integration allocate_test.go: "1 build job pending for each queue with different
    # share - allocate the second"
    pol = cluster(*queues(("queue0", 1), ("queue1", 2)))
    work = [build("pending_job0", "queue0", 1), build("pending_job1", "queue1", 1)]
    first, final = sessions(snapshot(pol, (node("node0", 1),), work))
    assert binds(first) == {"pending_job1": {"node0"}}
    assert not is_running(final, "pending_job0")


def test_spare_gpus_alternate_between_queues_as_their_shares_grow():
    # KAI integration allocate_test.go: "6 pending train jobs - allocate the 1st 2 of each
    # queue (verify the share is being updated during the allocation)"
    pol = cluster(*queues(("queue0", 1), ("queue1", 1)))
    work = [
        *(job(f"pending_job{i}", "queue0", 1) for i in range(3)),
        *(job(f"pending_job{i}", "queue1", 1) for i in range(3, 6)),
    ]
    first, final = sessions(snapshot(pol, (node("node0", 4),), work))
    runs = {"pending_job0", "pending_job1", "pending_job3", "pending_job4"}
    assert set(binds(first)) == runs
    assert {j.name for j in final.jobs if j.placement} == runs


def test_few_gpus_go_one_each_to_the_oldest_queues():
    # KAI integration allocate_test.go: "Over provisioning with over quota, many queues to
    # few GPUs - verify queue share is updated during the same allocation round"
    pol = cluster(*queues(("queue0", 1), ("queue1", 1), ("queue2", 1), ("queue3", 1)))
    work = [
        job("pending_job0", "queue0", 1),
        job("pending_job1", "queue1", 1),
        job("pending_job2", "queue2", 1),
        job("pending_job3", "queue3", 1),
        job("pending_job4", "queue0", 1),
        job("pending_job5", "queue1", 1),
    ]
    first, final = sessions(snapshot(pol, (node("node0", 2),), work))
    assert set(binds(first)) == {"pending_job0", "pending_job1"}
    assert {j.name for j in final.jobs if j.placement} == {"pending_job0", "pending_job1"}


def test_the_department_left_with_the_smaller_share_of_its_quota_gets_the_last_gpu():
    # KAI integration allocate_test.go: "Allocate Departments with smaller ratio 1st"
    pol = policy(
        project("queue0", 3, department="d1", weight=0),
        project("queue1", 2, department="d1", weight=0, age=1),
        project("queue2", 1, department="d2", weight=0, age=2),
        departments=(department("d1", 1), department("d2", 2, age=1)),
    )
    work = [
        job("pending_job0", "queue0", 1),
        job("pending_job1", "queue1", 1),
        job("pending_job2", "queue2", 1),
    ]
    first, final = sessions(snapshot(pol, (node("node0", 1),), work))
    assert binds(first) == {"pending_job2": {"node0"}}
    assert {j.name for j in final.jobs if j.placement} == {"pending_job2"}


# -- allocate (integration): shared GPUs ------------------------------------------------------


def test_a_share_that_does_not_fit_beside_a_shared_gpus_use_opens_another_gpu():
    # KAI integration allocateFractionalGpu_test.go: "1 shared gpu job running, 1 pending
    # interactive shared gpu job - allocate to new gpu"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        build("running_shared_gpu_job0", "queue0", 0.6, placement=(on("node0", 0, fraction=0.6),)),
        build("pending_shared_gpu_job1", "queue0", 0.5),
    ]
    first, final = sessions(snapshot(pol, (node("node0", 2),), work))
    assert pods_of(first, "pending_shared_gpu_job1") == (on("node0", 1, fraction=0.5),)
    assert placement(final, "running_shared_gpu_job0") == (on("node0", 0, fraction=0.6),)
    assert placement(final, "pending_shared_gpu_job1") == (on("node0", 1, fraction=0.5),)


def test_a_share_goes_to_the_gpu_a_whole_gpu_job_leaves_free():
    # KAI integration allocateFractionalGpu_test.go: "1 whole gpu job running, 1 pending
    # interactive shared gpu job - allocate"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        build("pending_shared_gpu_job1", "queue0", 0.5),
    ]
    first, final = sessions(snapshot(pol, (node("node0", 2),), work))
    assert pods_of(first, "pending_shared_gpu_job1") == (on("node0", 1, fraction=0.5),)
    assert placement(final, "running_job0") == (on("node0", 0),)


def test_shares_fill_the_gpus_in_submission_order_and_one_that_fits_nowhere_waits():
    # KAI integration allocateFractionalGpu_test.go: "1 interactive shared gpu job
    # running, 4 pending interactive shared gpus pending - allocate 3 of the shared GPUs
    # jobs"
    pol = cluster(*queues(("queue0", 2)))
    work = [
        build("running_shared_gpu_job0", "queue0", 0.5, placement=(on("node0", 0, fraction=0.5),)),
        build("pending_shared_gpu_job0", "queue0", 0.6),
        build("pending_shared_gpu_job1", "queue0", 0.5),
        build("pending_shared_gpu_job2", "queue0", 0.5),
        build("pending_shared_gpu_job3", "queue0", 0.3),
    ]
    first, final = sessions(snapshot(pol, (node("node0", 2),), work))
    assert {b.job: b.pods for b in first.binds} == {
        "pending_shared_gpu_job0": (on("node0", 1, fraction=0.6),),
        "pending_shared_gpu_job1": (on("node0", 0, fraction=0.5),),
        "pending_shared_gpu_job3": (on("node0", 1, fraction=0.3),),
    }
    assert not is_running(final, "pending_shared_gpu_job2")


def test_a_shared_gpu_train_job_runs_over_a_quota_a_whole_gpu_build_job_fills():
    # KAI integration allocateFractionalGpu_test.go: "Allow allocation of fractional
    # training when over quota with fractional jobs" (the second of the two; the first is
    # tests/test_kai_action_scenarios.py's
    # test_shared_gpu_train_work_runs_over_a_quota_that_non_preemptible_shares_fill)
    pol = cluster(*queues(("queue0", 1)))
    work = [
        build("running_job0", "queue0", 1, placement=(on("node0", 0),)),
        job("pending_job0", "queue0", 0.5),
    ]
    first, final = sessions(snapshot(pol, (node("node0", 2),), work))
    assert pods_of(first, "pending_job0") == (on("node0", 1, fraction=0.5),)
    assert placement(final, "running_job0") == (on("node0", 0),)


def test_a_share_goes_to_the_node_whose_gpu_is_already_shared():
    # KAI integration allocateFractionalGpu_test.go: "test gpuSharingOrder - one node empty
    # and one node with already running frac job - allocate to the node with already
    # running job"
    pol = cluster(*queues(("queue0", 3)))
    work = [
        build("running_shared_gpu_job0", "queue0", 0.5, placement=(on("node1", 1, fraction=0.5),)),
        build("pending_shared_gpu_job1", "queue0", 0.5),
    ]
    first, final = sessions(snapshot(pol, (node("node0", 2), node("node1", 2)), work))
    assert pods_of(first, "pending_shared_gpu_job1") == (on("node1", 1, fraction=0.5),)
    assert placement(final, "pending_shared_gpu_job1") == (on("node1", 1, fraction=0.5),)


# -- allocate: GPU memory ---------------------------------------------------------------------


def test_a_gpu_memory_request_on_an_empty_cluster_takes_its_share_of_a_gpu():
    # KAI integration allocateFractionalGpu_test.go and action allocateGpuMemory_test.go:
    # "Basic request gpu by memory when cluster is empty"
    pol = cluster(*queues(("queue0", 1)))
    work = [memory_job("pending_job-0", "queue0", 50, type="interactive")]
    first, final = sessions(snapshot(pol, (memory_node("node0", 1),), work))
    assert pods_of(first, "pending_job-0") == (on("node0", 0, fraction=0.5),)
    assert placement(final, "pending_job-0") == (on("node0", 0, fraction=0.5),)


def test_a_non_preemptible_gpu_memory_gang_over_the_quota_waits():
    # KAI action allocateGpuMemory_test.go: "Non preemptible job requests gpu memory over
    # deserved quota" (3 pods of 0.4 GPU: 1.2 GPUs on a quota of 1)
    pol = cluster(*queues(("queue0", 1)))
    work = [memory_job("pending_job-0", "queue0", 40, type="interactive", pods=3)]
    decisions = schedule(snapshot(pol, (memory_node("node0", 2),), work))
    assert not decisions.binds


def test_a_preemptible_gpu_memory_gang_over_the_projects_limit_waits():
    # KAI action allocateGpuMemory_test.go: "Preemptible job requests gpu memory over
    # queue limit" (3 pods of 0.4 GPU: 1.2 GPUs on a limit of 1)
    pol = cluster(project("queue0", 1, department="default", weight=0, limit=1))
    work = [memory_job("pending_job-0", "queue0", 40, pods=3)]
    decisions = schedule(snapshot(pol, (memory_node("node0", 2),), work))
    assert not decisions.binds


# -- allocate: elastic jobs -------------------------------------------------------------------


def test_an_elastic_job_gets_every_pod_that_fits():
    # KAI action allocateElastic_test.go: "Allocate elastic job - full allocate"
    pol = cluster(*queues(("queue0", 1)))
    work = [job("pending_job0", "queue0", 1, pods=2, min_available=1)]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert binds(decisions) == {"pending_job0": {"node0"}}
    assert started_pods(decisions) == {"pending_job0": [0, 1]}


def test_an_elastic_job_starts_with_the_pods_that_fit():
    # KAI action allocateElastic_test.go: "Allocate elastic job - partial allocate"
    pol = cluster(*queues(("queue0", 1)))
    work = [job("pending_job0", "queue0", 1, pods=2, min_available=1)]
    decisions = schedule(snapshot(pol, (node("node0", 1),), work))
    assert binds(decisions) == {"pending_job0": {"node0"}}
    assert started_pods(decisions) == {"pending_job0": [0]}


def test_a_running_elastic_jobs_missing_pod_is_placed():
    # KAI action allocateElastic_test.go: "Allocate elastic job - full allocate - partially
    # running"
    pol = cluster(*queues(("queue0", 1)))
    work = [running("running_job0", "queue0", 1, on("node0", 0), pods=2, min_available=1)]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert {b.job: b.pods for b in decisions.binds} == {"running_job0": (on("node0", 1, index=1),)}
    assert not decisions.evictions


def test_a_running_elastic_job_gets_the_missing_pods_that_fit():
    # KAI action allocateElastic_test.go: "Allocate elastic job - partial allocate - some
    # pods already running"
    pol = cluster(*queues(("queue0", 1)))
    work = [running("pending_job0", "queue0", 1, on("node0", 0), pods=3, min_available=1)]
    decisions = schedule(snapshot(pol, (node("node0", 2),), work))
    assert {b.job: b.pods for b in decisions.binds} == {"pending_job0": (on("node0", 1, index=1),)}
    assert not decisions.evictions


def test_two_elastic_jobs_on_too_few_gpus_the_older_gets_one_pod_more():
    # KAI action allocateElastic_test.go: "Allocate 2 elastic jobs - full and partial
    # allocate"
    pol = cluster(*queues(("queue0", 5)))
    work = [
        job("pending_job0", "queue0", 1, pods=3, min_available=1),
        job("pending_job1", "queue0", 1, pods=3, min_available=1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 5),), work))
    assert started_pods(decisions) == {"pending_job0": [0, 1, 2], "pending_job1": [0, 1]}


def test_two_elastic_jobs_take_turns_for_their_spare_pods():
    # KAI action allocateElastic_test.go: "Allocate 2 elastic jobs - both partial allocate":
    # a job past its gang places one pod a turn, behind the project's jobs at their gang
    pol = cluster(*queues(("queue0", 5)))
    work = [
        job("pending_job0", "queue0", 1, pods=4, min_available=1),
        job("pending_job1", "queue0", 1, pods=4, min_available=1),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 5),), work))
    assert started_pods(decisions) == {"pending_job0": [0, 1, 2], "pending_job1": [0, 1]}


def test_a_younger_gang_starts_before_an_older_elastic_jobs_spare_pods():
    # the same rule (KAI's elastic plugin orders a job below its gang first): the gang's
    # two pods run, the elastic job its one
    pol = cluster(*queues(("queue0", 3)))
    work = [
        job("elastic", "queue0", 1, pods=4, min_available=1),
        job("gang", "queue0", 1, pods=2, min_available=2),
    ]
    decisions = schedule(snapshot(pol, (node("node0", 3),), work))
    assert started_pods(decisions) == {"elastic": [0], "gang": [0, 1]}
