"""KAI Scheduler's reclaim action scenarios, GPU-only, as this engine decides them.

Each test rebuilds one scenario of KAI's `pkg/scheduler/actions/reclaim` tests (named in its
first comment) in this project's terms: KAI's leaf queue is a project, its parent queue a
department (KAI's tests give every queue one unlimited department when they name none), a
queue's deserved GPUs its quota, its GPU over-quota weight its weight; queues are aged in
the order KAI creates them, jobs submitted in the order KAI lists them. KAI runs the reclaim
action once; these run one cycle. A job KAI leaves "Releasing" is evicted for reclaim here; a
job KAI "Pipelines" onto a node is bound there, waiting for those evictions.
"""

from __future__ import annotations

from gitops_sched.engine import schedule
from gitops_sched.engine.types import Decisions, EvictReason, Job, Node, Policy, QueueSpec
from tests.engine_builders import allocated, department, job, nodes, policy, project, snapshot
from tests.test_engine_kai_parity import on, running


def queues(*specs: tuple) -> list[QueueSpec]:
    """KAI's queues in creation order: (name, deserved GPUs, GPU over-quota weight[, rank])."""
    return [
        project(name, quota, weight=weight, age=i, over_quota_rank=rank[0] if rank else 0)
        for i, (name, quota, weight, *rank) in enumerate(specs)
    ]


def in_departments(departments: tuple[tuple[str, float], ...], *specs: tuple) -> Policy:
    """KAI's departments (name, deserved GPUs; weighted by it, as KAI's tests do) and their
    queues (name, deserved GPUs, GPU over-quota weight, department[, rank]), in creation
    order."""
    return policy(
        *(
            project(n, q, d, weight=w, age=i, over_quota_rank=rank[0] if rank else 0)
            for i, (n, q, w, d, *rank) in enumerate(specs)
        ),
        departments=tuple(department(n, q, age=i) for i, (n, q) in enumerate(departments)),
    )


def cycle(
    queue_list: list[QueueSpec] | Policy, node_list: tuple[Node, ...], work: list[Job]
) -> Decisions:
    pol = queue_list if isinstance(queue_list, Policy) else policy(*queue_list)
    return schedule(snapshot(pol, node_list, work))


def reclaimed(decisions: Decisions) -> set[str]:
    assert all(e.reason == EvictReason.RECLAIM for e in decisions.evictions)
    return {e.job for e in decisions.evictions}


def binds(decisions: Decisions) -> dict[str, tuple[set[str], set[str]]]:
    """Each bound job: the nodes its pods go to and the jobs it waits for."""
    return {b.job: ({pod.node for pod in b.pods}, set(b.waits_for)) for b in decisions.binds}


# -- reclaim_test.go --------------------------------------------------------------------------


def test_a_project_below_its_quota_takes_a_whole_gang_of_a_project_over_its_quota():
    # KAI reclaim_test.go: "queue1 is under deserved quota, queue0 is over deserved quota and
    # will go below quota - reclaim"
    work = [
        running("q0-gang", "q0", 10, on("n-0", *range(10)), on("n-1", *range(10), index=1), pods=2),
        job("q1-job", "q1", 10),
    ]
    decisions = cycle(queues(("q0", 10, 1), ("q1", 10, 1)), nodes("n", 2, gpus=16), work)
    assert reclaimed(decisions) == {"q0-gang"}
    assert binds(decisions) == {"q1-job": ({"n-0"}, {"q0-gang"})}


def test_a_project_below_its_quota_takes_the_youngest_job_of_one_over_its_quota():
    # KAI reclaim_test.go: "queue1 is under deserved quota, queue0 is over deserved quota but
    # under fair share - reclaim"
    work = [
        *(running(f"q0-run-{i}", "q0", 2, on(f"n-{i}", 0, 1)) for i in range(6)),
        *(job(f"q0-wait-{i}", "q0", 2) for i in range(3)),
        job("q1-job", "q1", 2),
    ]
    decisions = cycle(queues(("q0", 2, 1), ("q1", 2, 1)), nodes("n", 6, gpus=3), work)
    assert reclaimed(decisions) == {"q0-run-5"}
    assert binds(decisions) == {"q1-job": ({"n-5"}, {"q0-run-5"})}


