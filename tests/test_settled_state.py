"""A settled state stays settled: one more cycle (on the engine's snapshot written out and read
back by its codec), or continued under the same config from what it wrote out (`simulate
--format json` fed back as `running:`), the engine decides nothing; and a plan
blames a change only for what it causes, so a change that changes nothing moves nothing.

The repos are the benchmarks' generated ones (`benchmarks/compile_scale.py`: whole GPUs,
fractions, GPU memory, MIG, gangs and elastic workloads, interactive and inference work,
several departments, over-quota weights, ranks and denials, limits) at small sizes. Issue
23's repo is the smallest found where the order a continuation queued its workloads in
(by name, not as they were submitted) made a settled state evict and start work; AGES's one
where a continuation that forgot how long its workloads had run (victims go youngest first)
did; USAGE's one where, with fairness over time, a continuation that forgot the projects'
past usage (the `usage` beside `time` that the output prints) did.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from benchmarks.compile_scale import DUMPER, generate, write_repo
from gitops_sched.agent.gpus import ComputeInstance, GpuInstance
from gitops_sched.agent.gpus import DeviceGpu as AgentGpu
from gitops_sched.agent.inventory import node_inventory
from gitops_sched.bridge.build import nodes_from_repo
from gitops_sched.bridge.policy import policy_from_configmap
from gitops_sched.compiler import render_repo
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.model import Repo
from gitops_sched.contract.inventory import encode_inventory
from gitops_sched.contract.labels import API_VERSION as API
from gitops_sched.contract.pods import COMPLETION_INDEX, NODE_GPUS, PLACEMENT
from gitops_sched.engine import schedule, settle
from gitops_sched.engine.codec import pod_to_dict, snapshot_from_dict, snapshot_to_dict
from gitops_sched.engine.types import Node, Snapshot
from gitops_sched.hardware.gpus import MIB
from gitops_sched.plan.build import Plan, make_plan
from gitops_sched.plan.impact import settled_state, state_simulation
from gitops_sched.scheduler.snapshot import CycleMemory, build_view
from gitops_sched.scheduler.view import ClusterView
from gitops_sched.sim import run as sim_run
from gitops_sched.sim.events import load_simulation
from gitops_sched.sim.report import to_json
from gitops_sched.sim.run import SimulationResult, simulate
from gitops_sched.validate import check_repo
from testkit.control_plane.nodes import repo_nodes
from tests.conftest import examples

Files = dict[str, list[dict[str, Any]]]
ISSUE_23 = {"seed": 2, "departments": 3, "projects": 20, "workloads": 150}
# waves 10 minutes apart: a continuation that took every running workload as started now
# (their ages lost) ordered reclaim's victims (youngest first) otherwise, and reclaimed
# where the settled run had found nothing to take
AGES = {"seed": 740, "departments": 2, "projects": 3, "workloads": 46}
# two waves 10 minutes apart under fairness over time: a continuation that forgot the
# projects' past usage (`usage`) split the spare GPUs otherwise, and reclaimed
USAGE = {"seed": 8124, "departments": 3, "projects": 4, "workloads": 42, "arrivals": 2}
USAGE |= {"advance": "10m", "deleted": 3, "order": random.Random(975)}
NO_OPS = ("comment", "reordered keys", "reformatted")
# fairness over time (the Cluster's `spec.policy.fairness`) the generated repos may have
FAIRNESS = (
    {"historyWeight": 2, "window": "8h", "halfLife": "1h"},
    {"historyWeight": 10, "window": "1h"},
)


def generated(
    seed: int, departments: int, projects: int, workloads: int, fairness: dict | None = None
) -> Files:
    """The benchmark's repo, its Cluster with `fairness` (over time) where given."""
    args = argparse.Namespace(
        seed=seed, departments=departments, projects=projects, workloads=workloads
    )
    files = generate(args)
    if fairness is not None:
        for cluster in (doc for docs in files.values() for doc in docs if doc["kind"] == "Cluster"):
            cluster["spec"]["policy"]["fairness"] = fairness
    return files


