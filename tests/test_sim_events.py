"""Simulation files: parsing, errors at their positions, steps, expectations, round trips."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gitops_sched.cli import main
from gitops_sched.config.diagnostics import Diagnostic, Diagnostics
from gitops_sched.config.model import Repo
from gitops_sched.engine.types import PodPlacement
from gitops_sched.hardware.mig import MigInstance
from gitops_sched.sim.events import (
    Advance,
    Delete,
    Expect,
    Idle,
    SetNodes,
    Simulation,
    Submit,
    load_simulation,
)
from gitops_sched.sim.report import to_json
from gitops_sched.sim.run import simulate
from gitops_sched.validate import check_repo
from testkit.config_builders import API, doc, node_group

EXAMPLE = Path(__file__).parent.parent / "examples" / "clusters" / "netapp-dgx"


REPO = (
    doc("Cluster", "lab"),
    node_group("dgx", nodeCount=2, gpusPerNode=8, gpu={"model": "H100-SXM5-80GB"}),
    node_group(
        "mig",
        nodeCount=1,
        gpusPerNode=2,
        gpu={"model": "A100-SXM4-80GB"},
        mig={"enabled": True},
    ),
    doc("Department", "research", quota={"gpu": 18}),
    doc("Project", "vision", department="research", quota={"gpu": 12}),
    doc(
        "Project",
        "nlp",
        department="research",
        quota={"gpu": 6},
        interactiveTimeLimit="1h",
    ),
    doc("Workload", "train-a", project="vision", gpu=8),
    doc("Workload", "half", project="nlp", gpu=0.5, nodeGroup="dgx"),
    doc("Workload", "slice", project="nlp", type="inference", mig="3g.40gb"),
)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the repo in `repo/`; paths in diagnostics are relative to it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "all.yaml").write_text(yaml.safe_dump_all(REPO, sort_keys=False))
    return tmp_path


def repo_in(here: Path) -> Repo:
    repo, diagnostics = check_repo(Path("repo"))
    assert repo is not None, [d.text() for d in diagnostics.items]
    return repo


def simulation_file(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Simulation", "metadata": {"name": "t"}, **fields}


def load(here: Path, text: str) -> tuple[Simulation | None, list[Diagnostic]]:
    (here / "sim.yaml").write_text(text)
    diagnostics = Diagnostics()
    simulation = load_simulation(Path("sim.yaml"), repo_in(here), diagnostics)
    return simulation, diagnostics.sorted()


def load_data(here: Path, **fields: Any) -> tuple[Simulation | None, list[Diagnostic]]:
    return load(here, yaml.safe_dump(simulation_file(**fields), sort_keys=False))


def pointed(diagnostic: Diagnostic) -> str:
    """The source line a diagnostic points at, from its column on."""
    loc = diagnostic.location
    return Path(loc.file).read_text().splitlines()[loc.line - 1][loc.col - 1 :]


def messages(diagnostics: list[Diagnostic]) -> list[str]:
    return [d.message for d in diagnostics]


# --- parsing -------------------------------------------------------------------------------

FULL = """\
apiVersion: gitops-sched.io/v1alpha1
kind: Simulation
metadata: {name: full}
nodes:
  - {name: n0, nodeGroup: dgx, gpus: 2, model: H100-SXM5-80GB, topology: rack-1}
  - name: m0
    nodeGroup: mig
    gpus: 1
    model: A100-80GB
    memory: 80Gi
    labels: {zone: a}
    mig:
      enabled: true
      instances: [{gpu: 0, profile: 1g.10gb, start: 6}]
running:
  - name: half
    pods: [{node: n0, gpus: [1], fraction: 0.5}]
  - name: slice
    pods: [{node: m0, gpus: [0], mig: {profile: 3g.40gb, start: 0}}]
  - {name: train-a, status: pending}
steps:
  - submit:
      apiVersion: gitops-sched.io/v1alpha1
      kind: Workload
      metadata: {name: extra}
      spec: {project: nlp, gpu: 1}
  - delete: [half]
  - node-down: n0
  - node-up: [n0]
  - advance: 1h30m
  - expect:
      projects: {nlp: {allocated: 1, queued: 0}}
      workloads: {half: deleted, extra: {status: running, node: n0}}
