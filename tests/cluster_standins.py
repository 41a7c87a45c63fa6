"""Stand-ins for the cluster parts the emulator does not run: the Job and Deployment
controllers and the kubelets. A test calls each stand-in's `step()` when it wants the part
to act (deterministic: no threads, no clocks unless given one); `settle()` steps them all
until nothing changes.

They act on the emulator in-process through `Api.call` (not over HTTP: fast, and neither
counted in `api.requests` nor hit by injected faults), with the same requests a real
controller or kubelet would make, so the emulator's rules apply to them too.

- `JobController`: batch/v1 Jobs in Indexed completion mode, as the real controller keeps
  them: `parallelism` pods named `<job>-<index>-<5 chars>` (seeded), carrying the template's
  labels and annotations, the completion index (annotation, label, JOB_COMPLETION_INDEX), an
  owner reference and the `batch.kubernetes.io/job-tracking` finalizer, which it removes
  once it has counted a finished pod. A pod that failed with a DisruptionTarget condition
  (evicted) is ignored by the rendered podFailurePolicy and replaced, once it has failed
  (podReplacementPolicy Failed); other failures count toward backoffLimit. Completes the Job
  when every index has succeeded; honours suspend and activeDeadlineSeconds (with a
  `clock`).
- `DeploymentController`: Deployments' pods, owned by the Deployment directly (no
  ReplicaSet), named `<deployment>-<pod-template-hash>-<5 chars>`; a template change
  replaces old pods within maxUnavailable/maxSurge.
- Both delete the pods of a Job or Deployment that is gone (the garbage collector's part),
  record pods they could not create in `failed_creates` (a real controller would retry and
  emit an event), and leave a status write that met a conflict to their next step.
- `Kubelet`: starts pods bound to existing Nodes (Running, Ready, startTime) after
  `start_after` steps, rejecting a pod that does not fit its node as the kubelet's
  admission does (phase Failed, reason `OutOf<resource>`: how a double-booked GPU shows;
  running pods count until they have stopped, terminating ones too), or whose node
  selector, required node affinity or NoExecute taints exclude it; finishes terminating
  pods after `terminate_after` steps (`Api.finish_terminating`); `on_start(pod, node)` runs
  once per started pod (a GPU reservation pod writing its GPU's UUID, say); `finish(...)`
  ends a pod (Succeeded or Failed).
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from tests.kube_emulator import Api, ApiError
from tests.kube_emulator.disruption import is_ready, scaled
from tests.kube_emulator.quantity import parse
from tests.kube_emulator.selectors import label_selector_matches

Obj = dict[str, Any]
NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the API machinery's random name alphabet
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
HASH_LABEL = "pod-template-hash"
TERMINAL = ("Succeeded", "Failed")


def _stamp(seconds: float | None = None) -> str:
    when = datetime.now(UTC) if seconds is None else datetime.fromtimestamp(seconds, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def _owned(pods: Iterable[Obj], owner: Obj) -> list[Obj]:
    uid = owner["metadata"]["uid"]
    return [
        p
        for p in pods
        if any(
            o.get("uid") == uid and o.get("controller")
            for o in p["metadata"].get("ownerReferences") or []
        )
    ]


def _owner_reference(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def _active(pod: Obj) -> bool:
    """Neither finished nor being deleted: what a controller counts as running its work."""
    return _phase(pod) not in TERMINAL and not pod["metadata"].get("deletionTimestamp")


def _condition(obj: Obj, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


class _Controller:
    """A controller of pods owned by objects of one kind (`OWNER`: apiVersion, kind)."""

    OWNER: tuple[str, str]

    def __init__(self, api: Api, seed: int = 0):
        self.api = api
        self.random = random.Random(seed)
        self.failed_creates: list[str] = []  # ApiError messages of pods it could not create

    def step(self) -> bool:
        """One sync of every owner, and of the pods of deleted owners; whether anything
        changed."""
        pods = self.api.objects("v1", "Pod")
        owners = self.api.objects(*self.OWNER)
        changed = False
        for owner in owners:
            changed |= self._sync(owner, _owned(pods, owner))
        for pod in self._orphans(pods, owners, self.OWNER[1]):
            changed |= self._orphaned(pod)
        return changed

    def _sync(self, owner: Obj, pods: list[Obj]) -> bool:
        raise NotImplementedError

    def _orphaned(self, pod: Obj) -> bool:
        """What a pod whose owner is gone changes (it was just deleted unless already
        terminating): whether anything changed."""
        return not pod["metadata"].get("deletionTimestamp")

    def _suffix(self) -> str:
        return "".join(self.random.choice(NAME_CHARS) for _ in range(5))

    def _create_pod(self, namespace: str, pod: Obj) -> bool:
        try:
            self.api.call("POST", _pod_path(namespace), pod, manager=type(self).__name__)
        except ApiError as exc:  # a real controller records an event and retries later
            self.failed_creates.append(exc.message)
            return False
        return True

    def _delete_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        try:
            self.api.call("DELETE", _pod_path(meta["namespace"], meta["name"]))
        except ApiError as exc:
            if exc.code != 404:
                raise

    def _put_status(self, path: str, obj: Obj, status: Obj) -> bool:
        """PUT the owner's status; False on a conflict (someone wrote first: next step)."""
        try:
            self.api.call("PUT", path, {**obj, "status": status}, manager=type(self).__name__)
        except ApiError as exc:
            if exc.code != 409:
                raise
            return False
        return True

    def _orphans(self, pods: list[Obj], owners: list[Obj], kind: str) -> list[Obj]:
        """Pods whose `kind` controller is gone, deleted as the garbage collector would."""
        alive = {o["metadata"]["uid"] for o in owners}
        orphans = [
            p
            for p in pods
            if any(
                o.get("kind") == kind and o.get("controller") and o.get("uid") not in alive
                for o in p["metadata"].get("ownerReferences") or []
            )
        ]
        for pod in orphans:
            if not pod["metadata"].get("deletionTimestamp"):
                self._delete_pod(pod)
        return orphans


