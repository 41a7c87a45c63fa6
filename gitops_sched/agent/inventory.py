"""The inventory the agent publishes about its node's GPUs (`contract.inventory`'s format),
built from what the GPU backend reports."""

from collections.abc import Iterable
from typing import Any

from gitops_sched.agent.gpus import DeviceGpu
from gitops_sched.contract.inventory import INVENTORY_VERSION
from gitops_sched.hardware.gpus import MIB


def node_inventory(gpus: Iterable[DeviceGpu]) -> dict[str, Any]:
    """The node's GPUs by index: UUID, model, product name, memory, MIG mode and instances.

    `instances` lists MIG GPU instances by start with their profile and how many compute
    instances they hold (0 means created but not yet usable by pods).
    """
    entries = []
    for gpu in sorted(gpus, key=lambda gpu: gpu.index):
        entry: dict[str, Any] = {
            "index": gpu.index,
            "uuid": gpu.uuid,
            "model": gpu.model,
            "product": gpu.name,
            "memoryMiB": gpu.memory_total // MIB,
            "mig": gpu.mig_mode,
            "instances": [
                {
                    "profile": instance.profile,
                    "start": instance.start,
                    "computeInstances": len(instance.compute_instances),
                }
                for instance in sorted(gpu.instances, key=lambda instance: instance.start)
            ],
        }
        if gpu.mig_pending is not None:
            entry["migPending"] = gpu.mig_pending
        entries.append(entry)
    return {"version": INVENTORY_VERSION, "gpus": entries}