"""


def test_parses_nodes_running_and_every_kind_of_step(here: Path) -> None:
    simulation, diagnostics = load(here, FULL)
    assert diagnostics == []
    assert simulation is not None
    n0, m0 = simulation.nodes
    assert (n0.name, n0.node_group, n0.topology, len(n0.gpus)) == ("n0", "dgx", "rack-1", 2)
    assert n0.gpus[0].memory_mib == 81559  # the catalogue's, as no memory is given
    assert (m0.gpu_model, m0.gpus[0].memory_mib, m0.labels) == (
        "A100-SXM4-80GB",
        81920,
        (("zone", "a"),),
    )
    # the running MIG pod's instance exists beside the declared one, in layout order
    assert m0.gpus[0].mig_instances == (MigInstance("3g.40gb", 0), MigInstance("1g.10gb", 6))
    assert [(p.workload.name, p.pods) for p in simulation.running] == [
        ("half", (PodPlacement("n0", (1,), 0.5),)),
        ("slice", (PodPlacement("m0", (0,), mig=MigInstance("3g.40gb", 0)),)),
        ("train-a", ()),
    ]
    actions = [step.action for step in simulation.steps]
    assert isinstance(actions[0], Submit)
    assert [w.name for w in actions[0].workloads] == ["extra"]
    assert actions[1:5] == [
        Delete(("half",)),
        SetNodes(("n0",), up=False),
        SetNodes(("n0",), up=True),
        Advance(5400),
    ]
    assert actions[5] == Expect(
        projects={"nlp": {"allocated": 1, "queued": 0}},
        workloads={"half": {"status": "deleted"}, "extra": {"status": "running", "node": "n0"}},
    )
    assert [(s.number, s.location.line) for s in simulation.steps] == [
        (1, 22),
        (2, 27),
        (3, 28),
        (4, 29),
        (5, 30),
        (6, 31),
    ]


STATIC_NODES = """\
apiVersion: gitops-sched.io/v1alpha1
kind: Simulation
metadata: {name: static}
nodes:
  - name: s0
    nodeGroup: mig
    gpus: 2
    model: A100-80GB
    mig:
      enabled: true
      strategy: static
      instances:
        - {gpu: 0, profile: 3g.40gb, start: 0}
        - {gpu: 0, profile: 3g.40gb, start: 4}
        - {gpu: 1, profile: 7g.80gb, start: 0}
"""


def test_static_nodes_have_fixed_gpus_with_their_instances(here: Path) -> None:
    simulation, diagnostics = load(here, STATIC_NODES)
    assert diagnostics == []
    assert simulation is not None
    (s0,) = simulation.nodes
    assert [(g.mig_enabled, g.mig_static, g.mig_instances) for g in s0.gpus] == [
        (True, True, (MigInstance("3g.40gb", 0), MigInstance("3g.40gb", 4))),
        (True, True, (MigInstance("7g.80gb", 0),)),
    ]


def test_a_running_pod_on_a_static_node_uses_a_declared_instance(here: Path) -> None:
    declared = {"node": "s0", "gpus": [0], "mig": {"profile": "3g.40gb", "start": 4}}
    text = STATIC_NODES + yaml.safe_dump({"running": [{"name": "slice", "pods": [declared]}]})
    simulation, diagnostics = load(here, text)
    assert diagnostics == []
    assert simulation is not None
    assert simulation.nodes[0].gpus[0].mig_instances == (
        MigInstance("3g.40gb", 0),
        MigInstance("3g.40gb", 4),
    )
    made_up = {"node": "s0", "gpus": [1], "mig": {"profile": "3g.40gb", "start": 4}}
    text = STATIC_NODES + yaml.safe_dump({"running": [{"name": "slice", "pods": [made_up]}]})
    simulation, diagnostics = load(here, text)
    assert simulation is None
    assert messages(diagnostics) == ["3g.40gb@4 is not in the static layout of the GPU"]


@pytest.mark.parametrize(
    ("mig", "message", "at"),
    [
        (
            "{enabled: true, strategy: static}",
            "strategy static needs the node's `instances`",
            "static}",
        ),
        ("{strategy: static}", "strategy static needs mig.enabled: true", "static}"),
        ("{enabled: true, strategy: fixed}", "'fixed' is not a MIG strategy", "fixed}"),
    ],
)
def test_static_nodes_need_mig_and_their_instances(
    here: Path, mig: str, message: str, at: str
) -> None:
    header = "apiVersion: gitops-sched.io/v1alpha1\nkind: Simulation\nmetadata: {name: t}\n"
    node = f"nodes:\n  - {{name: s0, gpus: 1, model: A100-80GB, mig: {mig}}}\n"
    simulation, diagnostics = load(here, header + node)
    assert simulation is None
    assert len(diagnostics) == 1
    assert message in diagnostics[0].message
    assert pointed(diagnostics[0]).startswith(at)


def test_without_nodes_the_repo_node_groups_are_simulated(here: Path) -> None:
    simulation, _ = load_data(here, steps=[{"submit": "train-a"}])
    assert simulation is not None
    assert [n.name for n in simulation.nodes] == ["dgx-0", "dgx-1", "mig-0"]
    assert simulation.steps[0].action.workloads[0].name == "train-a"


# --- errors and their positions ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message", "at"),
    [
        ("steps:\n  - sleep: 3\n", "unknown field 'steps[0].sleep'", "sleep: 3"),
        ("steps:\n  - advance: 3x\n", "'3x' is not a duration", "3x"),
        (
            "steps:\n  - {advance: 1m, delete: half}\n",
            "a step has exactly one of submit, delete",
            "{advance",
        ),
        ("nodes:\n  - {name: n0}\n", "missing required field 'nodes[0].gpus'", "{name: n0}"),
        (
            "running:\n  - {name: half, status: gone}\n",
            "'gone' is not one of",
            "gone}",
        ),
    ],
)
def test_schema_errors_point_at_the_value(here: Path, text: str, message: str, at: str) -> None:
    header = "apiVersion: gitops-sched.io/v1alpha1\nkind: Simulation\nmetadata: {name: t}\n"
    simulation, diagnostics = load(here, header + text)
    assert simulation is None
    assert len(diagnostics) == 1
    assert message in diagnostics[0].message
    assert pointed(diagnostics[0]).startswith(at)
    assert diagnostics[0].obj == "Simulation/t"


def test_a_file_holds_one_simulation(here: Path) -> None:
    simulation, diagnostics = load(here, "kind: Simulation\n---\nkind: Simulation\n")
    assert simulation is None
    assert messages(diagnostics) == ["expected one Simulation, found 2 documents"]


def test_yaml_errors_carry_their_position(here: Path) -> None:
    simulation, diagnostics = load(here, "kind: Simulation\nsteps: [\n")
    assert simulation is None
    assert diagnostics[0].message.startswith("YAML syntax error")
    assert diagnostics[0].location.line == 3


STEP_ERRORS = """\
apiVersion: gitops-sched.io/v1alpha1
kind: Simulation
metadata: {name: t}
steps:
  - submit: [train-a, nosuch]
  - delete: [train-a, ghost]
  - node-down: dgx-9
  - submit: train-a
  - submit: train-a
  - expect:
      projects: {vision: {allocated: 8}, nobody: {queued: 0}}
      workloads: {train-a: running, never: pending}
