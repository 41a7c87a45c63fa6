"""Simulation files (`simulate --events`): the nodes, what already runs, and scripted steps.

A file is one document, checked like the repo's: its JSON Schema first (schemas/
simulation.json), then names against the repo and against what earlier steps did, so
every problem is reported at its `FILE:LINE:COL` before anything runs:

    apiVersion: gitops-sched.io/v1alpha1
    kind: Simulation
    metadata: {name: reclaim}
    running:                      # the shape `simulate --format json` prints
      - name: train-big
        pods: [{node: dgx-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}]
    steps:
      - submit: {apiVersion: ..., kind: Workload, metadata: {name: infer}, spec: {...}}
      - expect: {workloads: {train-big: pending, infer: {status: running, node: dgx-0}}}
      - node-down: dgx-0
      - advance: 2h
      - idle: notebook              # its GPUs unused from now on, as the node agent reports

A `running` entry may list fewer pods than its gang's `minAvailable`: a gang in flight,
whose missing pods are pending work (placed when there is room, the gang evicted whole
when they have not started within the policy's stale-gang grace period). A pod's `index`
is its ordinal in the workload (default: its position in the list); pods are read with
the engine codec's `pod_from_dict`, the shape `simulate --format json` prints them in.
The entries are queued in the order listed (before the repo's other workloads), the order
`simulate --format json` lists its workloads in: the order they were submitted; a running
entry's `runningFor` (seconds, default 0) is how long it has run, its age as that output
prints it, so the youngest is still evicted first and time limits still count; `idleFor`
likewise how long its GPUs have gone unused (never longer than it has run). An entry
`stopped` or `deleted` (as that output lists ended workloads) is not submitted again.

With fairness over time, that output also prints the clock (`time`) and each project's
past usage (`usage`: the buckets of GPU-seconds, engine.history): given back next to
`running:`, a continuation starts at that time with that usage, as the run left it.
"""

from __future__ import annotations

import difflib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gitops_sched.bridge.build import canonical_model, gpu_request, nodes_from_repo
from gitops_sched.config import codes
from gitops_sched.config.checks import run_checks
from gitops_sched.config.codes import Code
from gitops_sched.config.diagnostics import Diagnostics, Location
from gitops_sched.config.document import SIMULATION, Document, Path_
from gitops_sched.config.loader import load_repo
from gitops_sched.config.model import Repo, Workload, build_workload, duration_seconds, quantity
from gitops_sched.config.schema import schema_problems, validate_documents, validator_for
from gitops_sched.engine.codec import pod_from_dict
from gitops_sched.engine.history import with_buckets, with_group_buckets
from gitops_sched.engine.requests import gpu_share_held
from gitops_sched.engine.types import (
    GPU_EPSILON,
    Gpu,
    GpuRequest,
    Node,
    PodPlacement,
    RequestKind,
    UsageHistory,
)
from gitops_sched.hardware.gpus import gpu_memory_mib
from gitops_sched.hardware.mig import MigInstance, in_layout_order, is_valid_layout

MAX_GUESSES = 20  # unknown workload names given a "did you mean" (see _StepReader._guess)

# Expectation fields of a project, as written in the file -> QueueStatus attribute.
PROJECT_FIELDS = {
    "deserved": "deserved",
    "fairShare": "fair_share",
    "allocated": "allocated",
    "queued": "queued",
}


@dataclass(frozen=True)
class Submit:
    workloads: tuple[Workload, ...]


@dataclass(frozen=True)
class Delete:
    names: tuple[str, ...]


@dataclass(frozen=True)
class SetNodes:
    """`node-down` (up=False: unschedulable, its work re-queued) or `node-up`."""

    names: tuple[str, ...]
    up: bool


@dataclass(frozen=True)
class Advance:
    seconds: int


@dataclass(frozen=True)
class Idle:
    """Workloads whose GPUs are unused from `seconds` before this step (`since:`), as the
    node agent would report them: the engine stops idle interactive work once the project's
    idleGpuTimeout has passed."""

    workloads: tuple[tuple[str, int], ...]  # (workload, seconds ago)


