"""The scheduler's Prometheus metrics (served with its probes by `cluster.serving`).

Per queue (`level` project or department; `project-node-group`, queue `<project>/<group>`,
for a project with quotas per node group): GPUs deserved, fair share, allocated and asked by
pending work, as the last cycle computed them; the cluster's GPUs, nodes and workloads;
cycle duration; pods bound by request kind; pods evicted by the engine's reason, and
evictions a PodDisruptionBudget refused; pods with our schedulerName the cycle could not
take (ignored: a namespace of no project, a pod it cannot read...), by namespace.
`scheduler/grafana-dashboard.json` charts them.

State gauges describe the cluster only while this replica leads: a standby clears them, so
the replicas' series never disagree. Counters and the cycle histogram are per replica.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gitops_sched.engine.requests import placed_pod_gpus
from gitops_sched.engine.types import Decisions, EvictReason, QueueStatus, RequestKind, Snapshot

if TYPE_CHECKING:
    from gitops_sched.scheduler.actuate import Outcome
    from gitops_sched.scheduler.view import ClusterView, Ignored

PROJECT = "project"
DEPARTMENT = "department"
PROJECT_NODE_GROUP = "project-node-group"  # queue "<project>/<group>": a per-group quota
# the `kind` label of binds: GPU memory requests are fractions once placed
BIND_KINDS = {
    RequestKind.WHOLE: "whole",
    RequestKind.FRACTION: "fraction",
    RequestKind.MEMORY: "fraction",
    RequestKind.MIG: "mig",
    RequestKind.NONE: "none",
}
CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class SchedulerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        queue = ["level", "queue"]
        self.deserved = Gauge(
            "gitops_sched_queue_deserved_gpus",
            "GPUs the queue deserves (quota).",
            queue,
            registry=r,
        )
        self.fair_share = Gauge(
            "gitops_sched_queue_fair_share_gpus",
            "GPUs the queue's fair share comes to (quota plus its share of spare GPUs).",
            queue,
            registry=r,
        )
        self.allocated = Gauge(
            "gitops_sched_queue_allocated_gpus", "GPUs the queue's pods hold.", queue, registry=r
        )
        self.pending = Gauge(
            "gitops_sched_queue_pending_gpus",
            "GPUs the queue's pending pods ask for.",
            queue,
            registry=r,
        )
        self.usage = Gauge(
            "gitops_sched_queue_usage_ratio",
            "The queue's past GPU usage in the fairness window, decayed, as a share of what "
            "the cluster could give in it (fairness over time; 0 when not configured).",
            queue,
            registry=r,
        )
        self.cycle_duration = Histogram(
            "gitops_sched_cycle_duration_seconds",
            "Time of one scheduling cycle (decide and carry out).",
            registry=r,
            buckets=CYCLE_BUCKETS,
        )
        self.binds = Counter(
            "gitops_sched_binds", "Pods bound, by GPU request kind.", ["kind"], registry=r
        )
        self.evictions = Counter(
            "gitops_sched_evictions", "Pods evicted, by reason.", ["reason"], registry=r
        )
        self.refused = Counter(
            "gitops_sched_evictions_refused",
            "Evictions a PodDisruptionBudget refused (retried in a later cycle).",
            registry=r,
        )
        self.cluster_gpus = Gauge(
            "gitops_sched_cluster_gpus",
            "The cluster's GPUs: total, allocated, and allocated to idle workloads.",
            ["state"],
            registry=r,
        )
        self.nodes = Gauge(
            "gitops_sched_nodes",
            "GPU nodes by state (skipped: annotations the scheduler cannot read).",
            ["state"],
            registry=r,
        )
        self.workloads = Gauge(
            "gitops_sched_workloads", "Workloads (jobs) by state.", ["state"], registry=r
        )
        self.leader = Gauge(
            "gitops_sched_leader", "1 while this replica holds the Lease.", registry=r
        )
        self.ignored = Gauge(
            "gitops_sched_ignored_pods",
            "Pods with the scheduler's name it cannot take (a namespace of no project, labels "
            "or annotations it cannot read, no node group admits them...), by namespace; "
            "each pod's pending reason and `scheduler --once` say why.",
            ["namespace"],
            registry=r,
        )
        self._queues: set[tuple[str, str]] = set()
        self._ignored_namespaces: set[str] = set()
        for kind in sorted(set(BIND_KINDS.values())):
            self.binds.labels(kind=kind)
        for reason in EvictReason:
            self.evictions.labels(reason=reason.value)

    def record_cycle(
        self, seconds: float, view: ClusterView, decisions: Decisions, outcome: Outcome
    ) -> None:
        """One cycle of the leader: its duration, the queues and cluster it saw, and what it
        carried out."""
        self.cycle_duration.observe(seconds)
        self.record_queues(decisions)
        self.record_cluster(view.snapshot)
        self.record_ignored(view.ignored)
        self.nodes.labels(state="skipped").set(len(view.skipped))
        self.record_binds(outcome.bound_by_kind)
        self.record_evictions(outcome.evicted_by_reason, outcome.eviction_refused)

    def record_queues(self, decisions: Decisions) -> None:
        """Set each queue's gauges from the cycle's status; drop queues no longer there."""
        current: set[tuple[str, str]] = set()
        for level, statuses in ((DEPARTMENT, decisions.departments), (PROJECT, decisions.projects)):
            for status in statuses:
                self._set_queue(level, status)
                current.add((level, status.name))
        for status in decisions.projects:  # per node group, where a project has quotas there
            for pool in status.pools:
                name = f"{status.name}/{pool.name}"
                self._set_queue(PROJECT_NODE_GROUP, replace(pool, name=name))
                current.add((PROJECT_NODE_GROUP, name))
        self._remove_queues(self._queues - current)
        self._queues = current

    def record_binds(self, by_kind: Mapping[RequestKind, int]) -> None:
        """Pods bound, by their request kind."""
        for kind, n in by_kind.items():
            self.binds.labels(kind=BIND_KINDS[kind]).inc(n)

    def record_evictions(self, by_reason: Mapping[EvictReason, int], refused: int = 0) -> None:
        """Pods the API agreed to evict, by reason, and evictions a PDB refused."""
        for reason, n in by_reason.items():
            self.evictions.labels(reason=reason.value).inc(n)
        self.refused.inc(refused)

    def record_cluster(self, snapshot: Snapshot) -> None:
        """GPUs, nodes and workloads as the cycle saw them."""
        nodes = {node.name: node for node in snapshot.nodes}
        allocated = idle = 0.0
        for job in snapshot.jobs:
            held = sum(placed_pod_gpus(job, pod, nodes.get(pod.node)) for pod in job.placement)
            allocated += held
            if job.idle_since is not None:
                idle += held
        self.cluster_gpus.labels(state="total").set(sum(len(n.gpus) for n in snapshot.nodes))
        self.cluster_gpus.labels(state="allocated").set(allocated)
        self.cluster_gpus.labels(state="idle_allocated").set(idle)
        schedulable = sum(1 for node in snapshot.nodes if node.schedulable)
        self.nodes.labels(state="schedulable").set(schedulable)
        self.nodes.labels(state="unschedulable").set(len(snapshot.nodes) - schedulable)
        running = sum(1 for job in snapshot.jobs if job.running)
        self.workloads.labels(state="running").set(running)
        self.workloads.labels(state="pending").set(len(snapshot.jobs) - running)

    def record_ignored(self, ignored: Sequence[Ignored]) -> None:
        """The cycle's ignored pods, by namespace; a namespace with none left drops out."""
        counts: dict[str, int] = {}
        for pod in ignored:
            counts[pod.namespace] = counts.get(pod.namespace, 0) + 1
        for namespace, n in counts.items():
            self.ignored.labels(namespace=namespace).set(n)
        for namespace in self._ignored_namespaces - counts.keys():
            self.ignored.remove(namespace)
        self._ignored_namespaces = set(counts)

    def set_leader(self, leading: bool) -> None:
        """Mark this replica leader or standby; a standby reports no cluster state."""
        self.leader.set(1 if leading else 0)
        if not leading:
            self._remove_queues(self._queues)
            self._queues = set()
            for gauge in (self.cluster_gpus, self.nodes, self.workloads, self.ignored):
                gauge.clear()
            self._ignored_namespaces = set()

    def _set_queue(self, level: str, status: QueueStatus) -> None:
        self.deserved.labels(level, status.name).set(status.deserved)
        self.fair_share.labels(level, status.name).set(status.fair_share)
        self.allocated.labels(level, status.name).set(status.allocated)
        self.pending.labels(level, status.name).set(status.queued)
        self.usage.labels(level, status.name).set(status.usage)

    def _remove_queues(self, queues: Iterable[tuple[str, str]]) -> None:
        for labels in queues:
            for gauge in (self.deserved, self.fair_share, self.allocated, self.pending):
                gauge.remove(*labels)
            self.usage.remove(*labels)
