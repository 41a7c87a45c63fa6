"""What the API server does to pods beyond storing them, as 1.32 does: priority admission,
the few spec fields an update may change, binding to a node, eviction against disruption
budgets and the grace period of a deletion (`pkg/registry/core/pod`, `pkg/apis/core/
validation`, `plugin/pkg/admission/priority`). Pure rules on pod dicts: `api.py` stores."""

from __future__ import annotations

import copy
from typing import Any

from tests.kube_emulator.disruption import is_ready
from tests.kube_emulator.errors import ApiError
from tests.kube_emulator.fields import now

# created by every real API server at start-up
SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": 2000000000,
    "system-node-critical": 2000001000,
}
TERMINAL_PHASES = ("Succeeded", "Failed")
UPDATABLE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def admit(pod: dict[str, Any], priority_classes: dict[str, dict[str, Any]]) -> None:
    """The Priority admission plugin: spec.priority and spec.preemptionPolicy come from the
    pod's PriorityClass (or the global default class, else 0); an unknown class, or a
    priority that disagrees with the class, is Forbidden."""
    spec = pod["spec"]
    name = spec.get("priorityClassName")
    policy = "PreemptLowerPriority"
    if name:
        if name in SYSTEM_PRIORITY_CLASSES:
            value = SYSTEM_PRIORITY_CLASSES[name]
        elif name in priority_classes:
            value = priority_classes[name]["value"]
            policy = priority_classes[name].get("preemptionPolicy", policy)
        else:
            raise _forbidden(pod, f"no PriorityClass with name {name} was found")
    else:
        default = next((c for c in priority_classes.values() if c.get("globalDefault")), None)
        value = default["value"] if default else 0
        if default:
            spec["priorityClassName"] = default["metadata"]["name"]
            policy = default.get("preemptionPolicy", policy)
    if spec.get("priority") is not None and spec["priority"] != value:
        raise _forbidden(
            pod,
            f"the integer value of priority ({spec['priority']}) must not be provided in pod "
            f"spec; priority admission controller computed {value} from the given "
            "PriorityClass name",
        )
    spec["priority"] = value
    spec.setdefault("preemptionPolicy", policy)
    if spec["preemptionPolicy"] != policy:
        raise _forbidden(
            pod,
            f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be "
            "provided in pod spec; priority admission controller computed "
            f"{policy} from the given PriorityClass name",
        )


def _forbidden(pod: dict[str, Any], why: str) -> ApiError:
    name = pod["metadata"].get("name", "")
    return ApiError(403, "Forbidden", f'pods "{name}" is forbidden: {why}', name=name, kind="pods")


def check_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    """ValidatePodUpdate: only images, activeDeadlineSeconds (set, or lowered), added
    tolerations and removed scheduling gates; spec.nodeName is set by a binding only."""
    before, after = old["spec"], new["spec"]
    causes = []
    munged = copy.deepcopy(after)
    for kind in ("containers", "initContainers"):
        olds, news = before.get(kind) or [], munged.get(kind) or []
        if len(olds) == len(news):
            for was, container in zip(olds, news):
                container["image"] = was.get("image")
    deadline, was = after.get("activeDeadlineSeconds"), before.get("activeDeadlineSeconds")
    if was is not None and deadline is None:
        causes.append(
            'spec.activeDeadlineSeconds: Invalid value: "null": must not update from a '
            "positive integer to nil value"
        )
    elif was is not None and deadline > was:
        causes.append(
            f"spec.activeDeadlineSeconds: Invalid value: {deadline}: must be less than or "
            "equal to previous value"
        )
    _set(munged, "activeDeadlineSeconds", was)
    tolerations = after.get("tolerations") or []
    if all(t in tolerations for t in before.get("tolerations") or []):
        _set(munged, "tolerations", before.get("tolerations"))
    gates = after.get("schedulingGates") or []
    if all(g in (before.get("schedulingGates") or []) for g in gates):
        _set(munged, "schedulingGates", before.get("schedulingGates"))
    if munged != before:
        causes.append(f"spec: Forbidden: {UPDATABLE}")
    if causes:
        name = new["metadata"]["name"]
        raise ApiError(
            422,
            "Invalid",
            f'Pod "{name}" is invalid: ' + ", ".join(causes),
            name=name,
            kind="Pod",
            causes=[{"reason": "FieldValueInvalid", "message": c} for c in causes],
        )


