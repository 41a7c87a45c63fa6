"""The NetApp example (`examples/clusters/netapp-dgx`) decided by Kueue and by `simulate`: the
repo rendered `--target kueue` on the real control plane with its kwok GPU nodes, Kueue's
controller manager running (`testkit/control_plane/kueue`), and per ClusterQueue (= project)
the workloads Kueue admits beside the ones `simulate` runs, after each change of the
example's scenario (`scenarios/idle-quota-is-lent.yaml`): the repo's workloads arrive,
team-d claims its quota with `d-sweep` (4 pods x 2 GPUs), `d-sweep` is deleted.

Jobs are created once every queue is active, in the order `simulate` submits them, each
decided before the next is created a second later (both schedulers break ties by arrival,
and Kueue's timestamps have seconds). This control plane
runs no kube-scheduler: Kueue admits, the admitted Jobs' pods stay Pending, unplaced.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitops_sched.bridge.build import nodes_from_repo
from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.compiler.targets import render_target
from gitops_sched.config.diagnostics import Diagnostics, Location
from gitops_sched.config.model import Repo, Workload
from gitops_sched.sim.events import Delete, Simulation, Step, Submit, load_simulation
from gitops_sched.sim.run import simulate
from gitops_sched.validate import check_repo
from testkit.control_plane.client import connect
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.install import apply_rendered
from testkit.control_plane.kueue import Kueue, settled, wait_active
from testkit.control_plane.nodes import repo_nodes

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "clusters" / "netapp-dgx"
SCENARIO = EXAMPLE / "scenarios" / "idle-quota-is-lent.yaml"
GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Row:
    """One ClusterQueue (project) after a stage."""

    queue: str
    simulate: tuple[str, ...]  # the workloads simulate runs
    kueue: tuple[str, ...]  # the workloads Kueue admits
    simulate_gpus: float  # GPUs simulate allocates the project (fractions included)
    kueue_gpus: float  # nvidia.com/gpu Kueue reserves for the ClusterQueue
    kueue_borrowed: float  # of which borrowed from the cohort


@dataclass(frozen=True)
class Stage:
    name: str
    rows: tuple[Row, ...]
    pending: dict[str, tuple[str, str]]  # workload Kueue leaves pending -> (project, why)


Change = Submit | Delete


def stage_from_dict(data: dict[str, Any]) -> Stage:
    """A Stage from `dataclasses.asdict` of one, through JSON (lists back to tuples)."""
    rows = tuple(
        Row(**{k: tuple(v) if isinstance(v, list) else v for k, v in r.items()})
        for r in data["rows"]
    )
    pending = {k: (v[0], v[1]) for k, v in data["pending"].items()}
    return Stage(data["name"], rows, pending)


def load() -> tuple[Repo, list[Change]]:
    """The example and its scenario's changes (what arrives, what is deleted), in order."""
    repo, diagnostics = check_repo(EXAMPLE)
    assert repo is not None, [d.text() for d in diagnostics.sorted()]
    scenario = load_simulation(SCENARIO, repo, Diagnostics())
    assert scenario is not None
    return repo, [s.action for s in scenario.steps if isinstance(s.action, Submit | Delete)]


def compare(root: Path, crds: list[dict[str, Any]]) -> list[Stage]:
    """A stage per change of the scenario, on a control plane of its own under `root`
    (Kueue's webhooks and CRDs stay out of any other test's cluster)."""
    repo, changes = load()
    submitted = [w for c in changes if isinstance(c, Submit) for w in c.workloads]
    known = {w.name for w in repo.workloads}
    full = dataclasses.replace(
        repo, workloads=[*repo.workloads, *(w for w in submitted if w.name not in known)]
    )
    objects = render_target(full, "kueue").objects
    jobs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Job"}
    nominal = _nominal(objects)
    stages = []
    with ControlPlane(root) as plane:
        kueue = Kueue(plane, crds)
        try:
            kueue.start()  # its CRDs, then the render through its webhooks
            apply_rendered(plane, [o for o in objects if o["kind"] != "Job"])
            cluster = connect(plane)
            queues = [o for o in objects if o["kind"] in ("ClusterQueue", "LocalQueue")]
            wait_active(cluster, queues)
            for node in repo_nodes(repo):
                cluster.create(node)
            live: dict[str, Workload] = {}
            for number, change in enumerate(changes, 1):
                if isinstance(change, Submit):
                    for workload in change.workloads:
                        cluster.create(jobs[workload.name])
                        live[workload.name] = workload
                        # decided before the next arrives, a second later: Kueue preempts
                        # the most recently admitted first, by seconds-precise timestamps
                        settled(cluster, len(live), quiet=0)
                        time.sleep(1.05 - time.time() % 1)
                for name in change.names if isinstance(change, Delete) else ():
                    cluster.delete(ObjectRef.of(jobs[name]))
                    del live[name]
                stages.append(_stage(cluster, repo, nominal, changes[:number], live))
            cluster.close()
        finally:
            kueue.stop()
    return stages


