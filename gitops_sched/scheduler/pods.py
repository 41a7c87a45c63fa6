"""One live pod read against the pod contract (`compiler.contract`): what the scheduler needs
of it to make the engine's job, or why it cannot take it.

Reading is per pod and pure; `snapshot` groups the pods into jobs. Kubernetes objects are the
plain dicts the API returns.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeGuard

from gitops_sched.bridge.build import gpu_request
from gitops_sched.config.model import DEFAULT_PRIORITY, PREEMPTIBLE_TYPES
from gitops_sched.contract.labels import PROJECT_LABEL, TYPE_LABEL, WORKLOAD_LABEL
from gitops_sched.contract.pods import (
    COMPLETION_INDEX,
    GPU_FRACTION,
    GPU_MEMORY,
    GPU_RESOURCE,
    IDLE_SINCE,
    MIG_RESOURCE_PREFIX,
    MIN_AVAILABLE,
    PLACEMENT,
    PREEMPTIBLE,
    PRIORITY,
    REPLICAS,
    parse_placement,
)
from gitops_sched.engine.codec import pod_from_dict
from gitops_sched.engine.types import GpuRequest, PodPlacement
from gitops_sched.quantity import parse_quantity

FINISHED = ("Succeeded", "Failed")  # phases that hold no GPU


class PodError(ValueError):
    """Why a pod of ours cannot be scheduled (said on the pod as its pending reason)."""


@dataclass(frozen=True, slots=True)
class OurPod:
    """A pod with our schedulerName, read: its job and everything the job is made of."""

    namespace: str
    name: str
    uid: str
    job: str  # the job's name: the workload label, else the pod's name
    project: str
    annotations: dict[str, str]
    created: float  # epoch seconds
    started: float | None  # status.startTime
    node: str  # spec.nodeName ("" while pending)
    terminating: bool
    owner_uid: str  # the controller's uid ("" for a bare pod)
    owner: tuple[str, str]  # the controller's kind and name (("", "") for a bare pod)
    index: int | None  # the completion index, else the placement's, else None (assigned)
    placement: PodPlacement | None  # where the engine placed it (bound pods)
    type: str
    priority: int
    preemptible: bool
    request: GpuRequest
    replicas: int | None  # REPLICAS, when given
    min_available: int
    idle_since: float | None
    spec: dict[str, Any]  # the pod's spec, for what only its job's first pod is asked

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.job}"


def meta(pod: dict[str, Any]) -> dict[str, Any]:
    return pod.get("metadata") or {}


def spec(pod: dict[str, Any]) -> dict[str, Any]:
    return pod.get("spec") or {}


def read_pod(pod: dict[str, Any], project: str) -> OurPod:
    """A pod of ours in `project`'s namespace; PodError when its labels or annotations
    cannot be read. A bound pod without a placement annotation has `placement` None (bound
    by someone else)."""
    metadata, pod_spec = meta(pod), spec(pod)
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    labelled = labels.get(PROJECT_LABEL)
    if labelled is not None and labelled != project:
        raise PodError(
            f"labelled for project {labelled!r} but in {project!r}'s namespace "
            f"{metadata.get('namespace')!r}"
        )
    wtype = labels.get(TYPE_LABEL, "train")
    if wtype not in DEFAULT_PRIORITY:
        raise PodError(f"{TYPE_LABEL}: unknown workload type {wtype!r}")
    node = pod_spec.get("nodeName") or ""
    index = _integer(annotations, COMPLETION_INDEX, 0)
    placement = None
    if node and PLACEMENT in annotations:
        placement, placed_as = read_placement(annotations[PLACEMENT], node)
        index = placed_as if index is None else index
    owners = metadata.get("ownerReferences") or ()
    controller: dict[str, Any] = next((o for o in owners if o.get("controller")), {})
    return OurPod(
        namespace=metadata.get("namespace") or "",
        name=metadata.get("name") or "",
        uid=metadata.get("uid") or "",
        job=labels.get(WORKLOAD_LABEL) or metadata.get("name") or "",
        project=project,
        annotations=annotations,
        created=timestamp(metadata.get("creationTimestamp")) or 0.0,
        started=timestamp((pod.get("status") or {}).get("startTime")),
        node=node,
        terminating=bool(metadata.get("deletionTimestamp")),
        owner_uid=controller.get("uid") or "",
        owner=(controller.get("kind") or "", controller.get("name") or ""),
        index=index,
        placement=placement,
        type=wtype,
        priority=_priority(annotations, pod_spec, wtype),
        preemptible=_flag(annotations, PREEMPTIBLE, wtype in PREEMPTIBLE_TYPES),
        request=pod_request(pod_spec, annotations),
        replicas=_integer(annotations, REPLICAS, 1),
        min_available=_integer(annotations, MIN_AVAILABLE, 1) or 1,
        idle_since=_idle_since(annotations),
        spec=pod_spec,
    )


def read_placement(text: str, node: str) -> tuple[PodPlacement, int | None]:
    """The PLACEMENT annotation (the codec's pod shape) on `node`, checked, and the index
    it gives the pod (None where it gives none)."""
    try:
        data = parse_placement(text)
    except ValueError as exc:
        raise PodError(f"{PLACEMENT}: {exc}") from None
    return pod_from_dict({**data, "node": node}), data.get("index")


def pod_request(pod_spec: dict[str, Any], annotations: dict[str, str]) -> GpuRequest:
    """The pod's GPU request in the config's terms (`gpu`, `gpuMemory`, `mig`) made into the
    engine's by `bridge.gpu_request`, as for a workload of the repo. One form only."""
    forms: dict[str, tuple[str, Any]] = {}  # where the pod says it -> the config's field
    if GPU_FRACTION in annotations:
        fraction = _float(annotations, GPU_FRACTION)
        if not 0 < fraction <= 1:
            raise PodError(f"{GPU_FRACTION}: {annotations[GPU_FRACTION]!r} is not in (0, 1]")
        forms[GPU_FRACTION] = ("gpu", fraction)
    if GPU_MEMORY in annotations:
        try:
            memory = parse_quantity(annotations[GPU_MEMORY])
        except ValueError:
            memory = None
        if memory is None or memory <= 0:
            raise PodError(f"{GPU_MEMORY}: {annotations[GPU_MEMORY]!r} is not an amount of memory")
        forms[GPU_MEMORY] = ("gpuMemory", annotations[GPU_MEMORY])
    for resource, count in extended_resources(pod_spec).items():
        if resource == GPU_RESOURCE:
            forms[resource] = ("gpu", count)
        elif count != 1:
            raise PodError(f"{resource}: a pod runs on one MIG instance, not {count}")
        else:
            forms[resource] = ("mig", resource.removeprefix(MIG_RESOURCE_PREFIX))
    if len(forms) > 1:
        raise PodError("asks for GPUs in more than one way: " + ", ".join(sorted(forms)))
    return gpu_request(dict(forms.values()))


def extended_resources(pod_spec: dict[str, Any]) -> dict[str, int]:
    """`nvidia.com/gpu` and `nvidia.com/mig-*` the pod holds: its containers' limits (else
    requests) added up, or its largest init container's if more, as Kubernetes counts."""
    total: dict[str, int] = {}
    for container in pod_spec.get("containers") or ():
        for name, count in _gpu_amounts(container).items():
            total[name] = total.get(name, 0) + count
    for container in pod_spec.get("initContainers") or ():
        for name, count in _gpu_amounts(container).items():
            total[name] = max(total.get(name, 0), count)
    return {name: count for name, count in total.items() if count}


def _gpu_amounts(container: dict[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    amounts = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    out = {}
    for name, value in amounts.items():
        if name == GPU_RESOURCE or name.startswith(MIG_RESOURCE_PREFIX):
            try:
                count = parse_quantity(value)
            except ValueError:
                raise PodError(f"{name}: {value!r} is not a quantity") from None
            if count < 0 or count != int(count):
                raise PodError(f"{name}: {value!r} is not a whole number")
            out[name] = int(count)
    return out


def node_constraints(pod_spec: dict[str, Any]) -> str:
    """The pod's nodeSelector and required node affinity terms, as one canonical string:
    pods of a workload share it, so which node groups it allows is worked out once."""
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    selector = pod_spec.get("nodeSelector") or {}
    if not selector and not affinity:
        return ""
    return json.dumps([selector, affinity.get("nodeSelectorTerms") or []], sort_keys=True)


@lru_cache(maxsize=4096)
def timestamp(text: str | None) -> float | None:
    """An RFC 3339 time as epoch seconds; None when absent or unreadable. Pods created in
    one burst share their times: each string is parsed once."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _idle_since(annotations: dict[str, str]) -> float | None:
    """IDLE_SINCE; an unreadable time counts as busy, so a bad value never evicts a pod."""
    return timestamp(annotations.get(IDLE_SINCE))


def _priority(annotations: dict[str, str], pod_spec: dict[str, Any], wtype: str) -> int:
    """PRIORITY, else the pod's priority (its PriorityClass: the same scale), else the
    type's default."""
    given = _integer(annotations, PRIORITY, None)
    if given is not None:
        return given
    value = pod_spec.get("priority")
    return value if _integral(value) else DEFAULT_PRIORITY[wtype]


def _integer(annotations: dict[str, str], key: str, least: int | None) -> int | None:
    """The annotation as an integer of at least `least`; None when absent."""
    if key not in annotations:
        return None
    try:
        value = int(annotations[key])
    except (TypeError, ValueError):
        raise PodError(f"{key}: {annotations[key]!r} is not an integer") from None
    if least is not None and value < least:
        raise PodError(f"{key}: {value} is below {least}")
    return value


def _float(annotations: dict[str, str], key: str) -> float:
    try:
        value = float(annotations[key])
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise PodError(f"{key}: {annotations[key]!r} is not a number")
    return value


def _flag(annotations: dict[str, str], key: str, default: bool) -> bool:
    value = annotations.get(key)
    if value is None:
        return default
    if value not in ("true", "false"):
        raise PodError(f"{key}: {value!r} is not true or false")
    return value == "true"


def _integral(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