class JobController(_Controller):
    """batch/v1 Jobs (Indexed completion mode) and their pods; see the module docstring.
    `clock` (seconds since the epoch) times activeDeadlineSeconds."""

    def __init__(self, api: Api, seed: int = 0, clock: Callable[[], float] | None = None):
        super().__init__(api, seed)
        self.clock = clock

    OWNER = ("batch/v1", "Job")

    def _orphaned(self, pod: Obj) -> bool:
        meta = pod["metadata"]
        if not meta.get("deletionTimestamp"):
            return super()._orphaned(pod)  # deleted just now
        if _phase(pod) in TERMINAL and TRACKING_FINALIZER in meta.get("finalizers", []):
            self._release(pod)  # its Job is gone: nothing left to count it for
            return True
        return False

    def _sync(self, job: Obj, pods: list[Obj]) -> bool:
        spec, status = job["spec"], copy.deepcopy(job.get("status") or {})
        if spec.get("completionMode") != "Indexed":
            raise NotImplementedError("the Job stand-in runs Indexed Jobs only")
        before = copy.deepcopy(status)
        status.setdefault("startTime", _stamp(self.clock() if self.clock else None))
        done = self._count_finished(job, pods, status)
        finished = _finished(status)
        if not finished:
            failure = self._failure(job, status)
            if failure is not None:
                status["conditions"] = [*status.get("conditions", []), *failure]
                finished = True
        active = [p for p in pods if _active(p)]
        if finished or spec.get("suspend"):
            for pod in active:
                self._delete_pod(pod)
            active = []
        else:
            active = self._fill(job, pods, active, status)
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if is_ready(p))
        status["terminating"] = sum(
            1 for p in pods if p["metadata"].get("deletionTimestamp") and _phase(p) not in TERMINAL
        )
        if status == before:
            return False
        meta = job["metadata"]
        path = f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}/status"
        if self._put_status(path, job, status):
            for pod in done:  # counted in the Job's status: the pod may go
                self._release(pod)
        return True

    def _release(self, pod: Obj) -> None:
        """Remove the job-tracking finalizer."""
        meta = pod["metadata"]
        remaining = [f for f in meta.get("finalizers") or [] if f != TRACKING_FINALIZER]
        patch = {"metadata": {"finalizers": remaining or None}}
        self.api.call("PATCH", _pod_path(meta["namespace"], meta["name"]), patch)

    def _count_finished(self, job: Obj, pods: list[Obj], status: Obj) -> list[Obj]:
        """Pods that finished and still carry the tracking finalizer, counted into `status`."""
        succeeded = _indexes(status.get("completedIndexes", ""))
        done = []
        for pod in pods:
            if TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or []):
                continue
            if _phase(pod) == "Succeeded":
                succeeded.add(int(pod["metadata"]["annotations"][INDEX_KEY]))
            elif _phase(pod) == "Failed":
                if not _ignored(job, pod):
                    status["failed"] = status.get("failed", 0) + 1
            else:
                continue
            done.append(pod)
        status["succeeded"] = len(succeeded)
        status["completedIndexes"] = _ranges(succeeded)
        if not status["completedIndexes"]:
            del status["completedIndexes"]
        completions = job["spec"]["completions"]
        if len(succeeded) >= completions and not _finished(status):
            now = _stamp(self.clock() if self.clock else None)
            status["conditions"] = [
                *status.get("conditions", []),
                *(
                    _job_condition(
                        k, "CompletionsReached", "Reached expected number of succeeded pods", now
                    )
                    for k in ("SuccessCriteriaMet", "Complete")
                ),
            ]
            status["completionTime"] = now
        return done

    def _failure(self, job: Obj, status: Obj) -> list[Obj] | None:
        spec = job["spec"]
        now = _stamp(self.clock() if self.clock else None)
        if status.get("failed", 0) > spec.get("backoffLimit", 6):
            reason, message = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        elif self._past_deadline(spec, status):
            reason, message = "DeadlineExceeded", "Job was active longer than specified deadline"
        else:
            return None
        return [_job_condition(k, reason, message, now) for k in ("FailureTarget", "Failed")]

    def _past_deadline(self, spec: Obj, status: Obj) -> bool:
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is None or self.clock is None:
            return False
        started = datetime.strptime(status["startTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        return self.clock() - started.timestamp() >= deadline

    def _fill(self, job: Obj, pods: list[Obj], active: list[Obj], status: Obj) -> list[Obj]:
        """New pods for the indexes without a succeeded, active or (podReplacementPolicy
        Failed) terminating pod, up to parallelism."""
        spec = job["spec"]
        succeeded = _indexes(status.get("completedIndexes", ""))
        wait_for_failed = spec.get("podReplacementPolicy") == "Failed"
        busy = {
            int(p["metadata"]["annotations"][INDEX_KEY])
            for p in pods
            if _active(p) or (wait_for_failed and _phase(p) not in TERMINAL)
        }
        active = list(active)
        for index in range(spec["completions"]):
            if len(active) >= spec["parallelism"]:
                break
            if index in succeeded or index in busy:
                continue
            pod = self._pod(job, index)
            if self._create_pod(job["metadata"]["namespace"], pod):
                active.append(pod)
        return active

    def _pod(self, job: Obj, index: int) -> Obj:
        template = copy.deepcopy(job["spec"]["template"])
        meta = template.get("metadata") or {}
        name = job["metadata"]["name"]
        labels = {**(meta.get("labels") or {}), INDEX_KEY: str(index)}
        annotations = {**(meta.get("annotations") or {}), INDEX_KEY: str(index)}
        index_env = {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_KEY}']"}},
        }
        spec = template["spec"]
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            container["env"] = [index_env, *container.get("env", [])]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{index}-{self._suffix()}",
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [_owner_reference(job)],
                "finalizers": [TRACKING_FINALIZER],
            },
            "spec": spec,
        }