@dataclass(frozen=True)
class Expect:
    # project -> file field (PROJECT_FIELDS) -> GPUs; "nodeGroups": group -> field -> GPUs
    projects: dict[str, dict[str, Any]]
    workloads: dict[str, dict[str, str]]  # workload -> status / node / reason -> text
    # (project|workload, name, field) -> where the expected value is written
    locations: dict[tuple[str, str, str], Location] = field(default_factory=dict, compare=False)


Action = Submit | Delete | SetNodes | Advance | Idle | Expect


@dataclass(frozen=True)
class Step:
    number: int  # from 1, as the log and the failures show it; 0 is the initial state
    location: Location
    action: Action


@dataclass(frozen=True)
class Placed:
    """A `running` entry: the workload and where its pods run (none: it is pending)."""

    workload: Workload
    pods: tuple[PodPlacement, ...]
    # how long its pods have run (`runningFor`): its age decides who is evicted first and
    # when an interactive time limit ends it, so a continuation keeps it
    running_for: float = 0.0
    idle_for: float | None = None  # how long its GPUs have gone unused (`idleFor`); None: busy


@dataclass(frozen=True)
class Simulation:
    name: str
    nodes: tuple[Node, ...]  # the file's, else the repo's; MIG instances of `running` included
    running: tuple[Placed, ...]
    steps: tuple[Step, ...]
    # workloads `running` lists as stopped or deleted (an earlier run's output): they stay so
    ended: frozenset[str] = frozenset()
    start: float = 0.0  # the clock at the start (`time`): where an earlier run left it
    # past usage (`usage`), for fairness over time
    history: UsageHistory = field(default_factory=UsageHistory)


def load_simulation(path: Path, repo: Repo, diagnostics: Diagnostics) -> Simulation | None:
    """Read and check a Simulation file; None (with diagnostics) when it has errors."""
    documents = load_repo(path, diagnostics)
    if len(documents) != 1:
        if not diagnostics.has_errors:
            found = f"{len(documents)} documents"
            message = f"expected one Simulation, found {found}"
            diagnostics.error(Location(path.as_posix()), message, code=codes.SIMULATION_COUNT)
        return None
    return parse_simulation(documents[0], repo, diagnostics)


def parse_simulation(doc: Document, repo: Repo, diagnostics: Diagnostics) -> Simulation | None:
    """The simulation a schema-valid document describes, checked against the repo."""
    validator = validator_for(SIMULATION)
    if not validator.is_valid(doc.data):
        diagnostics.extend(schema_problems(doc, doc.data, validator))
        return None
    problems = _Problems(doc)
    nodes = _nodes(doc, repo, problems)
    workloads = repo_workloads(repo)
    running, nodes = _running(doc, repo, workloads, nodes, problems)
    start = float(doc.data.get("time") or 0)
    history = _usage(doc, repo, start, problems)
    steps = tuple(_steps(doc, repo, workloads, nodes, running, problems))
    diagnostics.extend(problems.found.items)
    if problems.found.has_errors:
        return None
    ended = frozenset(
        entry["name"]
        for entry in doc.data.get("running", ())
        if entry.get("status", "running") not in ("running", "pending")
    )
    return Simulation(doc.name, nodes, running, steps, ended, start, history)


@dataclass
class _Problems:
    """Diagnostics of one simulation document, pointing at paths inside it."""

    doc: Document
    found: Diagnostics = field(default_factory=Diagnostics)

    def at(self, path: Path_, code: Code, message: str, *, key: bool = False) -> None:
        """An error at the value at `path`, or at the key naming it (`key`: a name that is
        itself the problem, whose value may start on a later line)."""
        where = self.doc.key_location(path) if key else self.doc.location(path)
        self.found.error(where, message, self.doc.ref, code)


# --- nodes ---------------------------------------------------------------------------------


def _nodes(doc: Document, repo: Repo, problems: _Problems) -> tuple[Node, ...]:
    if "nodes" not in doc.data:
        return nodes_from_repo(repo)
    entries = doc.data["nodes"]
    for i, count in _repeats(entry["name"] for entry in entries):
        problems.at(
            ("nodes", i, "name"),
            codes.SIMULATION_DUPLICATE,
            f"duplicate node '{entries[i]['name']}' ({count}x)",
        )
    return tuple(_node(entry, ("nodes", i), problems) for i, entry in enumerate(entries))