def test_a_fraction_below_its_fair_share_takes_the_half_gpu_of_a_project_over_its_share():
    # KAI reclaim_test.go: "queue0 is under fair share, queue1 is over fair share - reclaim"
    # (4 GPUs, quotas 1 and 2, the spare GPU goes 3:1 to q0: fair shares 2 and 2)
    work = [
        running("q0-whole", "q0", 1, on("n-0", 0)),
        running("q0-half", "q0", 0.5, on("n-0", 3, fraction=0.5)),
        job("q0-wait", "q0", 0.5),
        running("q1-pair", "q1", 2, on("n-0", 1, 2)),
        running("q1-half", "q1", 0.5, on("n-0", 3, fraction=0.5)),
    ]
    decisions = cycle(queues(("q0", 1, 3), ("q1", 2, 1)), nodes("n", 1, gpus=4), work)
    assert reclaimed(decisions) == {"q1-half"}
    assert binds(decisions) == {"q0-wait": ({"n-0"}, {"q1-half"})}


def test_a_gang_reclaims_single_gpu_jobs_across_nodes():
    # KAI reclaim_test.go: "queue0 is over fair share, queue1 is under fair share - reclaim
    # for job with multiple tasks" (KAI's q1_job0 runs in queue0)
    work = [
        *(running(f"q0-{i}", "q0", 1, on(f"n-{i}", 0)) for i in range(4)),
        job("q1-gang", "q1", 1, pods=4),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 2, 1)), nodes("n", 4, gpus=1), work)
    assert reclaimed(decisions) == {"q0-0", "q0-1", "q0-2", "q0-3"}
    assert binds(decisions)["q1-gang"][0] == {"n-0", "n-1", "n-2", "n-3"}


def test_a_gang_reclaims_a_gang_and_leaves_the_single_gpu_job_it_does_not_need():
    # KAI reclaim_test.go: "queue0 is over fair share, queue1 is under fair share - reclaim
    # for job with multiple tasks from job with multiple tasks"
    work = [
        running("q0-gang", "q0", 1, *(on(f"n-{i}", 0, index=i) for i in range(3)), pods=3),
        running("q0-single", "q0", 1, on("n-3", 0)),
        job("q1-gang", "q1", 1, pods=3),
    ]
    decisions = cycle(queues(("q0", 1, 0), ("q1", 2, 1)), nodes("n", 4, gpus=1), work)
    assert reclaimed(decisions) == {"q0-gang"}
    assert binds(decisions) == {"q1-gang": ({"n-0", "n-1", "n-2"}, {"q0-gang"})}


def test_a_gang_reclaims_from_every_project_over_its_quota_and_no_more():
    # KAI reclaim_test.go: "reclaim from multiple queues running on multiple nodes for a job
    # with multiple tasks" (q1 keeps its quota of one GPU: the older of its jobs)
    work = [
        running("job0", "q0", 1, on("n-0", 0)),
        running("job1", "q1", 1, on("n-0", 1)),
        running("job2", "q0", 1, on("n-1", 0)),
        running("job3", "q1", 1, on("n-1", 1)),
        job("q2-gang", "q2", 1, pods=3),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 1, 0), ("q2", 3, 0)), nodes("n", 2, gpus=2), work)
    assert reclaimed(decisions) == {"job0", "job2", "job3"}
    assert binds(decisions)["q2-gang"][1] == {"job0", "job2", "job3"}


def test_a_project_reclaims_its_quota_and_its_second_job_waits():
    # KAI reclaim_test.go: "2 jobs from queue0 running on node0 - 2 pending jobs from queue1 -
    # reclaim"
    work = [
        running("q0-old", "q0", 1, on("n-0", 0)),
        running("q0-young", "q0", 1, on("n-0", 1)),
        job("q1-first", "q1"),
        job("q1-second", "q1"),
    ]
    decisions = cycle(queues(("q0", 1, 1), ("q1", 1, 1)), nodes("n", 1, gpus=2), work)
    assert reclaimed(decisions) == {"q0-young"}
    assert binds(decisions) == {"q1-first": ({"n-0"}, {"q0-young"})}