def _ignored(job: Obj, pod: Obj) -> bool:
    """Whether the Job's podFailurePolicy ignores this failed pod (evicted, for the rendered
    Jobs: a DisruptionTarget condition)."""
    for rule in (job["spec"].get("podFailurePolicy") or {}).get("rules", []):
        for wanted in rule.get("onPodConditions", []):
            conditions = (pod.get("status") or {}).get("conditions") or []
            if any(
                c.get("type") == wanted["type"] and c.get("status") == wanted.get("status", "True")
                for c in conditions
            ):
                return rule["action"] == "Ignore"
    return False


def _finished(status: Obj) -> bool:
    return _condition({"status": status}, "Complete") or _condition({"status": status}, "Failed")


def _job_condition(kind: str, reason: str, message: str, now: str) -> Obj:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }


def _indexes(text: str) -> set[int]:
    """Indexes from the completedIndexes form: "0-2,5"."""
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return out


def _ranges(indexes: set[int]) -> str:
    parts, ordered = [], sorted(indexes)
    while ordered:
        first = last = ordered.pop(0)
        while ordered and ordered[0] == last + 1:
            last = ordered.pop(0)
        parts.append(f"{first}-{last}" if last > first else str(first))
    return ",".join(parts)


class DeploymentController(_Controller):
    """apps/v1 Deployments' pods, without ReplicaSets; see the module docstring."""

    OWNER = ("apps/v1", "Deployment")

    def _sync(self, deployment: Obj, pods: list[Obj]) -> bool:
        """A rolling update as the deployment controller paces it: new pods while the total
        stays within replicas + maxSurge, old pods deleted while at least replicas -
        maxUnavailable stay available (ready)."""
        spec = deployment["spec"]
        replicas = spec.get("replicas", 1)
        template_hash = _template_hash(spec["template"])
        active = [p for p in pods if _active(p)]
        current = [p for p in active if p["metadata"]["labels"].get(HASH_LABEL) == template_hash]
        old = [p for p in active if p not in current]
        rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
        surge = scaled(rolling.get("maxSurge", "25%"), replicas)
        unavailable = scaled(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
        unavailable = max(unavailable, 0 if surge else 1)
        excess = _deletion_order(current)[: max(0, len(current) - replicas)]
        new_unready = sum(1 for p in current if not is_ready(p))
        room_down = len(active) - (replicas - unavailable) - new_unready
        doomed = _deletion_order(old)[: max(0, room_down)] + excess
        for pod in doomed:
            self._delete_pod(pod)
        room_up = replicas + surge - (len(active) - len(doomed))
        missing = replicas - (len(current) - len(excess))
        created = [
            self._create_pod(
                deployment["metadata"]["namespace"], self._pod(deployment, template_hash)
            )
            for _ in range(max(0, min(room_up, missing)))
        ]
        if doomed or created:
            pods = _owned(self.api.objects("v1", "Pod"), deployment)
        status_changed = self._report(deployment, pods, template_hash)
        return bool(doomed) or any(created) or status_changed

    def _pod(self, deployment: Obj, template_hash: str) -> Obj:
        template = copy.deepcopy(deployment["spec"]["template"])
        meta = template.get("metadata") or {}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{deployment['metadata']['name']}-{template_hash}-{self._suffix()}",
                "labels": {**(meta.get("labels") or {}), HASH_LABEL: template_hash},
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [_owner_reference(deployment)],
            },
            "spec": template["spec"],
        }

    def _report(self, deployment: Obj, pods: list[Obj], template_hash: str) -> bool:
        active = [p for p in pods if _active(p)]
        ready = sum(1 for p in active if is_ready(p))
        status = {
            **(deployment.get("status") or {}),
            "observedGeneration": deployment["metadata"]["generation"],
            "replicas": len(active),
            "updatedReplicas": sum(
                1 for p in active if p["metadata"]["labels"].get(HASH_LABEL) == template_hash
            ),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": max(0, deployment["spec"].get("replicas", 1) - ready),
        }
        status = {
            k: v for k, v in status.items() if v != 0 or k in ("observedGeneration", "replicas")
        }
        if status == deployment.get("status"):
            return False
        meta = deployment["metadata"]
        path = f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}/status"
        return self._put_status(path, deployment, status)


