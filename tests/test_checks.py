"""Semantic checks the broken example repos do not cover, one small repo per test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gitops_sched.cli import main
from gitops_sched.config import codes
from gitops_sched.config.baseline import Baseline
from gitops_sched.config.checks import run_checks
from gitops_sched.config.diagnostics import Diagnostic, Diagnostics
from gitops_sched.config.loader import load_repo
from gitops_sched.config.model import build_repo
from gitops_sched.validate import FIT_CHECKS, check_repo
from testkit.config_builders import doc, node_group

CLUSTER = doc("Cluster", "lab", namespacePrefix="team-")
A100 = node_group(
    "a100",
    nodeCount=2,
    gpusPerNode=8,
    gpu={"model": "A100-SXM4-80GB", "memory": "80Gi"},
)
A100_MIG = node_group(
    "a100-mig",
    nodeCount=1,
    gpusPerNode=8,
    gpu={"model": "A100-SXM4-80GB"},
    mig={"enabled": True},
)
DEPARTMENT = doc("Department", "research", quota={"gpu": 16})
PROJECT = doc("Project", "vision", department="research", quota={"gpu": 4})
BASE = (CLUSTER, A100, DEPARTMENT, PROJECT)


def write_repo(path: Path, documents: list[dict[str, Any]]) -> None:
    (path / "repo.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))


@pytest.fixture
def repo_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(repo_dir: Path, *documents: dict[str, Any], base=BASE) -> list[Diagnostic]:
    """Diagnostics of the base repo (or `base`) plus `documents`, sorted as the CLI prints them."""
    write_repo(repo_dir, [*base, *documents])
    diagnostics = Diagnostics()
    loaded = load_repo(Path("."), diagnostics)
    run_checks(build_repo(loaded), loaded, diagnostics, FIT_CHECKS)
    return diagnostics.sorted()


def found(diagnostics: list[Diagnostic]) -> list[tuple[str, str, str]]:
    return [(d.obj, d.severity.value, d.message) for d in diagnostics]


def line_at(diagnostic: Diagnostic) -> str:
    """The source text a diagnostic points at, from its column on."""
    loc = diagnostic.location
    return Path(loc.file).read_text().splitlines()[loc.line - 1][loc.col - 1 :]


def key_line(diagnostic: Diagnostic) -> str:
    """The whole (stripped) source line, for values whose key sits left of the column."""
    loc = diagnostic.location
    return Path(loc.file).read_text().splitlines()[loc.line - 1].strip()


def test_valid_base_repo_has_no_diagnostics(repo_dir: Path) -> None:
    assert check(repo_dir) == []


def test_limits_below_quota(repo_dir: Path) -> None:
    department = doc("Department", "research", quota={"gpu": 16}, limit={"gpu": 8})
    project = doc(
        "Project",
        "vision",
        department="research",
        quota={"gpu": 4, "memory": "128Gi"},
        limit={"gpu": 2, "memory": "64Gi"},
    )
    diagnostics = check(repo_dir, base=(CLUSTER, A100, department, project))
    assert found(diagnostics) == [
        ("Department/research", "error", "GPU limit 8 is less than the GPU quota 16"),
        ("Project/vision", "error", "GPU limit 2 is less than the GPU quota 4"),
        ("Project/vision", "error", "memory limit 64Gi is less than the memory quota 128Gi"),
    ]
    assert [key_line(d) for d in diagnostics] == ["gpu: 8", "gpu: 2", "memory: 64Gi"]


@pytest.mark.parametrize(
    ("grace", "warned"), [("5s", True), ("0s", False), ("10s", False), (None, False)]
)
def test_a_stale_gang_grace_shorter_than_a_cycle_is_a_warning(
    repo_dir: Path, grace: str | None, warned: bool
) -> None:
    policy = {"cyclePeriod": "10s"} | ({"staleGangGrace": grace} if grace else {})
    cluster = doc("Cluster", "lab", policy=policy)
    diagnostics = check(repo_dir, base=(cluster, A100, DEPARTMENT, PROJECT))
    message = (
        "staleGangGrace (5s) is shorter than cyclePeriod (10s): a gang in flight gets one "
        "cycle to start its missing pods before it is evicted whole "
        "(0s evicts at once without this warning)"
    )
    assert found(diagnostics) == ([("Cluster/lab", "warning", message)] if warned else [])
    if warned:
        assert line_at(diagnostics[0]) == "5s"  # the value


@pytest.mark.parametrize("allow", [True, False])
def test_departments_over_capacity_warn_when_oversubscription_is_allowed(
    repo_dir: Path, allow: bool
) -> None:
    cluster = doc("Cluster", "lab", policy={"allowOversubscription": allow})
    department = doc("Department", "research", quota={"gpu": 20})
    write_repo(repo_dir, [cluster, A100, department, PROJECT])
    result = CliRunner().invoke(main, ["validate", "."])
    # at the department's GPU quota, not at the Cluster
    message = (
        "repo.yaml:{} GS402 Department/research: departments' GPU quotas add up to 20 "
        "(research 20), more than the cluster's 16 GPUs (a100 2x8){}"
    )
    line = next(
        i
        for i, text in enumerate(Path("repo.yaml").read_text().splitlines(), 1)
        if text.strip() == "gpu: 20"
    )
    if allow:
        assert result.exit_code == 0
        assert result.stderr.splitlines() == [
            message.format(f"{line}:10: warning", "; allowed by policy.allowOversubscription"),
            ".: valid (1 projects, 0 workloads, 16 GPUs)",
        ]
    else:
        assert result.exit_code == 1
        fix = (
            ": lower this quota to 16 or less, add GPU nodes to the node groups, or set the "
            "Cluster's spec.policy.allowOversubscription: true"
        )
        assert result.stderr.splitlines() == [message.format(f"{line}:10: error", fix)]


@pytest.mark.parametrize("allow", [True, False])
def test_projects_over_their_department_warn_when_oversubscription_is_allowed(
    repo_dir: Path, allow: bool
) -> None:
    cluster = doc("Cluster", "lab", policy={"allowOversubscription": allow})
    projects = [
        doc("Project", name, department="research", quota={"gpu": 10})
        for name in ("vision", "speech")
    ]
    diagnostics = check(repo_dir, *projects, base=(cluster, A100, DEPARTMENT))
    sum_ = (
        "projects' GPU quotas in department 'research' add up to 20 (vision 10, speech 10), "
        "more than its GPU quota of 16"
    )
    # at the quota of the project that takes the sum over (the later one in path order)
    if allow:
        note = "; allowed by policy.allowOversubscription (the department's quota caps their sum)"
        assert found(diagnostics) == [("Project/speech", "warning", sum_ + note)]
    else:
        note = (
            ": lower this quota to 6 or less, raise Department/research's spec.quota.gpu to 20, "
            "or set the Cluster's spec.policy.allowOversubscription: true"
        )
        assert found(diagnostics) == [("Project/speech", "error", sum_ + note)]
    assert line_at(diagnostics[0]) == "10"


def test_node_group_quotas_inside_node_group_capacity(repo_dir: Path) -> None:
    small = node_group("a100", nodeCount=1, gpusPerNode=8, gpu={"model": "A100-80GB"})
    h100 = node_group("h100", nodeCount=2, gpusPerNode=8, gpu={"model": "H100"})
    projects = [
        doc("Project", name, department="research", nodeGroupQuotas={"a100": {"gpu": 6}})
        for name in ("vision", "speech")
    ]
    diagnostics = check(repo_dir, *projects, base=(CLUSTER, small, h100, DEPARTMENT))
    assert found(diagnostics) == [
        (
            "Project/speech",
            "error",
            "projects' GPU quotas on node group 'a100' add up to 12 (vision 6, speech 6), "
            "more than its 8 GPUs (1 x 8 per node): lower this quota to 2 or less, raise "
            "NodeGroup/a100's spec.nodeCount, or set the Cluster's "
            "spec.policy.allowOversubscription: true",
        )
    ]
    assert key_line(diagnostics[0]) == "gpu: 6"


def test_gpu_memory_over_the_gpus_memory_points_at_the_template(repo_dir: Path) -> None:
    template = doc("Template", "big", image="llm:1", gpuMemory="100Gi")
    workload = doc("Workload", "llm", project="vision", template="big")
    diagnostics = check(repo_dir, template, workload)
    assert found(diagnostics) == [
        (
            "Template/big",
            "error",
            "gpuMemory 100Gi is more than one GPU has on the node groups workload 'llm' "
            "may use (a100 80Gi)",
        )
    ]
    assert key_line(diagnostics[0]) == "gpuMemory: 100Gi"


def test_unknown_gpu_model_is_a_warning(repo_dir: Path) -> None:
    group = node_group("z", nodeCount=1, gpusPerNode=4, gpu={"model": "Z100"})
    diagnostics = check(repo_dir, group)
    assert len(diagnostics) == 1
    assert diagnostics[0].severity.value == "warning"
    assert diagnostics[0].message.startswith("unknown GPU model 'Z100' (known: A10, A100-SXM4")
    assert line_at(diagnostics[0]) == "Z100"


def test_mig_on_a_gpu_without_mig(repo_dir: Path) -> None:
    group = node_group("t4", nodeCount=1, gpusPerNode=4, gpu={"model": "T4"}, mig={"enabled": True})
    diagnostics = check(repo_dir, group)
    assert found(diagnostics) == [("NodeGroup/t4", "error", "T4 GPUs do not support MIG")]
    assert key_line(diagnostics[0]) == "enabled: true"


def mig_group(name: str = "serve", gpus: int = 8, model: str = "A100-SXM4-80GB", **mig: Any):
    return node_group(name, nodeCount=1, gpusPerNode=gpus, gpu={"model": model}, mig=mig)


def instances(*pairs: tuple[str, int]) -> list[dict[str, Any]]:
    return [{"profile": profile, "start": start} for profile, start in pairs]


STATIC = {"enabled": True, "strategy": "static"}


def test_a_valid_static_layout_and_a_request_for_one_of_its_profiles_pass(repo_dir: Path) -> None:
    layout = instances(("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6))
    by_gpu = [{"gpus": [6, 7], "layout": instances(("7g.80gb", 0))}]
    group = mig_group(**STATIC, layout=layout, byGpu=by_gpu)
    workload = doc("Workload", "w", project="vision", nodeGroup="serve", mig="2g.20gb")
    assert check(repo_dir, group, workload) == []


def test_static_layout_instances_follow_nvidias_placement_tables(repo_dir: Path) -> None:
    layout = instances(("3g.40gb", 0), ("2g.20gb", 2), ("3g.20gb", 4), ("1g.10gb", 7))
    diagnostics = check(repo_dir, mig_group(**STATIC, layout=layout))
    assert found(diagnostics) == [
        (
            "NodeGroup/serve",
            "error",
            "2g.20gb at slice 2 overlaps 3g.40gb at slice 0 (memory slices 2, 3)",
        ),
        (
            "NodeGroup/serve",
            "error",
            "MIG profile '3g.20gb' does not exist on A100-SXM4-80GB (valid: 1g.10gb, "
            "1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)",
        ),
        (
            "NodeGroup/serve",
            "error",
            "1g.10gb cannot start at memory slice 7 on A100-SXM4-80GB "
            "(valid starts: 0, 1, 2, 3, 4, 5, 6)",
        ),
    ]
    assert [line_at(d) for d in diagnostics] == ["profile: 2g.20gb", "3g.20gb", "7"]


def test_a_static_layout_keeps_nvidias_instance_counts(repo_dir: Path) -> None:
    layout = instances(("1g.10gb+me", 0), ("1g.10gb+me", 1))
    diagnostics = check(repo_dir, mig_group(**STATIC, layout=layout))
    assert found(diagnostics) == [
        (
            "NodeGroup/serve",
            "error",
            "not a valid A100-SXM4-80GB MIG layout: 2 x 1g.10gb+me, at most 1; "
            "more than one +me instance",
        )
    ]
    assert key_line(diagnostics[0]) == "layout:"


@pytest.mark.parametrize(
    ("mig", "message"),
    [
        (
            STATIC,
            "strategy static needs the instances of every GPU: `layout` (every GPU of a node) "
            "or `byGpu` entries",
        ),
        (
            {
                **STATIC,
                "byGpu": [{"gpus": [0, 1, 2, 3, 4, 5], "layout": instances(("7g.80gb", 0))}],
            },
            "strategy static needs the instances of GPUs 6, 7: `layout` (every GPU of a node) "
            "or `byGpu` entries",
        ),
    ],
)
def test_a_static_group_declares_the_layout_of_every_gpu(
    repo_dir: Path, mig: dict[str, Any], message: str
) -> None:
    diagnostics = check(repo_dir, mig_group(**mig))
    assert found(diagnostics) == [("NodeGroup/serve", "error", message)]
    assert key_line(diagnostics[0]) == "strategy: static"


def test_an_empty_static_layout_is_an_error(repo_dir: Path) -> None:
    diagnostics = check(repo_dir, mig_group(**STATIC, layout=[]))
    assert found(diagnostics) == [
        (
            "NodeGroup/serve",
            "error",
            "a static layout needs instances (a MIG GPU serves no other work)",
        )
    ]


def test_by_gpu_names_each_gpu_of_the_node_once(repo_dir: Path) -> None:
    seven = instances(("7g.80gb", 0))
    by_gpu = [{"gpus": [0, 8], "layout": seven}, {"gpus": [0], "layout": seven}]
    diagnostics = check(repo_dir, mig_group(**STATIC, layout=seven, byGpu=by_gpu))
    assert found(diagnostics) == [
        ("NodeGroup/serve", "error", "GPU 8 does not exist on a node of 8 GPUs (indexes 0 to 7)"),
        ("NodeGroup/serve", "error", "GPU 0 has a layout already in byGpu"),
    ]
    assert [line_at(d) for d in diagnostics] == ["8", "0"]


@pytest.mark.parametrize(
    ("mig", "message", "line"),
    [
        (
            {"enabled": True, "layout": instances(("7g.80gb", 0))},
            "a MIG layout is for strategy: static only (a dynamic group's instances are "
            "created by the scheduler)",
            "layout:",
        ),
        (
            {"enabled": True, "byGpu": [{"gpus": [0], "layout": instances(("7g.80gb", 0))}]},
            "a MIG layout is for strategy: static only (a dynamic group's instances are "
            "created by the scheduler)",
            "byGpu:",
        ),
        (
            {"strategy": "static", "layout": instances(("7g.80gb", 0))},
            "strategy static needs mig.enabled: true",
            "strategy: static",
        ),
    ],
)
def test_a_layout_belongs_to_a_static_mig_group(
    repo_dir: Path, mig: dict[str, Any], message: str, line: str
) -> None:
    diagnostics = check(repo_dir, mig_group(**mig))
    assert found(diagnostics) == [("NodeGroup/serve", "error", message)]
    assert key_line(diagnostics[0]) == line


def test_a_static_layout_needs_a_known_gpu_model(repo_dir: Path) -> None:
    group = mig_group(model="Z100", **STATIC, layout=instances(("7g.80gb", 0)))
    diagnostics = check(repo_dir, group)
    assert [d.severity.value for d in diagnostics] == ["warning", "error"]  # unknown model
    assert diagnostics[1].message == (
        "a static MIG layout cannot be checked on unknown GPU model 'Z100'"
    )
    assert key_line(diagnostics[1]) == "strategy: static"


def test_a_mig_request_on_static_groups_needs_a_declared_instance(repo_dir: Path) -> None:
    halves = mig_group(**STATIC, layout=instances(("3g.40gb", 0), ("3g.40gb", 4)))
    workload = doc("Workload", "w", project="vision", nodeGroup="serve", mig="1g.10gb")
    diagnostics = check(repo_dir, halves, workload)
    assert found(diagnostics) == [
        (
            "Workload/w",
            "error",
            "MIG profile '1g.10gb' is not in the static MIG layout of node group 'serve' (3g.40gb)",
        )
    ]
    assert key_line(diagnostics[0]) == "mig: 1g.10gb"


def test_a_mig_request_names_why_each_group_lacks_the_profile(repo_dir: Path) -> None:
    halves = mig_group(**STATIC, layout=instances(("3g.40gb", 0), ("3g.40gb", 4)))
    h200 = mig_group("h200", model="H200", enabled=True)
    project = doc(
        "Project",
        "vision",
        department="research",
        quota={"gpu": 4},
        nodeGroups={"allowed": ["serve", "h200"]},
    )
    workload = doc("Workload", "w", project="vision", mig="1g.10gb")
    diagnostics = check(repo_dir, halves, h200, workload, base=(CLUSTER, A100, DEPARTMENT, project))
    assert found(diagnostics) == [
        (
            "Workload/w",
            "error",
            "MIG profile '1g.10gb' is not in the static MIG layout of node group 'serve' "
            "(3g.40gb) and does not exist on H200-SXM5-141GB (valid: 1g.18gb, 1g.18gb+me, "
            "1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb)",
        )
    ]
    # a dynamic group whose model offers the profile serves it
    workload = doc("Workload", "w", project="vision", mig="1g.18gb")
    assert check(repo_dir, halves, h200, workload, base=(CLUSTER, A100, DEPARTMENT, project)) == []


def test_derived_names_too_long(repo_dir: Path) -> None:
    project_name = "p" * 59  # team- + 59 = 64 characters
    workload_name = "w" * 53
    project = doc("Project", project_name, department="research", quota={"gpu": 1})
    workload = doc("Workload", workload_name, project="vision", gpu=1)
    assert found(check(repo_dir, project, workload)) == [
        (
            f"Project/{project_name}",
            "error",
            f"namespace 'team-{project_name}' is 64 characters, more than the 63 Kubernetes allows",
        ),
        (
            f"Workload/{workload_name}",
            "error",
            "workload name is 53 characters, more than 52 (its Job name becomes a pod label value)",
        ),
    ]


def test_invalid_selector_label_value(repo_dir: Path) -> None:
    selector = {"matchLabels": {"pool": "cpu pool"}}
    group = node_group("cpu", nodeCount=1, role="cpu-worker", nodeSelector=selector)
    diagnostics = check(repo_dir, group)
    assert [d.message.split(" (")[0] for d in diagnostics] == ["invalid label value 'cpu pool'"]
    assert line_at(diagnostics[0]) == "cpu pool"


@pytest.mark.parametrize("selector", [None, {}, {"matchLabels": {}}])
def test_a_node_group_without_selector_labels_is_an_error(
    repo_dir: Path, selector: dict[str, Any] | None
) -> None:
    group = doc("NodeGroup", "h100", nodeCount=1, gpusPerNode=8, gpu={"model": "H100"})
    if selector is not None:
        group["spec"]["nodeSelector"] = selector
    diagnostics = check(repo_dir, group)
    assert [(d.obj, d.severity, d.code) for d in diagnostics] == [
        ("NodeGroup/h100", "error", codes.NO_NODE_SELECTOR)
    ]
    assert "would take every node" in diagnostics[0].message
    assert "nvidia.com/gpu.product: NVIDIA-H100-SXM5-80GB" in diagnostics[0].message
    key = "matchLabels" if selector else "nodeSelector" if selector == {} else "spec"
    assert line_at(diagnostics[0]).startswith(key)


def test_node_label_is_ignored_with_a_warning_at_its_key(repo_dir: Path) -> None:
    label = {"key": "gitops-sched.io/node-group", "value": "cpu"}
    group = node_group("cpu", nodeCount=1, role="cpu-worker", nodeLabel=label)
    diagnostics = check(repo_dir, group)
    assert [(d.obj, d.severity, d.code) for d in diagnostics] == [
        ("NodeGroup/cpu", "warning", codes.IGNORED_FIELD)
    ]
    assert "ignored" in diagnostics[0].message and "nodeSelector" in diagnostics[0].message
    assert line_at(diagnostics[0]).startswith("nodeLabel:")


def test_pod_spec_merge_order(repo_dir: Path) -> None:
    default = doc(
        "Template",
        "base",
        default=True,
        image="a",
        env={"X": "1", "Y": "1"},
        gpu=1,
        workingDir="/w",
    )
    template = doc("Template", "tuned", image="b", env={"Y": "2"}, mig="1g.10gb")
    own = doc(
        "Workload", "own", project="vision", template="tuned", env={"Z": "3"}, gpuMemory="10Gi"
    )
    plain = doc("Workload", "plain", project="vision", template="tuned")
    write_repo(repo_dir, [*BASE, default, template, own, plain])
    repo = build_repo(load_repo(Path("."), Diagnostics()))
    by_name = {w.name: w for w in repo.workloads}
    assert repo.pod_spec(by_name["own"]) == {
        "image": "b",
        "env": {"X": "1", "Y": "2", "Z": "3"},
        "workingDir": "/w",
        "gpuMemory": "10Gi",
    }
    # the template's MIG request replaces the default template's whole GPUs
    assert repo.pod_spec(by_name["plain"]) == {
        "image": "b",
        "env": {"X": "1", "Y": "2"},
        "workingDir": "/w",
        "mig": "1g.10gb",
    }


def test_non_preemptible_shares_of_mig_and_gpu_memory(repo_dir: Path) -> None:
    project = doc("Project", "vision", department="research", quota={"gpu": 1})
    workloads = [
        doc("Workload", "nb", project="vision", type="interactive", replicas=3, mig="3g.40gb"),
        doc("Workload", "serve", project="vision", type="inference", replicas=3, gpuMemory="40Gi"),
        doc("Workload", "batch", project="vision", type="interactive", gpu=8, preemptible=True),
        doc("Workload", "train", project="vision", gpu=8),
    ]
    base = (CLUSTER, A100, A100_MIG, DEPARTMENT, project)
    diagnostics = check(repo_dir, *workloads, base=base)
    assert found(diagnostics) == [
        (
            "Project/vision",
            "error",
            "non-preemptible workloads need 2.7857 GPUs together (nb 1.2857, serve 1.5), "
            "more than the project's GPU quota of 1",
        ),
        (
            "Workload/nb",
            "error",
            "non-preemptible interactive workload needs 1.2857 GPUs (3 x 0.4286), "
            "more than the GPU quota of project 'vision' (1)",
        ),
        (
            "Workload/serve",
            "error",
            "non-preemptible inference workload needs 1.5 GPUs (3 x 0.5), "
            "more than the GPU quota of project 'vision' (1)",
        ),
    ]


def test_whole_gpus_may_be_written_as_floats(repo_dir: Path) -> None:
    assert check(repo_dir, doc("Workload", "w", project="vision", gpu=2.0)) == []


def test_no_cluster(repo_dir: Path) -> None:
    diagnostics = check(repo_dir, base=(A100, DEPARTMENT, PROJECT))
    assert [d.text() for d in diagnostics] == [
        "repo.yaml:1:1: error GS301: no Cluster document; a repo declares exactly one"
    ]


def test_objects_that_failed_the_schema_are_not_dangling(repo_dir: Path) -> None:
    write_repo(repo_dir, list(BASE))
    diagnostics = Diagnostics()
    documents = load_repo(Path("."), diagnostics)
    schema_valid = [d for d in documents if d.kind != "Department"]
    run_checks(build_repo(schema_valid), documents, diagnostics, FIT_CHECKS)
    assert diagnostics.items == []


def test_one_default_template(repo_dir: Path) -> None:
    templates = [doc("Template", name, default=True, image="x") for name in ("a", "b")]
    diagnostics = check(repo_dir, *templates)
    lines = (repo_dir / "repo.yaml").read_text().splitlines()
    first = lines.index("  name: a") - 2  # 1-based line of its apiVersion
    assert found(diagnostics) == [
        (
            "Template/b",
            "error",
            f"more than one default Template (the first is 'a' at repo.yaml:{first}:1)",
        )
    ]
    assert key_line(diagnostics[0]) == "default: true"


def test_workload_pinned_to_a_node_group_its_project_may_not_use(repo_dir: Path) -> None:
    h100 = node_group("h100", nodeCount=1, gpusPerNode=8, gpu={"model": "H100"})
    project = doc(
        "Project",
        "vision",
        department="research",
        quota={"gpu": 4},
        nodeGroups={"allowed": ["a100"], "byType": {"inference": ["h100"]}},
    )
    workloads = [
        doc("Workload", "train", project="vision", nodeGroup="h100", gpu=1),
        doc("Workload", "serve", project="vision", type="inference", nodeGroup="h100", gpu=1),
    ]
    diagnostics = check(repo_dir, *workloads, base=(CLUSTER, A100, h100, DEPARTMENT, project))
    assert found(diagnostics) == [
        (
            "Workload/train",
            "error",
            "node group 'h100' is not allowed for train workloads of project 'vision' "
            "(allowed: a100)",
        )
    ]


def test_render_errors_point_at_the_template_once(repo_dir: Path) -> None:
    template = doc("Template", "t", image="x", env={"N": "{{ 8 // (workload.replicas - 1) }}"})
    workloads = [doc("Workload", name, project="vision", template="t") for name in ("a", "b")]
    diagnostics = check(repo_dir, template, *workloads)
    assert found(diagnostics) == [
        (
            "Template/t",
            "error",
            "cannot render template expression: integer division or modulo by zero",
        )
    ]
    assert line_at(diagnostics[0]) == "'{{ 8 // (workload.replicas - 1) }}'"


def test_template_syntax_error(repo_dir: Path) -> None:
    workload = doc("Workload", "w", project="vision", image="{{ project.name }")
    assert found(check(repo_dir, workload)) == [
        ("Workload/w", "error", "template syntax error: unexpected '}'")
    ]


def test_no_cluster_in_an_empty_repo_points_at_the_repo() -> None:
    diagnostics = Diagnostics()
    run_checks(build_repo([]), [], diagnostics)
    assert [d.text() for d in diagnostics.items] == [
        ".:1:1: error GS301: no Cluster document; a repo declares exactly one"
    ]


# --- volumes: claims the repo renders ------------------------------------------------------

CHECKPOINTS = {
    "name": "checkpoints",
    "claim": {"size": "1Ti", "storageClass": "nfs", "accessModes": ["ReadWriteMany"]},
    "mountPath": "/ckpt",
}


def claiming(name: str, project: str = "vision", **claim: Any) -> dict[str, Any]:
    volume = {**CHECKPOINTS, "claim": {**CHECKPOINTS["claim"], **claim}}
    return doc("Workload", name, project=project, gpu=1, volumes=[volume])


def test_one_claim_declared_alike_or_in_other_projects_is_fine(repo_dir: Path) -> None:
    other = doc("Project", "nlp", department="research", quota={"gpu": 4})
    assert (
        check(
            repo_dir,
            other,
            claiming("a"),
            claiming("b", size="1024Gi", accessModes=["ReadWriteMany"]),  # same by value
            claiming("c", project="nlp", size="5Ti"),  # another namespace, another claim
        )
        == []
    )


def test_a_claim_declared_twice_differently_points_at_the_later_claim_key(
    repo_dir: Path,
) -> None:
    diagnostics = check(
        repo_dir, claiming("a"), claiming("b", storageClass="ssd", accessModes=["ReadWriteOnce"])
    )
    assert len(diagnostics) == 1
    (problem,) = diagnostics
    assert problem.obj == "Workload/b"
    assert problem.message.startswith(
        "claim 'checkpoints' of project 'vision' is declared differently by Workload/a at "
        "repo.yaml:"
    )
    assert problem.message.endswith(
        "(storageClass ssd here, nfs there; accessModes [ReadWriteOnce] here, "
        "[ReadWriteMany] there); the project's workloads share one claim per volume name"
    )
    assert key_line(problem) == "claim:"


def test_a_template_claim_conflict_is_reported_once(repo_dir: Path) -> None:
    template = doc("Template", "t", volumes=[CHECKPOINTS])
    uses = [doc("Workload", f"w{i}", project="vision", template="t", gpu=1) for i in range(3)]
    diagnostics = check(repo_dir, claiming("first", size="2Ti"), template, *uses)
    assert [d.obj for d in diagnostics] == ["Template/t"]


def test_claim_sizes_and_access_modes(repo_dir: Path) -> None:
    diagnostics = check(
        repo_dir,
        claiming("zero", size="0"),
        doc(
            "Workload",
            "tiny",
            project="vision",
            gpu=1,
            volumes=[{"name": "x", "claim": {"size": 512, "accessModes": []}, "mountPath": "/x"}],
        ),
    )
    assert found(diagnostics) == [
        ("Workload/zero", "error", "claim size must be more than 0, got 0"),
        (
            "Workload/tiny",
            "warning",
            "claim size 512 is 512 bytes (a quantity without a unit counts bytes: 512Gi?)",
        ),
        ("Workload/tiny", "error", "accessModes is empty (default: [ReadWriteOnce])"),
    ]
    assert line_at(diagnostics[0]) == "'0'"
    assert key_line(diagnostics[2]).startswith("accessModes:")


def test_a_gang_on_a_read_write_once_claim_is_warned(repo_dir: Path) -> None:
    volume = {"name": "scratch", "claim": {"size": "10Gi"}, "mountPath": "/scratch"}
    gang = doc("Workload", "ddp", project="vision", gpu=1, replicas=2, volumes=[volume])
    shared = claiming("ddp-rwx", replicas=2)
    shared["spec"]["replicas"] = 2
    assert found(check(repo_dir, gang, shared)) == [
        (
            "Workload/ddp",
            "warning",
            "claim 'scratch' is ReadWriteOnce, but the 2 pods of Workload/ddp may run on "
            "different nodes, and only one node can mount it (use accessModes: [ReadWriteMany])",
        )
    ]


def test_volume_names_are_unique_in_a_pod_shared_memory_included(repo_dir: Path) -> None:
    volumes = [
        {"name": "dshm", "claimName": "mine", "mountPath": "/a"},
        {"name": "data", "claimName": "d", "mountPath": "/b"},
        {"name": "data", "claimName": "e", "mountPath": "/c"},
    ]
    workload = doc("Workload", "w", project="vision", sharedMemory="1Gi", volumes=volumes)
    diagnostics = check(repo_dir, workload)
    assert found(diagnostics) == [
        (
            "Workload/w",
            "error",
            "volume 'dshm' of Workload/w is declared twice (also spec.sharedMemory)",
        ),
        (
            "Workload/w",
            "error",
            "volume 'data' of Workload/w is declared twice (also spec.volumes[1])",
        ),
    ]


# --- one problem, reported once, where the user looks ----------------------------------------


def validated(repo_dir: Path, *documents: dict[str, Any], base=BASE) -> list[tuple[str, str]]:
    """(code, object) of every diagnostic `validate` prints for the base repo plus `documents`."""
    write_repo(repo_dir, [*base, *documents])
    return [(str(d.code), d.obj) for d in check_repo(Path("."))[1].sorted()]


H100 = node_group("h100", nodeCount=1, gpusPerNode=8, gpu={"model": "H100"})


def test_a_node_group_that_fails_its_schema_has_no_follow_ons(repo_dir: Path) -> None:
    broken = {**H100, "spec": {**H100["spec"], "nodeCount": "one"}}
    department = doc("Department", "research", quota={"gpu": 24})  # 16 without h100
    pinned = doc("Workload", "big", project="vision", nodeGroup="h100", gpu=8)
    anywhere = doc("Workload", "any", project="vision", gpu=8, replicas=3, minAvailable=3)
    base = (CLUSTER, A100, department, PROJECT)
    assert validated(repo_dir, broken, pinned, anywhere, base=base) == [
        ("GS205", "NodeGroup/h100")  # not: over capacity, unknown node group, never fits
    ]
    assert validated(repo_dir, H100, pinned, anywhere, base=base) == []


def test_a_duplicate_project_is_not_counted_twice(repo_dir: Path) -> None:
    department = doc("Department", "research", quota={"gpu": 6})
    again = doc("Project", "vision", department="research", quota={"gpu": 4})
    assert validated(repo_dir, again, base=(CLUSTER, A100, department, PROJECT)) == [
        ("GS303", "Project/vision")  # not: projects' quotas 8 over the department's 6
    ]


def test_a_dangling_reference_is_reported_once(repo_dir: Path) -> None:
    workloads = [
        doc("Workload", "tune", project="vision", nodeGroup="h200", mig="1g.10gb"),
        doc("Workload", "train", project="vision", template="pytorch", gpu=64),
        doc(
            "Workload",
            "serve",
            project="nlp",
            type="inference",
            gpu=1,
            env={"P": "{{ project.name }}"},
        ),
    ]
    assert validated(repo_dir, *workloads) == [
        ("GS304", "Workload/tune"),  # not: no MIG node group, not allowed
        ("GS304", "Workload/train"),  # not: can never fit (the template may pin elsewhere)
        ("GS304", "Workload/serve"),  # not: non-preemptible over quota, cannot render
    ]


@pytest.mark.parametrize(
    ("broken", "error"),
    [
        ({"kind": "Projet"}, "GS202"),  # a misspelt kind: no Project of that name exists
        ({"kind": None}, "GS202"),  # no kind at all
        ({"metadata": None}, "GS204"),  # no name: it may be the project referred to
        ({"spec": {"departmnet": "research", "quota": {"gpu": 4}}}, "GS203"),  # misspelt field
    ],
    ids=["misspelt-kind", "no-kind", "no-name", "misspelt-field"],
)
def test_a_broken_project_is_one_error_not_one_per_workload_naming_it(
    repo_dir: Path, broken: dict[str, Any], error: str
) -> None:
    project = {k: v for k, v in {**PROJECT, **broken}.items() if v is not None}
    workloads = [doc("Workload", f"w{i}", project="vision", gpu=1) for i in range(3)]
    assert validated(repo_dir, *workloads, base=(CLUSTER, A100, DEPARTMENT, project)) == [
        (error, f"{project.get('kind', '?')}/{project.get('metadata', {}).get('name', '?')}")
    ]


def test_a_broken_cluster_leaves_the_policy_checks_out(repo_dir: Path) -> None:
    cluster = doc("Cluster", "lab", policy={"allowOversubscription": "yes"})
    department = doc("Department", "research", quota={"gpu": 2})
    assert validated(repo_dir, base=(cluster, A100, department, PROJECT)) == [
        ("GS205", "Cluster/lab")  # not: the project over its department, as an error
    ]


def test_a_duplicate_is_reported_on_the_later_definition_in_path_order(repo_dir: Path) -> None:
    # walked, z.yaml comes before the folder `a`; in path order a/b.yaml comes first
    write_repo(repo_dir, list(BASE))
    again = yaml.safe_dump_all([PROJECT, PROJECT], sort_keys=False)
    (repo_dir / "z.yaml").write_text(again)
    (repo_dir / "a").mkdir()
    (repo_dir / "a" / "b.yaml").write_text(yaml.safe_dump(PROJECT, sort_keys=False))
    problems = [(str(d.location), d.message) for d in check_repo(Path("."))[1].sorted()]
    message = "duplicate Project 'vision' (first defined at a/b.yaml:4:9)"
    assert problems == [(at, message) for at in ("repo.yaml:33:9", "z.yaml:4:9", "z.yaml:13:9")]


def test_in_a_plan_the_quota_the_change_raised_is_blamed(repo_dir: Path) -> None:
    speech = doc("Project", "speech", department="research", quota={"gpu": 4})
    department = doc("Department", "research", quota={"gpu": 8})
    base = (CLUSTER, A100, department, PROJECT, speech)  # vision 4 + speech 4: fits
    write_repo(repo_dir, list(base))
    before = Baseline.of(check_repo(Path("."))[0].documents())
    raised = doc("Project", "vision", department="research", quota={"gpu": 6})
    write_repo(repo_dir, [CLUSTER, A100, department, raised, speech])
    fix = (
        "lower this quota to {} or less, raise Department/research's spec.quota.gpu to 10, "
        "or set the Cluster's spec.policy.allowOversubscription: true"
    )
    # validate: in path order, speech tips the sum over; plan: vision, which the change raised
    assert [
        (d.obj, d.message.partition("of 8: ")[2]) for d in check_repo(Path("."))[1].sorted()
    ] == [("Project/speech", fix.format(2))]
    planned = check_repo(Path("."), baseline=before)[1].sorted()
    assert [(d.obj, d.message.partition("of 8: ")[2]) for d in planned] == [
        ("Project/vision", fix.format(4))
    ]


def test_in_a_plan_a_lowered_bound_is_blamed(repo_dir: Path) -> None:
    speech = doc("Project", "speech", department="research", quota={"gpu": 4})
    department = doc("Department", "research", quota={"gpu": 8})
    write_repo(repo_dir, [CLUSTER, A100, department, PROJECT, speech])
    before = Baseline.of(check_repo(Path("."))[0].documents())
    lowered = doc("Department", "research", quota={"gpu": 6})
    write_repo(repo_dir, [CLUSTER, A100, lowered, PROJECT, speech])
    [problem] = check_repo(Path("."), baseline=before)[1].sorted()
    assert (problem.obj, key_line(problem)) == ("Department/research", "gpu: 6")
    assert problem.message.endswith(
        "more than its GPU quota of 6: raise Department/research's spec.quota.gpu to 8, "
        "lower the quotas that add up, or set the Cluster's spec.policy.allowOversubscription: "
        "true"
    )
