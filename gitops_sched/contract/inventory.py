"""The node agent's GPU inventory (`NODE_GPUS`): its format, whether it changed, its reading.

The inventory holds only what changes when hardware or MIG layout changes (no memory in use,
no utilisation), so publishing on change means publishing rarely. It is a plain dict with
sorted lists (`agent.inventory.node_inventory` builds it),

    {"version": 1, "gpus": [{"index": 0, "uuid": "GPU-...", "model": "A100-SXM4-80GB",
      "product": "NVIDIA A100-SXM4-80GB", "memoryMiB": 81920, "mig": "enabled",
      "instances": [{"profile": "1g.10gb", "start": 0, "computeInstances": 1}]}]}

and `encode_inventory` gives the same bytes for the same GPUs: the scheduler reads it back
from the node annotation with `parse_inventory`.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gitops_sched.contract import foreignjson
from gitops_sched.hardware.mig import MigInstance

INVENTORY_VERSION = 1


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


@dataclass(frozen=True)
class InventoryGpu:
    """One GPU of a published inventory: its index and memory checked, the rest as written
    (`model` and `product` may be anything another process wrote)."""

    index: int
    memory_mib: int
    model: Any
    product: Any
    mig: Any
    entry: dict[str, Any]

    def mig_instances(self) -> list[MigInstance]:
        """The MIG instances it lists, in the order written; KeyError or TypeError
        when an entry is not an instance. Read only where the node's own layout counts."""
        return [MigInstance(i["profile"], i["start"]) for i in self.entry.get("instances") or ()]


def parse_inventory(text: str) -> tuple[InventoryGpu, ...]:
    """The GPUs of an inventory annotation, by index; ValueError when it is not JSON or its
    GPUs are not indexed 0..n-1 or lack their memory, KeyError, TypeError or AttributeError
    when it is not shaped like an inventory."""
    entries = foreignjson.loads(text)["gpus"]
    entries = sorted(entries, key=lambda entry: entry["index"])
    if [entry["index"] for entry in entries] != list(range(len(entries))):
        raise ValueError("GPUs not indexed 0, 1, ...")
    gpus = []
    for entry in entries:
        memory = entry["memoryMiB"]
        if not isinstance(memory, int) or isinstance(memory, bool) or memory < 0:
            raise ValueError("memoryMiB")
        gpus.append(
            InventoryGpu(
                entry["index"],
                memory,
                entry.get("model"),
                entry.get("product"),
                entry.get("mig"),
                entry,
            )
        )
    return tuple(gpus)