def load(files: Files) -> Repo | None:
    """The generated repo as `validate` loads it; None where the generator made an invalid
    one (it sizes for hundreds of projects: a few small draws break a rule)."""
    with tempfile.TemporaryDirectory() as tmp:
        write_repo(files, Path(tmp))
        repo, _ = check_repo(Path(tmp))
    return repo


sizes = {
    "seed": st.integers(1, 10_000),
    "departments": st.integers(1, 3),
    "projects": st.integers(3, 16),
    "workloads": st.integers(20, 120),
}


def steps(repo: Repo, order: random.Random, arrivals: int, advance: str, deleted: int) -> list:
    """The repo's workloads arriving in `arrivals` waves, `advance` apart (interactive work
    may pass its time limit), then `deleted` of them deleted: a state with ages, stopped and
    deleted work."""
    names = [workload.name for workload in repo.workloads]
    order.shuffle(names)
    size = -(-len(names) // arrivals)
    waves = [names[i : i + size] for i in range(0, len(names), size)]
    made: list[dict[str, Any]] = []
    for wave in waves:
        made += [{"submit": wave}, {"advance": advance}]
    return [*made, {"delete": names[:deleted]}] if deleted else made


def run_result(
    repo: Repo, steps: list, running: list | None = None, **more: Any
) -> SimulationResult:
    """`simulate --events` of a Simulation with these steps (and `running:`, and `more`
    keys: `time`, `usage`)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.yaml"
        document = {"apiVersion": API, "kind": "Simulation", "metadata": {"name": "waves"}}
        document |= {"steps": steps, "running": running or [], **more}
        path.write_text(yaml.dump(document, Dumper=DUMPER), encoding="utf-8")
        diagnostics = Diagnostics()
        simulation = load_simulation(path, repo, diagnostics)
        assert simulation is not None, [d.text() for d in diagnostics.items]
        return simulate(repo, simulation)


def as_json(result: SimulationResult) -> dict[str, Any]:
    """What `simulate --format json` prints of it, read back."""
    return json.loads(json.dumps(to_json(result)))


def run(repo: Repo, steps: list, running: list | None = None, **more: Any) -> dict[str, Any]:
    """`simulate --events --format json` of a Simulation with these steps (and `running:`,
    and `more`)."""
    return as_json(run_result(repo, steps, running, **more))


def continued(settled: dict[str, Any]) -> dict[str, Any]:
    """What a Simulation gives back of a `--format json` output beside `running:`: its
    clock and, with fairness over time, its past usage."""
    return {key: settled[key] for key in ("time", "usage") if key in settled}


def active(workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [w for w in workloads if w["status"] in ("running", "pending")]


@settings(max_examples=examples(12), deadline=None)
@given(
    **sizes,
    arrivals=st.integers(1, 3),
    advance=st.sampled_from(("10m", "5h")),
    deleted=st.integers(0, 3),
    order=st.randoms(use_true_random=False),
    fairness=st.sampled_from((None, *FAIRNESS)),
)
@example(**ISSUE_23, arrivals=1, advance="10m", deleted=0, order=random.Random(0), fairness=None)
@example(**AGES, arrivals=3, advance="10m", deleted=3, order=random.Random(166), fairness=None)
@example(**USAGE, fairness=FAIRNESS[1])
def test_a_settled_state_fed_back_as_running_decides_nothing(
    seed: int,
    departments: int,
    projects: int,
    workloads: int,
    arrivals: int,
    advance: str,
    deleted: int,
    order: random.Random,
    fairness: dict | None,
) -> None:
    repo = load(generated(seed, departments, projects, workloads, fairness))
    assume(repo is not None)
    assert repo is not None
    if arrivals == 1 and not deleted:  # the repo arriving at once: simulate without events
        result = simulate(repo)
    else:
        result = run_result(repo, steps(repo, order, arrivals, advance, deleted))
    settled = as_json(result)
    # one more cycle, on the engine's snapshot written out and read back by its codec
    snapshot = snapshot_from_dict(json.loads(json.dumps(snapshot_to_dict(result.snapshot))))
    assert not schedule(snapshot).changed
    # fed back, as `plan --state` reads it and as a Simulation's `running:`
    again = simulate(repo, state_simulation(repo, settled, "state.json"))
    assert [(e.action, e.workload, e.reason) for e in again.log] == []
    assert active(to_json(again)["workloads"]) == active(settled["workloads"])
    fed_back = run(repo, [], running=settled["workloads"], **continued(settled))
    assert fed_back["log"] == []
    assert fed_back.get("usage") == settled.get("usage")


# --- plan: a change that changes nothing ----------------------------------------------------


def git(cwd: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(cwd)}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def reordered(value: Any) -> Any:
    """Every mapping's keys in reverse order (lists keep theirs: their order is content)."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(value)}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def no_op_text(docs: list[dict[str, Any]], text: str, how: str) -> str:
    """The file's text changed in a way that changes none of its objects."""
    if how == "comment":
        return text + "# a reviewer's note: nothing else changes\n"
    if how == "reordered keys":
        return yaml.safe_dump_all([reordered(d) for d in docs], sort_keys=False)
    return yaml.safe_dump_all(docs, sort_keys=True, default_flow_style=True, width=60, indent=4)


def plan_of_no_op(files: Files, file: int, how: str) -> Plan:
    """The plan of a working tree that changes one file of the committed repo, `how`."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_repo(files, root / "cfg")
        git(root, "init", "-q")
        git(root, "add", "cfg")
        git(root, "commit", "-q", "-m", "base")
        name = sorted(files)[file % len(files)]
        path = root / "cfg" / name
        path.write_text(no_op_text(files[name], path.read_text(), how), encoding="utf-8")
        return make_plan(root / "cfg", "HEAD")


def assert_no_moves(plan: Plan) -> None:
    assert plan.compared and plan.workloads is not None
    assert plan.objects == ()
    assert [m.workload for m in plan.workloads.evicted] == []
    assert [m.workload for m in plan.workloads.started] == []
    changed = [p for p in plan.workloads.projects if p.changed]
    assert changed == []


@settings(max_examples=examples(6), deadline=None)
@given(**sizes, file=st.integers(0, 1000), how=st.sampled_from(NO_OPS))
@example(**ISSUE_23, file=0, how="comment")
def test_the_plan_of_a_change_that_changes_nothing_moves_nothing(
    seed: int, departments: int, projects: int, workloads: int, file: int, how: str
) -> None:
    files = generated(seed, departments, projects, workloads)
    assume(load(files) is not None)
    assert_no_moves(plan_of_no_op(files, file, how))


@settings(max_examples=examples(4), deadline=None)
@given(**sizes, fairness=st.sampled_from((None, *FAIRNESS)))
@example(**ISSUE_23, fairness=None)
def test_a_run_that_starts_where_a_settled_run_ended_is_not_cycled_and_ends_the_same(
    seed: int, departments: int, projects: int, workloads: int, fairness: dict | None
) -> None:
    """plan's head when the change leaves the engine's input as it was (`settled=`): no
    cycle is run, and the run ends as the one that cycles (which decides nothing)."""
    repo = load(generated(seed, departments, projects, workloads, fairness))
    assume(repo is not None)
    first = simulate(repo)
    cycled = simulate(repo, settled_state(first))
    with mock.patch.object(sim_run, "settle", wraps=sim_run.settle) as engine:
        known = simulate(repo, settled_state(first), settled=first)
    assert engine.call_count == 0
    assert known.log == cycled.log == ()
    assert as_json(known) == as_json(cycled)
    assert (known.snapshot, known.projects) == (cycled.snapshot, cycled.projects)


# --- the in-cluster scheduler: its view rebuilt from live pods ------------------------------

NOW = 1_800_000_000.0  # the scheduler's clock when the workloads have all arrived


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def controller_pods(controller: dict[str, Any], created: float) -> list[dict[str, Any]]:
    """The pods the Job (indexed) or Deployment controller makes of a rendered workload,
    all created at `created`."""
    template, name = controller["spec"]["template"], controller["metadata"]["name"]
    count = controller["spec"].get("parallelism") or controller["spec"].get("replicas") or 1
    pods = []
    for i in range(count):
        metadata = copy.deepcopy(template["metadata"])
        metadata |= {
            "name": f"{name}-{i}",
            "namespace": controller["metadata"]["namespace"],
            "uid": f"uid-{controller['metadata']['namespace']}-{name}-{i}",
            "creationTimestamp": stamp(created),
            "ownerReferences": [
                {"kind": controller["kind"], "name": name, "uid": f"uid-{name}", "controller": True}
            ],
        }
        if controller["kind"] == "Job":
            metadata.setdefault("annotations", {})[COMPLETION_INDEX] = str(i)
        pods.append({"metadata": metadata, "spec": copy.deepcopy(template["spec"]), "status": {}})
    return pods


def live_node(obj: dict[str, Any], node: Node) -> dict[str, Any]:
    """The Node object Ready, with the inventory the node agent publishes of a MIG node's
    GPUs (its layout, as the engine left it)."""
    obj = copy.deepcopy(obj)
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    if any(gpu.mig_enabled for gpu in node.gpus):
        gpus = [
            AgentGpu(
                index=gpu.index,
                uuid=f"GPU-{node.name}-{gpu.index}",
                name=f"NVIDIA {node.gpu_model}",
                model=node.gpu_model,
                memory_total=gpu.memory_mib * MIB,
                memory_used=0,
                mig_mode="enabled" if gpu.mig_enabled else "disabled",
                instances=tuple(
                    GpuInstance(i.profile, i.start, n, (ComputeInstance(0, 1, i.start),))
                    for n, i in enumerate(gpu.mig_instances)
                ),
            )
            for gpu in node.gpus
        ]
        annotations = obj["metadata"].setdefault("annotations", {})
        annotations[NODE_GPUS] = encode_inventory(node_inventory(gpus))
    return obj


def live_nodes(repo: Repo, nodes: tuple[Node, ...]) -> list[dict[str, Any]]:
    """The repo's nodes as the cluster shows them, each with `nodes`' GPUs of its name."""
    engine = {node.name: node for node in nodes}
    return [live_node(obj, engine[obj["metadata"]["name"]]) for obj in repo_nodes(repo)]


def bound(pods: list[dict[str, Any]], view: ClusterView, settled: Snapshot) -> list[dict[str, Any]]:
    """The pods as the scheduler leaves them once it has carried the settled state out:
    each running pod bound where the engine placed it, with its placement, started."""
    by_uid = {pod["metadata"]["uid"]: copy.deepcopy(pod) for pod in pods}
    for job in settled.jobs:
        refs = {ref.index: ref for ref in view.pods[job.key]}
        for placement in job.placement:
            pod = by_uid[refs[placement.index].uid]
            pod["spec"]["nodeName"] = placement.node
            annotations = pod["metadata"].setdefault("annotations", {})
            annotations[PLACEMENT] = json.dumps(pod_to_dict(placement))
            pod["status"] = {"phase": "Running", "startTime": stamp(NOW)}
    return list(by_uid.values())


@settings(max_examples=examples(4), deadline=None)
@given(**sizes)
@example(**ISSUE_23)
def test_a_restarted_scheduler_rebuilding_its_view_from_live_pods_decides_nothing(
    seed: int, departments: int, projects: int, workloads: int
) -> None:
    repo = load(generated(seed, departments, projects, workloads))
    assume(repo is not None)
    assert repo is not None
    objects = render_repo(repo)
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    policy = policy_from_configmap(config_map)
    # the workloads arrive in repo order, a second apart, and wait
    controllers = [o for o in objects if o["kind"] in ("Job", "Deployment")]
    pods = [
        pod
        for i, controller in enumerate(controllers)
        for pod in controller_pods(controller, NOW - len(controllers) + i)
    ]
    nodes = live_nodes(repo, nodes_from_repo(repo))
    arrived = build_view(pods, nodes, policy, NOW, CycleMemory())
    assert arrived.ignored == ()
    settled, _ = settle(arrived.snapshot)
    # a new scheduler (a restart, a leader failing over): no memory, its view from live pods
    running = bound(pods, arrived, settled)
    restarted = build_view(
        running, live_nodes(repo, settled.nodes), policy, NOW + 60, CycleMemory()
    )
    assert restarted.ignored == ()
    assert {job.key: job.placement for job in restarted.snapshot.jobs} == {
        job.key: job.placement for job in settled.jobs
    }
    decisions = schedule(restarted.snapshot)
    assert (decisions.evictions, decisions.binds, decisions.mig_changes) == ((), (), ())
