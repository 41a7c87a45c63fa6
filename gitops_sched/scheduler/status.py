"""What the scheduler tells users each cycle: each Project's and Department's status
(deserved, fair share, allocated and queued GPUs), and why a pod waits.

Writes are kept to what changed, since this runs every cycle over every pending pod:
a queue's status is patched only when a value differs from what the object has; a
pending pod gets its `PodScheduled=False` condition (reason `Unschedulable`, the message
in the engine's words) and one `FailedScheduling` Event only when its message changes.
The messages already said are remembered by pod UID, so a restarted (or newly elected)
scheduler says each pending pod's reason once more. A node the cycle skipped (annotations
it cannot read) gets one `NodeSkipped` Warning Event each time its reason changes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gitops_sched.cluster.client import ClusterClient, ObjectRef
from gitops_sched.cluster.errors import ApiFailure, NotFound
from gitops_sched.contract.labels import API_VERSION
from gitops_sched.contract.pods import PENDING_CONDITION_REASON
from gitops_sched.engine.types import Decisions, QueueStatus
from gitops_sched.hardware.gpus import rounded_gpus
from gitops_sched.scheduler.actuate import Outcome
from gitops_sched.scheduler.view import ClusterView

COMPONENT = "gitops-sched-scheduler"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"  # conditions merge by type
MAX_MESSAGE = 1024


@dataclass
class StatusReport:
    queues: int = 0  # Project/Department statuses written
    conditions: int = 0  # pod conditions written
    events: int = 0  # Events created
    errors: list[str] = field(default_factory=list)


def queue_status(queue: QueueStatus) -> dict[str, Any]:
    """A queue's status as the CRD names its fields, GPUs rounded as reports round them; a
    project with quotas per node group has the same per group under `nodeGroups`."""
    status: dict[str, Any] = {
        "deserved": rounded_gpus(queue.deserved),
        "fairShare": rounded_gpus(queue.fair_share),
        "allocated": rounded_gpus(queue.allocated),
        "queued": rounded_gpus(queue.queued),
    }
    if queue.pools:
        status["nodeGroups"] = {pool.name: queue_status(pool) for pool in queue.pools}
    return status


@dataclass(frozen=True)
class _Pod:
    namespace: str
    name: str
    uid: str
    bound: bool = False  # an ignored pod bound already: an Event, but no PodScheduled=False


class StatusWriter:
    def __init__(self, client: ClusterClient, dry_run: bool = False):
        self.client = client
        self.dry_run = dry_run
        self._said: dict[str, str] = {}  # pod UID -> the pending message it was last given
        self._skipped: dict[str, str] = {}  # node -> why it was last said to be skipped

    def write(
        self,
        view: ClusterView,
        decisions: Decisions,
        outcome: Outcome | None = None,
        usage: dict[str, dict[str, Any]] | None = None,
    ) -> StatusReport:
        """The queues' status and the pending pods' reasons; `outcome` (this cycle's
        actuation) adds why a bind waits and leaves out the pods it bound; `usage`: the
        projects' past usage to keep (scheduler.usage)."""
        report = StatusReport()
        self.write_queues(decisions, report, usage)
        self.write_pending(view, decisions, outcome, report)
        self.write_skipped(view, report)
        return report

    def write_skipped(self, view: ClusterView, report: StatusReport) -> None:
        """A Warning Event on each node newly skipped, or skipped for another reason."""
        said, self._skipped = self._skipped, {}
        for node in view.skipped:
            why = f"left out of scheduling: {node.why}"[:MAX_MESSAGE]
            self._skipped[node.name] = why
            if said.get(node.name) == why:
                continue
            report.events += 1
            if self.dry_run:
                continue
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            involved = {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid}
            try:
                self.client.create(_event(involved, "default", "NodeSkipped", why, stamp, stamp))
            except ApiFailure as exc:
                del self._skipped[node.name]  # said next cycle
                report.errors.append(f"creating an event for node {node.name}: {exc}")

    # --- queues --------------------------------------------------------------------

    def write_queues(
        self,
        decisions: Decisions,
        report: StatusReport,
        usage: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Each queue's status where it changed; `usage`: projects' past usage to keep
        (fairness over time, see scheduler.usage)."""
        for kind, queues in (
            ("Department", decisions.departments),
            ("Project", decisions.projects),
        ):
            if not queues:
                continue
            try:
                live = self.client.list(API_VERSION, kind)
            except ApiFailure as exc:
                report.errors.append(f"listing {kind}s: {exc}")
                continue
            by_name = {obj["metadata"]["name"]: obj for obj in live or ()}
            for queue in queues:
                obj = by_name.get(queue.name)
                wanted: dict[str, Any] = dict(queue_status(queue))
                if kind == "Project" and usage and queue.name in usage:
                    wanted["usage"] = usage[queue.name]
                if obj is None or _same(obj.get("status") or {}, wanted):
                    continue  # no object to write to (the reconciler makes it), or no change
                report.queues += 1
                try:
                    self.client.patch(
                        ObjectRef.of(obj),
                        {"status": wanted},
                        subresource="status",
                        dry_run=self.dry_run,
                    )
                except ApiFailure as exc:
                    report.errors.append(f"writing the status of {kind} {queue.name}: {exc}")

    # --- pending pods --------------------------------------------------------------

    def write_pending(
        self,
        view: ClusterView,
        decisions: Decisions,
        outcome: Outcome | None,
        report: StatusReport,
    ) -> None:
        reasons = dict(decisions.pending_reasons)
        bound: set[str] = set()
        if outcome is not None:
            reasons |= outcome.waiting_reasons
            bound = outcome.bound_uids
        told: list[tuple[_Pod, str]] = []
        for job, why in sorted(reasons.items()):
            for pod in view.pods.get(job, ()):
                if not (pod.bound or pod.terminating or pod.uid in bound):
                    told.append((_Pod(pod.namespace, pod.name, pod.uid), why))
        reserved = {(r.namespace, r.name) for r in view.reservations}
        told += [
            (_Pod(p.namespace, p.name, p.uid, p.bound), p.why)
            for p in view.ignored
            if (p.namespace, p.name) not in reserved
        ]
        for target, why in told:
            why = why[:MAX_MESSAGE]
            if self._said.get(target.uid) != why:
                self._tell(target, why, report)
        live = {p.uid for pods in view.pods.values() for p in pods} | {p.uid for p in view.ignored}
        self._said = {uid: why for uid, why in self._said.items() if uid in live}

    def _tell(self, pod: _Pod, why: str, report: StatusReport) -> None:
        """The pod's PodScheduled condition, then one Event, saying why it waits (a bound
        pod gets the Event alone)."""
        report.conditions += not pod.bound
        report.events += 1
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if pod.bound:
            self._remember(pod, why)
            self._event(pod, why, stamp, stamp, report)  # no write to version it by
            return
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": PENDING_CONDITION_REASON,
            "message": why,
            "lastTransitionTime": stamp,
        }
        ref = ObjectRef("v1", "Pod", pod.namespace, pod.name)
        try:
            written = self.client.patch(
                ref,
                {"status": {"conditions": [condition]}},
                subresource="status",
                content_type=STRATEGIC_MERGE_PATCH,
                dry_run=self.dry_run,
            )
        except NotFound:
            return  # gone meanwhile
        except ApiFailure as exc:
            report.errors.append(f"writing the pending reason of {pod.namespace}/{pod.name}: {exc}")
            return
        self._remember(pod, why)
        version = (written.get("metadata") or {}).get("resourceVersion", "")
        self._event(pod, why, version, stamp, report)

    def _remember(self, pod: _Pod, why: str) -> None:
        """The pod has been told (a dry run told it nothing: the next run tells it)."""
        if not self.dry_run:
            self._said[pod.uid] = why

    def _event(self, pod: _Pod, why: str, version: str, stamp: str, report: StatusReport) -> None:
        involved = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
        }
        event = _event(involved, pod.namespace, "FailedScheduling", why, version, stamp)
        if self.dry_run:
            # a dry-run condition write leaves the pod's version as it was, so the name
            # may be an Event the last real run made: the server names this one
            name = event["metadata"].pop("name")
            event["metadata"]["generateName"] = name.rpartition(".")[0] + "."
        try:
            self.client.create(event, dry_run=self.dry_run)
        except ApiFailure as exc:  # best effort: the condition says it already, or next time
            # AlreadyExists: this very Event is there (a restarted scheduler tells the pod again)
            if exc.reason != "AlreadyExists":
                report.errors.append(f"creating an event for {pod.namespace}/{pod.name}: {exc}")


def _event(
    involved: dict[str, str], namespace: str, reason: str, why: str, version: str, stamp: str
) -> dict[str, Any]:
    """A Warning Event about `involved`; its name is unique to the object, message and
    `version` (a pod's: the one its condition write made), so never a clash, and the same
    on a retry."""
    digest = hashlib.sha256(f"{involved['uid']}\0{why}\0{version}".encode()).hexdigest()[:16]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved['name'][:200]}.{digest}", "namespace": namespace},
        "involvedObject": involved,
        "type": "Warning",
        "reason": reason,
        "message": why,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def _same(have: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether the object's status already says `wanted` (by value: 4 is 4.0)."""
    return all(
        (isinstance(value, dict) or isinstance(have.get(key), int | float))
        and have.get(key) == value
        for key, value in wanted.items()
    )
