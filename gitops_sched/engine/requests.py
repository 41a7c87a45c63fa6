"""How many GPUs a job counts for against quota and fair share.

Whole GPUs count as themselves, a fraction as its fraction, GPU memory as its share
of the GPU it runs on (or, while pending, of the largest GPU it may run on), and a
MIG instance as its share of the GPU's compute slices.
"""

from __future__ import annotations

from functools import lru_cache

from gitops_sched.engine.types import Job, Node, PodPlacement, RequestKind
from gitops_sched.hardware.mig import compute_share


def placed_pod_gpus(job: Job, pod: PodPlacement, node: Node | None) -> float:
    """The share of GPUs a running pod of `job` holds on its node (None: a node not known)."""
    if node is None:
        return pod_gpus(job, pod, "", 0)
    memory = node.gpus[pod.gpus[0]].memory_mib if pod.gpus else 0
    return pod_gpus(job, pod, node.gpu_model, memory)


def pod_gpus(job: Job, pod: PodPlacement | None, model: str, memory_mib: int) -> float:
    """The share of GPUs one pod of `job` holds on (or would hold on) a GPU of that model."""
    request = job.request
    if request.kind is RequestKind.WHOLE:
        return float(request.count)
    if request.kind is RequestKind.FRACTION:
        return request.fraction
    if request.kind is RequestKind.MEMORY:
        if pod is not None and pod.fraction:
            return pod.fraction
        return min(1.0, request.memory_mib / memory_mib) if memory_mib else 1.0
    if request.kind is RequestKind.MIG:
        return mig_share(model, request.mig_profile)
    return 0.0


@lru_cache(maxsize=1024)
def mig_share(model: str, profile: str) -> float:
    """A MIG instance's share of its GPU; a whole GPU where the model or profile is unknown
    (kept per pair: MIG placement asks about every GPU model of a job's node groups, and
    working out why a model has no such profile is dearer than the answer)."""
    try:
        return compute_share(model, profile)
    except ValueError:
        return 1.0


def gpu_share_held(pod: PodPlacement, model: str) -> float:
    """The share of each of its GPUs a placed pod holds: its MIG instance's compute share,
    its fraction, else the whole GPU."""
    if pod.mig is not None:
        return mig_share(model, pod.mig.profile)
    return pod.fraction or 1.0
