"""The engine's decisions carried out on the cluster, once per cycle.

In this order: evictions (the Eviction API, so PodDisruptionBudgets are honoured: a
refusal is counted and the next cycle's engine asks again; nothing is ever deleted or
forced), MIG requests to the node agents (`migrequest`), binds, then reservation pods no
longer used are deleted (`reservations`).

A bind is carried out only when all of it can be: every pod of the Bind live and unbound,
the GPUs it waits for free (a pipelined Bind waits: the next cycle decides it again as a
plain one once the victims are gone), each shared GPU's reservation pod running with its
UUID known, each MIG profile advertised by the node. Then each pod gets its placement
annotations (a merge patch) and is bound (a Binding). A gang therefore starts whole or
not at all.

A dry run sends every one of these writes as a server-side dry run (dryRun=All): the server
checks each as it would carry it out (permissions, a PodDisruptionBudget, a pod bound
meanwhile) and stores nothing, so its refusals are the errors the real cycle would meet.
Only binding a reservation pod the dry run has just "created" cannot be asked.

Every write to a pod (Binding, reservation pod, Eviction, delete) enters the loop's
`Assumed` state at once, done or of unknown outcome (a dropped connection, a 5xx, a 409
saying the cache is behind), so the next cycle never hands its GPUs out again before the
cache shows it. A Binding answered 429 (the server throttling) is retried after its
Retry-After; if it is still refused the pod is not assumed bound, and the next cycle
decides it again.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gitops_sched.bridge.policy import ClusterPolicy
from gitops_sched.cluster.client import ClusterClient, ObjectRef
from gitops_sched.cluster.errors import ApiFailure, Conflict, NotFound
from gitops_sched.contract.pods import (
    GPU_MEMORY_LIMIT,
    GPU_UUID,
    MIG_RESOURCE_PREFIX,
    NODE_MIG_REQUEST,
    PLACEMENT,
    encode_placement,
)
from gitops_sched.engine.apply import STOPPING
from gitops_sched.engine.codec import pod_to_dict
from gitops_sched.engine.types import (
    Bind,
    Decisions,
    Evict,
    EvictReason,
    PodPlacement,
    RequestKind,
)
from gitops_sched.scheduler.assumed import Assumed, Key
from gitops_sched.scheduler.migrequest import (
    advertised,
    agent_error,
    mig_in_use,
    requests_to_write,
)
from gitops_sched.scheduler.reservations import (
    DEFAULT_IMAGE,
    memory_share_mib,
    reservation_pod,
)
from gitops_sched.scheduler.view import ClusterView, PodRef, Reservation

FIELD_MANAGER = "gitops-sched-scheduler"


@dataclass
class Outcome:
    """What one cycle's actuation did (in a dry run: would do), for the loop, logs and
    metrics. `bound` and `evicted` let the loop assume its own writes until its informers
    show them."""

    bound: list[tuple[str, str, dict[str, str]]] = field(
        default_factory=list
    )  # uid, node, annotations
    evicted: list[str] = field(default_factory=list)  # UIDs of pods the API agreed to evict
    eviction_refused: int = 0  # refused (a PodDisruptionBudget: 429); the next cycle asks again
    waiting: int = 0  # pods of binds not carried out yet (pipelined, MIG, reservation, gang)
    waiting_reasons: dict[str, str] = field(default_factory=dict)  # job key -> why it waits
    bound_by_kind: Counter[RequestKind] = field(default_factory=Counter)
    evicted_by_reason: Counter[EvictReason] = field(default_factory=Counter)
    reservations_created: int = 0
    reservations_deleted: int = 0
    mig_requests: int = 0  # nodes whose MIG request was written
    errors: list[str] = field(default_factory=list)  # API calls that failed (a bind's 409 too)
    log: list[str] = field(default_factory=list)

    @property
    def bound_uids(self) -> set[str]:
        return {uid for uid, _, _ in self.bound}

    def summary(self, ignored: int | None = None) -> str:
        """One line; `ignored`, when given, is the cycle's ignored pods (the view's)."""
        parts = [
            f"{len(self.bound)} bound",
            f"{len(self.evicted)} evicted",
            f"{self.eviction_refused} evictions refused",
            f"{self.waiting} waiting",
        ]
        if ignored is not None:
            parts.append(f"{ignored} ignored")
        if self.reservations_created or self.reservations_deleted:
            parts.append(
                f"reservation pods {self.reservations_created} created, "
                f"{self.reservations_deleted} deleted"
            )
        if self.mig_requests:
            parts.append(f"{self.mig_requests} MIG requests")
        parts.append(f"{len(self.errors)} errors")
        return ", ".join(parts)


def shared_gpu(pod: PodPlacement) -> tuple[str, int] | None:
    """The (node, GPU) a fraction pod shares, or None for other pods."""
    if pod.fraction > 0 and pod.mig is None and pod.gpus:
        return pod.node, pod.gpus[0]
    return None


def outcome_unknown(exc: ApiFailure) -> bool:
    """Whether a failed write may have been carried out all the same: no answer (a dropped
    connection, a timeout) or a server error; or a 409, which says the cache is behind."""
    return exc.status in (0, 409) or exc.status >= 500


class Actuator:
    """Carries out each cycle's Decisions; what it writes to pods goes into `assumed`
    (the loop's, laid over the next cycles' cached pods)."""

    def __init__(
        self,
        client: ClusterClient,
        policy: ClusterPolicy,
        reservation_image: str = DEFAULT_IMAGE,
        dry_run: bool = False,
        assumed: Assumed | None = None,
    ):
        self.client = client
        self.policy = policy  # its scheduler name and system namespace name our pods
        self.reservation_image = reservation_image
        self.dry_run = dry_run
        self.assumed = Assumed() if assumed is None else assumed

    def carry_out(
        self, view: ClusterView, decisions: Decisions, now: float | None = None
    ) -> Outcome:
        cycle = _Cycle(self, view, Outcome(), time.time() if now is None else now)
        for evict in decisions.evictions:
            cycle.evict(evict)
        cycle.request_mig(decisions)
        for bind in decisions.binds:
            cycle.bind(bind)
        cycle.release_reservations(decisions.binds)
        return cycle.outcome


class _Cycle:
    """One carry_out: the view, what was done so far, and the lookups it needs."""

    def __init__(self, actuator: Actuator, view: ClusterView, outcome: Outcome, now: float):
        self.actuator = actuator
        self.assumed = actuator.assumed
        self.now = now
        self.client = actuator.client
        self.dry_run = actuator.dry_run
        self.view = view
        self.outcome = outcome
        self.suspended: set[ObjectRef] = set()  # Jobs stopped this cycle
        snapshot = view.snapshot
        self.jobs = {job.key: job for job in snapshot.jobs}
        self.gpu_memory = {
            (node.name, gpu.index): gpu.memory_mib for node in snapshot.nodes for gpu in node.gpus
        }
        self.reservations = {(r.node, r.gpu): r for r in view.reservations}
        self.touched: set[tuple[str, int]] = set()  # reservations created or bound this cycle
        self.mig_used = mig_in_use(snapshot)

    def note(self, line: str) -> None:
        self.outcome.log.append(f"would {line}" if self.dry_run else line)

    # --- evictions -----------------------------------------------------------------

    def evict(self, evict: Evict) -> None:
        why = f"{evict.reason}" + (f" for {evict.by}" if evict.by else "")
        for placement in evict.pods:
            pod = self.view.pod(evict.job, placement.index)
            if pod is None or pod.terminating:
                continue  # gone already, or leaving
            if evict.reason in STOPPING and pod.owner[0] == "Job":
                self.stop_job(pod, evict.reason)
                continue
            self.note(f"evict {pod.namespace}/{pod.name} ({why})")
            body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": pod.name, "namespace": pod.namespace},
                "deleteOptions": {"preconditions": {"uid": pod.uid}},
            }
            try:
                self.client.post(_pod_ref(pod), "eviction", body, dry_run=self.dry_run)
                self._evicted(pod, evict.reason)
            except (NotFound, Conflict):  # gone, or another pod of that name now
                self.outcome.log.append(f"{pod.namespace}/{pod.name}: already gone")
            except ApiFailure as exc:
                if exc.status == 429:
                    self.outcome.eviction_refused += 1
                    self.outcome.log.append(f"{pod.namespace}/{pod.name}: eviction refused: {exc}")
                else:
                    self._error(f"evicting {pod.namespace}/{pod.name}", exc)
                    if outcome_unknown(exc):
                        self.assumed.terminating(_key(pod), pod.uid, self.now, unsure=True)

    def stop_job(self, pod: PodRef, reason: EvictReason) -> None:
        """Stop, not re-queue: an evicted pod of a Job comes back (its podFailurePolicy
        ignores disruptions), so work stopped for its time limit or idleness suspends its
        Job instead, and the Job controller deletes the pods."""
        job = ObjectRef("batch/v1", "Job", pod.namespace, pod.owner[1])
        if job not in self.suspended:
            self.suspended.add(job)
            self.note(f"suspend {job} ({reason})")
            try:
                self.client.patch(job, {"spec": {"suspend": True}}, dry_run=self.dry_run)
            except NotFound:
                return
            except ApiFailure as exc:
                self._error(f"suspending {job}", exc)
                return
        self._evicted(pod, reason)

    def _evicted(self, pod: PodRef, reason: EvictReason) -> None:
        self.outcome.evicted.append(pod.uid)
        self.outcome.evicted_by_reason[reason] += 1
        self.assumed.terminating(_key(pod), pod.uid, self.now)

    # --- MIG requests --------------------------------------------------------------

    def request_mig(self, decisions: Decisions) -> None:
        wanted = requests_to_write(self.view.snapshot, self.view.nodes, decisions.mig_changes)
        for node, text in wanted.items():
            self.note(f"request MIG layout on {node}: {text}")
            self.outcome.mig_requests += 1
            patch = {"metadata": {"annotations": {NODE_MIG_REQUEST: text}}}
            try:
                self.client.patch(ObjectRef("v1", "Node", "", node), patch, dry_run=self.dry_run)
            except ApiFailure as exc:
                self._error(f"writing the MIG request of node {node}", exc)

    # --- binds ---------------------------------------------------------------------

    def bind(self, bind: Bind) -> None:
        if bind.pipelined:
            self._wait(bind, _pipelined_reason(bind, self.view.nodes))
            return
        pods: list[tuple[PodPlacement, PodRef]] = []
        for placement in bind.pods:
            pod = self.view.pod(bind.job, placement.index)
            if pod is None or pod.bound or pod.terminating:
                state = "missing" if pod is None else "bound" if pod.bound else "terminating"
                self._wait(bind, f"pod {placement.index} of the gang is {state}")
                return
            pods.append((placement, pod))
        blocked = [why for why in map(self._blocker, bind.pods) if why]
        blocked += self._mig_blockers(bind)
        if blocked:
            self._wait(bind, blocked[0])
            return
        kind = self._kind(bind.job)
        planned = [
            (placement, pod, self._annotations(bind.job, placement)) for placement, pod in pods
        ]
        for placement, pod, wanted in planned:
            if self._bind_pod(pod, placement.node, wanted):
                self.outcome.bound.append((pod.uid, placement.node, wanted))
                self.outcome.bound_by_kind[kind] += 1
                if placement.mig is not None:
                    self.mig_used[(placement.node, placement.mig.profile)] += 1

    def _kind(self, job_key: str) -> RequestKind:
        job = self.jobs.get(job_key)
        return job.request.kind if job is not None else RequestKind.NONE

    def _wait(self, bind: Bind, why: str) -> None:
        self.outcome.waiting += len(bind.pods)
        self.outcome.waiting_reasons[bind.job] = why
        self.outcome.log.append(f"{bind.job}: not bound yet: {why}")

    def _blocker(self, placement: PodPlacement) -> str:
        """Why this pod cannot be bound yet ("" when it can): its shared GPU's reservation
        pod not ready, or (a whole-GPU pod) a GPU a reservation pod still holds."""
        shared = shared_gpu(placement)
        if shared is None:
            held = [g for g in placement.gpus if (placement.node, g) in self.reservations]
            if placement.mig is None and held:
                node = placement.node
                return f"waiting for the reservation pod holding GPU {held[0]} on {node} to go"
            return ""
        reservation = self.reservations.get(shared)
        node, gpu = shared
        if reservation is None:
            self._reserve(node, gpu)
            return f"waiting for the reservation pod of GPU {gpu} on {node} to start"
        if reservation.terminating:
            return f"waiting for the old reservation pod of GPU {gpu} on {node} to go"
        if not reservation.bound:
            self._bind_reservation(reservation)
            return f"waiting for the reservation pod of GPU {gpu} on {node} to start"
        if not reservation.uuid:
            return f"waiting for the reservation pod of GPU {gpu} on {node} to report its UUID"
        return ""

    def _mig_blockers(self, bind: Bind) -> list[str]:
        """Why the MIG pods cannot be bound yet: a profile the node does not advertise
        enough of (with the agent's error, when it said one)."""
        blocked = []
        mig_pods = [p for p in bind.pods if p.mig is not None]
        wanted = Counter((p.node, p.mig.profile) for p in mig_pods if p.mig is not None)
        for (node, profile), count in sorted(wanted.items()):
            found = self.view.nodes.get(node)
            if advertised(found, profile) >= self.mig_used[(node, profile)] + count:
                continue
            why = f"waiting for {node} to advertise {MIG_RESOURCE_PREFIX}{profile}"
            gpus = sorted({p.gpus[0] for p in mig_pods if p.node == node and p.gpus})
            failed = next((f"GPU {g}: {e}" for g in gpus if (e := agent_error(found, g))), "")
            blocked.append(f"{why} (MIG change failed on {failed})" if failed else why)
        return blocked

    def _annotations(self, job_key: str, placement: PodPlacement) -> dict[str, str]:
        """What a pod is told where it runs: its placement; on a shared GPU, the GPU's UUID
        and its memory share (what it asked for, else its fraction of the GPU's memory)."""
        wanted = {PLACEMENT: encode_placement(pod_to_dict(placement))}
        shared = shared_gpu(placement)
        if shared is not None:
            job = self.jobs.get(job_key)
            asked = job.request.memory_mib if job and job.request.kind is RequestKind.MEMORY else 0
            memory = self.gpu_memory.get(shared, 0)
            wanted[GPU_UUID] = self.reservations[shared].uuid
            wanted[GPU_MEMORY_LIMIT] = str(memory_share_mib(placement.fraction, memory, asked))
        return wanted

    def _bind_pod(self, pod: PodRef, node: str, annotations: dict[str, str]) -> bool:
        self.note(f"bind {pod.namespace}/{pod.name} to {node}")
        return self._post_binding(pod.namespace, pod.name, pod.uid, node, annotations)

    def _post_binding(
        self, namespace: str, name: str, uid: str, node: str, annotations: dict[str, str]
    ) -> bool:
        """One request binds the pod and writes its annotations: the API server copies a
        Binding's annotations onto the pod as it sets spec.nodeName, so a pod is never
        bound without them, and half the requests go out. Assumed bound when it was, or
        may have been."""
        key = (namespace, name)
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        meta |= {"uid": uid} if uid else {}
        if annotations:
            meta["annotations"] = annotations
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        ref = ObjectRef("v1", "Pod", namespace, name)
        try:
            self.client.post(ref, "binding", body, dry_run=self.dry_run, retry_throttled=True)
        except ApiFailure as exc:
            self._error(f"binding {namespace}/{name} to {node}", exc)
            if outcome_unknown(exc):
                self.assumed.bound(key, uid, node, annotations, self.now, unsure=True)
            return False
        self.assumed.bound(key, uid, node, annotations, self.now)
        return True

    # --- reservation pods ----------------------------------------------------------

    def _reserve(self, node: str, gpu: int) -> None:
        """Create the reservation pod of (node, GPU) and bind it there, once a cycle."""
        if (node, gpu) in self.touched:
            return
        self.touched.add((node, gpu))
        actuator = self.actuator
        pod = reservation_pod(
            node,
            gpu,
            actuator.policy.system_namespace,
            actuator.policy.scheduler_name,
            actuator.reservation_image,
        )
        meta = pod["metadata"]
        self.note(f"create reservation pod {meta['namespace']}/{meta['name']} on {node}")
        self.outcome.reservations_created += 1
        try:
            created = self.client.create(pod, FIELD_MANAGER, dry_run=self.dry_run)
        except ApiFailure as exc:  # AlreadyExists: the view has not caught up; next cycle
            self._error(f"creating reservation pod {meta['name']}", exc)
            if outcome_unknown(exc):
                self.assumed.created(pod, self.now, unsure=True)
            return
        self.assumed.created(created, self.now)
        if self.dry_run:
            return  # a pod the dry run did not create cannot be bound, even as a dry run
        uid = created.get("metadata", {}).get("uid", "")
        self._post_binding(meta["namespace"], meta["name"], uid, node, {})

    def _bind_reservation(self, reservation: Reservation) -> None:
        key = (reservation.node, reservation.gpu)
        if key in self.touched:
            return
        self.touched.add(key)
        self.note(f"bind reservation pod {reservation.name} to {reservation.node}")
        self._post_binding(
            reservation.namespace, reservation.name, reservation.uid, reservation.node, {}
        )

    def release_reservations(self, binds: tuple[Bind, ...]) -> None:
        """Delete the reservation pods whose GPU no pod of ours uses or is about to."""
        snapshot = self.view.snapshot
        placements = [pod for job in snapshot.jobs for pod in job.placement]
        placements += [releasing.pod for releasing in snapshot.releasing]
        placements += [pod for bind in binds for pod in bind.pods]
        used = {shared for shared in map(shared_gpu, placements) if shared is not None}
        for reservation in self.view.reservations:
            if (reservation.node, reservation.gpu) in used or reservation.terminating:
                continue
            self.note(f"delete reservation pod {reservation.name}: GPU {reservation.gpu} unused")
            self.outcome.reservations_deleted += 1
            key = (reservation.namespace, reservation.name)
            ref = ObjectRef("v1", "Pod", reservation.namespace, reservation.name)
            try:
                self.client.delete(ref, dry_run=self.dry_run)
            except ApiFailure as exc:
                self._error(f"deleting reservation pod {reservation.name}", exc)
                if outcome_unknown(exc):
                    self.assumed.terminating(key, reservation.uid, self.now, unsure=True)
                continue
            self.assumed.terminating(key, reservation.uid, self.now)

    def _error(self, what: str, exc: ApiFailure) -> None:
        self.outcome.errors.append(f"{what}: {exc}")
        self.outcome.log.append(f"error {what}: {exc}")


def _pod_ref(pod: PodRef) -> ObjectRef:
    return ObjectRef("v1", "Pod", pod.namespace, pod.name)


def _key(pod: PodRef) -> Key:
    return pod.namespace, pod.name


def _pipelined_reason(bind: Bind, nodes: dict[str, dict[str, Any]]) -> str:
    if bind.waits_for:
        shown = ", ".join(bind.waits_for[:3]) + (", ..." if len(bind.waits_for) > 3 else "")
        return f"waiting for the pods of {shown} to leave its GPUs"
    change = bind.waits_for_mig[0]
    why = (
        f"waiting for MIG instance {change.instance.profile} on GPU {change.gpu} of "
        f"{change.node} to be created"
    )
    failed = agent_error(nodes.get(change.node), change.gpu)
    return f"{why} (failed: {failed})" if failed else why