"""


def test_step_errors_point_at_the_name(here: Path) -> None:
    simulation, diagnostics = load(here, STEP_ERRORS)
    assert simulation is None
    assert [(d.location.line, d.message, pointed(d)) for d in diagnostics] == [
        (5, "unknown workload 'nosuch' (not in the repo)", "nosuch]"),
        (6, "unknown workload 'ghost' (not submitted before)", "ghost]"),
        (7, "unknown node 'dgx-9'", "dgx-9"),
        (9, "workload 'train-a' is already submitted", "train-a"),
        (11, "unknown project 'nobody' (not in the repo)", "nobody: {queued: 0}}"),
        (12, "unknown workload 'never' (not submitted by an earlier step)", "never: pending}"),
    ]


def test_an_expectation_on_a_misspelt_project_or_workload_guesses_the_name(here: Path) -> None:
    text = STEP_ERRORS.replace("nobody:", "visoin:").replace("never:", "train-b:")
    _, diagnostics = load(here, text)
    found = messages(diagnostics)
    assert "unknown project 'visoin' (not in the repo: did you mean 'vision'?)" in found
    guess = "unknown workload 'train-b' (not submitted by an earlier step: did you mean 'train-a'?)"
    assert guess in found


GROUP_EXPECTATION = """\
apiVersion: gitops-sched.io/v1alpha1
kind: Simulation
metadata: {name: t}
steps:
  - submit: [half]
  - expect:
      projects:
        nlp:
          nodeGroups:
            dgz:
              allocated: 0.5
"""


def test_an_expectation_on_an_unknown_node_group_is_an_error_at_its_name(here: Path) -> None:
    """Before, `test` ran it and reported "expected 0.5, got (none)" as if the engine
    had failed; a misspelt group is a mistake in the file, like a misspelt project."""
    simulation, diagnostics = load(here, GROUP_EXPECTATION)
    assert simulation is None
    assert [(d.location.line, d.code.id, d.message, pointed(d)) for d in diagnostics] == [
        (
            10,
            "GS805",
            "unknown node group 'dgz' (not in the repo or the Simulation's nodes: "
            "did you mean 'dgx'?)",
            "dgz:",
        )
    ]


def test_a_node_group_of_the_simulations_own_nodes_is_known_to_its_expectations(
    here: Path,
) -> None:
    """`nodes:` may put nodes in a what-if group the repo lacks; the repo's groups stay
    known though no node of the file is in them."""
    nodes = "nodes:\n  - {name: w0, nodeGroup: dgz, gpus: 4, model: H100-SXM5-80GB}\n"
    text = GROUP_EXPECTATION.replace("steps:", nodes + "steps:").replace(
        "        nlp:\n", "        vision: {nodeGroups: {mig: {allocated: 0}}}\n        nlp:\n"
    )
    simulation, diagnostics = load(here, text)
    assert diagnostics == []
    assert simulation is not None
    expect = simulation.steps[-1].action
    assert isinstance(expect, Expect)
    assert expect.projects["nlp"]["nodeGroups"] == {"dgz": {"allocated": 0.5}}


def test_an_unknown_workload_name_is_told_the_nearest_one(here: Path) -> None:
    names = ", ".join(["train-aa", *(f"nosuch-{i}" for i in range(25)), "train-ab"])
    steps = f"steps:\n  - submit: [{names}]\n"
    _, diagnostics = load(here, STEP_ERRORS.split("steps:")[0] + steps)
    found = messages(diagnostics)
    assert found[0] == "unknown workload 'train-aa' (not in the repo: did you mean 'train-a'?)"
    # a guess compares with every workload: the names after the first 20 unknown get none
    assert found[-1] == "unknown workload 'train-ab' (not in the repo)"
    assert sum("did you mean" in message for message in found) == 1


def test_submitted_workloads_are_checked_like_the_repos(here: Path) -> None:
    text = """\