def _repeats(names: Iterable[str]) -> Iterator[tuple[int, int]]:
    """(index, count) of every second and later occurrence of a name."""
    names = list(names)
    counts = Counter(names)
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            yield i, counts[name]
        seen.add(name)


def _node(entry: dict, path: Path_, problems: _Problems) -> Node:
    model = entry.get("model")
    memory = quantity(entry["memory"]) if "memory" in entry else None
    mig = entry.get("mig", {})
    enabled = mig.get("enabled", False)
    static = mig.get("strategy", "dynamic") == "static"  # as a NodeGroup's mig.strategy
    if static and not enabled:
        problems.at(
            (*path, "mig", "strategy"),
            codes.SIMULATION_NODE,
            "strategy static needs mig.enabled: true",
        )
    elif static and not mig.get("instances"):
        problems.at(
            (*path, "mig", "strategy"),
            codes.SIMULATION_NODE,
            "strategy static needs the node's `instances`",
        )
    by_gpu: dict[int, list[MigInstance]] = {}
    for j, instance in enumerate(mig.get("instances", ())):
        where = (*path, "mig", "instances", j)
        if not enabled:
            problems.at(where, codes.SIMULATION_NODE, "MIG instances on a node without mig.enabled")
        elif instance["gpu"] >= entry["gpus"]:
            problems.at(
                (*where, "gpu"),
                codes.SIMULATION_NODE,
                f"GPU {instance['gpu']} of {entry['gpus']}-GPU node",
            )
        else:
            by_gpu.setdefault(instance["gpu"], []).append(
                MigInstance(instance["profile"], instance["start"])
            )
    node = Node(
        name=entry["name"],
        node_group=entry.get("nodeGroup", ""),
        gpu_model=canonical_model(model),
        gpus=tuple(
            Gpu(
                i,
                gpu_memory_mib(model, memory),
                enabled,
                tuple(by_gpu.get(i, ())),
                mig_static=static,
            )
            for i in range(entry["gpus"])
        ),
        topology=entry.get("topology", ""),
        labels=tuple(sorted(entry.get("labels", {}).items())),
    )
    for gpu in node.gpus:
        if not is_valid_layout(node.gpu_model, gpu.mig_instances):
            problems.at(
                (*path, "mig"),
                codes.SIMULATION_NODE,
                f"GPU {gpu.index}: not a valid {node.gpu_model} MIG layout",
            )
    return node


# --- running -------------------------------------------------------------------------------


def _running(
    doc: Document,
    repo: Repo,
    workloads: dict[str, Workload],
    nodes: tuple[Node, ...],
    problems: _Problems,
) -> tuple[tuple[Placed, ...], tuple[Node, ...]]:
    """The placed and pending workloads of `running`, and the nodes with their MIG instances."""
    entries = doc.data.get("running", ())
    for i, count in _repeats(entry["name"] for entry in entries):
        problems.at(
            ("running", i, "name"),
            codes.SIMULATION_DUPLICATE,
            f"workload '{entries[i]['name']}' listed {count}x",
        )
    use = _GpuUse({node.name: node for node in nodes})
    placed = []
    for i, entry in enumerate(entries):
        status = entry.get("status", "running")
        if status not in ("running", "pending"):
            continue  # stopped and deleted workloads of an earlier run's output
        workload = _running_workload(doc, repo, workloads, entry, ("running", i), problems)
        if workload is None:
            continue
        pods: tuple[PodPlacement, ...] = ()
        if status == "running" or entry.get("pods"):
            # pending with pods: a gang in flight, as `--format json` prints one
            pods = _pods(repo, workload, entry, use, ("running", i), problems)
        if status == "pending" and len(pods) >= workload.min_available > 0:
            gang = workload.min_available
            message = f"a pending workload runs fewer pods than its minAvailable ({gang})"
            problems.at(
                ("running", i, "status"), codes.SIMULATION_RUNNING, f"{message}, not {len(pods)}"
            )
        idle = entry.get("idleFor")
        running_for = float(entry.get("runningFor") or 0)
        placed.append(Placed(workload, pods, running_for, None if idle is None else float(idle)))
    return tuple(placed), tuple(use.nodes[node.name] for node in nodes)