def test_projects_each_at_their_quota_reclaim_nothing():
    # KAI reclaim_test.go: "1 job from queue0 and 1 job from queue1 running on node0 - don't
    # reclaim" and "Don't reclaim when there's fairness between the queues" (the same cluster)
    work = [
        running("q0-run", "q0", 1, on("n-0", 0)),
        running("q1-run", "q1", 1, on("n-0", 1)),
        job("q0-wait", "q0"),
        job("q1-wait", "q1"),
    ]
    decisions = cycle(queues(("q0", 1, 1), ("q1", 1, 1)), nodes("n", 1, gpus=2), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_reclaim_takes_the_train_job_and_leaves_the_build_job():
    # KAI reclaim_test.go: "2 jobs from queue0 running on node0 (1 train, 1 build)- 2 pending
    # jobs from queue1 - reclaim train"
    work = [
        running("q0-train", "q0", 1, on("n-0", 0)),
        running("q0-build", "q0", 1, on("n-0", 1), type="interactive"),
        job("q1-first", "q1"),
        job("q1-second", "q1"),
    ]
    decisions = cycle(queues(("q0", 1, 1), ("q1", 1, 1)), nodes("n", 1, gpus=2), work)
    assert reclaimed(decisions) == {"q0-train"}
    assert binds(decisions) == {"q1-first": ({"n-0"}, {"q0-train"})}


def test_oversubscribed_quotas_reclaim_nothing_from_a_project_at_its_quota():
    # KAI reclaim_test.go: "Queues are over provisioned, ratio between queues are equal, yet
    # don't reclaim since number of used GPUs is equal to the deserved GPUs"
    work = [
        running("q0-a", "q0", 1, on("n-0", 0)),
        running("q0-b", "q0", 1, on("n-0", 1)),
        job("q1-first", "q1"),
        job("q1-second", "q1"),
    ]
    decisions = cycle(queues(("q0", 2, 2), ("q1", 2, 2)), nodes("n", 1, gpus=2), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_a_build_job_past_its_quota_reclaims_nothing():
    # KAI reclaim_test.go: "2 train job of 1 GPUs from queue0 running on node0 with deserved
    # of 1, 1 pending build job of 2 GPUs from queue1 with deserved of 1 - don't reclaim"
    work = [
        running("q0-pair", "q0", 2, on("n-0", 0, 1)),
        job("q1-build", "q1", 2, type="interactive"),
    ]
    decisions = cycle(queues(("q0", 1, 1), ("q1", 1, 1)), nodes("n", 1, gpus=2), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_reclaim_takes_train_before_preemptible_interactive():
    # KAI reclaim_test.go: "1 train and 1 preemptible interactive are over quota - reclaim train"
    work = [
        running("q0-train", "q0", 1, on("n-0", 0)),
        running("q0-notebook", "q0", 1, on("n-0", 1), priority=75, preemptible=True),
        job("q1-job", "q1"),
    ]
    decisions = cycle(queues(("q0", 1, 1), ("q1", 1, 1)), nodes("n", 1, gpus=2), work)
    assert reclaimed(decisions) == {"q0-train"}
    assert binds(decisions) == {"q1-job": ({"n-0"}, {"q0-train"})}


def test_reclaim_takes_the_younger_of_two_preemptible_interactive_jobs():
    # KAI reclaim_test.go: "2 preemptible interactive are over quota - reclaim"
    work = [
        running("q0-old", "q0", 1, on("n-0", 0), priority=75, preemptible=True),
        running("q0-young", "q0", 1, on("n-0", 1), priority=75, preemptible=True),
        job("q1-job", "q1"),
    ]
    decisions = cycle(queues(("q0", 1, 1), ("q1", 1, 1)), nodes("n", 1, gpus=2), work)
    assert reclaimed(decisions) == {"q0-young"}
    assert binds(decisions) == {"q1-job": ({"n-0"}, {"q0-young"})}


def test_interactive_work_over_quota_is_never_reclaimed():
    # KAI reclaim_test.go: "1 interactive job is running with more GPUs than the quota, 1
    # interactive job form different project is pending - don't reclaim (never kill
    # interactive jobs)"
    work = [
        running("q0-build", "q0", 1, on("n-0", 0), type="interactive"),
        job("q1-build", "q1", type="interactive"),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 1, 1)), nodes("n", 1, gpus=1), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_interactive_work_must_fit_the_deserved_quota_not_the_fair_share():
    # KAI reclaim_test.go: "Interactive jobs should use the number of deserved GPUs, and not
    # the reclaimable deserved GPUs"
    work = [
        running("q0-build", "q0", 1, on("n-0", 0), type="interactive"),
        running("q1-train", "q1", 3, on("n-0", 1, 2, 3)),
        job("q0-second-build", "q0", type="interactive"),
    ]
    decisions = cycle(queues(("q0", 1, 1), ("q1", 1, 1)), nodes("n", 1, gpus=4), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_a_queue_without_work_leaves_its_share_to_the_others():
    # KAI reclaim_test.go: "Verify inactive queues don't affect the reclaimable deserved
    # calculation" (q2 asks for nothing: q0 and q1 share 4 GPUs as 2 and 2)
    work = [
        *(running(f"q0-{i}", "q0", 1, on("n-0", i)) for i in range(3)),
        running("q1-run", "q1", 1, on("n-0", 3)),
        job("q1-wait", "q1"),
    ]
    decisions = cycle(queues(("q0", 1, 1), ("q1", 1, 1), ("q2", 1, 1)), nodes("n", 1, gpus=4), work)
    assert reclaimed(decisions) == {"q0-2"}
    assert binds(decisions) == {"q1-wait": ({"n-0"}, {"q0-2"})}


def test_a_job_over_its_fair_share_is_reclaimed_whole():
    # KAI reclaim_test.go: "reclaim from job that allocated more resources than its' fairShare
    # (no remaining)" (10 GPUs, quotas 2 and 2, spare split 1:2: fair shares 4 and 6)
    work = [running("q0-eight", "q0", 8, on("n-0", *range(8))), job("q1-six", "q1", 6)]
    decisions = cycle(queues(("q0", 2, 1), ("q1", 2, 2)), nodes("n", 1, gpus=10), work)
    assert reclaimed(decisions) == {"q0-eight"}
    assert binds(decisions) == {"q1-six": ({"n-0"}, {"q0-eight"})}


def test_a_job_within_its_fair_share_is_not_reclaimed_for_one_past_its_own():
    # KAI reclaim_test.go: "don't reclaim from job that allocated resources within its'
    # fairShare" (fair shares 4 and 6: q1's 7 GPUs are more than its share)
    work = [running("q0-four", "q0", 4, on("n-0", *range(4))), job("q1-seven", "q1", 7)]
    decisions = cycle(queues(("q0", 2, 1), ("q1", 2, 2)), nodes("n", 1, gpus=10), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_spare_gpus_one_project_does_not_ask_for_go_to_the_other_in_its_fair_share():
    # KAI reclaim_test.go: "reclaim from job that allocated more resources than its'
    # fairShare (remaining was given to queue with lower over quota weight)" (12 GPUs: q1 asks
    # for 7 of its part of the spare 8, q0 keeps the rest: fair shares 5 and 7)
    work = [running("q0-ten", "q0", 10, on("n-0", *range(10))), job("q1-seven", "q1", 7)]
    decisions = cycle(queues(("q0", 2, 1), ("q1", 2, 2)), nodes("n", 1, gpus=12), work)
    assert reclaimed(decisions) == {"q0-ten"}
    assert binds(decisions) == {"q1-seven": ({"n-0"}, {"q0-ten"})}
    assert allocated(decisions, "q1") == 7


def test_reclaim_moves_work_over_its_quota_to_make_room_rather_than_stop_it():
    # KAI reclaim_test.go: "queue0 is under deserved quota, queue1 is over deserved quota but
    # not over fair share - reclaim" (q0's 1-GPU job moves to the GPU left beside its
    # 2-GPU job; q1's 2-GPU job takes the node it leaves)
    work = [
        running("q0-pair", "q0", 2, on("n0-0", 0, 1)),
        running("q0-one", "q0", 1, on("n1-0", 0)),
        job("q1-pair", "q1", 2),
    ]
    decisions = cycle(
        queues(("q0", 2, 1), ("q1", 2, 0)), (*nodes("n0", 1, gpus=3), *nodes("n1", 1, gpus=2)), work
    )
    assert {e.job for e in decisions.evictions} == {"q0-one"}
    assert binds(decisions) == {
        "q0-one": ({"n0-0"}, set()),
        "q1-pair": ({"n1-0"}, {"q0-one"}),
    }


def test_preemptible_inference_work_over_its_quota_is_reclaimed_for_inference_within_quota():
    # KAI reclaim_test.go: "inference basic reclaim" (KAI's test sessions count inference as
    # preemptible: here the inference jobs say so)
    work = [
        running("q0-old", "q0", 1, on("n-0", 0), type="inference", preemptible=True),
        running("q0-young", "q0", 1, on("n-0", 1), type="inference", preemptible=True),
        job("q1-serve", "q1", type="inference", preemptible=True),
    ]
    decisions = cycle(queues(("q0", 1, 0), ("q1", 1, 0)), nodes("n", 1, gpus=2), work)
    assert reclaimed(decisions) == {"q0-young"}
    assert binds(decisions) == {"q1-serve": ({"n-0"}, {"q0-young"})}


def test_a_half_gpu_moves_onto_anothers_half_to_free_a_gpu_for_a_whole_one():
    # KAI reclaim_test.go: "Reclaim based on releasing resources with consolidation" (q1's
    # half, of the newer of two equal queues, joins q0's half; nothing is stopped)
    work = [
        running("q0-half", "q0", 0.5, on("n-0", 0, fraction=0.5)),
        running("q1-half", "q1", 0.5, on("n-1", 0, fraction=0.5)),
        job("q2-whole", "q2"),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 0, 0), ("q2", 2, 0)), nodes("n", 2, gpus=1), work)
    assert {e.job for e in decisions.evictions} == {"q1-half"}
    assert binds(decisions) == {"q1-half": ({"n-0"}, set()), "q2-whole": ({"n-1"}, {"q1-half"})}


def test_of_two_equal_queues_the_newer_gives_up_its_fraction():
    # KAI reclaim_test.go: "Reclaim based on releasing resources without consolidation" (two
    # 0.7 shares cannot share a GPU: the newer queue's is reclaimed)
    work = [
        running("q0-part", "q0", 0.7, on("n-0", 0, fraction=0.7)),
        running("q1-part", "q1", 0.7, on("n-1", 0, fraction=0.7)),
        job("q2-whole", "q2"),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 0, 0), ("q2", 2, 0)), nodes("n", 2, gpus=1), work)
    assert reclaimed(decisions) == {"q1-part"}
    assert binds(decisions) == {"q2-whole": ({"n-1"}, {"q1-part"})}