apiVersion: gitops-sched.io/v1alpha1
kind: Simulation
metadata: {name: t}
steps:
  - submit:
      - apiVersion: gitops-sched.io/v1alpha1
        kind: Workload
        metadata: {name: lost}
        spec: {project: nowhere, gpu: 1}
      - apiVersion: gitops-sched.io/v1alpha1
        kind: Workload
        metadata: {name: Bad_Name}
        spec: {project: vision, gpu: 1}
      - apiVersion: gitops-sched.io/v1alpha1
        kind: Project
        metadata: {name: sneaky}
        spec: {department: research}
"""
    simulation, diagnostics = load(here, text)
    assert simulation is None
    assert [(d.location.line, d.obj) for d in diagnostics] == [
        (9, "Workload/lost"),
        (12, "Workload/Bad_Name"),
        (15, "Project/sneaky"),
    ]
    assert "unknown Project 'nowhere'" in diagnostics[0].message
    assert pointed(diagnostics[0]).startswith("nowhere")
    assert "is not a DNS-1123 label" in diagnostics[1].message
    assert "expected a Workload document" in diagnostics[2].message


def test_a_deleted_workload_may_be_submitted_again(here: Path) -> None:
    steps = [{"submit": "train-a"}, {"delete": "train-a"}, {"submit": "train-a"}]
    simulation, diagnostics = load_data(here, steps=steps)
    assert diagnostics == []
    assert simulation is not None


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "ghost"}, "'ghost' is not a repo workload; give its `workload:`"),
        (
            {"name": "half", "pods": [{"node": "nope", "gpus": [0], "fraction": 0.5}]},
            "unknown node 'nope'",
        ),
        (
            {"name": "half", "pods": [{"node": "dgx-0", "gpus": [8], "fraction": 0.5}]},
            "node 'dgx-0' has no GPU 8 (8 GPUs)",
        ),
        (
            {"name": "train-a", "pods": [{"node": "dgx-0", "gpus": [0, 1]}]},
            "a whole request is placed on 8 distinct GPU(s), not (0, 1)",
        ),
        (
            {"name": "half", "pods": [{"node": "dgx-0", "gpus": [0]}]},
            "a fraction request needs its `fraction` of the GPU",
        ),
        (
            {
                "name": "slice",
                "pods": [{"node": "mig-0", "gpus": [0], "mig": {"profile": "1g.10gb", "start": 0}}],
            },
            "a MIG request needs `mig: {profile: 3g.40gb, start: ...}`",
        ),
        (
            {
                "name": "slice",
                "pods": [{"node": "dgx-0", "gpus": [0], "mig": {"profile": "3g.40gb", "start": 0}}],
            },
            "GPU 0 of node 'dgx-0' is not MIG-enabled",
        ),
        ({"name": "half", "pods": []}, "a running workload has 1 to 1 pods, not 0"),
    ],
)
def test_running_entries_must_fit_their_nodes(
    here: Path, entry: dict[str, Any], message: str
) -> None:
    simulation, diagnostics = load_data(here, running=[entry])
    assert simulation is None
    assert messages(diagnostics) == [message]


def test_running_pods_may_not_share_more_than_a_gpu(here: Path) -> None:
    whole = {"node": "dgx-0", "gpus": list(range(8))}
    half = {"node": "dgx-0", "gpus": [3], "fraction": 0.5}
    _, diagnostics = load_data(
        here, running=[{"name": "train-a", "pods": [whole]}, {"name": "half", "pods": [half]}]
    )
    assert messages(diagnostics) == ["GPU 3 of node 'dgx-0' is over-committed"]
    assert diagnostics[0].location.line == 20  # the half pod, the second to take GPU 3
    assert pointed(diagnostics[0]) == "node: dgx-0"


GANG = doc("Workload", "gang", project="vision", gpu=8, replicas=3)  # minAvailable 3


def node_gpus(node: str, index: int | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"node": node, "gpus": list(range(8))}
    return pod if index is None else {**pod, "index": index}


def test_a_running_gang_may_list_fewer_pods_than_its_min_available(here: Path) -> None:
    entry = {"name": "gang", "pods": [node_gpus("dgx-0", index=2)], "workload": GANG}
    simulation, diagnostics = load_data(here, running=[entry])
    assert simulation is not None, messages(diagnostics)
    assert simulation.running[0].pods == (PodPlacement("dgx-0", tuple(range(8)), index=2),)


def test_running_pods_are_indexed_by_position_unless_they_say(here: Path) -> None:
    pods = [node_gpus("dgx-0"), node_gpus("dgx-1", index=2)]
    entry = {"name": "gang", "pods": pods, "workload": GANG}
    simulation, _ = load_data(here, running=[entry])
    assert simulation is not None
    assert [pod.index for pod in simulation.running[0].pods] == [0, 2]


@pytest.mark.parametrize(
    ("indexes", "message"),
    [
        ((0, 0), "pod index 0 is listed twice"),
        ((None, 0), "pod index 0 is listed twice"),
        ((3, None), "pod index 3 is past the last replica (2)"),
    ],
)
def test_running_pod_indexes_are_distinct_replicas(
    here: Path, indexes: tuple[int | None, int | None], message: str
) -> None:
    pods = [node_gpus("dgx-0", indexes[0]), node_gpus("dgx-1", indexes[1])]
    _, diagnostics = load_data(here, running=[{"name": "gang", "pods": pods, "workload": GANG}])
    assert messages(diagnostics) == [message]


def test_a_pending_entry_with_a_whole_gang_is_a_contradiction(here: Path) -> None:
    pods = [node_gpus("dgx-0")]
    entry = {"name": "train-a", "status": "pending", "pods": pods}
    _, diagnostics = load_data(here, running=[entry])
    assert messages(diagnostics) == [
        "a pending workload runs fewer pods than its minAvailable (1), not 1"
    ]
    assert pointed(diagnostics[0]) == "pending"


def test_a_running_workload_document_must_match_its_name(here: Path) -> None:
    other = doc("Workload", "other", project="vision", gpu=1)
    entry = {"name": "mine", "pods": [{"node": "dgx-0", "gpus": [0]}], "workload": other}
    _, diagnostics = load_data(here, running=[entry])
    assert messages(diagnostics) == ["name 'mine' differs from its workload's 'other'"]


# --- running the steps ---------------------------------------------------------------------


def run_file(here: Path, **fields: Any):
    simulation, diagnostics = load_data(here, **fields)
    assert simulation is not None, [d.text() for d in diagnostics]
    return simulate(repo_in(here), simulation)


def statuses(result) -> dict[str, tuple[str, str]]:
    return {s.workload.name: (s.status, s.reason) for s in result.workloads}


def test_without_steps_the_repo_workloads_are_submitted(here: Path) -> None:
    result = simulate(repo_in(here))
    assert {name: status for name, (status, _) in statuses(result).items()} == {
        "train-a": "running",
        "half": "running",
        "slice": "running",
    }
    assert [e.action for e in result.log].count("bind") == 3
    assert "mig-create" in [e.action for e in result.log]
    assert all(e.step == 0 for e in result.log)


def test_node_down_requeues_its_workloads_and_node_up_brings_room_back(here: Path) -> None:
    nodes = [{"name": "solo", "nodeGroup": "dgx", "gpus": 8, "model": "H100-SXM5-80GB"}]
    steps = [
        {"submit": "train-a"},
        {"node-down": "solo"},
        {"expect": {"workloads": {"train-a": "pending"}}},
        {"node-up": "solo"},
        {"expect": {"workloads": {"train-a": {"status": "running", "node": "solo"}}}},
    ]
    result = run_file(here, nodes=nodes, steps=steps)
    assert result.failures == ()
    assert result.expectations == 3
    evictions = [(e.step, e.cycle, e.workload, e.reason) for e in result.log if e.action == "evict"]
    assert evictions == [(2, 0, "train-a", "node-down")]
    assert [(e.step, e.workload) for e in result.log if e.action == "bind"] == [
        (1, "train-a"),
        (4, "train-a"),
    ]


def test_interactive_work_stops_after_the_time_limit(here: Path) -> None:
    shell = doc("Workload", "shell", project="nlp", type="interactive", gpu=1)
    steps = [
        {"submit": shell},
        {"advance": "59m"},
        {"expect": {"workloads": {"shell": "running"}}},
        {"advance": "2m"},
        {"expect": {"workloads": {"shell": {"status": "stopped", "reason": "time-limit"}}}},
        {"delete": "shell"},
        {"expect": {"workloads": {"shell": "deleted"}}},
    ]
    result = run_file(here, steps=steps)
    assert result.failures == ()
    assert result.snapshot.now == 61 * 60


def test_failed_expectations_record_expected_and_actual(here: Path) -> None:
    steps = [
        {"submit": "train-a"},
        {
            "expect": {
                "projects": {"vision": {"allocated": 4, "deserved": 12}},
                "workloads": {"train-a": {"status": "pending", "node": "dgx-0"}},
            }
        },
        {"submit": "half"},
    ]
    result = run_file(here, steps=steps)
    assert result.expectations == 4
    failed = [(f.step, f.subject, f.name, f.field, f.expected, f.actual) for f in result.failures]
    assert failed == [
        (2, "project", "vision", "allocated", 4, 8.0),
        (2, "workload", "train-a", "status", "pending", "running"),
    ]
    assert "half" in statuses(result)  # the run went on after the failure


def json_of(result) -> dict[str, Any]:
    return json.loads(json.dumps(to_json(result)))


def test_json_output_seeds_the_next_run_with_the_same_placements(here: Path) -> None:
    extra = doc("Workload", "extra", project="vision", gpuMemory="20Gi", replicas=2)
    steps = [{"submit": ["train-a", "half", "slice", extra]}]
    first = json_of(run_file(here, steps=steps))
    assert {w["status"] for w in first["workloads"]} == {"running"}
    assert next(w for w in first["workloads"] if w["name"] == "extra")["workload"] == extra

    second = json_of(run_file(here, running=first["workloads"]))
    assert second["workloads"] == first["workloads"]
    assert second["nodes"] == first["nodes"]
    assert second["projects"] == first["projects"]
    assert [e["action"] for e in second["log"]] == []  # nothing to decide: all placed already


def test_a_gang_in_flight_seeds_the_next_run_still_in_flight(here: Path) -> None:
    entry = {"name": "gang", "pods": [node_gpus("dgx-0", index=2)], "workload": GANG}
    steps = [{"advance": "10s"}]  # within the grace period; no repo workload submitted
    first = json_of(run_file(here, running=[entry], steps=steps))
    (gang,) = first["workloads"]
    # 3 pods of 8 GPUs on two 8-GPU nodes: it could never start whole
    assert (gang["status"], gang["reason"]) == (
        "pending",
        "can never fit: its gang of 3 pods must start together, but the nodes it may use hold "
        "at most 2 pods of 8 GPUs (dgx: 2 nodes x 8 GPUs, mig: 1 node x 2 GPUs (MIG)); "
        "a gang of 2 or fewer would fit",
    )
    pod = {"node": "dgx-0", "gpus": list(range(8)), "fraction": None, "mig": None, "index": 2}
    assert gang["pods"] == [pod]

    second = json_of(run_file(here, running=first["workloads"], steps=steps))
    assert second["workloads"] == [gang | {"runningFor": gang["runningFor"] + 10}]  # 10s older
    assert second["log"] == []


def test_a_running_workload_fed_back_keeps_its_age(here: Path) -> None:
    shell = doc("Workload", "shell", project="nlp", type="interactive", gpu=1)
    first = json_of(run_file(here, steps=[{"submit": shell}, {"advance": "50m"}]))
    (entry,) = first["workloads"]
    assert (entry["status"], entry["runningFor"]) == ("running", 50 * 60)
    # its 1h limit counts from its start, not from the continuation's
    second = run_file(here, running=first["workloads"], steps=[{"advance": "11m"}])
    assert statuses(second) == {"shell": ("stopped", "time-limit")}
    assert [(e.step, e.action, e.reason) for e in second.log] == [(1, "evict", "time-limit")]


def test_json_output_has_fixed_keys_and_sorted_lists(here: Path) -> None:
    data = json_of(simulate(repo_in(here)))
    assert list(data) == [
        "simulation",
        "time",
        "departments",
        "projects",
        "workloads",
        "nodes",
        "log",
        "expectations",
    ]
    assert [p["name"] for p in data["projects"]] == ["nlp", "vision"]
    assert list(data["projects"][0]) == [
        "name",
        "deserved",
        "fairShare",
        "allocated",
        "queued",
        "department",
        "nodeGroups",
    ]
    # the workloads in the order they were submitted (the repo's file order): the order
    # `running:` queues them in when the output is fed back
    assert [w["name"] for w in data["workloads"]] == ["train-a", "half", "slice"]
    slice_ = data["workloads"][2]
    assert slice_["pods"][0]["mig"]["profile"] == "3g.40gb"
    mig_gpu = next(n for n in data["nodes"] if n["name"] == "mig-0")["gpus"][0]
    assert mig_gpu["allocated"] == round(3 / 7, 4)
    assert mig_gpu["mig"][0]["workload"] == "slice"


# --- the command ---------------------------------------------------------------------------


def test_cli_exits_1_and_prints_the_diff_when_an_expectation_fails(here: Path) -> None:
    steps = [{"submit": "train-a"}, {"expect": {"projects": {"vision": {"allocated": 3}}}}]
    (here / "sim.yaml").write_text(yaml.safe_dump(simulation_file(steps=steps)))
    result = CliRunner().invoke(main, ["simulate", "repo", "--events", "sim.yaml"])
    assert result.exit_code == 1, result.output
    assert "Expectations not met" in result.output
    assert "project/vision" in result.output
    assert "0/1 expectations met" in result.output

    as_json = CliRunner().invoke(
        main, ["simulate", "repo", "--events", "sim.yaml", "--format", "json"]
    )
    assert as_json.exit_code == 1
    failed = json.loads(as_json.output)["expectations"]["failed"]
    assert [(f["field"], f["expected"], f["actual"]) for f in failed] == [("allocated", 3, 8.0)]
    assert (failed[0]["file"], failed[0]["line"]) == ("sim.yaml", 10)  # `allocated: 3`


def test_cli_reports_events_file_errors_with_exit_1(here: Path) -> None:
    (here / "sim.yaml").write_text(yaml.safe_dump(simulation_file(steps=[{"delete": "x"}])))
    result = CliRunner().invoke(main, ["simulate", "repo", "--events", "sim.yaml"])
    assert result.exit_code == 1
    assert "sim.yaml:6:11: error GS805 Simulation/t: unknown workload 'x'" in result.output


def test_cli_passes_when_expectations_hold(here: Path) -> None:
    steps = [{"submit": "train-a"}, {"expect": {"projects": {"vision": {"allocated": 8}}}}]
    (here / "sim.yaml").write_text(yaml.safe_dump(simulation_file(steps=steps)))
    result = CliRunner().invoke(main, ["simulate", "repo", "--events", "sim.yaml"])
    assert result.exit_code == 0, result.output
    assert "1/1 expectations met" in result.output


@pytest.mark.skipif(not EXAMPLE.is_dir(), reason="examples/clusters/netapp-dgx not written yet")
def test_cli_simulates_the_netapp_dgx_example() -> None:
    result = CliRunner().invoke(main, ["simulate", str(EXAMPLE), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["projects"]
    assert data["workloads"]
    table = CliRunner().invoke(main, ["simulate", str(EXAMPLE)])
    assert table.exit_code == 0, table.output
    assert "Projects" in table.output


# --- hostile values: a diagnostic at the value and exit 1, never a traceback ---------------

HUGE = "9" * 400


def _line_col(text: str, at: str) -> str:
    before = text[: text.index(at)]
    return f"{before.count(chr(10)) + 1}:{len(before) - before.rfind(chr(10))}"


@pytest.mark.parametrize(
    ("body", "at", "message"),
    [
        ("steps:\n  - advance: .inf\n", ".inf", "inf is not a finite number"),
        ("steps:\n  - advance: .nan\n", ".nan", "nan is not a finite number"),
        ("steps:\n  - advance: 60.0\n", "60.0", "60.0 is not an integer"),
        (f"steps:\n  - advance: {HUGE}\n", HUGE, "is greater than the maximum of 3153600000"),
        ('steps:\n  - advance: "5m\\n"\n', '"5m', "is not a duration"),
        (
            "steps:\n  - expect: {projects: {nlp: {allocated: .inf}}}\n",
            ".inf",
            "allocated: inf is not a finite number",
        ),
        (
            f"steps:\n  - expect: {{projects: {{nlp: {{queued: {HUGE}}}}}}}\n",
            HUGE,
            "is greater than the maximum of 1000000",
        ),
        ("nodes:\n  - {name: n0, gpus: 1000000}\n", "1000000", "is greater than the maximum of 64"),
        ("nodes:\n  - {name: n0, gpus: 2.0}\n", "2.0", "2.0 is not an integer"),
        ('nodes:\n  - {name: n0, gpus: 1, memory: "5Gi\\n"}\n', '"5Gi', "is not a Kubernetes"),
        (
            "running:\n  - {name: half, pods: [{node: dgx-0, gpus: [1.0]}]}\n",
            "1.0",
            "1.0 is not an integer",
        ),
    ],
)
def test_hostile_values_are_schema_errors_at_the_value(
    here: Path, body: str, at: str, message: str
) -> None:
    text = "apiVersion: gitops-sched.io/v1alpha1\nkind: Simulation\nmetadata: {name: t}\n" + body
    (here / "sim.yaml").write_text(text)
    result = CliRunner().invoke(main, ["simulate", "repo", "--events", "sim.yaml"])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    [found] = [line for line in result.output.splitlines() if line.startswith("sim.yaml:")]
    assert re.match(rf"sim\.yaml:{_line_col(text, at)}: error GS2\d\d Simulation/t: ", found), found
    assert message in found


@pytest.mark.usefixtures("each_yaml_parser")
def test_deep_nesting_in_a_simulation_file_stops_at_the_65th_level(here: Path) -> None:
    text = "kind: Simulation\nsteps: " + "[" * 3000 + "]" * 3000 + "\n"
    (here / "sim.yaml").write_text(text)
    result = CliRunner().invoke(main, ["simulate", "repo", "--events", "sim.yaml"])
    assert result.exit_code == 1, result.output
    # the document's mapping is the first level, the 64th `[` the 65th
    deep = "sim.yaml:2:71: error GS108: mappings and sequences nested more than 64 deep"
    assert deep in result.output


# --- idle GPUs -----------------------------------------------------------------------------

IDLE_TIMEOUT_REPO = tuple(
    doc("Project", "nlp", department="research", quota={"gpu": 6}, idleGpuTimeout="30m")
    if d["kind"] == "Project" and d["metadata"]["name"] == "nlp"
    else d
    for d in REPO
)
SHELL = doc("Workload", "shell", project="nlp", type="interactive", gpu=1)
BUSY_SHELL = doc("Workload", "busy-shell", project="nlp", type="interactive", gpu=1)
IDLE_TRAIN = doc("Workload", "idle-train", project="nlp", gpu=1)


@pytest.fixture
def idle_here(here: Path) -> Path:
    """The repo with an idleGpuTimeout of 30m on project nlp."""
    text = yaml.safe_dump_all(IDLE_TIMEOUT_REPO, sort_keys=False)
    (here / "repo" / "all.yaml").write_text(text)
    return here


def test_an_idle_interactive_workload_is_stopped_after_the_idle_timeout_and_not_before(
    idle_here: Path,
) -> None:
    steps = [
        {"submit": [SHELL, BUSY_SHELL, IDLE_TRAIN]},
        {"advance": "5m"},
        {"idle": ["shell", "idle-train"]},
        {"advance": "29m"},
        {"expect": {"workloads": {"shell": "running"}}},
        {"advance": "1m"},
        {
            "expect": {
                "workloads": {
                    "shell": {"status": "stopped", "reason": "idle"},
                    "busy-shell": "running",  # never reported idle
                    "idle-train": "running",  # the idle rule stops interactive work only
                }
            }
        },
    ]
    result = run_file(idle_here, steps=steps)
    assert result.failures == ()
    assert result.expectations == 5
    stops = [(e.step, e.workload, e.reason) for e in result.log if e.action == "evict"]
    assert stops == [(6, "shell", "idle")]


def test_idle_since_counts_from_that_long_before_the_step(idle_here: Path) -> None:
    steps = [
        {"submit": SHELL},
        {"advance": "25m"},
        {"idle": {"workload": "shell", "since": "20m"}},
        {"advance": "9m"},
        {"expect": {"workloads": {"shell": "running"}}},
        {"advance": "1m"},
        {"expect": {"workloads": {"shell": {"status": "stopped", "reason": "idle"}}}},
    ]
    assert run_file(idle_here, steps=steps).failures == ()


def test_idle_since_never_reaches_back_before_the_workload_started(idle_here: Path) -> None:
    steps = [
        {"submit": SHELL},
        {"advance": "10m"},
        {"idle": {"workload": "shell", "since": "2h"}},  # idle since it started, 10m ago
        {"expect": {"workloads": {"shell": "running"}}},
        {"advance": "20m"},
        {"expect": {"workloads": {"shell": {"status": "stopped", "reason": "idle"}}}},
    ]
    assert run_file(idle_here, steps=steps).failures == ()


def test_an_idle_workload_fed_back_stays_idle_since_then(idle_here: Path) -> None:
    steps = [{"submit": SHELL}, {"advance": "10m"}, {"idle": "shell"}, {"advance": "20m"}]
    first = json_of(run_file(idle_here, steps=steps))
    (entry,) = first["workloads"]
    assert (entry["runningFor"], entry["idleFor"]) == (30 * 60, 20 * 60)
    # its 30m idle timeout counts from when its GPUs went unused, not from the continuation
    second = run_file(idle_here, running=first["workloads"], steps=[{"advance": "10m"}])
    assert statuses(second) == {"shell": ("stopped", "idle")}


IDLE_ERRORS = """\
apiVersion: gitops-sched.io/v1alpha1
kind: Simulation
metadata: {name: t}
steps:
  - submit: train-a
  - idle: [train-a, ghost]
  - idle: {workload: nosuch, since: 5m}
  - idle: {since: 5m}
"""


def test_idle_steps_name_submitted_workloads(here: Path) -> None:
    simulation, diagnostics = load(here, IDLE_ERRORS.replace("  - idle: {since: 5m}\n", ""))
    assert simulation is None
    assert [(d.location.line, d.message, pointed(d)) for d in diagnostics] == [
        (6, "unknown workload 'ghost' (not submitted before)", "ghost]"),
        (7, "unknown workload 'nosuch' (not submitted before)", "nosuch, since: 5m}"),
    ]
    simulation, diagnostics = load(here, IDLE_ERRORS)
    assert simulation is None and [d.location.line for d in diagnostics] == [8]


def test_idle_steps_are_read_with_how_long_ago(here: Path) -> None:
    steps = [
        {"submit": "train-a"},
        {"idle": "train-a"},
        {"idle": [{"workload": "train-a", "since": "1h"}]},
    ]
    simulation, diagnostics = load_data(here, steps=steps)
    assert diagnostics == [] and simulation is not None
    assert [step.action for step in simulation.steps[1:]] == [
        Idle((("train-a", 0),)),
        Idle((("train-a", 3600),)),
    ]