def _usage(doc: Document, repo: Repo, start: float, problems: _Problems) -> UsageHistory:
    """`usage`: each project's buckets (start, GPU-seconds), and for a project with
    per-node-group quotas its buckets per group, as `--format json` prints them; a
    bucket starts before the simulation's `time` (a bucket after it is usage not yet
    had), once per project (group), the project is the repo's, and a group is the repo's
    and only for a project with per-group quotas. Where the
    Cluster configures no fairness the usage counts for nothing: a warning says so."""
    usage = doc.data.get("usage") or {}
    if usage and (repo.cluster is None or repo.cluster.policy.fairness is None):
        message = "past usage counts for nothing: the Cluster's policy has no `fairness`"
        problems.found.warning(doc.location(("usage",)), message, doc.ref, codes.SIMULATION_USAGE)
    projects = {project.name: project for project in repo.projects}
    groups = {group.name for group in repo.node_groups}
    history = UsageHistory()
    for name, entry in usage.items():
        if name not in projects:
            problems.at(("usage", name), codes.SIMULATION_USAGE, f"no project '{name}'")
            continue
        buckets = _buckets(entry, ("usage", name), start, problems)
        history = with_buckets(history, name, buckets)
        for group, by_group in (entry.get("nodeGroups") or {}).items():
            where = ("usage", name, "nodeGroups", group)
            if not projects[name].node_group_quotas or group not in groups:
                message = (
                    f"no node group '{group}'"
                    if group not in groups
                    else f"project '{name}' has no `nodeGroupQuotas`: one usage, over the cluster"
                )
                problems.at(where, codes.SIMULATION_USAGE, message)
                continue
            pairs = _buckets(by_group, where, start, problems)
            history = with_group_buckets(history, (name, group), pairs)
    return history


def _buckets(
    entry: dict[str, Any], where: Path_, start: float, problems: _Problems
) -> tuple[tuple[float, float], ...]:
    """One `buckets` list of `usage` (see _usage), each start checked."""
    buckets = entry.get("buckets") or ()
    seen: set[float] = set()
    for i, bucket in enumerate(buckets):
        path, at = (*where, "buckets", i, "start"), float(bucket["start"])
        if at > start:
            message = f"a bucket of past usage starts at {at:g}, after `time` ({start:g})"
            problems.at(path, codes.SIMULATION_USAGE, message)
        elif at in seen:
            message = f"a bucket starting at {at:g} listed twice"
            problems.at(path, codes.SIMULATION_USAGE, message)
        seen.add(at)
    return tuple((float(b["start"]), float(b["gpuSeconds"])) for b in buckets)


def _running_workload(
    doc: Document,
    repo: Repo,
    workloads: dict[str, Workload],
    entry: dict,
    path: Path_,
    problems: _Problems,
) -> Workload | None:
    name = entry["name"]
    if entry.get("workload") is None:
        workload = workloads.get(name)
        if workload is None:
            problems.at(
                (*path, "name"),
                codes.SIMULATION_RUNNING,
                f"'{name}' is not a repo workload; give its `workload:`",
            )
        return workload
    workload = _submitted(doc, repo, (*path, "workload"), problems)
    if workload is not None and workload.name != name:
        problems.at(
            (*path, "name"),
            codes.SIMULATION_RUNNING,
            f"name '{name}' differs from its workload's '{workload.name}'",
        )
    return workload


def _pods(
    repo: Repo, workload: Workload, entry: dict, use: _GpuUse, path: Path_, problems: _Problems
) -> tuple[PodPlacement, ...]:
    pods = entry.get("pods", [])
    if not 1 <= len(pods) <= workload.replicas:
        problems.at(
            path,
            codes.SIMULATION_RUNNING,
            f"a running workload has 1 to {workload.replicas} pods, not {len(pods)}",
        )
    request = gpu_request(repo.pod_spec(workload))
    placements = []
    indexes: set[int] = set()
    for j, pod in enumerate(pods):
        placement = pod_from_dict(pod, index=j)  # no `index`: its position in the list
        where = (*path, "pods", j, "index") if "index" in pod else (*path, "pods", j)
        if placement.index >= workload.replicas:
            last = workload.replicas - 1
            problems.at(
                where,
                codes.SIMULATION_RUNNING,
                f"pod index {placement.index} is past the last replica ({last})",
            )
        elif placement.index in indexes:
            problems.at(
                where, codes.SIMULATION_DUPLICATE, f"pod index {placement.index} is listed twice"
            )
        indexes.add(placement.index)
        problem = _pod_problem(request, placement, use.nodes.get(placement.node))
        if problem := problem or use.add(placement):
            problems.at((*path, "pods", j), codes.SIMULATION_RUNNING, problem)
        placements.append(placement)
    return tuple(placements)


