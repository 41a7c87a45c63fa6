"""What a simulation shows: a stable JSON document, or rich tables for a terminal.

The JSON is meant to be diffed and fed back: every object has the same keys whatever
its state (null where a value does not apply), lists are sorted by name, GPU numbers
are rounded to 4 decimals, and `workloads` is exactly the shape a Simulation file's
`running:` accepts, so one run's output can seed the next. Pods (of workloads and of the
log) are the engine codec's pod placements (`engine.codec.pod_to_dict`), the shape the
Simulation parser reads back.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from rich.console import Console
from rich.table import Table

from gitops_sched.engine.codec import mig_instance_to_dict, pod_to_dict
from gitops_sched.engine.requests import mig_share
from gitops_sched.engine.types import GpuRequest, Node, QueueStatus, RequestKind
from gitops_sched.hardware.mig import MigInstance
from gitops_sched.sim.run import (
    ExpectationFailure,
    LogEntry,
    SimulationResult,
    WorkloadState,
    nodes_of,
)

DECIMALS = 4
STATUS_STYLE = {"running": "green", "pending": "yellow", "stopped": "red", "deleted": "dim"}


def rounded(value: float) -> float:
    """GPUs as every report prints them (`plan`'s too): DECIMALS places, never "-0.0"."""
    return round(value, DECIMALS) + 0.0


def _or_none(value: str) -> str | None:
    return value or None


# --- JSON ----------------------------------------------------------------------------------


def to_json(result: SimulationResult) -> dict[str, Any]:
    parents = {queue.name: queue.parent for queue in result.snapshot.policy.projects}
    usage = _usage(result)
    return {
        "simulation": result.name,
        "time": result.snapshot.now,
        "departments": [_queue(q) for q in _by_name(result.departments)],
        "projects": [
            {**_queue(q), "department": parents.get(q.name, "")} for q in _by_name(result.projects)
        ],
        "workloads": [_workload(state) for state in result.workloads],
        "nodes": [_node(node, usage) for node in sorted(result.snapshot.nodes, key=_name)],
        "log": [_entry(entry) for entry in result.log],
        "expectations": {
            "checked": result.expectations,
            "failed": [failure_json(failure) for failure in result.failures],
        },
    }


def _name(item: QueueStatus | Node) -> str:
    return item.name


def _by_name(queues: tuple[QueueStatus, ...]) -> list[QueueStatus]:
    return sorted(queues, key=_name)


def _queue(queue: QueueStatus) -> dict[str, Any]:
    return {
        "name": queue.name,
        "deserved": rounded(queue.deserved),
        "fairShare": rounded(queue.fair_share),
        "allocated": rounded(queue.allocated),
        "queued": rounded(queue.queued),
    }


def _workload(state: WorkloadState) -> dict[str, Any]:
    return {
        "name": state.workload.name,
        "project": state.workload.project,
        "type": state.workload.type,
        "status": state.status,
        "reason": _or_none(state.reason),
        "pods": [pod_to_dict(pod) for pod in state.pods],
        "workload": state.document,
    }


def _entry(entry: LogEntry) -> dict[str, Any]:
    return {
        "step": entry.step,
        "cycle": entry.cycle,
        "time": entry.time,
        "action": entry.action,
        "workload": _or_none(entry.workload),
        "reason": _or_none(entry.reason),
        "by": _or_none(entry.by),
        "pods": [pod_to_dict(pod) for pod in entry.pods],
    }


def failure_json(failure: ExpectationFailure) -> dict[str, Any]:
    """An unmet expectation as `simulate` and `test` print it in JSON."""
    return {
        "step": failure.step,
        "file": failure.location.file,
        "line": failure.location.line,
        "col": failure.location.col,
        "subject": failure.subject,
        "name": failure.name,
        "field": failure.field,
        "expected": failure.expected,
        "actual": failure.actual,
    }


# --- node usage ----------------------------------------------------------------------------


class Held(NamedTuple):
    """A workload's hold on one GPU."""

    workload: str
    share: float  # of the GPU: 1 whole, its fraction, or its MIG instance's compute share
    mig: MigInstance | None


Usage = dict[tuple[str, int], list[Held]]  # (node, GPU index) -> holds


def _usage(result: SimulationResult) -> Usage:
    """What each GPU holds."""
    models = {node.name: node.gpu_model for node in result.snapshot.nodes}
    usage: Usage = defaultdict(list)
    for state in result.workloads:
        for pod in state.pods:
            for index in pod.gpus:
                share = pod.fraction or 1.0
                if pod.mig:
                    share = mig_share(models[pod.node], pod.mig.profile)
                usage[(pod.node, index)].append(Held(state.workload.name, share, pod.mig))
    return usage


def _node(node: Node, usage: Usage) -> dict[str, Any]:
    held = [usage[(node.name, index)] for index in range(len(node.gpus))]
    return {
        "name": node.name,
        "nodeGroup": node.node_group,
        "model": node.gpu_model,
        "topology": _or_none(node.topology),
        "schedulable": node.schedulable,
        "capacity": len(node.gpus),
        "allocated": rounded(sum(hold.share for holds in held for hold in holds)),
        "gpus": [_gpu(node, index, holds) for index, holds in enumerate(held)],
    }


def _gpu(node: Node, index: int, holds: list[Held]) -> dict[str, Any]:
    gpu = node.gpus[index]
    by_instance = {hold.mig: hold.workload for hold in holds if hold.mig}
    return {
        "index": index,
        "memoryMiB": gpu.memory_mib,
        "allocated": rounded(sum(hold.share for hold in holds)),
        "workloads": [
            {"name": hold.workload, "share": rounded(hold.share)}
            for hold in sorted(holds, key=lambda hold: (hold.workload, hold.share))
        ],
        "mig": [
            {**mig_instance_to_dict(i), "workload": by_instance.get(i)}
            for i in sorted(gpu.mig_instances, key=lambda i: (i.start, i.profile))
        ],
    }


# --- tables --------------------------------------------------------------------------------


def _num(value: float) -> str:
    return f"{rounded(value):g}"


def request_text(request: GpuRequest) -> str:
    """A pod's GPU request as a workload would write it."""
    match request.kind:
        case RequestKind.WHOLE:
            return str(request.count)
        case RequestKind.FRACTION:
            return _num(request.fraction)
        case RequestKind.MEMORY:
            return f"{request.memory_mib}Mi"
        case RequestKind.MIG:
            return request.mig_profile
    return "-"


def print_table(result: SimulationResult, console: Console) -> None:
    """Departments, projects, workloads, nodes; then unmet expectations as a diff."""
    data = to_json(result)
    console.print(_queues("Departments", data["departments"], with_department=False))
    console.print(_queues("Projects", data["projects"], with_department=True))
    console.print(_workloads(result))
    console.print(_nodes(data["nodes"]))
    checked, failed = result.expectations, len(result.failures)
    if result.failures:
        console.print(_failures(result.failures))
    if checked:
        style = "red" if failed else "green"
        console.print(f"[{style}]{checked - failed}/{checked} expectations met[/{style}]")


def _queues(title: str, queues: list[dict], with_department: bool) -> Table:
    table = Table(title=title, title_justify="left")
    if with_department:
        table.add_column("Department")
    table.add_column(title[:-1])
    for column in ("Deserved", "Fair share", "Allocated", "Queued"):
        table.add_column(column, justify="right")
    for queue in queues:
        numbers = [f"{queue[k]:g}" for k in ("deserved", "fairShare", "allocated", "queued")]
        first = [queue["department"]] if with_department else []
        table.add_row(*first, queue["name"], *numbers)
    return table


def _workloads(result: SimulationResult) -> Table:
    table = Table(title="Workloads", title_justify="left")
    for column in ("Workload", "Project", "Type", "Status", "Pods", "GPUs/pod"):
        table.add_column(column, no_wrap=True, justify="right" if "Pods" in column else "left")
    table.add_column("Nodes", overflow="fold")
    table.add_column("Reason", overflow="fold", ratio=1)
    for state in result.workloads:
        style = STATUS_STYLE[state.status]
        table.add_row(
            state.workload.name,
            state.workload.project,
            state.workload.type,
            f"[{style}]{state.status}[/{style}]",
            f"{len(state.pods)}/{state.workload.replicas}",
            request_text(state.request),
            nodes_of(state.pods).replace(",", ", "),
            state.reason,
        )
    return table


def _gpu_text(gpu: dict) -> str:
    """`3g.40gb(train-a) 1g.10gb(free)` for MIG, `0.6+0.4` for shared GPUs, else ''."""
    if gpu["mig"]:
        return " ".join(f"{m['profile']}({m['workload'] or 'free'})" for m in gpu["mig"])
    if len(gpu["workloads"]) > 1 or 0 < gpu["allocated"] < 1:
        return "+".join(f"{held['share']:g}" for held in gpu["workloads"])
    return ""


def _nodes(nodes: list[dict]) -> Table:
    table = Table(title="Nodes", title_justify="left")
    for column in ("Node", "Group", "Model", "Used", "Shared and MIG GPUs"):
        table.add_column(column, justify="right" if column == "Used" else "left")
    for node in nodes:
        details = [f"gpu{gpu['index']}: {text}" for gpu in node["gpus"] if (text := _gpu_text(gpu))]
        down = "" if node["schedulable"] else " [red](down)[/red]"
        table.add_row(
            node["name"] + down,
            node["nodeGroup"],
            node["model"],
            f"{node['allocated']:g}/{node['capacity']}",
            "\n".join(details),
        )
    return table


def _failures(failures: tuple[ExpectationFailure, ...]) -> Table:
    table = Table(title="Expectations not met", title_justify="left", title_style="bold red")
    for column in ("Step", "At", "Object", "Field", "Expected", "Actual"):
        table.add_column(column, overflow="fold")
    for f in failures:
        table.add_row(
            str(f.step),
            str(f.location),
            f"{f.subject}/{f.name}",
            f.field,
            f"[green]{shown(f.expected)}[/green]",
            f"[red]{shown(f.actual)}[/red]",
        )
    return table


def shown(value: Any) -> str:
    """An expected or actual value as the reports print it (GPUs as numbers)."""
    if isinstance(value, float):
        return _num(value)
    return "(none)" if value in (None, "") else str(value)
