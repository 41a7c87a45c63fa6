"""`render --target kai|kueue`: the objects KAI Scheduler and Kueue read, and a warning at the
config's line for each thing the target cannot express."""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from gitops_sched.cli import main
from gitops_sched.compiler.targets import Rendered, render_target
from gitops_sched.config import codes
from gitops_sched.config.model import Repo, Resources
from gitops_sched.validate import check_repo
from testkit.config_builders import doc, node_group

V100 = {"model": "V100-SXM2-32GB", "memory": "32Gi"}
A100 = {"model": "A100-SXM4-80GB", "memory": "80Gi"}


def base(**project: Any) -> list[dict[str, Any]]:
    """A repo both targets express in full: no warning for either."""
    return [
        doc("Cluster", "lab", namespacePrefix="team-"),
        node_group(
            "dgx", nodeCount=2, gpusPerNode=8, gpu=V100, cpuPerNode="80", memoryPerNode="512Gi"
        ),
        doc("Department", "research", quota={"gpu": 12}),
        doc("Project", "vision", department="research", quota={"gpu": 8}, **project),
        doc("Project", "nlp", department="research", quota={"gpu": 4}, overQuotaWeight=1),
        doc("Workload", "ddp", project="vision", image="pytorch", gpu=2),
    ]


def write(tmp_path: Path, documents: list[dict[str, Any]]) -> Path:
    (tmp_path / "repo.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return tmp_path / "repo.yaml"


def render(tmp_path: Path, documents: list[dict[str, Any]], target: str) -> Rendered:
    write(tmp_path, documents)
    repo, diagnostics = check_repo(tmp_path)
    assert repo is not None, [d.text() for d in diagnostics.sorted()]
    return render_target(repo, target)


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def line_of(path: Path, name: str, key: str) -> int:
    """The 1-based line of `key:` in the document of the object named `name`."""
    lines = path.read_text().splitlines()
    start = lines.index(f"  name: {name}")
    return next(i + 1 for i, line in enumerate(lines) if i > start and f"{key}:" in line)


@pytest.mark.parametrize("target", ["kai", "kueue"])
def test_a_repo_the_target_expresses_in_full_renders_without_warnings(
    tmp_path: Path, target: str
) -> None:
    assert render(tmp_path, base(), target).diagnostics == []


# (targets, code, how the base repo is changed, object named, key the warning points at)
SPECIAL = {
    "nodeGroupQuotas": [
        doc("Cluster", "lab"),
        node_group("dgx", nodeCount=2, gpusPerNode=8, gpu=V100),
        node_group("a100", nodeCount=1, gpusPerNode=8, gpu=A100),
        doc("Department", "research", quota={"gpu": 8}),
        doc(
            "Project",
            "vision",
            department="research",
            nodeGroupQuotas={"dgx": {"gpu": 4}, "a100": {"gpu": 4}},
        ),
    ],
    "spread": [
        doc("Cluster", "lab"),
        node_group("dgx", nodeCount=2, gpusPerNode=8, gpu=V100),
        node_group("a100", nodeCount=1, gpusPerNode=8, gpu=A100),
        doc("Department", "research", quota={"gpu": 8}),
        doc("Project", "vision", department="research", quota={"gpu": 8}),
    ],
    "mig": [
        doc("Cluster", "lab"),
        node_group(
            "a100",
            nodeCount=1,
            gpusPerNode=8,
            gpu=A100,
            mig={"enabled": True, "strategy": "dynamic"},
        ),
        doc("Department", "research", quota={"gpu": 8}),
        doc("Project", "vision", department="research", quota={"gpu": 8}),
        doc("Workload", "slice", project="vision", image="pytorch", mig="1g.10gb"),
    ],
}


def changed(change: str) -> list[dict[str, Any]]:
    if change in SPECIAL:
        return SPECIAL[change]
    documents = base()
    if change == "capacity":
        del documents[1]["spec"]["memoryPerNode"]
        return documents
    kind, name, key, value = {
        "idle": ("Project", "vision", "idleGpuTimeout", "30m"),
        "gang": ("Workload", "ddp", "minAvailable", 2),
        "fraction": ("Workload", "ddp", "gpu", 0.5),
        "policy": ("Project", "vision", "fractionPolicy", "evict"),
        "priority": ("Workload", "ddp", "priority", 70),
        "rank": ("Project", "nlp", "overQuotaRank", 1),
        "department": ("Department", "research", "limit", {"gpu": 16}),
    }[change]
    target = next(d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name)
    target["spec"][key] = value
    if change == "gang":
        target["spec"]["replicas"] = 2
    return documents


CASES = [
    ("kai", codes.TARGET_NODE_GROUP_QUOTA, "nodeGroupQuotas", "vision", "nodeGroupQuotas"),
    ("kai", codes.TARGET_IDLE_TIMEOUT, "idle", "vision", "idleGpuTimeout"),
    ("kueue", codes.TARGET_IDLE_TIMEOUT, "idle", "vision", "idleGpuTimeout"),
    ("kai", codes.TARGET_GANG, "gang", "ddp", "minAvailable"),
    ("kueue", codes.TARGET_FRACTION, "fraction", "ddp", "gpu"),
    ("kai", codes.TARGET_DYNAMIC_MIG, "mig", "slice", "mig"),
    ("kueue", codes.TARGET_DYNAMIC_MIG, "mig", "slice", "mig"),
    ("kai", codes.TARGET_FRACTION_POLICY, "policy", "vision", "fractionPolicy"),
    ("kai", codes.TARGET_PRIORITY, "priority", "ddp", "priority"),
    ("kueue", codes.TARGET_PRIORITY, "priority", "ddp", "priority"),
    ("kueue", codes.TARGET_RANK, "rank", "nlp", "overQuotaRank"),
    ("kueue", codes.TARGET_SPREAD_QUOTA, "spread", "vision", "quota"),
    ("kueue", codes.TARGET_DEPARTMENT, "department", "research", "limit"),
    ("kueue", codes.TARGET_UNKNOWN_CAPACITY, "capacity", "dgx", "spec"),
]


@pytest.mark.parametrize(("target", "code", "change", "name", "key"), CASES)
def test_what_the_target_cannot_express_is_a_warning_at_its_line(
    tmp_path: Path, target: str, code: codes.Code, change: str, name: str, key: str
) -> None:
    documents = changed(change)
    rendered = render(tmp_path, documents, target)
    path = tmp_path / "repo.yaml"
    [warning] = [w for w in rendered.diagnostics if w.code is code]
    assert warning.severity.value == "warning"
    assert warning.obj.endswith(f"/{name}")
    assert (warning.location.file, warning.location.line) == (
        path.as_posix(),
        line_of(path, name, key),
    )
    assert {"kai": "KAI Scheduler", "kueue": "Kueue"}[target] in warning.message


def test_every_target_code_has_a_test() -> None:
    target_codes = {c for c in codes.CODES.values() if c.id.startswith("GS9")}
    assert {case[1] for case in CASES} | {codes.TARGET_NAME_CLASH} == target_codes


@pytest.mark.parametrize(
    ("target", "kind", "name", "says"),
    [
        ("kai", "Project", "research", "KAI Scheduler's queues share one namespace"),
        ("kueue", "Department", "lab", "Kueue's root cohort is named after the Cluster"),
    ],
)
def test_names_the_target_would_render_twice_are_an_error_and_nothing_is_written(
    tmp_path: Path, target: str, kind: str, name: str, says: str
) -> None:
    documents = base()
    if kind == "Project":  # a project named as its department: two Queues `research`
        documents.append(doc("Project", name, department="research", quota={"gpu": 0}))
    else:  # a department named as the Cluster: two Cohorts `lab`
        documents.append(doc("Department", name, quota={"gpu": 0}))
    (tmp_path / "repo").mkdir()
    path = write(tmp_path / "repo", documents)
    out = tmp_path / "out"
    args = ["render", str(tmp_path / "repo"), "-o", str(out)]
    result = CliRunner().invoke(main, [*args, "--target", target])
    assert result.exit_code == 1
    lines = path.read_text().splitlines()
    line = max(i + 1 for i, text in enumerate(lines) if text == f"  name: {name}")
    assert f"repo.yaml:{line}:3: error GS911 {kind}/{name}: {says}" in result.stderr
    assert not out.exists()
    other = "kueue" if target == "kai" else "kai"
    assert CliRunner().invoke(main, [*args, "--target", other]).exit_code == 0


def test_kai_queues_are_a_department_parent_and_project_leaves(tmp_path: Path) -> None:
    documents = base(limit={"gpu": 10, "cpu": "64"}, overQuotaRank=2)
    documents.append(
        doc(
            "Project",
            "closed",
            department="research",
            quota={"gpu": 2, "memory": "1Gi"},
            overQuota="denied",
        )
    )
    documents[2]["spec"]["quota"]["gpu"] = 14
    objects = render(tmp_path, documents, "kai").objects
    department = find(objects, "Queue", "research")
    assert "parentQueue" not in department["spec"]
    assert department["spec"]["resources"]["gpu"] == {
        "quota": 14,
        "limit": -1,
        "overQuotaWeight": 14,
    }
    vision = find(objects, "Queue", "vision")["spec"]
    assert (vision["parentQueue"], vision["priority"]) == ("research", 2)
    assert vision["resources"] == {
        "gpu": {"quota": 8, "limit": 10, "overQuotaWeight": 8},
        "cpu": {"quota": -1, "limit": 64000, "overQuotaWeight": 8},
        "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 8},
    }
    closed = find(objects, "Queue", "closed")["spec"]["resources"]
    assert closed["gpu"] == {"quota": 2, "limit": 2, "overQuotaWeight": 2}
    assert closed["memory"]["quota"] == closed["memory"]["limit"] == 1073.741824  # MB
    assert not any(o["apiVersion"].startswith("gitops-sched.io") for o in objects)


def kai_workload(tmp_path: Path, **spec: Any) -> dict[str, Any]:
    documents = base()
    if {"gpu", "gpuMemory"} & set(spec):
        del documents[-1]["spec"]["gpu"]
    documents[-1]["spec"].update(spec)
    objects = render(tmp_path, documents, "kai").objects
    return next(o for o in objects if o["kind"] in ("Job", "Deployment"))


@pytest.mark.parametrize(
    ("spec", "priority_class", "preemptibility"),
    [
        ({}, "train", "preemptible"),
        ({"type": "interactive"}, "build", "non-preemptible"),
        ({"type": "interactive", "preemptible": True}, "build-preemptible", "preemptible"),
        ({"type": "inference"}, "inference", "non-preemptible"),
    ],
)
def test_kai_workloads_name_kais_scheduler_queue_and_priority_class(
    tmp_path: Path, spec: dict[str, Any], priority_class: str, preemptibility: str
) -> None:
    controller = kai_workload(tmp_path, **spec)
    pod = controller["spec"]["template"]
    assert controller["metadata"]["labels"]["kai.scheduler/queue"] == "vision"
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "vision"
    assert pod["metadata"]["labels"]["kai.scheduler/preemptibility"] == preemptibility
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["spec"]["priorityClassName"] == priority_class
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 2


@pytest.mark.parametrize(
    ("request_", "annotation", "value"),
    [({"gpu": 0.25}, "gpu-fraction", "0.25"), ({"gpuMemory": "10Gi"}, "gpu-memory", "10240")],
)
def test_kai_gpu_shares_are_kais_annotations_and_kai_sets_the_devices(
    tmp_path: Path, request_: dict[str, Any], annotation: str, value: str
) -> None:
    pod = kai_workload(tmp_path, **request_)["spec"]["template"]
    assert pod["metadata"]["annotations"][annotation] == value
    container = pod["spec"]["containers"][0]
    assert "NVIDIA_VISIBLE_DEVICES" not in {e["name"] for e in container.get("env", [])}
    assert "nvidia.com/gpu" not in container.get("resources", {}).get("limits", {})


def test_kueue_queues_flavors_and_cohorts(tmp_path: Path) -> None:
    documents = base(limit={"gpu": 10})
    documents.append(
        doc("Project", "closed", department="research", quota={"gpu": 0}, overQuota="denied")
    )
    objects = render(tmp_path, documents, "kueue").objects
    flavor = find(objects, "ResourceFlavor", "dgx")
    assert flavor["spec"]["nodeLabels"] == {"pool": "dgx"}
    assert find(objects, "Cohort", "research")["spec"] == {
        "parentName": "lab",
        "fairSharing": {"weight": "12"},
    }
    vision = find(objects, "ClusterQueue", "vision")["spec"]
    assert vision["cohortName"] == "research"
    assert vision["fairSharing"] == {"weight": "8"}
    assert vision["preemption"]["reclaimWithinCohort"] == "Any"
    assert vision["preemption"]["withinClusterQueue"] == "LowerPriority"
    [group] = vision["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    [dgx] = group["flavors"]
    gpu = next(r for r in dgx["resources"] if r["name"] == "nvidia.com/gpu")
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "2"}
    cpu = next(r for r in dgx["resources"] if r["name"] == "cpu")
    assert cpu["nominalQuota"] == "160"  # no cpu quota: the node group's capacity
    closed = find(objects, "ClusterQueue", "closed")["spec"]["resourceGroups"][0]["flavors"][0]
    assert {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "0"} in closed[
        "resources"
    ]
    local = find(objects, "LocalQueue", "vision")
    assert (local["metadata"]["namespace"], local["spec"]) == (
        "team-vision",
        {"clusterQueue": "vision"},
    )
    wpc = find(objects, "WorkloadPriorityClass", "gitops-sched-inference")
    assert wpc["value"] == 125


def test_kueue_jobs_start_suspended_in_their_queue_and_elastic_gangs_admit_partly(
    tmp_path: Path,
) -> None:
    documents = base()
    documents[-1]["spec"].update(replicas=4, minAvailable=2)
    job = find(render(tmp_path, documents, "kueue").objects, "Job", "ddp")
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "vision"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "gitops-sched-train"
    assert job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] == "2"
    assert "schedulerName" not in job["spec"]["template"]["spec"]