def _pod_problem(request: GpuRequest, pod: PodPlacement, node: Node | None) -> str | None:
    """What makes a pod's placement impossible for its request, if anything."""
    if node is None:
        return f"unknown node '{pod.node}'"
    if missing := [g for g in pod.gpus if g >= len(node.gpus)]:
        return f"node '{node.name}' has no GPU {missing[0]} ({len(node.gpus)} GPUs)"
    wanted = {RequestKind.WHOLE: request.count, RequestKind.NONE: 0}.get(request.kind, 1)
    if len(set(pod.gpus)) != wanted or len(pod.gpus) != wanted:
        return f"a {request.kind} request is placed on {wanted} distinct GPU(s), not {pod.gpus}"
    if request.kind in (RequestKind.FRACTION, RequestKind.MEMORY) and not pod.fraction:
        return f"a {request.kind} request needs its `fraction` of the GPU"
    if request.kind is RequestKind.MIG:
        if pod.mig is None or pod.mig.profile != request.mig_profile:
            return f"a MIG request needs `mig: {{profile: {request.mig_profile}, start: ...}}`"
        if not node.gpus[pod.gpus[0]].mig_enabled:
            return f"GPU {pod.gpus[0]} of node '{node.name}' is not MIG-enabled"
    return None


@dataclass
class _GpuUse:
    """What running pods hold so far; a running MIG pod's instance exists on its GPU (on a
    static GPU, it must be one of the declared instances)."""

    nodes: dict[str, Node]
    shares: defaultdict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))
    mig_used: set[tuple[str, int, MigInstance]] = field(default_factory=set)

    def add(self, pod: PodPlacement) -> str | None:
        """Record a well-formed pod; what it collides with, if anything."""
        node = self.nodes[pod.node]
        if pod.mig is None:
            for index in pod.gpus:
                self.shares[(pod.node, index)] += gpu_share_held(pod, node.gpu_model)
                if self.shares[(pod.node, index)] > 1 + GPU_EPSILON:
                    return f"GPU {index} of node '{pod.node}' is over-committed"
            return None
        gpu = node.gpus[pod.gpus[0]]
        key = (pod.node, gpu.index, pod.mig)
        if key in self.mig_used:
            return f"MIG instance {pod.mig.profile}@{pod.mig.start} is used by another pod"
        self.mig_used.add(key)
        if pod.mig in gpu.mig_instances:
            return None
        if gpu.mig_static:
            return f"{pod.mig.profile}@{pod.mig.start} is not in the static layout of the GPU"
        instances = (*gpu.mig_instances, pod.mig)
        if not is_valid_layout(node.gpu_model, instances):
            return f"{pod.mig.profile}@{pod.mig.start} does not fit beside the GPU's instances"
        gpus = list(node.gpus)
        gpus[gpu.index] = replace(gpu, mig_instances=in_layout_order(instances))
        self.nodes[pod.node] = replace(node, gpus=tuple(gpus))
        return None


# --- submitted workloads -------------------------------------------------------------------


def _subdocument(doc: Document, path: Path_) -> Document:
    """The mapping at `path` as a document of its own, its positions still in the file."""
    data: Any = doc.data
    for part in path:
        data = data[part]

    def rebased(table: Mapping[Path_, tuple[int, int]]) -> dict[Path_, tuple[int, int]]:
        return {p[len(path) :]: at for p, at in table.items() if p[: len(path)] == path}

    return Document(doc.file, doc.index, data, rebased(doc.positions), rebased(doc.key_positions))