def _stage(
    client: ClusterClient,
    repo: Repo,
    nominal: dict[str, float],
    changes: list[Change],
    live: dict[str, Workload],
) -> Stage:
    decided = settled(client, len(live))
    ours = simulate(repo, _simulation(repo, changes))
    running = {s.workload.name: s.workload.project for s in ours.workloads if s.status == "running"}
    allocated = {p.name: p.allocated for p in ours.projects}
    rows = []
    for project in sorted(p.name for p in repo.projects):
        mine = {k.split("/")[1]: w for k, w in decided.items() if w["queue"] == project}
        gpus = sum(w["gpus"] for w in mine.values())
        borrowed = max(gpus - nominal[project], 0.0)
        admitted = sorted(mine)
        rows.append(
            Row(
                project,
                tuple(sorted(n for n, p in running.items() if p == project)),
                tuple(admitted),
                allocated.get(project, 0.0),
                gpus,
                borrowed,
            )
        )
    pending = {
        name: (live[name].project, w["why"])
        for name, w in ((k.split("/")[1], w) for k, w in decided.items())
        if w["queue"] is None
    }
    name = ("then " if len(changes) > 1 else "") + _describe(changes[-1])
    return Stage(name, tuple(rows), pending)


def _describe(change: Change) -> str:
    if isinstance(change, Delete):
        return f"{', '.join(change.names)} deleted"
    names = [w.name for w in change.workloads]
    if len(names) > 1:
        return f"the repo's {len(names)} workloads arrive"
    return f"{names[0]} ({change.workloads[0].project}) arrives"


def _simulation(repo: Repo, changes: list[Change]) -> Simulation:
    steps = tuple(Step(i, Location(SCENARIO, 0, 0), c) for i, c in enumerate(changes, 1))
    return Simulation(SCENARIO.stem, nodes_from_repo(repo), running=(), steps=steps)


def _nominal(objects: list[dict[str, Any]]) -> dict[str, float]:
    """ClusterQueue -> its nvidia.com/gpu nominal quota over every flavor, as rendered."""
    return {
        o["metadata"]["name"]: sum(
            float(r["nominalQuota"])
            for g in o["spec"]["resourceGroups"]
            for f in g["flavors"]
            for r in f["resources"]
            if r["name"] == GPU
        )
        for o in objects
        if o["kind"] == "ClusterQueue"
    }


def table(stages: list[Stage]) -> str:
    """The comparison as one Markdown table, a heading row per stage; what Kueue leaves
    pending in its ClusterQueue's cell, with Kueue's reason."""
    lines = [
        "| ClusterQueue | `simulate` runs | Kueue admits | GPUs simulate / Kueue (borrowed) |",
        "|---|---|---|---|",
    ]
    for stage in stages:
        lines.append(f"| *{stage.name}* | | | |")
        for r in stage.rows:
            admitted = "the same" if r.kueue == r.simulate else ", ".join(r.kueue) or "—"
            left = [
                f"{name} pending: {why}"
                for name, (queue, why) in sorted(stage.pending.items())
                if queue == r.queue
            ]
            if left:
                admitted += f" ({'; '.join(left)})"
            lines.append(
                f"| {r.queue} | {', '.join(r.simulate) or '—'} | {admitted} "
                f"| {r.simulate_gpus:g} / {r.kueue_gpus:g} ({r.kueue_borrowed:g}) |"
            )
    return "\n".join(lines) + "\n"