def _template_hash(template: Obj) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(NAME_CHARS[b % len(NAME_CHARS)] for b in digest[:10])


def _deletion_order(pods: list[Obj]) -> list[Obj]:
    """Which pods a ReplicaSet gives up first: unbound, then not ready, then the newest."""
    return sorted(
        pods,
        key=lambda p: (
            bool(p["spec"].get("nodeName")),
            is_ready(p),
            [-ord(c) for c in p["metadata"].get("creationTimestamp", "")],
            p["metadata"]["name"],
        ),
    )


class Kubelet:
    """Every node's kubelet; see the module docstring. `nodes` limits it to some nodes."""

    def __init__(
        self,
        api: Api,
        start_after: int = 0,
        terminate_after: int = 0,
        on_start: Callable[[Obj, Obj], None] | None = None,
        nodes: Iterable[str] | None = None,
    ):
        self.api = api
        self.start_after, self.terminate_after = start_after, terminate_after
        self.on_start = on_start
        self.nodes = None if nodes is None else set(nodes)
        self.steps = 0
        self._seen: dict[str, int] = {}  # pod uid -> the step it was first seen waiting

    def step(self) -> bool:
        """Finish due terminating pods, then admit and start due bound pods; whether
        anything changed."""
        self.steps += 1
        changed = False
        nodes = {n["metadata"]["name"]: n for n in self.api.objects("v1", "Node")}
        for pod in self.api.objects("v1", "Pod"):
            meta = pod["metadata"]
            mine = self.nodes is None or pod["spec"].get("nodeName") in self.nodes
            if (
                mine
                and meta.get("deletionTimestamp")
                and self._due(pod, "stop", self.terminate_after)
            ):
                changed |= bool(self.api.finish_terminating(meta["namespace"], meta["name"]))
        pods = self.api.objects("v1", "Pod")
        waiting = sorted(
            (
                p
                for p in pods
                if p["spec"].get("nodeName") in nodes
                and (self.nodes is None or p["spec"]["nodeName"] in self.nodes)
                and _phase(p) == "Pending"
                and not p["metadata"].get("deletionTimestamp")
            ),
            key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]),
        )
        for pod in waiting:
            if not self._due(pod, "start", self.start_after):
                continue
            node = nodes[pod["spec"]["nodeName"]]
            running = [
                p
                for p in self.api.objects("v1", "Pod")
                if p["spec"].get("nodeName") == node["metadata"]["name"] and _phase(p) == "Running"
            ]
            rejection = _rejection(pod, node, running)
            if rejection is not None:
                self._write_status(
                    pod, {"phase": "Failed", "reason": rejection[0], "message": rejection[1]}
                )
            else:
                self._start(pod, node)
            changed = True
        return changed

    def finish(self, namespace: str, name: str, succeeded: bool = True) -> None:
        """A pod's containers exit: phase Succeeded (exit code 0) or Failed."""
        pod = self.api.find("v1", "Pod", name, namespace)
        if pod is None:
            raise KeyError(f"no pod {namespace}/{name}")
        now = _stamp()
        conditions = [
            {**c, "status": "False", "lastTransitionTime": now}
            if c["type"] in ("Ready", "ContainersReady")
            else c
            for c in pod["status"].get("conditions", [])
        ]
        code = 0 if succeeded else 1
        containers = [
            {
                **c,
                "ready": False,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if succeeded else "Error",
                        "startedAt": now,
                        "finishedAt": now,
                    }
                },
            }
            for c in pod["status"].get("containerStatuses", [])
        ]
        self._write_status(
            pod,
            {
                "phase": "Succeeded" if succeeded else "Failed",
                "conditions": conditions,
                "containerStatuses": containers,
            },
        )

    def _due(self, pod: Obj, what: str, after: int) -> bool:
        key = f"{what}/{pod['metadata']['uid']}"
        first = self._seen.setdefault(key, self.steps)
        return self.steps - first >= after

    def _start(self, pod: Obj, node: Obj) -> None:
        now = _stamp()
        conditions = [c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"]
        conditions += [
            {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
        ]
        containers = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in pod["spec"]["containers"]
        ]
        addresses = (node.get("status") or {}).get("addresses") or []
        host = next((a["address"] for a in addresses if a.get("type") == "InternalIP"), None)
        status = {
            "phase": "Running",
            "startTime": now,
            "conditions": conditions,
            "containerStatuses": containers,
        }
        if host:
            status["hostIP"] = host
        self._write_status(pod, status)
        if self.on_start is not None:
            meta = pod["metadata"]
            self.on_start(self.api.find("v1", "Pod", meta["name"], meta["namespace"]), node)

    def _write_status(self, pod: Obj, status: Obj) -> None:
        meta = pod["metadata"]
        path = _pod_path(meta["namespace"], meta["name"]) + "/status"
        self.api.call("PATCH", path, {"status": status}, manager="kubelet")


def requests_of(pod: Obj) -> dict[str, Decimal]:
    """What a pod asks of its node: the sum of its containers' requests or, when larger, an
    init container's; plus its overhead."""

    def total(containers: list[Obj]) -> dict[str, Decimal]:
        out: dict[str, Decimal] = {}
        for c in containers:
            for name, value in ((c.get("resources") or {}).get("requests") or {}).items():
                out[name] = out.get(name, Decimal(0)) + parse(value)[0]
        return out

    spec = pod["spec"]
    out = total(spec.get("containers", []))
    for init in spec.get("initContainers", []):
        for name, value in total([init]).items():
            out[name] = max(out.get(name, Decimal(0)), value)
    for name, value in (spec.get("overhead") or {}).items():
        out[name] = out.get(name, Decimal(0)) + parse(value)[0]
    return out


def _rejection(pod: Obj, node: Obj, running: list[Obj]) -> tuple[str, str] | None:
    """Why the kubelet's admission turns `pod` away from `node` (reason, message), if it does.
    Resources the node does not list are not checked, except extended ones (with a "/" in
    their name, like nvidia.com/gpu): a node without them has none."""
    labels = node["metadata"].get("labels") or {}
    if not _node_selected(pod["spec"], labels):
        return (
            "NodeAffinity",
            "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node "
            "affinity/selector",
        )
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") == "NoExecute" and not any(
            _tolerates(t, taint) for t in pod["spec"].get("tolerations") or []
        ):
            return (
                "Taint",
                "Pod was rejected: Predicate TaintToleration failed: node(s) had untolerated taint",
            )
    allocatable = {
        k: parse(v)[0] for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()
    }
    used: dict[str, Decimal] = {"pods": Decimal(len(running))}
    for other in running:
        for name, value in requests_of(other).items():
            used[name] = used.get(name, Decimal(0)) + value
    wanted = {**requests_of(pod), "pods": Decimal(1)}
    for name, amount in sorted(wanted.items()):
        if name not in allocatable and "/" not in name:
            continue
        capacity = allocatable.get(name, Decimal(0))
        if amount > 0 and used.get(name, Decimal(0)) + amount > capacity:
            message = (
                f"Pod was rejected: Node didn't have enough resource: {name}, requested: "
                f"{amount:f}, used: {used.get(name, Decimal(0)):f}, capacity: {capacity:f}"
            )
            return f"OutOf{name}", message
    return None