def test_a_gang_takes_an_idle_gpu_and_reclaims_a_fraction_for_the_other_pod():
    # KAI reclaim_test.go: "Reclaim based on releasing and idle resources"
    work = [
        running("q0-part", "q0", 0.7, on("n-0", 0, fraction=0.7)),
        job("q1-gang", "q1", 1, pods=2),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 2, 0)), nodes("n", 2, gpus=1), work)
    assert reclaimed(decisions) == {"q0-part"}
    assert binds(decisions) == {"q1-gang": ({"n-0", "n-1"}, {"q0-part"})}


def test_a_gang_of_fractions_shares_its_own_projects_gpu_and_reclaims_the_other():
    # KAI reclaim_test.go: "Reclaim based on releasing and idle resources with fractions"
    # (one 0.7 pod beside q1's own 0.3, the other where q0's 0.7 was)
    work = [
        running("q0-part", "q0", 0.7, on("n-0", 0, fraction=0.7)),
        running("q1-part", "q1", 0.3, on("n-1", 0, fraction=0.3)),
        job("q1-gang", "q1", 0.7, pods=2),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 2, 0)), nodes("n", 2, gpus=1), work)
    assert reclaimed(decisions) == {"q0-part"}
    assert binds(decisions) == {"q1-gang": ({"n-0", "n-1"}, {"q0-part"})}