def _submitted(doc: Document, repo: Repo, path: Path_, problems: _Problems) -> Workload | None:
    """A Workload document inside the file, checked like the repo's own workloads."""
    sub = _subdocument(doc, path)
    if sub.data.get("kind", "Workload") != "Workload":
        message = f"expected a Workload document, not {sub.kind}"
        problems.found.error(sub.location(("kind",)), message, sub.ref, codes.BAD_KIND)
        return None
    diagnostics = Diagnostics()
    workload = build_workload(sub) if validate_documents([sub], diagnostics) else None
    if workload is not None:
        alone = replace(repo, workloads=[workload])
        # a what-if may submit work that never fits: simulate says so ("can never fit")
        run_checks(alone, _documents(repo, workload), diagnostics)
    # the repo's own findings (warnings) were printed already; keep what concerns this file
    problems.found.extend(d for d in diagnostics.items if d.location.file == doc.file)
    return None if diagnostics.has_errors else workload


def repo_workloads(repo: Repo) -> dict[str, Workload]:
    """The repo's workloads by name; on a duplicate name the first, as a scan would find."""
    workloads: dict[str, Workload] = {}
    for workload in repo.workloads:
        workloads.setdefault(workload.name, workload)
    return workloads


def _documents(repo: Repo, workload: Workload) -> list[Document]:
    """The repo's documents as if `workload` were its only workload."""
    objects = [repo.cluster, *repo.node_groups, *repo.departments, *repo.projects]
    return [o.doc for o in [*objects, *repo.templates] if o is not None] + [workload.doc]


# --- steps ---------------------------------------------------------------------------------


def _steps(
    doc: Document,
    repo: Repo,
    workloads: dict[str, Workload],
    nodes: tuple[Node, ...],
    running: tuple[Placed, ...],
    problems: _Problems,
) -> Iterator[Step]:
    names = {placed.workload.name for placed in running}
    node_names = {node.name for node in nodes}
    # a what-if group of the file's `nodes:` is as known to expectations as the repo's own
    groups = {group.name for group in repo.node_groups} | {node.node_group for node in nodes}
    groups.discard("")
    reader = _StepReader(doc, repo, workloads, problems, node_names, groups, names, set(names))
    for i, entry in enumerate(doc.data.get("steps", ())):
        ((key, value),) = entry.items()
        path = ("steps", i, key)
        yield Step(i + 1, doc.key_location(path), reader.read(key, value, path))


def _listed(value: Any, path: Path_) -> list[tuple[Any, Path_]]:
    """A value or a list of them, each with its path."""
    if isinstance(value, list):
        return [(item, (*path, j)) for j, item in enumerate(value)]
    return [(value, path)]


