"""What a simulation shows: a stable JSON document, or rich tables for a terminal.

The JSON is meant to be diffed and fed back: every object has the same keys whatever
its state (null where a value does not apply), lists are sorted by name but `workloads`,
GPU numbers are rounded to 4 decimals, and `workloads` is exactly the shape a Simulation
file's `running:` accepts, in the order the workloads were submitted (the engine's
tie-breaker, which `running:` queues them in), so one run's output can seed the next and
a settled state fed back stays settled; with fairness over time configured, `usage` is
each project's past usage (`engine.history`, exact, not rounded), the Simulation file's
`usage:` beside `time:`. Pods (of workloads and of the
log) are the engine codec's pod placements (`engine.codec.pod_to_dict`), the shape the
Simulation parser reads back.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from rich import box
from rich.console import Console
from rich.table import Table

from gitops_sched.engine.codec import mig_instance_to_dict, pod_to_dict
from gitops_sched.engine.history import buckets_of
from gitops_sched.engine.requests import gpu_share_held
from gitops_sched.engine.types import (
    GpuRequest,
    Node,
    PodPlacement,
    QueueStatus,
    RequestKind,
    Snapshot,
)
from gitops_sched.hardware.gpus import gpus_text, rounded_gpus
from gitops_sched.hardware.mig import MigInstance
from gitops_sched.sim.run import (
    ExpectationFailure,
    LogEntry,
    SimulationResult,
    WorkloadState,
    nodes_of,
)

WIDE = 100  # columns from which the workloads table shows each workload's type
STATUS_STYLE = {"running": "green", "pending": "yellow", "stopped": "red", "deleted": "dim"}


def _or_none(value: str) -> str | None:
    return value or None


# --- JSON ----------------------------------------------------------------------------------


def to_json(result: SimulationResult, idle_gpus: bool = True) -> dict[str, Any]:
    """The run as JSON; without `idle_gpus`, each node lists only its GPUs that hold work or
    MIG instances (all the tables show: see _node)."""
    parents = {queue.name: queue.parent for queue in result.snapshot.policy.projects}
    usage = _usage(result)
    return {
        "simulation": result.name,
        "time": result.snapshot.now,
        "departments": [_queue(q) for q in _by_name(result.departments)],
        "projects": [
            {
                **_queue(q),
                "department": parents.get(q.name, ""),
                "nodeGroups": {pool.name: _queue(pool) for pool in q.pools},
            }
            for q in _by_name(result.projects)
        ],
        **_past_usage(result.snapshot),
        "workloads": [_workload(state) for state in result.queue],
        "nodes": [
            _node(node, usage, idle_gpus) for node in sorted(result.snapshot.nodes, key=_name)
        ],
        "log": [_entry(entry) for entry in result.log],
        "expectations": {
            "checked": result.expectations,
            "failed": [failure_json(failure) for failure in result.failures],
        },
    }


def _past_usage(snapshot: Snapshot) -> dict[str, Any]:
    """`usage`: every project's buckets of GPU-seconds (start, oldest first), and per node
    group for one with per-group quotas (`nodeGroups`), as a Simulation's `usage:` reads
    them back; nothing where fairness is not configured."""
    if snapshot.policy.fairness is None:
        return {}
    by_group: dict[str, dict[str, Any]] = {}  # project -> group -> its buckets there
    for (project, group), buckets in snapshot.history.node_groups:
        by_group.setdefault(project, {})[group] = {"buckets": _buckets(buckets)}
    return {
        "usage": {
            name: {
                "buckets": _buckets(buckets_of(snapshot.history, name)),
                **({"nodeGroups": by_group[name]} if name in by_group else {}),
            }
            for name in sorted(q.name for q in snapshot.policy.projects)
        }
    }


def _buckets(buckets: tuple[tuple[float, float], ...]) -> list[dict[str, float]]:
    return [{"start": at, "gpuSeconds": used} for at, used in buckets]


def _name(item: QueueStatus | Node) -> str:
    return item.name


def _by_name(queues: tuple[QueueStatus, ...]) -> list[QueueStatus]:
    return sorted(queues, key=_name)


def _queue(queue: QueueStatus) -> dict[str, Any]:
    return {
        "name": queue.name,
        "deserved": rounded_gpus(queue.deserved),
        "fairShare": rounded_gpus(queue.fair_share),
        "allocated": rounded_gpus(queue.allocated),
        "queued": rounded_gpus(queue.queued),
    }


def queue_json(queue: QueueStatus) -> dict[str, Any]:
    """A queue's numbers as the JSON reports give them (explain's per node group too)."""
    return _queue(queue)


def _workload(state: WorkloadState) -> dict[str, Any]:
    return {
        "name": state.workload.name,
        "project": state.workload.project,
        "type": state.workload.type,
        "status": state.status,
        "reason": _or_none(state.reason),
        "pods": [pod_to_dict(pod) for pod in state.pods],
        "runningFor": state.running_for,
        "idleFor": state.idle_for,
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
                share = gpu_share_held(pod, models[pod.node])
                usage[(pod.node, index)].append(Held(state.workload.name, share, pod.mig))
    return usage


def _node(node: Node, usage: Usage, idle_gpus: bool) -> dict[str, Any]:
    """A node and its GPUs; without `idle_gpus`, none that holds nothing and has no MIG
    instance: a dict for every idle GPU of 100,000 nodes was gigabytes for a table that
    shows none of them."""
    held = [usage.get((node.name, index), []) for index in range(len(node.gpus))]
    return {
        "name": node.name,
        "nodeGroup": node.node_group,
        "model": node.gpu_model,
        "topology": _or_none(node.topology),
        "schedulable": node.schedulable,
        "capacity": len(node.gpus),
        "allocated": rounded_gpus(sum(hold.share for holds in held for hold in holds)),
        "gpus": [
            _gpu(node, index, holds)
            for index, holds in enumerate(held)
            if idle_gpus or holds or node.gpus[index].mig_instances
        ],
    }


def _gpu(node: Node, index: int, holds: list[Held]) -> dict[str, Any]:
    gpu = node.gpus[index]
    by_instance = {hold.mig: hold.workload for hold in holds if hold.mig}
    return {
        "index": index,
        "memoryMiB": gpu.memory_mib,
        "allocated": rounded_gpus(sum(hold.share for hold in holds)),
        "workloads": [
            {"name": hold.workload, "share": rounded_gpus(hold.share)}
            for hold in sorted(holds, key=lambda hold: (hold.workload, hold.share))
        ],
        "mig": [
            {**mig_instance_to_dict(i), "workload": by_instance.get(i)}
            for i in sorted(gpu.mig_instances, key=lambda i: (i.start, i.profile))
        ],
    }


# --- tables --------------------------------------------------------------------------------


def request_text(request: GpuRequest) -> str:
    """A pod's GPU request as a workload would write it."""
    match request.kind:
        case RequestKind.WHOLE:
            return str(request.count)
        case RequestKind.FRACTION:
            return gpus_text(request.fraction)
        case RequestKind.MEMORY:
            return f"{request.memory_mib}Mi"
        case RequestKind.MIG:
            return request.mig_profile
    return "-"