# -- reclaimDepartments_test.go ---------------------------------------------------------------


def test_reclaim_takes_train_work_across_departments():
    # KAI reclaimDepartments_test.go: "Classic reclaim for train jobs between departments"
    pol = in_departments((("d1", 1), ("d2", 1)), ("q0", 1, 0, "d1"), ("q1", 1, 0, "d2"))
    work = [
        running("q0-train", "q0", 1, on("n-0", 0)),
        running("q0-build", "q0", 1, on("n-0", 1), type="interactive"),
        job("q1-train", "q1"),
    ]
    decisions = cycle(pol, nodes("n", 1, gpus=2), work)
    assert reclaimed(decisions) == {"q0-train"}
    assert binds(decisions) == {"q1-train": ({"n-0"}, {"q0-train"})}


def test_interactive_work_within_its_quota_reclaims_train_work_of_another_department():
    # KAI reclaimDepartments_test.go: "Classic interactive job reclaim train job from
    # different department"
    pol = in_departments((("d1", 1), ("d2", 1)), ("q0", 1, 1, "d1"), ("q1", 1, 1, "d2"))
    work = [
        running("q0-train", "q0", 1, on("n-0", 0)),
        running("q0-build", "q0", 1, on("n-0", 1), type="interactive"),
        job("q1-build", "q1", type="interactive"),
    ]
    decisions = cycle(pol, nodes("n", 1, gpus=2), work)
    assert reclaimed(decisions) == {"q0-train"}
    assert binds(decisions) == {"q1-build": ({"n-0"}, {"q0-train"})}