def test_render_target_prints_the_warnings_and_writes_the_targets_objects(
    tmp_path: Path,
) -> None:
    (tmp_path / "repo").mkdir()
    path = write(tmp_path / "repo", changed("priority"))
    result = CliRunner().invoke(
        main, ["render", str(tmp_path / "repo"), "--target", "kueue", "-o", "-"]
    )
    assert result.exit_code == 0, result.output
    line = line_of(path, "ddp", "priority")
    assert f"repo.yaml:{line}:3: warning GS907 Workload/ddp: Kueue takes" in result.stderr
    kinds = {d["kind"] for d in yaml.safe_load_all(result.stdout)}
    assert {"ClusterQueue", "LocalQueue", "Job"} <= kinds
    assert "CustomResourceDefinition" not in kinds


@functools.cache
def base_repo() -> Repo:
    with tempfile.TemporaryDirectory() as folder:
        write(Path(folder), base())
        repo, _ = check_repo(Path(folder))
    assert repo is not None
    return repo


@given(
    quota=st.integers(0, 64),
    extra=st.one_of(st.none(), st.integers(0, 64)),
    allowed=st.booleans(),
)
def test_a_kai_leaf_allows_its_quota_and_no_more_than_the_repo_allows(
    quota: int, extra: int | None, allowed: bool
) -> None:
    """KAI's leaf limit: the repo's limit (-1: none), the quota when over quota is denied;
    never below the quota."""
    repo = base_repo()
    limit = Resources(gpu=None if extra is None else float(quota + extra))
    vision = dataclasses.replace(
        repo.projects[0], quota=Resources(gpu=float(quota)), limit=limit, over_quota_allowed=allowed
    )
    objects = render_target(dataclasses.replace(repo, projects=[vision, *repo.projects[1:]]), "kai")
    gpu = find(objects.objects, "Queue", "vision")["spec"]["resources"]["gpu"]
    assert gpu["quota"] == quota
    if not allowed:
        assert gpu["limit"] == quota
    elif extra is None:
        assert gpu["limit"] == -1
    else:
        assert gpu["limit"] == quota + extra >= gpu["quota"]


