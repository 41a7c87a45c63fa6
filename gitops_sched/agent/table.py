"""The node's GPU inventory as a rich table (`gitops-sched agent --once --dry-run`)."""

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table


def print_inventory(node: str, inventory: Mapping[str, Any], console: Console) -> None:
    """One row per GPU: index, model, memory, MIG mode, instances (`profile@start`), UUID."""
    gpus = inventory["gpus"]
    table = Table(title=f"node {node}: {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}")
    for column in ("GPU", "model", "memory", "MIG", "instances", "UUID"):
        table.add_column(
            column,
            justify="right" if column in ("GPU", "memory") else "left",
            overflow="fold",
        )
    for gpu in gpus:
        mig = gpu["mig"] + (f" (pending {gpu['migPending']})" if "migPending" in gpu else "")
        instances = ", ".join(
            f"{i['profile']}@{i['start']}" + ("" if i["computeInstances"] else " (no CI)")
            for i in gpu["instances"]
        )
        table.add_row(
            str(gpu["index"]),
            gpu["model"],
            f"{gpu['memoryMiB']} MiB",
            mig,
            instances or "-",
            gpu["uuid"],
        )
    console.print(table)
