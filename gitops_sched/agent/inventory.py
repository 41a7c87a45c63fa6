"""What the agent publishes about its node's GPUs, and whether that changed.

The inventory holds only what changes when hardware or MIG layout changes (no memory in use,
no utilisation), so publishing on change means publishing rarely. It is a plain dict with
sorted lists, and `encode_inventory` gives the same bytes for the same GPUs: the scheduler
reads it back from a node annotation.
"""

import json
from collections.abc import Iterable, Mapping
from typing import Any

from gitops_sched import foreignjson
from gitops_sched.agent.gpus import Gpu
from gitops_sched.hardware.gpus import MIB

INVENTORY_VERSION = 1


def node_inventory(gpus: Iterable[Gpu]) -> dict[str, Any]:
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


def encode_inventory(inventory: Mapping[str, Any]) -> str:
    """Canonical JSON (sorted keys, no spaces): equal inventories give equal strings."""
    return json.dumps(inventory, sort_keys=True, separators=(",", ":"))


def inventory_changed(
    published: str | Mapping[str, Any] | None, current: Mapping[str, Any]
) -> bool:
    """Whether `current` differs from what was last published (its JSON, or the dict).

    Nothing published, or a value that is not valid JSON, counts as changed so the agent
    repairs it; key order and whitespace do not.
    """
    if published is None:
        return True
    if isinstance(published, str):
        try:
            published = foreignjson.loads(published)
        except ValueError:
            return True
    return published != current
