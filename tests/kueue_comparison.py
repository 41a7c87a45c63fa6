"""The NetApp example (`examples/clusters/netapp-dgx`) decided by Kueue and by `simulate`: the
repo rendered `--target kueue` on the real control plane with its kwok GPU nodes, Kueue's
controller manager running (`tests/control_plane/kueue`), and per ClusterQueue (= project)
the workloads Kueue admits beside the ones `simulate` runs, in two stages of the example's
scenario (`scenarios/idle-quota-is-lent.yaml`): the repo's workloads arrive, then team-d
claims its quota with `d-sweep` (4 pods x 2 GPUs).

Jobs are created in the order `simulate` submits them, each in a later second (both
schedulers break ties by arrival, and Kueue's timestamps have seconds). This control plane
runs no kube-scheduler: Kueue admits, the admitted Jobs' pods stay Pending, unplaced.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitops_sched.bridge.build import nodes_from_repo
from gitops_sched.compiler.targets import render_target
from gitops_sched.config.diagnostics import Diagnostics, Location
from gitops_sched.config.model import Repo, Workload
from gitops_sched.config.validate import check_repo
from gitops_sched.sim.events import Simulation, Step, Submit, load_simulation
from gitops_sched.sim.run import simulate
from tests.control_plane.cluster import ControlPlane
from tests.control_plane.fixtures import connect
from tests.control_plane.kueue import Kueue, apply, settled
from tests.control_plane.nodes import repo_nodes

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
    pending: dict[str, str]  # workload Kueue leaves pending -> Kueue's reason


def load() -> tuple[Repo, list[Submit]]:
    """The example and its scenario's submit steps up to team-d's claim."""
    repo, diagnostics = check_repo(EXAMPLE)
    assert repo is not None, [d.text() for d in diagnostics.sorted()]
    scenario = load_simulation(SCENARIO, repo, Diagnostics())
    assert scenario is not None
    submits = [s.action for s in scenario.steps if isinstance(s.action, Submit)]
    return repo, submits[:2]


def compare(root: Path, crds: list[dict[str, Any]]) -> list[Stage]:
    """Both stages on a control plane of its own under `root` (Kueue's webhooks and CRDs
    stay out of any other test's cluster)."""
    repo, submits = load()
    submitted = [w for s in submits for w in s.workloads]
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
            apply(plane, [o for o in objects if o["kind"] != "Job"])
            cluster = connect(plane)
            for node in repo_nodes(repo):
                cluster.create(node)
            arrived: list[Workload] = []
            for number, submit in enumerate(submits, 1):
                for workload in submit.workloads:
                    cluster.create(jobs[workload.name])
                    time.sleep(1.05 - time.time() % 1)  # the next one in a later second
                arrived += submit.workloads
                stages.append(_stage(plane, repo, nominal, submits[:number], arrived))
            cluster.close()
        finally:
            kueue.stop()
    return stages


def _stage(
    plane: ControlPlane,
    repo: Repo,
    nominal: dict[str, float],
    submits: list[Submit],
    arrived: list[Workload],
) -> Stage:
    decided = settled(plane, len(arrived))
    ours = simulate(repo, _simulation(repo, submits))
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
    pending = {k.split("/")[1]: w["why"] for k, w in decided.items() if w["queue"] is None}
    name = " then ".join(_describe(s) for s in submits)
    return Stage(name, tuple(rows), pending)


def _describe(submit: Submit) -> str:
    names = [w.name for w in submit.workloads]
    if len(names) > 1:
        return f"{len(names)} workloads arrive"
    return f"{names[0]} ({submit.workloads[0].project}) arrives"


def _simulation(repo: Repo, submits: list[Submit]) -> Simulation:
    steps = tuple(Step(i, Location(SCENARIO, 0, 0), s) for i, s in enumerate(submits, 1))
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
    """The comparison as a Markdown table per stage."""
    lines = []
    for stage in stages:
        lines += [f"### {stage.name}", ""]
        lines.append(
            "| ClusterQueue | simulate runs | Kueue admits | GPUs simulate / Kueue (borrowed) |"
        )
        lines.append("|---|---|---|---|")
        for r in stage.rows:
            lines.append(
                f"| {r.queue} | {', '.join(r.simulate) or '—'} | {', '.join(r.kueue) or '—'} "
                f"| {r.simulate_gpus:g} / {r.kueue_gpus:g} ({r.kueue_borrowed:g}) |"
            )
        for name, why in sorted(stage.pending.items()):
            lines.append(f"\nKueue leaves `{name}` pending: {why}")
        lines.append("")
    return "\n".join(lines)
