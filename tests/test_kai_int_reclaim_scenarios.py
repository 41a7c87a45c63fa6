"""KAI Scheduler's reclaim integration scenarios, GPU-only, as this engine settles them.

Each test rebuilds one scenario of KAI's `pkg/scheduler/actions/integration_tests/reclaim/
reclaim_test.go` (named in its first comment). Those tests run KAI's whole session —
allocate, consolidation, reclaim, preempt, stale gangs — for two sessions, then five more
that must change nothing, and carry the cluster between sessions: an evicted ("Releasing")
pod goes back to pending, a pipelined one to pending, a binding one runs. That is this
engine's `settle`: cycles until one changes nothing, evicted work back in the queue, binds
carried out. So each test settles the snapshot and checks where every job ends up (running
on which nodes, or pending), and that no cycle evicts more pods than KAI lets one session
evict (none where KAI's test allows no eviction).

The mapping is README "Scheduling" ("Checked against KAI's own scenarios"): KAI's leaf
queue is a project, its parent a department (when a test names none, KAI's default one,
whose unlimited quota KAI's fair share counts as the cluster's GPUs), deserved GPUs the
quota, the GPU over-quota weight the weight, a queue's priority its over-quota rank; queues
are aged in KAI's creation order and jobs submitted in the order KAI lists them. KAI's
train jobs are train (priority 50), its build jobs non-preemptible interactive (100).
"""

from __future__ import annotations

from gitops_sched.engine.types import Decisions, Job, Node, Policy, QueueSpec, Snapshot
from tests.engine_builders import department, job, policy, snapshot
from tests.test_engine_kai_parity import on, running, settled
from tests.test_kai_action_scenarios import build, node
from tests.test_kai_reclaim_scenarios import in_departments, queues

PENDING: frozenset[str] = frozenset()


def in_default(projects: list[QueueSpec], node_list: tuple[Node, ...]) -> Policy:
    """KAI's default department (the one `queues` puts them in): its deserved GPUs
    unlimited, which KAI's fair share reads as every GPU of the cluster
    (`setDeservedResource`), so here a quota of the cluster's GPUs."""
    total = sum(len(n.gpus) for n in node_list)
    return policy(*projects, departments=(department(projects[0].parent, total),))


def settle_cluster(
    pol: Policy, node_list: tuple[Node, ...], work: list[Job]
) -> tuple[dict[str, set[str]], list[Decisions]]:
    """Where each job ends up once the engine has settled (its nodes; none = pending), and
    the cycles it took."""
    final, history = settled(snapshot(pol, node_list, work))
    return where(final), history


def where(state: Snapshot) -> dict[str, set[str]]:
    return {j.name: {pod.node for pod in j.placement} for j in state.jobs}


def pods_where(state: Snapshot, name: str) -> dict[int, str]:
    """Each running pod of a job: its index -> its node."""
    return next({pod.index: pod.node for pod in j.placement} for j in state.jobs if j.name == name)


def evicted_pods_per_cycle(history: list[Decisions]) -> list[int]:
    return [sum(len(e.pods) for e in d.evictions) for d in history]


def no_cycle_evicts_more_than(history: list[Decisions], pods: int) -> bool:
    """KAI's test lets each session evict at most `pods` pods (none when it sets no limit)."""
    return all(n <= pods for n in evicted_pods_per_cycle(history))


def nodes_named(*specs: tuple[str, int]) -> tuple[Node, ...]:
    return tuple(node(name, gpus) for name, gpus in specs)


# -- two queues in the default department -----------------------------------------------------


