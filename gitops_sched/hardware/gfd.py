"""NVIDIA GPU Feature Discovery's node labels: their names, and the labels GFD puts on a node.

GFD (part of NVIDIA's GPU operator) labels every GPU node with what NVML reports: the product
name, the GPU count, memory per GPU, MIG capability and, under the mixed MIG strategy, the
instances per profile. The scheduler reads them (`scheduler.nodes`); simulated nodes carry
them as a real node would (`bridge.build`), and nothing else: a NodeGroup finds its nodes by
these labels and the ones an admin or a cloud's node pool puts on them.
"""

from __future__ import annotations

from gitops_sched.hardware.gpus import lookup_gpu_model

GFD_PRESENT = "nvidia.com/gpu.present"
GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_COUNT = "nvidia.com/gpu.count"
GFD_MEMORY = "nvidia.com/gpu.memory"  # MiB
GFD_MIG_CAPABLE = "nvidia.com/mig.capable"
GFD_MIG_STRATEGY = "nvidia.com/mig.strategy"
GFD_MIG_COUNT = ".count"  # nvidia.com/mig-<profile>.count

# NVML's product names where they differ from "NVIDIA <model>"; GFD writes them with dashes
_NVML_BRAND = {"V100-SXM2-16GB": "Tesla", "V100-SXM2-32GB": "Tesla", "T4": "Tesla"}


def gfd_product(model: str) -> str:
    """`nvidia.com/gpu.product` as GFD writes it for a model: NVML's name, dashed."""
    known = lookup_gpu_model(model)
    name = known.name if known else model
    return f"{_NVML_BRAND.get(name, 'NVIDIA')}-{name}".replace(" ", "-")


def gfd_labels(model: str | None, gpus: int, memory_mib: int, mig_enabled: bool) -> dict[str, str]:
    """The labels GFD puts on a node of `gpus` GPUs of `model` (none without GPUs); the
    memory label only where it is known (above 0). MIG instance counts are left out: a
    simulated node's instances are its group's declared layout, or made on demand."""
    if not gpus:
        return {}
    labels = {GFD_PRESENT: "true", GFD_COUNT: str(gpus)}
    if model:
        labels[GFD_PRODUCT] = gfd_product(model)
    if memory_mib > 0:
        labels[GFD_MEMORY] = str(memory_mib)
    known = lookup_gpu_model(model) if model else None
    if known:
        labels[GFD_MIG_CAPABLE] = str(known.mig_capable).lower()
    if mig_enabled:
        labels[GFD_MIG_STRATEGY] = "mixed"
    return labels