def test_kueue_spreads_no_quota_over_the_other_flavors(tmp_path: Path) -> None:
    """An overall quota sits on the first flavor; the others get 0 of what it limits (borrowed,
    or, with over quota denied, nothing: the warning says the project cannot run there)."""
    documents = changed("spread")
    documents[-1]["spec"].update(quota={"gpu": 8, "cpu": "16"}, overQuota="denied")
    rendered = render(tmp_path, documents, "kueue")
    queue = find(rendered.objects, "ClusterQueue", "vision")["spec"]["resourceGroups"][0]
    by_flavor = {f["name"]: {r["name"]: r for r in f["resources"]} for f in queue["flavors"]}
    assert by_flavor["dgx"]["cpu"] == {"name": "cpu", "nominalQuota": "16", "borrowingLimit": "0"}
    assert by_flavor["a100"]["cpu"] == {"name": "cpu", "nominalQuota": "0", "borrowingLimit": "0"}
    assert by_flavor["a100"]["memory"]["nominalQuota"] == "0"  # no memory quota, no capacity
    [warning] = [d for d in rendered.diagnostics if d.code is codes.TARGET_SPREAD_QUOTA]
    assert warning.message.endswith(
        "on a100 it has none and, over quota denied, may not borrow: it cannot run there"
    )


@pytest.mark.parametrize(
    ("target", "label"), [("kai", "kai.scheduler/queue"), ("kueue", "kueue.x-k8s.io/queue-name")]
)
def test_only_the_workload_is_marked_for_the_target_not_its_services(
    tmp_path: Path, target: str, label: str
) -> None:
    documents = base()
    documents[-1]["spec"].update(replicas=2, minAvailable=1)  # a gang: a headless Service too
    objects = render(tmp_path, documents, target).objects
    assert label in find(objects, "Job", "ddp")["metadata"]["labels"]
    service = find(objects, "Service", "ddp")
    assert label not in service["metadata"]["labels"]
    assert "annotations" not in service["metadata"]
