"""The reconciler's Prometheus metrics, served with its probes by `cluster.serving` (ready once
it has fetched and compiled the repo, or as a standby replica waiting for the Lease)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.sync_duration = Histogram(
            "gitops_sched_reconcile_duration_seconds",
            "Time of one sync.",
            registry=r,
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
        )
        self.syncs = Counter(
            "gitops_sched_reconcile_syncs", "Syncs by outcome.", ["outcome"], registry=r
        )
        self.applied = Counter(
            "gitops_sched_reconcile_objects_applied", "Objects applied.", registry=r
        )
        self.replaced = Counter(
            "gitops_sched_reconcile_objects_replaced",
            "Objects deleted and created again: a field fixed at creation changed (also "
            "counted as applied).",
            registry=r,
        )
        self.replacing = Gauge(
            "gitops_sched_reconcile_replacing_objects",
            "Replacements waiting, after the last sync, for the old object to go.",
            registry=r,
        )
        self.pruned = Counter(
            "gitops_sched_reconcile_objects_pruned", "Objects pruned.", registry=r
        )
        self.drift = Gauge(
            "gitops_sched_reconcile_drifted_objects",
            "Objects repaired in the last sync.",
            registry=r,
        )
        self.errors = Counter(
            "gitops_sched_reconcile_errors", "Errors (objects, invalid commits, API).", registry=r
        )
        self.warnings = Gauge(
            "gitops_sched_reconcile_warnings",
            "Warnings of the last sync: namespaces the repo dropped kept because they hold "
            "objects gitops-sched does not manage.",
            registry=r,
        )
        self.adopted = Counter(
            "gitops_sched_reconcile_objects_adopted",
            "Objects someone else made, taken over with consent (also counted as applied).",
            registry=r,
        )
        self.managed = Gauge(
            "gitops_sched_reconcile_managed_objects", "Objects the repo renders.", registry=r
        )
        self.last_sync = Gauge(
            "gitops_sched_reconcile_last_sync_timestamp_seconds",
            "End of the last successful sync.",
            registry=r,
        )
        self.commit = Gauge(
            "gitops_sched_reconcile_synced_commit_info",
            "The last synced commit (value 1).",
            ["commit"],
            registry=r,
        )
        self.leader = Gauge(
            "gitops_sched_reconcile_leader", "1 while this replica holds the Lease.", registry=r
        )
        self._commit: str | None = None

    def synced_commit(self, commit: str) -> None:
        if self._commit is not None and self._commit != commit:
            self.commit.remove(self._commit)
        self.commit.labels(commit=commit).set(1)
        self._commit = commit
