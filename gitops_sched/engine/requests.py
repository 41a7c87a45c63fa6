"""How many GPUs a job counts for against quota and fair share.

Whole GPUs count as themselves, a fraction as its fraction, GPU memory as its share
of the GPU it runs on (or, while pending, of the largest GPU it may run on), and a
MIG instance as its share of the GPU's compute slices.
"""

from __future__ import annotations

from collections.abc import Iterable

from gitops_sched.engine.mig import compute_share
from gitops_sched.engine.types import Job, Node, PodPlacement, RequestKind


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


def mig_share(model: str, profile: str) -> float:
    """A MIG instance's share of its GPU; a whole GPU where the model or profile is unknown."""
    try:
        return compute_share(model, profile)
    except ValueError:
        return 1.0


def allowed_nodes(job: Job, nodes: Iterable[Node]) -> list[Node]:
    """Nodes of the job's allowed node groups (any node when it names none)."""
    if not job.node_groups:
        return list(nodes)
    allowed = set(job.node_groups)
    return [n for n in nodes if n.node_group in allowed]


def nominal_gpu(job: Job, nodes: Iterable[Node]) -> tuple[str, int]:
    """The (model, memory) a pending job is accounted against: its largest allowed GPU.

    MIG requests look only at MIG-enabled nodes, so the profile's compute share is known.
    """
    best = ("", 0)
    mig = job.request.kind is RequestKind.MIG
    for node in allowed_nodes(job, nodes):
        for gpu in node.gpus:
            if gpu.mig_enabled == mig and gpu.memory_mib > best[1]:
                best = (node.gpu_model, gpu.memory_mib)
    return best