def test_a_half_gpu_below_its_fair_share_takes_the_half_gpu_of_a_project_over_its_share():
    # KAI integration reclaim_test.go: "queue0 is under fair share, queue1 is over fair share
    # - reclaim"
    work = [
        running("q0_job0", "queue0", 1, on("node0", 0)),
        running("q0_job1", "queue0", 0.5, on("node0", 3, fraction=0.5)),
        job("q0_job2", "queue0", 0.5),
        running("q1_job0", "queue1", 2, on("node0", 1, 2)),
        running("q1_job1", "queue1", 0.5, on("node0", 3, fraction=0.5)),
    ]
    cluster = nodes_named(("node0", 4))
    pol = in_default(queues(("queue0", 1, 3), ("queue1", 2, 1)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "q0_job0": {"node0"},
        "q0_job1": {"node0"},
        "q0_job2": {"node0"},
        "q1_job0": {"node0"},
        "q1_job1": PENDING,
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_a_job_over_its_quota_gives_its_gpus_to_a_project_within_its_quota():
    # KAI integration reclaim_test.go: "1 train job running for queue0, 1 train job pending
    # for queue1 - reclaim" (the 2-GPU job then waits: one GPU is left)
    work = [running("running_job0", "queue0", 2, on("node0", 0, 1)), job("pending_job0", "queue1")]
    cluster = nodes_named(("node0", 2))
    pol = in_default(queues(("queue0", 1, 1), ("queue1", 1, 1)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {"running_job0": PENDING, "pending_job0": {"node0"}}
    assert no_cycle_evicts_more_than(history, 1)


def test_a_project_below_its_quota_takes_the_one_gpu_job_of_a_project_over_it():
    # KAI integration reclaim_test.go: "(This is used by the demo) 2 jobs running for queue0
    # on 3 GPUs, 1 job running for queue1 on 1 GPU, 1 pending job for queue1 - reclaim"
    # (in KAI's scenario queue1 holds the three GPUs and queue0 waits)
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue1", 2, on("node1", 0, 1)),
        running("running_job2", "queue1", 1, on("node0", 1)),
        job("pending_job0", "queue0"),
    ]
    cluster = nodes_named(("node0", 2), ("node1", 2))
    pol = in_default(queues(("queue0", 2, 2), ("queue1", 2, 2)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": {"node1"},
        "running_job2": PENDING,
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_reclaim_takes_the_younger_job_of_the_project_over_its_quota():
    # KAI integration reclaim_test.go: "2 jobs running for queue0 on 3 GPUs, 1 job running
    # for queue1 on 1 GPU, 1 pending job for queue1 - reclaim"
    work = [
        running("running_job0", "queue0", 1, on("node1", 0)),
        running("running_job1", "queue0", 2, on("node0", 0, 1)),
        running("running_job2", "queue1", 1, on("node1", 1)),
        job("pending_job0", "queue1"),
    ]
    cluster = nodes_named(("node0", 2), ("node1", 2))
    pol = in_default(queues(("queue0", 2, 2), ("queue1", 2, 2)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running_job0": {"node1"},
        "running_job1": PENDING,
        "running_job2": {"node1"},
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_a_project_at_its_quota_and_fair_share_reclaims_nothing():
    # KAI integration reclaim_test.go: "2 jobs running for queue0 on 3 GPUs, 1 job running for
    # queue1 on 1 GPU, 1 pending job for queue1, deserved of queue1 is 1 - don't reclaim"
    # (KAI lists this scenario twice, the same cluster both times)
    work = [
        running("running_job0", "queue0", 1, on("node1", 0)),
        running("running_job1", "queue0", 2, on("node0", 0, 1)),
        running("running_job2", "queue1", 1, on("node1", 1)),
        job("pending_job0", "queue1"),
    ]
    cluster = nodes_named(("node0", 2), ("node1", 2))
    pol = in_default(queues(("queue0", 2, 2), ("queue1", 1, 1)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running_job0": {"node1"},
        "running_job1": {"node0"},
        "running_job2": {"node1"},
        "pending_job0": PENDING,
    }
    assert no_cycle_evicts_more_than(history, 0)


def test_oversubscribed_quotas_still_guarantee_a_project_the_quota_it_asks_for():
    # KAI integration reclaim_test.go: "1 running job over quota but with queue that has
    # higher reclaimable deserved gpus, other job is pending but asks the exact amount of
    # GPUs as in deserved, cluster is in over capacity - reclaim" (quotas 6 and 5 on 8 GPUs)
    work = [
        running("running_job0", "queue0", 8, on("node0", *range(8))),
        job("pending_job0", "queue1", 5),
    ]
    cluster = nodes_named(("node0", 8))
    pol = in_default(queues(("queue0", 6, 6), ("queue1", 5, 5)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {"running_job0": PENDING, "pending_job0": {"node0"}}
    assert no_cycle_evicts_more_than(history, 1)


def test_reclaim_takes_from_the_project_with_no_quota_first():
    # KAI integration reclaim_test.go: "2 train job for overquota project 1, 1 job for
    # overquota project with deserved of 0, 1 job recalim from different project - reclaim
    # the job with quota of 0"
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        running("running_job1", "queue0", 1, on("node0", 2)),
        running("running_job2", "queue2", 1, on("node0", 3)),
        job("pending_job0", "queue1"),
    ]
    cluster = nodes_named(("node0", 4))
    pol = in_default(queues(("queue0", 1, 1), ("queue1", 1, 1), ("queue2", 0, 0)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": {"node0"},
        "running_job2": PENDING,
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_reclaim_takes_from_the_lower_ranked_of_two_projects_over_their_quota():
    # KAI integration reclaim_test.go: "2 train job for overquota project 1, 1 job for
    # overquota project with deserved of 0, 1 job recalim from different project - reclaim
    # from less prioritized queue" (queue2's priority is one above the default: rank 1)
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 1, on("node0", 1)),
        running("running_job2", "queue2", 1, on("node0", 2)),
        running("running_job3", "queue2", 1, on("node0", 3)),
        job("pending_job0", "queue1"),
    ]
    cluster = nodes_named(("node0", 4))
    pol = in_default(queues(("queue0", 1, 1), ("queue1", 1, 1), ("queue2", 1, 0, 1)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": PENDING,
        "running_job2": {"node0"},
        "running_job3": {"node0"},
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_spare_gpus_split_by_weight_decide_what_is_reclaimed_and_what_waits():
    # KAI integration reclaim_test.go: "Reclaim according to the fairness ratio, more GPUs
    # then sum of deserved GPUs" (8 GPUs, quotas 1 and 1, equal weights: fair shares 4 and 4)
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 3, on("node0", 1, 2, 3)),
        running("running_job2", "queue0", 4, on("node0", 4, 5, 6, 7)),
        job("pending_job0", "queue1", 4),
        job("pending_job1", "queue1", 4),
    ]
    cluster = nodes_named(("node0", 8))
    pol = in_default(queues(("queue0", 1, 1), ("queue1", 1, 1)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": {"node0"},
        "running_job2": PENDING,
        "pending_job0": {"node0"},
        "pending_job1": PENDING,
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_the_gpu_left_by_rounding_the_spare_split_counts_toward_a_projects_fair_share():
    # KAI integration reclaim_test.go: "Reclaim according to the reclaimable deserved GPUs,
    # queue0 has 1 GPU from remaining from setQueueReclaimableResources remaining logic"
    # (7 GPUs, quotas 2 and 1, 4 spare split 2:1 in whole GPUs, the one left to queue0: 5, 2)
    work = [
        running("running_job0", "queue0", 4, on("node0", 0, 1, 2, 3)),
        running("running_job1", "queue1", 3, on("node0", 4, 5, 6)),
        job("pending_job0", "queue0", 1),
    ]
    cluster = nodes_named(("node0", 7))
    pol = in_default(queues(("queue0", 2, 2), ("queue1", 1, 1)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": PENDING,
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_a_build_job_past_its_quota_does_not_stop_the_next_build_job_from_reclaiming():
    # KAI integration reclaim_test.go: "Reclaim job when the pending job with the second
    # highest priority job should reclaim (this was a bug)"
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        build("pending_job0", "queue1", 2),
        build("pending_job1", "queue1", 1),
    ]
    cluster = nodes_named(("node0", 2))
    pol = in_default(queues(("queue0", 0, 0), ("queue1", 1, 1)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running_job0": PENDING,
        "pending_job0": PENDING,
        "pending_job1": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_reclaim_takes_the_youngest_jobs_until_the_project_is_back_at_its_fair_share():
    # KAI integration reclaim_test.go: "Verify we do only 1 round of GPU allocation for whole
    # GPUs jobs, and give the GPUs to the one with the bigger remaining - this is a bug we
    # had" (8 GPUs, quotas 4 and 2, 2 spare split 4:2: the GPU left goes to the larger
    # remainder, queue1's: fair shares 5 and 3)
    work = [
        running("running_job0", "queue0", 5, on("node0", 0, 1, 2, 3, 4)),
        running("running_job1", "queue0", 1, on("node0", 5)),
        running("running_job2", "queue0", 1, on("node0", 6)),
        job("pending_job0", "queue1", 3),
    ]
    cluster = nodes_named(("node0", 8))
    pol = in_default(queues(("queue0", 4, 4), ("queue1", 2, 2)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": PENDING,
        "running_job2": PENDING,
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 2)


def test_a_queue_asking_for_less_than_its_quota_leaves_the_rest_to_the_others():
    # KAI integration reclaim_test.go: "1 queue with big quota will be satisfied with 1 gpu,
    # give the rest of the gpus according to the last test" (queue2's quota of 10 asks for
    # one GPU: fair shares 5, 3 and 1 of 9)
    work = [
        running("running_job0", "queue0", 5, on("node0", 0, 1, 2, 3, 4)),
        running("running_job1", "queue0", 2, on("node0", 5, 6)),
        running("running_job2", "queue0", 1, on("node0", 7)),
        job("pending_job3", "queue2", 1),
        job("pending_job0", "queue1", 3),
    ]
    cluster = nodes_named(("node0", 9))
    pol = in_default(queues(("queue0", 4, 4), ("queue1", 4, 4), ("queue2", 10, 10)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": PENDING,
        "running_job2": PENDING,
        "pending_job3": {"node0"},
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 2)


def test_a_job_past_its_projects_quota_and_fair_share_reclaims_nothing():
    # KAI integration reclaim_test.go: "Verify we do only 1 round of GPU allocation for whole
    # GPUs jobs - this is a bug we had" (4 GPUs, quotas 2 and 1, the spare GPU to queue0)
    work = [
        running("running_job0", "queue0", 3, on("node0", 0, 1, 2)),
        job("pending_job0", "queue1", 2),
    ]
    cluster = nodes_named(("node0", 4))
    pol = in_default(queues(("queue0", 2, 2), ("queue1", 1, 1)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {"running_job0": {"node0"}, "pending_job0": PENDING}
    assert no_cycle_evicts_more_than(history, 0)


# -- departments ------------------------------------------------------------------------------


def test_reclaim_across_departments_takes_train_work_and_leaves_build_work():
    # KAI integration reclaim_test.go: "Classic reclaim for train jobs between departments"
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 1, on("node0", 1), type="interactive"),
        job("pending_job0", "queue1"),
    ]
    pol = in_departments((("d1", 1), ("d2", 1)), ("queue0", 1, 1, "d1"), ("queue1", 1, 1, "d2"))
    outcome, history = settle_cluster(pol, nodes_named(("node0", 2)), work)
    assert outcome == {
        "running_job0": PENDING,
        "running_job1": {"node0"},
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_build_work_within_its_quota_reclaims_train_work_of_another_department():
    # KAI integration reclaim_test.go: "Classic interactive job reclaim train job from
    # different department"
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue0", 1, on("node0", 1), type="interactive"),
        build("pending_job0", "queue1"),
    ]
    pol = in_departments((("d1", 1), ("d2", 1)), ("queue0", 1, 1, "d1"), ("queue1", 1, 1, "d2"))
    outcome, history = settle_cluster(pol, nodes_named(("node0", 2)), work)
    assert outcome == {
        "running_job0": PENDING,
        "running_job1": {"node0"},
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_no_reclaim_that_would_take_a_department_past_its_fair_share():
    # KAI integration reclaim_test.go: "Don't reclaim if department will be overquota"
    work = [
        running("running_job0", "queue0", 3, on("node0", 0, 1, 2)),
        running("running_job1", "queue1", 1, on("node0", 3), type="interactive"),
        job("pending_job0", "queue1", 2),
    ]
    pol = in_departments(
        (("d1", 2), ("d2", 2)),
        ("queue0", 1, 1, "d1"),
        ("queue1", 1, 1, "d2"),
        ("queue2", 1, 1, "d2"),
    )
    outcome, history = settle_cluster(pol, nodes_named(("node0", 4)), work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": {"node0"},
        "pending_job0": PENDING,
    }
    assert no_cycle_evicts_more_than(history, 0)


def test_a_department_over_its_fair_share_gives_up_only_the_job_beyond_it():
    # KAI integration reclaim_test.go: "Reclaim trains according to deserved quota" (8 GPUs,
    # departments of quota 1 each: fair shares 4 and 4; d1 holds 5)
    work = [
        running("running_job0", "queue0", 4, on("node0", 0, 1, 2, 3)),
        running("running_job1", "queue0", 1, on("node0", 4)),
        job("pending_job0", "queue1", 4),
    ]
    pol = in_departments((("d1", 1), ("d2", 1)), ("queue0", 1, 1, "d1"), ("queue1", 1, 1, "d2"))
    outcome, history = settle_cluster(pol, nodes_named(("node0", 8)), work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": PENDING,
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_a_higher_ranked_project_reclaims_its_fair_share_from_the_projects_over_theirs():
    # KAI integration reclaim_test.go: "Reclaim trains according to priority" (8 GPUs in one
    # department: the rank-1 project's spare share comes first, 3 GPUs; the rest split 2:1
    # gives fair shares 3 and 2 to the two projects holding 5 and 3)
    work = [
        *(running(f"q0_running_job{i}", "queue0", 1, on("node0", i)) for i in range(5)),
        *(running(f"q1_running_job{i}", "queue1", 1, on("node0", 5 + i)) for i in range(3)),
        job("reclaimer", "reclaimer_queue", 3),
    ]
    pol = in_departments(
        (("d1", 1),),
        ("queue0", 1, 2, "d1"),
        ("queue1", 1, 1, "d1"),
        ("reclaimer_queue", 0, 1, "d1", 1),
    )
    outcome, history = settle_cluster(pol, nodes_named(("node0", 8)), work)
    assert outcome == {
        "q0_running_job0": {"node0"},
        "q0_running_job1": {"node0"},
        "q0_running_job2": {"node0"},
        "q0_running_job3": PENDING,
        "q0_running_job4": PENDING,
        "q1_running_job0": {"node0"},
        "q1_running_job1": {"node0"},
        "q1_running_job2": PENDING,
        "reclaimer": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 3)


def test_reclaim_takes_from_another_department_and_from_its_own():
    # KAI integration reclaim_test.go: "Reclaim from different department and same department"
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        running("running_job1", "queue1", 2, on("node0", 2, 3)),
        job("pending_job0", "queue2", 4),
    ]
    pol = in_departments(
        (("d1", 0), ("d2", 4)),
        ("queue0", 1, 1, "d1"),
        ("queue1", 0, 0, "d2"),
        ("queue2", 4, 4, "d2"),
    )
    outcome, history = settle_cluster(pol, nodes_named(("node0", 4)), work)
    assert outcome == {
        "running_job0": PENDING,
        "running_job1": PENDING,
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 2)


def test_a_department_within_its_quota_reclaims_from_one_over_its_quota():
    # KAI integration reclaim_test.go: "d2 is under deserved quota and d1 is over quota and
    # within fair share - reclaim" (d1's build job stays; its train job makes way)
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        running("running_job1", "queue0", 2, on("node1", 0, 1), type="interactive"),
        job("pending_job0", "queue1", 2),
    ]
    pol = in_departments((("d1", 2), ("d2", 2)), ("queue0", 2, 3, "d1"), ("queue1", 2, 0, "d2"))
    outcome, history = settle_cluster(pol, nodes_named(("node0", 3), ("node1", 3)), work)
    assert outcome == {
        "running_job0": PENDING,
        "running_job1": {"node1"},
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_inside_a_department_a_project_below_its_quota_reclaims_from_one_over_it():
    # KAI integration reclaim_test.go: "both departments got deserved quota, a queue within
    # d2 is under quota - reclaim from another queue"
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        running("running_job1", "queue0", 1, on("node1", 0), type="interactive"),
        running("running_job2", "queue1", 2, on("node1", 1, 2)),
        running("running_job3", "queue1", 1, on("node0", 2)),
        job("pending_job0", "queue2", 1),
    ]
    pol = in_departments(
        (("d1", 3), ("d2", 3)),
        ("queue0", 3, 0, "d1"),
        ("queue1", 2, 0, "d2"),
        ("queue2", 1, 0, "d2"),
    )
    outcome, history = settle_cluster(pol, nodes_named(("node0", 3), ("node1", 3)), work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": {"node1"},
        "running_job2": {"node1"},
        "running_job3": PENDING,
        "pending_job0": {"node0"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_departments_over_their_quota_within_their_fair_share_reclaim_nothing():
    # KAI integration reclaim_test.go: "departments and queues are over deserved quota and
    # within fair share - should not reclaim"
    work = [
        running("running_job0", "queue0", 2, on("node0", 0, 1)),
        running("running_job1", "queue0", 1, on("node1", 0), type="interactive"),
        running("running_job2", "queue1", 2, on("node1", 1, 2)),
        running("running_job3", "queue1", 1, on("node0", 2)),
        job("pending_job0", "queue1", 1),
    ]
    pol = in_departments((("d1", 1), ("d2", 1)), ("queue0", 1, 1, "d1"), ("queue1", 1, 1, "d2"))
    outcome, history = settle_cluster(pol, nodes_named(("node0", 3), ("node1", 3)), work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": {"node1"},
        "running_job2": {"node1"},
        "running_job3": {"node0"},
        "pending_job0": PENDING,
    }
    assert no_cycle_evicts_more_than(history, 0)


def test_a_project_at_its_quota_reclaims_nothing_while_both_departments_are_below_theirs():
    # KAI integration reclaim_test.go: "both departments are under deserved quota - should
    # not reclaim"
    work = [
        running("running_job0", "queue0", 1, on("node0", 0)),
        running("running_job1", "queue1", 1, on("node1", 0), type="interactive"),
        job("pending_job0", "queue1", 1),
    ]
    pol = in_departments((("d1", 2), ("d2", 2)), ("queue0", 1, 0, "d1"), ("queue1", 1, 0, "d2"))
    outcome, history = settle_cluster(pol, nodes_named(("node0", 1), ("node1", 1)), work)
    assert outcome == {
        "running_job0": {"node0"},
        "running_job1": {"node1"},
        "pending_job0": PENDING,
    }
    assert no_cycle_evicts_more_than(history, 1)


# -- elastic jobs and shared GPUs -------------------------------------------------------------


def test_reclaim_takes_only_the_elastic_pod_over_the_quota_and_starts_pods_up_to_the_share():
    # KAI integration reclaim_test.go: "Reclaim only over quota task from elastic Job"
    # (KAI's lower-priority pod is the one reclaimed: here the higher index, as README says)
    work = [
        running(
            "running-job",
            "queue0",
            1,
            on("node0", 0),
            on("node0", 1, index=1),
            pods=2,
            min_available=1,
        ),
        job("pending-job", "queue1", 1, pods=3, min_available=1),
    ]
    cluster = nodes_named(("node0", 3))
    pol = in_default(queues(("queue0", 1, 0), ("queue1", 2, 1)), cluster)
    final, history = settled(snapshot(pol, cluster, work))
    assert pods_where(final, "running-job") == {0: "node0"}
    assert pods_where(final, "pending-job") == {0: "node0", 1: "node0"}
    assert no_cycle_evicts_more_than(history, 2)


def test_a_half_gpu_moves_beside_anothers_half_so_a_whole_gpu_job_runs():
    # KAI integration reclaim_test.go: "Reclaim based on releasing resources with
    # consolidation" (queue1's half, of the newer of two equal queues, moves; nothing stops)
    work = [
        running("running-job0", "queue0", 0.5, on("node0", 0, fraction=0.5)),
        running("running-job1", "queue1", 0.5, on("node1", 0, fraction=0.5)),
        job("pending-job", "queue2", 1),
    ]
    cluster = nodes_named(("node0", 1), ("node1", 1))
    pol = in_default(queues(("queue0", 0, 0), ("queue1", 0, 0), ("queue2", 2, 0)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running-job0": {"node0"},
        "running-job1": {"node0"},
        "pending-job": {"node1"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_of_two_equal_queues_the_newer_gives_up_its_fraction_for_a_whole_gpu():
    # KAI integration reclaim_test.go: "Reclaim based on releasing resources without
    # consolidation" (two 0.7 shares cannot share a GPU)
    work = [
        running("running-job0", "queue0", 0.7, on("node0", 0, fraction=0.7)),
        running("running-job1", "queue1", 0.7, on("node1", 0, fraction=0.7)),
        job("pending-job", "queue2", 1),
    ]
    cluster = nodes_named(("node0", 1), ("node1", 1))
    pol = in_default(queues(("queue0", 0, 0), ("queue1", 0, 0), ("queue2", 2, 0)), cluster)
    outcome, history = settle_cluster(pol, cluster, work)
    assert outcome == {
        "running-job0": {"node0"},
        "running-job1": PENDING,
        "pending-job": {"node1"},
    }
    assert no_cycle_evicts_more_than(history, 1)


def test_a_gang_takes_the_idle_gpu_and_reclaims_a_fraction_for_its_other_pod():
    # KAI integration reclaim_test.go: "Reclaim based on releasing and idle resources"
    work = [
        running("running-job", "queue0", 0.7, on("node0", 0, fraction=0.7)),
        job("pending-job", "queue1", 1, pods=2),
    ]
    cluster = nodes_named(("node0", 1), ("node1", 1))
    pol = in_default(queues(("queue0", 0, 0), ("queue1", 2, 0)), cluster)
    final, history = settled(snapshot(pol, cluster, work))
    assert where(final)["running-job"] == PENDING
    assert pods_where(final, "pending-job") == {0: "node0", 1: "node1"}
    assert no_cycle_evicts_more_than(history, 1)


def test_a_gang_of_fractions_joins_its_projects_gpu_and_reclaims_the_other():
    # KAI integration reclaim_test.go: "Reclaim based on releasing and idle resources with
    # fractions" (one 0.7 pod beside queue1's own 0.3, the other where queue0's 0.7 was)
    work = [
        running("running-job0", "queue0", 0.7, on("node0", 0, fraction=0.7)),
        running("running-job1", "queue1", 0.3, on("node1", 0, fraction=0.3)),
        job("pending-job", "queue1", 0.7, pods=2),
    ]
    cluster = nodes_named(("node0", 1), ("node1", 1))
    pol = in_default(queues(("queue0", 0, 0), ("queue1", 2, 0)), cluster)
    final, history = settled(snapshot(pol, cluster, work))
    assert where(final) == {
        "running-job0": PENDING,
        "running-job1": {"node1"},
        "pending-job": {"node0", "node1"},
    }
    assert pods_where(final, "pending-job") == {0: "node1", 1: "node0"}
    assert no_cycle_evicts_more_than(history, 1)
