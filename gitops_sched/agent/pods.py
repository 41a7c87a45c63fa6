"""What the agent reads from the pods bound to its node (the contract of contract.pods).

Pure functions of pod objects as the API returns them (plain dicts): which are fraction pods
and their share of their GPU's memory, which are watched for idleness, and the time format
of the idle annotation.
"""

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gitops_sched.agent.fractions import FractionPod, Policy
from gitops_sched.contract.labels import TYPE_LABEL
from gitops_sched.contract.pods import (
    FRACTION_POLICY,
    GPU_FRACTION,
    GPU_MEMORY_LIMIT,
    GPU_RESOURCE,
    GPU_UUID,
    IDLE_SINCE,
    MIG_RESOURCE_PREFIX,
    RESERVATION_LABEL,
)
from gitops_sched.hardware.gpus import MIB


@dataclass(frozen=True)
class PodKey:
    """A pod's identity: where to write about it."""

    namespace: str
    name: str
    uid: str


def pod_key(pod: Mapping[str, Any]) -> PodKey:
    meta = pod["metadata"]
    return PodKey(meta.get("namespace", ""), meta["name"], meta.get("uid", ""))


def _annotations(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return pod["metadata"].get("annotations") or {}


def live(pods: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Pods that run or are about to: not finished, not being deleted."""
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase in ("Pending", "Running") and not pod["metadata"].get("deletionTimestamp"):
            yield pod


POLICIES: dict[str, Policy] = {"warn": "warn", "evict": "evict"}


def fraction_pods(
    pods: Iterable[Mapping[str, Any]], memory_by_uuid: Mapping[str, int], policy: Policy
) -> list[FractionPod]:
    """The fraction pods among `pods` with their share in bytes: the scheduler's
    GPU_MEMORY_LIMIT (MiB), else GPU_FRACTION of their GPU's memory. Reservation pods hold
    the whole GPU and are left out, as are pods whose share cannot be read."""
    found = []
    for pod in live(pods):
        annotations = _annotations(pod)
        gpu_uuid = annotations.get(GPU_UUID)
        if not gpu_uuid or RESERVATION_LABEL in (pod["metadata"].get("labels") or {}):
            continue
        share = _share(annotations, memory_by_uuid.get(gpu_uuid))
        if share is not None:
            key = pod_key(pod)
            # its project's policy, rendered on the pod, else the agent's
            chosen = POLICIES.get(annotations.get(FRACTION_POLICY, ""), policy)
            found.append(FractionPod(key.uid, key.namespace, key.name, gpu_uuid, share, chosen))
    return found


def _share(annotations: Mapping[str, str], gpu_memory: int | None) -> int | None:
    try:
        if GPU_MEMORY_LIMIT in annotations:
            return int(annotations[GPU_MEMORY_LIMIT]) * MIB
        if GPU_FRACTION in annotations and gpu_memory is not None:
            return int(float(annotations[GPU_FRACTION]) * gpu_memory)
    except ValueError:
        return None
    return None


def holds_gpus(pod: Mapping[str, Any]) -> bool:
    """Whether a pod asks for GPUs: whole GPUs or MIG instances, or a share of one."""
    if GPU_UUID in _annotations(pod):
        return True
    for container in (pod.get("spec") or {}).get("containers") or ():
        resources = container.get("resources") or {}
        for amounts in (resources.get("limits") or {}, resources.get("requests") or {}):
            if any(r == GPU_RESOURCE or r.startswith(MIG_RESOURCE_PREFIX) for r in amounts):
                return True
    return False


def idle_watched(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods whose idleness is published: interactive pods holding GPUs (the only ones
    the scheduler stops when idle), reservation pods left out."""
    return [
        pod
        for pod in live(pods)
        if (pod["metadata"].get("labels") or {}).get(TYPE_LABEL) == "interactive"
        and RESERVATION_LABEL not in (pod["metadata"].get("labels") or {})
        and holds_gpus(pod)
    ]


def format_time(seconds: float) -> str:
    """RFC 3339 in UTC to the second, as the IDLE_SINCE annotation holds it."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def published_idle_since(pod: Mapping[str, Any]) -> float | None:
    """The pod's IDLE_SINCE annotation as a time, None when absent or unreadable."""
    text = _annotations(pod).get(IDLE_SINCE)
    if not text:
        return None
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