def _node_selected(spec: Obj, labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    return any(
        label_selector_matches(
            {
                "matchExpressions": [
                    e
                    for e in term.get("matchExpressions", [])
                    if e["operator"] in ("In", "NotIn", "Exists", "DoesNotExist")
                ]
            },
            labels,
        )
        and all(
            _compares(e, labels)
            for e in term.get("matchExpressions", [])
            if e["operator"] in ("Gt", "Lt")
        )
        for term in terms
    )


def _compares(expression: Obj, labels: dict[str, str]) -> bool:
    value = labels.get(expression["key"])
    if value is None or not value.lstrip("-").isdigit():
        return False
    bound = int(expression["values"][0])
    return int(value) > bound if expression["operator"] == "Gt" else int(value) < bound


def _tolerates(toleration: Obj, taint: Obj) -> bool:
    if toleration.get("effect") not in (None, "", taint.get("effect")):
        return False
    if toleration.get("key") not in (None, "", taint.get("key")):
        return False
    if not toleration.get("key") and toleration.get("operator") != "Exists":
        return False
    if toleration.get("operator") == "Exists":
        return True
    return toleration.get("value", "") == taint.get("value", "")


def settle(*standins: JobController | DeploymentController | Kubelet, limit: int = 50) -> int:
    """Step the stand-ins in turn until a round changes nothing; the number of rounds."""
    for rounds in range(1, limit + 1):
        if not any([s.step() for s in standins]):
            return rounds
    raise RuntimeError(f"the stand-ins still change things after {limit} rounds")