@dataclass
class _StepReader:
    """Reads steps in order, tracking which workloads exist so names can be checked."""

    doc: Document
    repo: Repo
    workloads: dict[str, Workload]  # the repo's, by name
    problems: _Problems
    nodes: set[str]
    node_groups: set[str]  # the repo's and those the file's `nodes:` name
    active: set[str]  # submitted and not deleted
    known: set[str]  # ever submitted: expectations may name deleted workloads
    guessed: int = 0  # unknown names given a "did you mean" (at most MAX_GUESSES)

    def read(self, key: str, value: Any, path: Path_) -> Action:
        if key == "submit":
            return Submit(tuple(self._submit(value, path)))
        if key == "delete":
            return Delete(tuple(self._delete(value, path)))
        if key in ("node-down", "node-up"):
            return SetNodes(tuple(self._nodes(value, path)), up=key == "node-up")
        if key == "advance":
            return Advance(duration_seconds(value) or 0)
        if key == "idle":
            return Idle(tuple(self._idle(value, path)))
        return self._expect(value, path)

    def _submit(self, value: Any, path: Path_) -> Iterator[Workload]:
        for item, where in _listed(value, path):
            workload = self._workload(item, where)
            if workload is None:
                continue
            if workload.name in self.active:
                self.problems.at(
                    where,
                    codes.SIMULATION_DUPLICATE,
                    f"workload '{workload.name}' is already submitted",
                )
            self.active.add(workload.name)
            self.known.add(workload.name)
            yield workload

    def _workload(self, item: Any, where: Path_) -> Workload | None:
        if isinstance(item, dict):
            return _submitted(self.doc, self.repo, where, self.problems)
        workload = self.workloads.get(item)
        if workload is None:
            guess = self._guess(item, self.workloads, "not in the repo")
            self.problems.at(
                where, codes.SIMULATION_UNKNOWN, f"unknown workload '{item}' ({guess})"
            )
        return workload

    def _guess(self, name: Any, known: Iterable[str], absent: str) -> str:
        """`absent`, with the closest known name for the first MAX_GUESSES unknown names (a
        guess compares with every known name: a file of thousands of wrong names must not
        cost thousands of such scans)."""
        self.guessed += 1
        if self.guessed > MAX_GUESSES:
            return absent
        close = difflib.get_close_matches(str(name), list(known), n=1)
        return f"{absent}: did you mean '{close[0]}'?" if close else absent

    def _delete(self, value: Any, path: Path_) -> Iterator[str]:
        for name, where in _listed(value, path):
            if name not in self.active:
                self.problems.at(
                    where,
                    codes.SIMULATION_UNKNOWN,
                    f"unknown workload '{name}' (not submitted before)",
                )
            self.active.discard(name)
            yield name

    def _idle(self, value: Any, path: Path_) -> Iterator[tuple[str, int]]:
        for item, where in _listed(value, path):
            if isinstance(item, dict):
                name, where = item["workload"], (*where, "workload")
            else:
                name = item
            if name not in self.active:
                self.problems.at(
                    where,
                    codes.SIMULATION_UNKNOWN,
                    f"unknown workload '{name}' (not submitted before)",
                )
            since = item.get("since") if isinstance(item, dict) else None
            yield name, duration_seconds(since) or 0

    def _nodes(self, value: Any, path: Path_) -> Iterator[str]:
        for name, where in _listed(value, path):
            if name not in self.nodes:
                self.problems.at(where, codes.SIMULATION_UNKNOWN, f"unknown node '{name}'")
            yield name

    def _expect(self, value: dict, path: Path_) -> Expect:
        projects = value.get("projects", {})
        for name, fields in projects.items():
            if self.repo.project(name) is None:
                known = [project.name for project in self.repo.projects]
                self.problems.at(
                    (*path, "projects", name),
                    codes.SIMULATION_UNKNOWN,
                    f"unknown project '{name}' ({self._guess(name, known, 'not in the repo')})",
                    key=True,
                )
            for group in fields.get("nodeGroups") or {}:
                if group not in self.node_groups:
                    guess = self._guess(
                        group, self.node_groups, "not in the repo or the Simulation's nodes"
                    )
                    self.problems.at(
                        (*path, "projects", name, "nodeGroups", group),
                        codes.SIMULATION_UNKNOWN,
                        f"unknown node group '{group}' ({guess})",
                        key=True,
                    )
        workloads = value.get("workloads", {})
        for name in workloads:
            if name not in self.known:
                guess = self._guess(name, self.known, "not submitted by an earlier step")
                self.problems.at(
                    (*path, "workloads", name),
                    codes.SIMULATION_UNKNOWN,
                    f"unknown workload '{name}' ({guess})",
                    key=True,
                )
        locations = {
            ("project", name, key): self.doc.location((*path, "projects", name, key))
            for name, fields in projects.items()
            for key in fields
        }
        for name, fields in projects.items():  # per node group: "nodeGroups.<group>.<key>"
            for group, values in (fields.get("nodeGroups") or {}).items():
                for key in values:
                    where = (*path, "projects", name, "nodeGroups", group, key)
                    locations[("project", name, f"nodeGroups.{group}.{key}")] = self.doc.location(
                        where
                    )
        expected: dict[str, dict[str, str]] = {}
        for name, want in workloads.items():
            where = (*path, "workloads", name)
            expected[name] = {"status": want} if isinstance(want, str) else dict(want)
            for key in expected[name]:
                at = where if isinstance(want, str) else (*where, key)
                locations[("workload", name, key)] = self.doc.location(at)
        return Expect(
            projects={name: dict(fields) for name, fields in projects.items()},
            workloads=expected,
            locations=locations,
        )