def test_no_reclaim_that_would_take_the_department_past_its_fair_share():
    # KAI reclaimDepartments_test.go: "Don't reclaim if department will be overquota"
    pol = in_departments(
        (("d1", 2), ("d2", 2)), ("q0", 1, 1, "d1"), ("q1", 1, 1, "d2"), ("q2", 1, 1, "d2")
    )
    work = [
        running("q0-three", "q0", 3, on("n-0", 0, 1, 2)),
        running("q1-build", "q1", 1, on("n-0", 3), type="interactive"),
        job("q1-pair", "q1", 2),
    ]
    decisions = cycle(pol, nodes("n", 1, gpus=4), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_a_department_over_its_fair_share_gives_up_only_the_job_it_holds_beyond_it():
    # KAI reclaimDepartments_test.go: "Reclaim trains according to deserved quota" (8 GPUs,
    # departments of quota 1 each: fair shares 4 and 4; d1 holds 5)
    pol = in_departments((("d1", 1), ("d2", 1)), ("q0", 1, 1, "d1"), ("q1", 1, 1, "d2"))
    work = [
        running("q0-four", "q0", 4, on("n-0", 0, 1, 2, 3)),
        running("q0-one", "q0", 1, on("n-0", 4)),
        job("q1-four", "q1", 4),
    ]
    decisions = cycle(pol, nodes("n", 1, gpus=8), work)
    assert reclaimed(decisions) == {"q0-one"}
    assert binds(decisions) == {"q1-four": ({"n-0"}, {"q0-one"})}


def test_reclaim_takes_from_another_department_and_from_its_own():
    # KAI reclaimDepartments_test.go: "Reclaim from different department and same department"
    pol = in_departments(
        (("d1", 0), ("d2", 4)), ("q0", 1, 1, "d1"), ("q1", 0, 0, "d2"), ("q2", 4, 4, "d2")
    )
    work = [
        running("q0-pair", "q0", 2, on("n-0", 0, 1)),
        running("q1-pair", "q1", 2, on("n-0", 2, 3)),
        job("q2-four", "q2", 4),
    ]
    decisions = cycle(pol, nodes("n", 1, gpus=4), work)
    assert reclaimed(decisions) == {"q0-pair", "q1-pair"}
    assert binds(decisions) == {"q2-four": ({"n-0"}, {"q0-pair", "q1-pair"})}


def test_a_project_within_its_quota_does_not_reclaim_past_its_departments_share():
    # KAI reclaimDepartments_test.go: "Verify reclaim doesn't happen between department by
    # fairness" (q0's quota of 3 is more than its department's share of 2)
    pol = in_departments((("d0", 1), ("d1", 1)), ("q0", 3, 3, "d0"), ("q1", 1, 1, "d1"))
    work = [
        running("q0-pair", "q0", 2, on("n-0", 0, 1)),
        running("q1-pair", "q1", 2, on("n-0", 2, 3)),
        job("q0-one", "q0"),
    ]
    decisions = cycle(pol, nodes("n", 1, gpus=4), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_interactive_work_must_fit_its_departments_quota():
    # KAI reclaimDepartments_test.go: "Verify department interactive will not go over quota
    # even if department has enough fair share"
    pol = in_departments((("d0", 1), ("d1", 1)), ("q0", 3, 3, "d0"), ("q1", 3, 3, "d1"))
    work = [
        running("q0-build", "q0", 1, on("n-0", 0), type="interactive"),
        running("q1-three", "q1", 3, on("n-0", 1, 2, 3)),
        job("q0-second-build", "q0", type="interactive"),
    ]
    decisions = cycle(pol, nodes("n", 1, gpus=4), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_train_work_reclaims_up_to_its_departments_fair_share():
    # KAI reclaimDepartments_test.go: "Verify department train will not go over quota even if
    # department has enough fair share" (fair shares 2 and 2; d1 holds 3 in one job)
    pol = in_departments((("d0", 1), ("d1", 1)), ("q0", 1, 1, "d0"), ("q1", 1, 1, "d1"))
    work = [
        running("q0-one", "q0", 1, on("n-0", 0)),
        running("q1-three", "q1", 3, on("n-0", 1, 2, 3)),
        job("q0-second", "q0"),
    ]
    decisions = cycle(pol, nodes("n", 1, gpus=4), work)
    assert reclaimed(decisions) == {"q1-three"}
    assert binds(decisions)["q0-second"] == ({"n-0"}, {"q1-three"})


# -- reclaimGang_test.go ----------------------------------------------------------------------


def test_a_gang_reclaims_and_is_pipelined_whole():
    # KAI reclaimGang_test.go: "Reclaim other job and pipeline all tasks of job"
    work = [
        running("q0-one", "q0", 1, on("n-0", 0)),
        job("q1-gang", "q1", 1, type="interactive", pods=2),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 2, 2)), nodes("n", 1, gpus=2), work)
    assert reclaimed(decisions) == {"q0-one"}
    assert binds(decisions) == {"q1-gang": ({"n-0"}, {"q0-one"})}
    assert len(decisions.binds[0].pods) == 2


def test_a_gang_that_cannot_fit_whole_reclaims_nothing():
    # KAI reclaimGang_test.go: "If can't allocate all tasks, dont' reclaim"
    work = [
        running("q0-one", "q0", 1, on("n-0", 0)),
        job("q1-gang", "q1", 1, type="interactive", pods=2),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 2, 2)), nodes("n", 1, gpus=1), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_a_gang_past_its_quota_reclaims_nothing():
    # KAI reclaimGang_test.go: "dont reclaim if will go over quota" (two 2-GPU build pods on a
    # quota of 2)
    work = [
        running("q0-ten", "q0", 10, on("n-0", *range(10))),
        job("q1-gang", "q1", 2, type="interactive", pods=2),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 2, 2)), nodes("n", 1, gpus=10), work)
    assert not decisions.evictions
    assert not decisions.binds