def _set(spec: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        spec.pop(key, None)
    else:
        spec[key] = value


def set_condition(pod: dict[str, Any], kind: str, reason: str = "", message: str = "") -> None:
    """podutil.UpdatePodCondition with status True: the transition time changes only when
    the status does."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    old = next((c for c in conditions if c.get("type") == kind), None)
    condition: dict[str, Any] = {"type": kind, "status": "True", "lastProbeTime": None}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    stamp = old.get("lastTransitionTime") if old and old.get("status") == "True" else now()
    condition["lastTransitionTime"] = stamp
    if old is None:
        conditions.append(condition)
    else:
        conditions[conditions.index(old)] = condition


def check_binding(binding: Any, url_name: str | None) -> dict[str, Any]:
    """The Binding's target (the real server's validation errors are plain errors: 500)."""
    if not isinstance(binding, dict) or (binding.get("apiVersion"), binding.get("kind")) != (
        "v1",
        "Binding",
    ):
        raise ApiError(400, "BadRequest", "the body must be a v1 Binding")
    name = (binding.get("metadata") or {}).get("name")
    if url_name is not None and name != url_name:
        raise ApiError(400, "BadRequest", "name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    if target.get("kind") not in (None, "", "Node"):
        raise ApiError(
            500, "", f'target.kind: Unsupported value: "{target["kind"]}": supported values: "Node"'
        )
    if not target.get("name"):
        raise ApiError(500, "", "target.name: Required value")
    return target


def assign(pod: dict[str, Any], node: str, annotations: dict[str, str]) -> None:
    """setPodNodeAndMetadata: a 409 on pods/binding when the pod is being deleted, bound, or
    gated."""
    name = pod["metadata"]["name"]
    spec = pod["spec"]
    if pod["metadata"].get("deletionTimestamp"):
        why = f"pod {name} is being deleted, cannot be assigned to a host"
    elif spec.get("nodeName"):
        why = f'pod {name} is already assigned to node "{spec["nodeName"]}"'
    elif spec.get("schedulingGates"):
        why = f"pod {name} has non-empty .spec.schedulingGates"
    else:
        spec["nodeName"] = node
        pod["metadata"].setdefault("annotations", {}).update(annotations)
        set_condition(pod, "PodScheduled")
        return
    raise ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on pods/binding "{name}": {why}',
        name=name,
        kind="pods/binding",
    )


def evictable_without_budget(pod: dict[str, Any]) -> bool:
    """canIgnorePDB: a pod not running yet, already finished, or already terminating."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in (*TERMINAL_PHASES, "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def check_budget(pod: dict[str, Any], pdb: dict[str, Any]) -> None:
    """May the one budget that selects `pod` lose it? 429 (or 403) when not."""
    status = pdb.get("status") or {}
    healthy, desired = status.get("currentHealthy", 0), status.get("desiredHealthy", 0)
    if not is_ready(pod):  # an unready pod does not count; its eviction costs nothing
        always = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
        if always or (healthy >= desired and desired > 0):
            return
    name = pdb["metadata"]["name"]
    allowed = status.get("disruptionsAllowed", 0)
    if allowed < 0:
        raise ApiError(
            403,
            "Forbidden",
            f'poddisruptionbudgets.policy "{name}" is forbidden: pdb disruptions allowed is '
            "negative",
        )
    if allowed == 0:
        raise ApiError(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            causes=[
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {name} needs {desired} healthy pods "
                    f"and has {healthy} currently",
                }
            ],
        )


def stopped(pod: dict[str, Any]) -> dict[str, Any]:
    """A copy of `pod` as its kubelet reports it once its containers stopped: a terminal
    phase (Failed unless it had finished) and no readiness."""
    out = copy.deepcopy(pod)
    status = out.setdefault("status", {})
    if status.get("phase") not in TERMINAL_PHASES:
        status["phase"] = "Failed"
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Ready", "ContainersReady") and condition["status"] != "False":
            condition.update(status="False", lastTransitionTime=now())
    return out


def grace_period(pod: dict[str, Any], requested: int | None) -> int:
    """CheckGracefulDelete: the requested period, else the pod's; 0 for a pod no kubelet
    runs (unbound) or one that has finished."""
    if not pod["spec"].get("nodeName"):
        return 0
    if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return 0
    period = (
        requested if requested is not None else pod["spec"].get("terminationGracePeriodSeconds", 30)
    )
    return 1 if period < 0 else period
