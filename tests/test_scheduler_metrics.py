"""The scheduler's Prometheus metrics: the names and labels the dashboard and alerts use,
queues that leave the repo leave the metrics, a standby replica reports no cluster state,
the pods the scheduler cannot take are counted by namespace."""

from __future__ import annotations

from collections import Counter

import pytest
from prometheus_client import generate_latest

from gitops_sched.engine.types import (
    Decisions,
    EvictReason,
    Gpu,
    GpuRequest,
    Job,
    Node,
    PodPlacement,
    QueueStatus,
    RequestKind,
    Snapshot,
)
from gitops_sched.scheduler.actuate import Outcome
from gitops_sched.scheduler.metrics import SchedulerMetrics
from gitops_sched.scheduler.view import ClusterView, Ignored
from tests.engine_builders import policy

EXPORTED = {
    "gitops_sched_queue_deserved_gpus",
    "gitops_sched_queue_fair_share_gpus",
    "gitops_sched_queue_allocated_gpus",
    "gitops_sched_queue_pending_gpus",
    "gitops_sched_queue_usage_ratio",
    "gitops_sched_cycle_duration_seconds",
    "gitops_sched_binds_total",
    "gitops_sched_evictions_total",
    "gitops_sched_evictions_refused_total",
    "gitops_sched_cluster_gpus",
    "gitops_sched_nodes",
    "gitops_sched_workloads",
    "gitops_sched_leader",
    "gitops_sched_ignored_pods",
}