def duration(seconds: float) -> str:
    """`1h30m`, `45s`, `2d4h`, `0s`: a simulated time as the Simulation file writes it."""
    left = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts) or "0s"


def print_table(result: SimulationResult, console: Console) -> None:
    """Departments, projects, workloads (and why the pending ones wait), nodes, the
    decisions step by step; then unmet expectations as a diff. Tables have no inner
    borders, so they stay readable in 80 columns."""
    data = to_json(result, idle_gpus=False)
    console.print(_queues("Departments", data["departments"], with_department=False))
    console.print(_queues("Projects", data["projects"], with_department=True))
    console.print(_workloads(result, wide=console.width >= WIDE))
    waiting = [state for state in result.workloads if state.reason]
    if waiting:
        console.print(_reasons(waiting))
    console.print(_nodes(data["nodes"]))
    if result.log:
        console.print(_decisions(result))
    checked, failed = result.expectations, len(result.failures)
    if result.failures:
        console.print(_failures(result.failures))
    if checked:
        style = "red" if failed else "green"
        console.print(f"[{style}]{checked - failed}/{checked} expectations met[/{style}]")


def _table(title: str) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)


def _queues(title: str, queues: list[dict], with_department: bool) -> Table:
    table = _table(title)
    if with_department:
        table.add_column("Department")
    table.add_column(title[:-1])
    for column in ("Deserved", "Fair share", "Allocated", "Queued"):
        table.add_column(column, justify="right")
    for queue in queues:
        numbers = [gpus_text(queue[k]) for k in ("deserved", "fairShare", "allocated", "queued")]
        first = [queue["department"]] if with_department else []
        table.add_row(*first, queue["name"], *numbers)
        for group, pool in queue.get("nodeGroups", {}).items():  # quotas per node group
            numbers = [gpus_text(pool[k]) for k in ("deserved", "fairShare", "allocated", "queued")]
            table.add_row(*[""] * len(first), f"  in {group}", *numbers)
    return table


def _workloads(result: SimulationResult, wide: bool) -> Table:
    """One row per workload; the Type column only where there is room for it."""
    table = _table("Workloads")
    table.add_column("Workload", no_wrap=True)
    table.add_column("Project", no_wrap=True)
    if wide:
        table.add_column("Type", no_wrap=True)
    table.add_column("Status", no_wrap=True)
    table.add_column("Pods", justify="right", no_wrap=True)
    table.add_column("GPUs/pod", no_wrap=True)
    table.add_column("Nodes", overflow="fold", ratio=1)
    for state in result.workloads:
        style = STATUS_STYLE[state.status]
        table.add_row(
            state.workload.name,
            state.workload.project,
            *([state.workload.type] if wide else []),
            f"[{style}]{state.status}[/{style}]",
            f"{len(state.pods)}/{state.workload.replicas}",
            request_text(state.request),
            nodes_of(state.pods).replace(",", ", "),
        )
    return table


