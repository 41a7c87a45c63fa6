"""validate's "can never fit" checks, MIG on a model without profiles, node groups selecting
the same nodes; each at its line, with its code; validate and simulate agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gitops_sched.cli import main
from gitops_sched.config.checks import run_checks
from gitops_sched.config.diagnostics import Diagnostic, Diagnostics
from gitops_sched.config.loader import load_repo
from gitops_sched.config.model import build_repo
from gitops_sched.validate import FIT_CHECKS
from testkit.config_builders import API, doc, node_group

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "clusters"
CLUSTER = doc("Cluster", "lab")
A100 = node_group(
    "a100",
    nodeCount=2,
    gpusPerNode=8,
    gpu={"model": "A100-SXM4-80GB"},
    cpuPerNode="64",
    memoryPerNode="1Ti",
)
MIG = node_group(
    "mig",
    nodeCount=1,
    gpusPerNode=8,
    gpu={"model": "A100-80GB"},
    mig={"enabled": True},
)
CPU = node_group("cpu", role="cpu-worker", nodeCount=2, gpusPerNode=0, cpuPerNode="32")
DEPARTMENT = doc("Department", "research", quota={"gpu": 16})
PROJECT = doc("Project", "vision", department="research", quota={"gpu": 16})
BASE = (CLUSTER, A100, MIG, CPU, DEPARTMENT, PROJECT)


@pytest.fixture
def repo_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(*documents: dict[str, Any], base: tuple = BASE) -> list[Diagnostic]:
    Path("repo.yaml").write_text(yaml.safe_dump_all([*base, *documents], sort_keys=False))
    diagnostics = Diagnostics()
    loaded = load_repo(Path("."), diagnostics)
    run_checks(build_repo(loaded), loaded, diagnostics, FIT_CHECKS)
    return diagnostics.sorted()


def only(diagnostics: list[Diagnostic]) -> tuple[str, str, str, str]:
    """The one diagnostic: its code, object, message and the source line it points at."""
    assert len(diagnostics) == 1, [d.text() for d in diagnostics]
    (found,) = diagnostics
    line = Path(found.location.file).read_text().splitlines()[found.location.line - 1].strip()
    assert found.code is not None
    return found.code.id, found.obj, found.message, line


def train(name: str = "w", **spec: Any) -> dict[str, Any]:
    return doc("Workload", name, project="vision", **spec)


def test_the_example_repos_validate_cleanly() -> None:
    for name in ("oci-a100", "netapp-dgx"):
        result = CliRunner().invoke(main, ["validate", str(EXAMPLES / name), "--format", "json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["diagnostics"] == []


def test_a_pod_bigger_than_every_node(repo_dir: Path) -> None:
    assert only(check(train(gpu=16))) == (
        "GS510",
        "Workload/w",
        "can never fit: a pod needs 16 GPUs, the largest node it may use has 8 (a100: 2 nodes "
        "x 8 GPUs, cpu: 2 nodes x 0 GPUs, mig: 1 node x 8 GPUs (MIG)); at most 8 GPUs per pod fit",
        "gpu: 16",
    )


def test_a_gang_that_cannot_start_whole(repo_dir: Path) -> None:
    code, _, message, line = only(check(train(gpu=8, replicas=3)))
    assert (code, line) == ("GS511", "replicas: 3")
    assert message.endswith(
        "hold at most 2 pods of 8 GPUs (a100: 2 nodes x 8 GPUs, cpu: 2 "
        "nodes x 0 GPUs, mig: 1 node x 8 GPUs (MIG)); a gang of 2 or fewer "
        "would fit"
    )
    # the gang is minAvailable pods: the elastic rest may wait
    assert check(train(gpu=8, replicas=3, minAvailable=2)) == []
    assert only(check(train(gpu=4, replicas=6, minAvailable=5)))[3] == "minAvailable: 5"


def test_a_non_mig_request_on_mig_only_gpus(repo_dir: Path) -> None:
    code, _, message, line = only(check(train(gpu=1, nodeGroup="mig")))
    assert (code, line) == ("GS512", "nodeGroup: mig")
    assert message == (
        "can never fit: it needs GPUs without MIG, but every GPU it may use is in MIG mode "
        "(mig: 1 node x 8 GPUs (MIG)); ask for a MIG profile or allow a node group without MIG"
    )
    # without a pin, at the request; one from a template, at the template reference
    project = doc("Project", "vision", department="research", nodeGroups={"allowed": ["mig"]})
    base = (CLUSTER, A100, MIG, DEPARTMENT, project)
    assert only(check(train(gpuMemory="10Gi"), base=base))[3] == "gpuMemory: 10Gi"
    template = doc("Template", "half", image="x", gpu=0.5)
    assert only(check(template, train(template="half"), base=base))[3] == "template: half"
    assert check(train(mig="1g.10gb"), base=base) == []


def test_a_gpu_request_on_cpu_nodes_only(repo_dir: Path) -> None:
    project = doc("Project", "vision", department="research", nodeGroups={"allowed": ["cpu"]})
    code, _, message, line = only(
        check(train(gpu=1), base=(CLUSTER, A100, CPU, DEPARTMENT, project))
    )
    assert (code, line) == ("GS513", "gpu: 1")
    assert (
        message == "can never fit: the node groups it may use have no GPUs (cpu: 2 nodes x 0 GPUs)"
    )


def test_cpu_and_memory_beyond_every_declaring_node(repo_dir: Path) -> None:
    project = doc("Project", "vision", department="research", nodeGroups={"allowed": ["a100"]})
    base = (CLUSTER, A100, DEPARTMENT, project)
    code, _, message, line = only(check(train(gpu=1, resources={"cpu": "96"}), base=base))
    assert (code, line) == ("GS514", "cpu: '96'")
    assert message == (
        "can never fit: a pod asks for cpu 96, more than any node it may use has "
        "(a100 64 per node); at most 64 would fit"
    )
    assert only(check(train(gpu=1, resources={"memory": "2Ti"}), base=base))[3] == "memory: 2Ti"
    # a group that does not say how big its nodes are may have room
    assert check(train(gpu=1, resources={"cpu": "96"}, nodeGroup="mig", mig="1g.10gb")) == []


def test_mig_on_a_model_without_known_profiles_is_an_error(repo_dir: Path) -> None:
    group = node_group(
        "z", nodeCount=1, gpusPerNode=4, gpu={"model": "Z100"}, mig={"enabled": True}
    )
    errors = [d for d in check(group) if d.severity.value == "error"]
    code, obj, message, line = only(errors)
    assert (code, obj, line) == ("GS613", "NodeGroup/z", "enabled: true")
    assert message.startswith(
        "MIG is enabled on GPU model 'Z100', which has no known MIG "
        "profiles: the scheduler could not create instances there "
        "(MIG models: A100-SXM4-40GB, "
    )


def test_node_groups_selecting_the_same_nodes(repo_dir: Path) -> None:
    wide = node_group(
        "gpus",
        nodeCount=1,
        gpusPerNode=8,
        nodeSelector={"matchLabels": {"pool": "gpu"}},
    )
    narrow = node_group(
        "fast",
        nodeCount=1,
        gpusPerNode=8,
        nodeSelector={"matchLabels": {"pool": "gpu", "tier": "fast"}},
    )
    code, obj, message, line = only(check(wide, narrow))
    assert (code, obj, line) == ("GS408", "NodeGroup/fast", "matchLabels:")
    assert message == (
        "node groups 'gpus' and 'fast' select the same nodes (pool=gpu vs pool=gpu, tier=fast): "
        "every node one matches the other matches too, so their GPUs would be counted twice; "
        "give each group a label the other does not have"
    )
    other = node_group(
        "slow",
        nodeCount=1,
        gpusPerNode=8,
        nodeSelector={"matchLabels": {"pool": "gpu", "tier": "slow"}},
    )
    assert check(narrow, other) == []  # tier tells them apart


def test_validate_and_simulate_say_the_same(repo_dir: Path) -> None:
    big = train("big", gpu=8, replicas=3)
    (message,) = [d.message for d in check(big)]
    Path("repo.yaml").write_text(yaml.safe_dump_all(list(BASE), sort_keys=False))
    events = {
        "apiVersion": API,
        "kind": "Simulation",
        "metadata": {"name": "t"},
        "steps": [{"submit": [big]}],
    }
    Path("events.yaml").write_text(yaml.safe_dump(events))
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            ".",
            "--events",
            "events.yaml",
            "--format",
            "json",
            "--exclude",
            "events.yaml",
        ],
    )
    assert result.exit_code == 0, result.output
    (state,) = json.loads(result.stdout)["workloads"]
    assert (state["status"], state["reason"]) == ("pending", message)
