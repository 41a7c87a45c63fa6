"""Telling people what a sync did: the Cluster custom resource's status and Kubernetes
Events, written only when there is news (a new commit, objects applied or pruned, drift,
errors that changed), so a sync with nothing to do makes no request at all.

Status (`kubectl get clusters` shows the synced commit): syncedCommit, lastAttemptedCommit,
lastSyncTime, objects, applied, replaced, pruned, drift, replacing, errors, warnings (a
namespace kept: not an error, the sync is Synced), and a `Synced` condition (False while a
replacement waits for its old object to go: reason Replacing).

Events are about this reconciler's inventory ConfigMap, in its own namespace
(`kubectl -n gitops-sched get events`, or `describe configmap gitops-sched-inventory-<name>`).
Not about the Cluster object: the API server refuses (422) an Event in a namespace about a
cluster-scoped object, which client-go's recorder writes in `default` instead, where the
reconciler has no right to write.
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime
from typing import Any

from gitops_sched.cluster.client import ClusterClient, ObjectRef
from gitops_sched.cluster.diff import FIELD_MANAGER
from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.contract.labels import API_VERSION, GROUP
from gitops_sched.reconciler.sync import SyncResult

MAX_LISTED = 50  # drift and errors listed in status and events, at most
COMPONENT = "gitops-sched-reconciler"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cluster_ref(rendered_or_live: list[dict[str, Any]] | dict[ObjectRef, Any]) -> ObjectRef | None:
    refs = (
        rendered_or_live
        if isinstance(rendered_or_live, dict)
        else [ObjectRef.of(o) for o in rendered_or_live]
    )
    return next((r for r in refs if r.kind == "Cluster" and r.group == GROUP), None)


class Reporter:
    def __init__(
        self, client: ClusterClient, inventory: ObjectRef, identity: str, dry_run: bool = False
    ):
        self.client = client
        self.inventory = inventory  # what the Events are about (in the reconciler's namespace)
        self.identity = identity
        self.dry_run = dry_run

    def synced(self, result: SyncResult, cluster: ObjectRef | None) -> None:
        """After a sync of a valid commit."""
        live = result.live.get(cluster) if cluster else None
        old = (live or {}).get("status") or {}
        ok = not result.errors and not result.waiting
        news = (
            result.changed
            or old.get("lastAttemptedCommit") != result.revision
            or (ok and old.get("syncedCommit") != result.revision)
            or old.get("errors", []) != result.errors[:MAX_LISTED]
            or old.get("replacing", []) != result.waiting[:MAX_LISTED]
            or old.get("warnings", []) != result.warnings[:MAX_LISTED]
        )
        if not news or self.dry_run:
            return
        reason = "ApplyFailed" if result.errors else "Replacing" if result.waiting else "Synced"
        status = {
            "syncedCommit": result.revision if ok else old.get("syncedCommit", ""),
            "lastAttemptedCommit": result.revision,
            "lastSyncTime": _now(),
            "objects": result.objects,
            "applied": result.applied,
            "replaced": len(result.replaced),
            "pruned": len(result.pruned),
            "drift": result.drift[:MAX_LISTED],
            "replacing": result.waiting[:MAX_LISTED],
            "errors": result.errors[:MAX_LISTED],
            "warnings": result.warnings[:MAX_LISTED],
            "conditions": [_condition(ok, reason, _summary(result))],
        }
        self._write_status(cluster, status)
        self._event(
            "Warning" if result.errors else "Normal",
            {"ApplyFailed": "SyncFailed"}.get(reason, reason),
            _summary(result),
        )
        if result.drift:
            text = "; ".join(result.drift[:MAX_LISTED])
            self._event("Warning", "DriftRepaired", f"{len(result.drift)} drifted: {text}")
        if result.warnings:
            text = "; ".join(result.warnings[:MAX_LISTED])
            self._event("Warning", "PruneSkipped", f"{len(result.warnings)} kept: {text}")

    def invalid(
        self, revision: str, errors: list[str], live_cluster: dict[str, Any] | None
    ) -> None:
        """After a commit that does not compile: nothing was applied."""
        old = (live_cluster or {}).get("status") or {}
        if old.get("lastAttemptedCommit") == revision and old.get("errors") == errors[:MAX_LISTED]:
            return
        if self.dry_run:
            return
        ref = ObjectRef.of(live_cluster) if live_cluster else None
        message = f"commit {revision[:12]} is invalid ({len(errors)} errors); nothing applied"
        status = {
            **{k: v for k, v in old.items() if k in ("syncedCommit", "objects")},
            "lastAttemptedCommit": revision,
            "lastSyncTime": _now(),
            "errors": errors[:MAX_LISTED],
            "conditions": [_condition(False, "InvalidConfig", message)],
        }
        if ref is not None:
            self._write_status(ref, status)
        self._event("Warning", "InvalidConfig", message + ": " + "; ".join(errors[:5]))

    def _write_status(self, cluster: ObjectRef | None, status: dict[str, Any]) -> None:
        if cluster is None:
            return
        body = {
            "apiVersion": API_VERSION,
            "kind": "Cluster",
            "metadata": {"name": cluster.name},
            "status": status,
        }
        # the Cluster object may be gone or its CRD not served: the event still tells
        with contextlib.suppress(ApiFailure):
            self.client.apply(body, FIELD_MANAGER, force=True, subresource="status")

    def _event(self, kind: str, reason: str, message: str) -> None:
        about = self.inventory
        involved = {
            "apiVersion": about.api_version,
            "kind": about.kind,
            "namespace": about.namespace,
            "name": about.name,
        }
        stamp = _now()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"gitops-sched.{uuid.uuid4().hex[:16]}",
                "namespace": about.namespace,
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.identity[:128],
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        with contextlib.suppress(ApiFailure):  # events are best effort
            self.client.create(event)


def _condition(ok: bool, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": "Synced",
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message[:1024],
        "lastTransitionTime": _now(),
    }


def _summary(result: SyncResult) -> str:
    parts = [
        f"commit {result.revision[:12]}",
        f"{result.objects} objects",
        f"{len(result.created)} created",
        f"{len(result.updated)} updated",
    ]
    if result.replaced:
        parts.append(f"{len(result.replaced)} replaced")
    if result.adopted:
        parts.append(f"{len(result.adopted)} adopted")
    parts.append(f"{len(result.pruned)} pruned")
    if result.drift:
        parts.append(f"{len(result.drift)} drifted")
    if result.waiting:
        parts.append(
            f"{len(result.waiting)} waiting to be created again: " + "; ".join(result.waiting[:5])
        )
    if result.errors:
        parts.append(f"{len(result.errors)} errors: " + "; ".join(result.errors[:5]))
    if result.warnings:
        parts.append(f"{len(result.warnings)} warnings: " + "; ".join(result.warnings[:5]))
    return ", ".join(parts)