def _reasons(states: list[WorkloadState]) -> Table:
    """Why each pending (or stopped) workload is not running: long lines, wrapped."""
    table = _table("Not running")
    table.add_column("Workload", no_wrap=True)
    table.add_column("Why", ratio=1)
    for state in states:
        table.add_row(state.workload.name, state.reason)
    return table


def _decisions(result: SimulationResult) -> Table:
    """The log, one row per decision: when, what, and for binds and evictions where."""
    projects = {state.workload.name: state.workload.project for state in result.workloads}
    table = _table("Decisions")
    table.add_column("Step", justify="right", no_wrap=True)
    table.add_column("At", justify="right", no_wrap=True)
    table.add_column("Action", no_wrap=True)
    table.add_column("Workload", overflow="fold")
    table.add_column("Details", overflow="fold", ratio=1)
    for entry in result.log:
        table.add_row(
            str(entry.step),
            duration(entry.time),
            entry.action.replace("-", " "),
            entry.workload,
            decision_text(entry, projects),
        )
    return table


def decision_text(entry: LogEntry, projects: dict[str, str]) -> str:
    """`reclaim for team-a/train, from dgx1-0`, `dgx1-0 GPUs 0-3`, `1g.10gb at slice 6 on
    a100-mig-0 GPU 0`: what a decision did, in words."""
    where = pods_text(entry.pods)
    if entry.action == "evict":
        reason = entry.reason
        if entry.by:
            reason += f" for {projects.get(entry.by, '?')}/{entry.by}"
        return f"{reason}, from {where}"
    if entry.action.startswith("mig"):
        pod = entry.pods[0]
        assert pod.mig is not None  # MIG log entries carry their instance
        return f"{pod.mig.profile} at slice {pod.mig.start} on {pod.node} GPU {pod.gpus[0]}"
    return where


def pods_text(pods: tuple[PodPlacement, ...]) -> str:
    """Where pods are, per node: `a100-0 GPUs 0-7 (2 pods); a100-1 GPUs 0-3`,
    `a10-0 GPU 1 (0.5)`, `a100-serve-0 GPU 0 (2 pods, 3g.40gb)`."""
    by_node: dict[str, list[PodPlacement]] = {}
    for pod in pods:
        by_node.setdefault(pod.node, []).append(pod)
    return "; ".join(_node_text(node, group) for node, group in by_node.items()) or "-"


def _node_text(node: str, pods: list[PodPlacement]) -> str:
    gpus = tuple(sorted({index for pod in pods for index in pod.gpus}))
    first = pods[0]
    details = [f"{len(pods)} pods"] if len(pods) > 1 else []
    if first.mig is not None:
        details.append(first.mig.profile)
    elif first.fraction:
        details.append(gpus_text(first.fraction))
    text = f"{node} {_gpu_range(gpus)}" if gpus else node
    return f"{text} ({', '.join(details)})" if details else text


def _gpu_range(indexes: tuple[int, ...]) -> str:
    """`GPU 3`, `GPUs 0-3`, `GPUs 0, 2`."""
    if len(indexes) == 1:
        return f"GPU {indexes[0]}"
    ordered = sorted(indexes)
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"GPUs {ordered[0]}-{ordered[-1]}"
    return "GPUs " + ", ".join(map(str, ordered))


def _gpu_text(gpu: dict) -> str:
    """`3g.40gb(train-a) 1g.10gb(free)` for MIG, `0.6+0.4` for shared GPUs, else ''."""
    if gpu["mig"]:
        return " ".join(f"{m['profile']}({m['workload'] or 'free'})" for m in gpu["mig"])
    if len(gpu["workloads"]) > 1 or 0 < gpu["allocated"] < 1:
        return "+".join(gpus_text(held["share"]) for held in gpu["workloads"])
    return ""


def _nodes(nodes: list[dict]) -> Table:
    table = _table("Nodes")
    for column in ("Node", "Group", "Model", "Used"):
        table.add_column(column, justify="right" if column == "Used" else "left", overflow="fold")
    table.add_column("Shared and MIG GPUs", overflow="fold", ratio=1)
    for node in nodes:
        details = [f"gpu{gpu['index']}: {text}" for gpu in node["gpus"] if (text := _gpu_text(gpu))]
        down = "" if node["schedulable"] else " [red](down)[/red]"
        table.add_row(
            node["name"] + down,
            node["nodeGroup"],
            node["model"],
            f"{gpus_text(node['allocated'])}/{node['capacity']}",
            "\n".join(details),
        )
    return table


def _failures(failures: tuple[ExpectationFailure, ...]) -> Table:
    table = _table("Expectations not met")
    table.title_style = "bold red"
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
        return gpus_text(value)
    return "(none)" if value in (None, "") else str(value)