def value(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def decisions(*projects: QueueStatus) -> Decisions:
    return Decisions(
        departments=(QueueStatus("research", 8, 10, 6, 4),),
        projects=projects,
    )


def exported_names(metrics: SchedulerMetrics) -> set[str]:
    """Metric names as Prometheus scrapes them, histogram series folded into their name."""
    return {
        sample.name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        for family in metrics.registry.collect()
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def test_a_cycle_exports_exactly_the_documented_metric_names() -> None:
    metrics = SchedulerMetrics()
    metrics.set_leader(True)
    view = ClusterView(Snapshot(policy(), (), ()), {}, ignored=(Ignored("lab", "p", "u1", "why"),))
    metrics.record_cycle(0.1, view, decisions(QueueStatus("vision", 4, 4, 4, 0)), Outcome())
    assert exported_names(metrics) == EXPORTED


def test_queue_gauges_are_labelled_by_level_and_queue() -> None:
    metrics = SchedulerMetrics()
    metrics.record_queues(decisions(QueueStatus("vision", 4, 6.5, 3, 2)))
    project = {"level": "project", "queue": "vision"}
    assert value(metrics, "gitops_sched_queue_deserved_gpus", **project) == 4
    assert value(metrics, "gitops_sched_queue_fair_share_gpus", **project) == 6.5
    assert value(metrics, "gitops_sched_queue_allocated_gpus", **project) == 3
    assert value(metrics, "gitops_sched_queue_pending_gpus", **project) == 2
    department = {"level": "department", "queue": "research"}
    assert value(metrics, "gitops_sched_queue_fair_share_gpus", **department) == 10


def test_a_queue_deleted_from_the_repo_leaves_every_queue_gauge() -> None:
    metrics = SchedulerMetrics()
    metrics.record_queues(
        decisions(QueueStatus("vision", 4, 4, 4, 0), QueueStatus("nlp", 4, 4, 1, 0))
    )
    metrics.record_queues(decisions(QueueStatus("vision", 4, 8, 5, 0)))
    text = generate_latest(metrics.registry).decode()
    assert 'queue="nlp"' not in text
    assert value(metrics, "gitops_sched_queue_allocated_gpus", level="project", queue="vision") == 5


def test_binds_evictions_and_refusals_are_counted_by_kind_and_reason() -> None:
    metrics = SchedulerMetrics()
    metrics.record_binds({RequestKind.WHOLE: 4, RequestKind.MEMORY: 1, RequestKind.FRACTION: 2})
    metrics.record_evictions({EvictReason.RECLAIM: 3, EvictReason.STALE_GANG: 1}, refused=2)
    assert value(metrics, "gitops_sched_binds_total", kind="whole") == 4
    assert value(metrics, "gitops_sched_binds_total", kind="fraction") == 3  # memory counts here
    assert value(metrics, "gitops_sched_binds_total", kind="mig") == 0
    assert value(metrics, "gitops_sched_evictions_total", reason="reclaim") == 3
    assert value(metrics, "gitops_sched_evictions_total", reason="stale-gang") == 1
    assert value(metrics, "gitops_sched_evictions_total", reason="idle") == 0
    assert value(metrics, "gitops_sched_evictions_refused_total") == 2


def test_a_cycle_records_its_duration_queues_cluster_and_actions() -> None:
    metrics = SchedulerMetrics()
    view = ClusterView(Snapshot(policy(), (), ()), {})
    outcome = Outcome(
        bound_by_kind=Counter({RequestKind.MIG: 2}),
        evicted_by_reason=Counter({EvictReason.PREEMPT: 1}),
        eviction_refused=1,
    )
    metrics.record_cycle(0.02, view, decisions(QueueStatus("vision", 4, 4, 4, 0)), outcome)
    metrics.record_cycle(3.0, view, decisions(QueueStatus("vision", 4, 4, 4, 0)), outcome)
    assert value(metrics, "gitops_sched_cycle_duration_seconds_count") == 2
    assert value(metrics, "gitops_sched_cycle_duration_seconds_bucket", le="0.025") == 1
    assert value(metrics, "gitops_sched_binds_total", kind="mig") == 4
    assert value(metrics, "gitops_sched_evictions_total", reason="preempt") == 2
    assert value(metrics, "gitops_sched_evictions_refused_total") == 2
    assert value(metrics, "gitops_sched_queue_deserved_gpus", level="project", queue="vision") == 4
    assert value(metrics, "gitops_sched_cluster_gpus", state="total") == 0


def job(name: str, request: GpuRequest, *placement: PodPlacement, idle: bool = False) -> Job:
    return Job(
        name,
        "vision",
        "train",
        50,
        True,
        request,
        pods=max(1, len(placement)),
        placement=placement,
        idle_since=100.0 if idle else None,
    )


def test_cluster_gauges_count_gpus_nodes_and_workloads() -> None:
    gpus = tuple(Gpu(i, 81920) for i in range(8))
    nodes = (
        Node("n1", "a100", "A100-SXM4-80GB", gpus),
        Node("n2", "a100", "A100-SXM4-80GB", gpus, schedulable=False),
    )
    whole = GpuRequest(RequestKind.WHOLE, count=2)
    half = GpuRequest(RequestKind.FRACTION, fraction=0.5)
    jobs = (
        job("train", whole, PodPlacement("n1", (0, 1)), PodPlacement("n1", (2, 3), index=1)),
        job("notebook", half, PodPlacement("n1", (4,), fraction=0.5), idle=True),
        job("waiting", whole),
    )
    metrics = SchedulerMetrics()
    metrics.record_cluster(Snapshot(policy(), nodes, jobs))
    assert value(metrics, "gitops_sched_cluster_gpus", state="total") == 16
    assert value(metrics, "gitops_sched_cluster_gpus", state="allocated") == 4.5
    assert value(metrics, "gitops_sched_cluster_gpus", state="idle_allocated") == 0.5
    assert value(metrics, "gitops_sched_nodes", state="schedulable") == 1
    assert value(metrics, "gitops_sched_nodes", state="unschedulable") == 1
    assert value(metrics, "gitops_sched_workloads", state="running") == 2
    assert value(metrics, "gitops_sched_workloads", state="pending") == 1


@pytest.mark.parametrize("leading", [True, False])
def test_only_the_leader_reports_cluster_state(leading: bool) -> None:
    metrics = SchedulerMetrics()
    metrics.set_leader(True)
    metrics.record_queues(decisions(QueueStatus("vision", 4, 4, 4, 0)))
    metrics.record_cluster(Snapshot(policy(), (), ()))
    metrics.set_leader(leading)
    assert value(metrics, "gitops_sched_leader") == (1 if leading else 0)
    text = generate_latest(metrics.registry).decode()
    assert ('queue="vision"' in text) is leading
    assert ('gitops_sched_nodes{state="schedulable"}' in text) is leading


NO_PROJECT = "namespace 'lab' belongs to no project"


def test_ignored_pods_are_counted_by_namespace_and_a_namespace_with_none_left_drops_out() -> None:
    metrics = SchedulerMetrics()
    metrics.set_leader(True)
    stray = Ignored("lab", "stray", "u1", NO_PROJECT)
    ghost = Ignored("team-a", "ghost", "u2", "labelled for project 'nobody'")
    picky = Ignored("team-a", "picky", "u3", "no node group it may use admits...", bound=True)
    empty = Snapshot(policy(), (), ())
    metrics.record_cycle(
        0.1, ClusterView(empty, {}, ignored=(stray, ghost, picky)), decisions(), Outcome()
    )
    assert value(metrics, "gitops_sched_ignored_pods", namespace="lab") == 1
    assert value(metrics, "gitops_sched_ignored_pods", namespace="team-a") == 2

    metrics.record_cycle(0.1, ClusterView(empty, {}, ignored=(ghost,)), decisions(), Outcome())
    assert value(metrics, "gitops_sched_ignored_pods", namespace="lab") is None
    assert value(metrics, "gitops_sched_ignored_pods", namespace="team-a") == 1

    metrics.set_leader(False)  # the leader counts them now
    assert "gitops_sched_ignored_pods{" not in generate_latest(metrics.registry).decode()


def test_past_usage_is_exported_per_queue_and_leaves_with_it() -> None:
    """Fairness over time: each queue's decayed past usage, a share of the window."""
    metrics = SchedulerMetrics()
    used = QueueStatus("vision", 0, 2, 8, 8, usage=0.625)
    metrics.record_queues(decisions(used, QueueStatus("nlp", 0, 6, 0, 8)))
    project = {"level": "project", "queue": "vision"}
    assert value(metrics, "gitops_sched_queue_usage_ratio", **project) == 0.625
    assert value(metrics, "gitops_sched_queue_usage_ratio", level="project", queue="nlp") == 0
    metrics.record_queues(decisions(used))
    assert value(metrics, "gitops_sched_queue_usage_ratio", level="project", queue="nlp") is None