def test_reclaim_takes_a_whole_gang_for_one_job():
    # KAI reclaimGang_test.go: "reclaim mpi job"
    work = [
        running("q0-gang", "q0", 1, on("n-0", 0), on("n-0", 1, index=1), pods=2),
        job("q1-build", "q1", 2, type="interactive"),
    ]
    decisions = cycle(queues(("q0", 0, 0), ("q1", 2, 2)), nodes("n", 1, gpus=2), work)
    assert reclaimed(decisions) == {"q0-gang"}
    assert binds(decisions) == {"q1-build": ({"n-0"}, {"q0-gang"})}


def test_reclaiming_one_pod_of_a_gang_on_two_nodes_stops_the_whole_gang():
    # KAI reclaimGang_test.go: "job reclaims from job on two nodes"
    work = [
        running("q0-gang", "q0", 1, on("n-0", 0), on("n-1", 0, index=1), pods=2),
        job("q1-one", "q1"),
    ]
    decisions = cycle(queues(("q0", 1, 1), ("q1", 1, 1)), nodes("n", 2, gpus=1), work)
    assert reclaimed(decisions) == {"q0-gang"}
    assert {pod.node for pod in decisions.evictions[0].pods} == {"n-0", "n-1"}
    assert set(binds(decisions)) == {"q1-one"}
    assert binds(decisions)["q1-one"][1] == {"q0-gang"}
