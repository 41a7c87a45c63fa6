"""The schema stage: which documents pass, and what every error says and where it points."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from kubernetes.utils.quantity import parse_quantity

from gitops_sched.cli import main
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.document import KINDS, Document
from gitops_sched.config.loader import load_repo
from gitops_sched.config.model import POD_FIELDS, build_cluster
from gitops_sched.config.schema import (
    SchemaValidator,
    quick_check,
    schema_for,
    validate_documents,
)
from gitops_sched.engine.types import STALE_GANG_GRACE_S
from testkit.config_builders import diagnostic_line
from tests.conftest import examples

HEADER = "apiVersion: gitops-sched.io/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\n"

# One document per kind using every field, as an example repo would.
FULL = {
    "Cluster": """\
spec:
  kubernetesVersion: "1.32"
  systemNamespace: gitops-sched-system
  namespacePrefix: team-
  schedulerName: gitops-sched
  network: {allowedNamespaces: [ingress-nginx, monitoring]}
  policy:
    cyclePeriod: 1m30s
    reclaimThreshold: 0.5
    consolidation: true
    staleGangGrace: 2m
    defaultOverQuotaWeight: equal
    allowOversubscription: false
    minRuntime: {preempt: 5m, reclaim: 1h}
""",
    "NodeGroup": """\
spec:
  role: gpu-worker
  nodeSelector:
    matchLabels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  nodeLabel: {key: gitops-sched.io/node-group, value: h100}
  nodeCount: 4
  gpusPerNode: 8
  gpu: {model: H100-SXM5-80GB, memory: 80Gi}
  mig:
    enabled: true
    strategy: static
    layout: [{profile: 3g.40gb, start: 0}, {profile: 2g.20gb, start: 4}]
    byGpu: [{gpus: [6, 7], layout: [{profile: 7g.80gb, start: 0}]}]
  topology: {label: topology.kubernetes.io/rack, nodesPerDomain: 2}
  cpuPerNode: 192
  memoryPerNode: 2Ti
""",
    "Department": """\
spec:
  quota: {gpu: 16, cpu: "128", memory: 1Ti}
  overQuotaWeight: 2
  limit: {gpu: 24}
  admins: [alice]
  minRuntime: {reclaim: 30m}
""",
    "Project": """\
spec:
  department: research
  quota: {gpu: 4, cpu: 32000m, memory: 256Gi}
  nodeGroupQuotas:
    h100: {gpu: 2}
    a100: {gpu: 2}
  overQuota: denied
  overQuotaWeight: 0
  overQuotaRank: 2
  limit: {gpu: 8}
  nodeGroups:
    allowed: [h100, a100]
    byType: {interactive: [a100], inference: [h100], train: [h100, a100]}
  interactiveTimeLimit: 8h
  idleGpuTimeout: 3600
  members: {users: [bob], groups: [vision]}
  network: {allowedNamespaces: [api-gateway]}
  minRuntime: {preempt: 10m}
""",
    "Template": """\
spec:
  default: true
  image: "nvcr.io/nvidia/pytorch:24.05-py3"
  command: [torchrun, train.py]
  args: ["--run={{ workload.name }}"]
  env: {NCCL_DEBUG: INFO, PROJECT: "{{ project.name }}"}
  ports: [{name: tensorboard, containerPort: 6006, protocol: TCP}]
  volumes:
    - {name: data, claimName: "{{ project.name }}-data", mountPath: /data, readOnly: true}
    - name: ckpt
      claim: {size: 1Ti, storageClass: nfs.example.com, accessModes: [ReadWriteMany]}
      mountPath: /ckpt
  sharedMemory: 16Gi
  resources: {cpu: 8, memory: 64Gi}
  workingDir: /workspace
  gpuMemory: 10Gi
""",
    "Workload": """\
spec:
  project: vision
  type: inference
  template: pytorch
  image: nvcr.io/nvidia/tritonserver:24.05-py3
  replicas: 2
  minAvailable: 2
  priority: 200
  preemptible: false
  nodeGroup: h100
  mig: 1g.10gb+me
""",
}


def text_of(kind: str, spec: str = "", name: str = "x") -> str:
    return HEADER.format(kind=kind, name=name) + spec


def check(tmp_path: Path, *texts: str) -> tuple[list[Document], list[str]]:
    """Schema-valid documents of a one-file repo, and every diagnostic line, file relative."""
    (tmp_path / "repo.yaml").write_text("---\n".join(texts))
    diagnostics = Diagnostics()
    valid = validate_documents(load_repo(tmp_path, diagnostics), diagnostics)
    prefix = f"{tmp_path.as_posix()}/"
    return valid, [diagnostic_line(d).removeprefix(prefix) for d in diagnostics.sorted()]


def problems(tmp_path: Path, *texts: str) -> list[str]:
    return check(tmp_path, *texts)[1]


# --- what passes ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_document_using_every_field_is_valid(tmp_path: Path, kind: str) -> None:
    valid, found = check(tmp_path, text_of(kind, FULL[kind]))
    assert found == []
    assert [d.kind for d in valid] == [kind]


@pytest.mark.parametrize(
    ("kind", "spec"),
    [
        ("Cluster", ""),
        ("NodeGroup", "spec: {nodeCount: 0}\n"),
        ("Department", "spec: {quota: {gpu: 0}}\n"),
        ("Project", "spec: {department: d, quota: {gpu: 1}}\n"),
        ("Project", "spec: {department: d, nodeGroupQuotas: {a100: {gpu: 1}}}\n"),
        ("Template", "spec: {}\n"),
        ("Workload", "spec: {project: p}\n"),
        ("Workload", "spec: {project: p, gpu: 0.5}\n"),
    ],
)
def test_a_minimal_document_is_valid(tmp_path: Path, kind: str, spec: str) -> None:
    valid, found = check(tmp_path, text_of(kind, spec))
    assert found == []
    assert len(valid) == 1


def test_only_the_valid_documents_are_returned(tmp_path: Path) -> None:
    valid, found = check(
        tmp_path,
        text_of("Workload", "spec: {project: p}\n", name="good"),
        text_of("Workload", "spec: {projekt: p}\n", name="bad"),
    )
    assert [d.name for d in valid] == ["good"]
    assert len(found) == 1  # the misspelt field, not also the project it lacks


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "clusters"


@pytest.mark.parametrize(
    "example", sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir() and p.name != "broken")
)
def test_every_document_of_the_example_repos_is_valid(example: str) -> None:
    diagnostics = Diagnostics()
    documents = load_repo(EXAMPLES / example, diagnostics)
    assert validate_documents(documents, diagnostics) == documents
    assert [d.text() for d in diagnostics.items] == []


@pytest.mark.parametrize(
    "value", ["12000m", "1Gi", "1.5", "8e3", "1E3", ".5", "100Ki", "0", "1e-3", 4, 0.25]
)
def test_kubernetes_quantities_are_accepted(tmp_path: Path, value: str | float) -> None:
    spec = f"spec: {{quota: {{cpu: {json.dumps(value)}}}}}\n"
    assert problems(tmp_path, text_of("Department", spec)) == []
    assert parse_quantity(value) >= 0  # and the model can read what the schema let through


@pytest.mark.parametrize("value", ["1e30", "1e19", "99999999999999999999999999999Ei", "2Ei"])
def test_a_quantity_string_over_the_bound_is_refused_like_a_number(
    tmp_path: Path, value: str
) -> None:
    # the schema's `maximum` bounds numbers only: the string's value is checked too, so a
    # quantity past 10^18 never reaches a check that prints it
    spec = f'spec:\n  project: p\n  resources: {{cpu: "{value}"}}\n'
    assert problems(tmp_path, text_of("Workload", spec, name="w")) == [
        f"repo.yaml:7:20: Workload/w: spec.resources.cpu: '{value}' is more than 1e18"
    ]
    at_bound = 'spec:\n  project: p\n  resources: {cpu: "1E"}\n'
    assert problems(tmp_path, text_of("Workload", at_bound, name="w")) == []


@pytest.mark.parametrize("value", ["10s", "5m", "1h30m", "2d", "90", 90])
def test_durations_are_accepted(tmp_path: Path, value: str | int) -> None:
    spec = f"spec:\n  policy: {{cyclePeriod: {json.dumps(value)}}}\n"
    assert problems(tmp_path, text_of("Cluster", spec)) == []


# --- apiVersion and kind ----------------------------------------------------------------


def test_unknown_api_version_is_reported_and_the_rest_still_checked(tmp_path: Path) -> None:
    text = text_of("Workload", "spec: {project: p, replicas: 0}\n").replace("v1alpha1", "v1beta1")
    valid, found = check(tmp_path, text)
    assert valid == []
    assert found == [
        "repo.yaml:1:13: Workload/x: unknown apiVersion 'gitops-sched.io/v1beta1' "
        "(expected gitops-sched.io/v1alpha1)",
        "repo.yaml:5:30: Workload/x: spec.replicas: 0 is less than the minimum of 1",
    ]


def test_missing_api_version(tmp_path: Path) -> None:
    text = "kind: Cluster\nmetadata: {name: c}\n"
    assert problems(tmp_path, text) == [
        "repo.yaml:1:1: Cluster/c: missing apiVersion (expected gitops-sched.io/v1alpha1)"
    ]


def test_unknown_kind(tmp_path: Path) -> None:
    assert problems(tmp_path, text_of("Queue", "spec: {}\n", name="q")) == [
        "repo.yaml:2:7: Queue/q: unknown kind 'Queue' (expected one of Cluster, NodeGroup, "
        "Department, Project, Template, Workload, Simulation)"
    ]


def test_another_apis_document_is_one_error_saying_how_to_leave_it_out(tmp_path: Path) -> None:
    deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {}\n"
    assert problems(tmp_path, deployment) == [
        "repo.yaml:1:13: Deployment/web: not a gitops-sched document (apiVersion 'apps/v1', "
        "expected gitops-sched.io/v1alpha1): leave it out with .gitops-schedignore or --exclude"
    ]  # not also "unknown kind 'Deployment': did you mean 'Department'?"


def test_a_misspelt_kind_says_which_kind_it_looks_like(tmp_path: Path) -> None:
    assert problems(tmp_path, text_of("Projet", "spec: {}\n", name="p")) == [
        "repo.yaml:2:7: Projet/p: unknown kind 'Projet': did you mean 'Project'? (expected one "
        "of Cluster, NodeGroup, Department, Project, Template, Workload, Simulation)"
    ]


def test_missing_kind(tmp_path: Path) -> None:
    text = "apiVersion: gitops-sched.io/v1alpha1\nmetadata: {name: c}\n"
    assert problems(tmp_path, text) == [
        "repo.yaml:1:1: ?/c: missing kind (expected one of Cluster, NodeGroup, Department, "
        "Project, Template, Workload, Simulation)"
    ]


# --- fields -----------------------------------------------------------------------------


def test_unknown_field_points_at_its_key_and_suggests_the_near_miss(tmp_path: Path) -> None:
    spec = "spec:\n  department: d\n  quota: {gpu: 1}\n  overQuotaWieght: 2\n  colour: blue\n"
    assert problems(tmp_path, text_of("Project", spec, name="p")) == [
        "repo.yaml:8:3: Project/p: unknown field 'spec.overQuotaWieght': did you mean "
        f"'overQuotaWeight'? (allowed: {PROJECT_FIELDS})",
        f"repo.yaml:9:3: Project/p: unknown field 'spec.colour' (allowed: {PROJECT_FIELDS})",
    ]


PROJECT_FIELDS = (
    "department, quota, nodeGroupQuotas, overQuota, overQuotaWeight, overQuotaRank, limit, "
    "nodeGroups, interactiveTimeLimit, idleGpuTimeout, fractionPolicy, members, network, "
    "minRuntime"
)


def test_unknown_field_in_a_nested_block_mapping(tmp_path: Path) -> None:
    spec = "spec:\n  policy:\n    cyclePeriod: 5s\n    preemption:\n      enabled: true\n"
    assert problems(tmp_path, text_of("Cluster", spec, name="c")) == [
        "repo.yaml:8:5: Cluster/c: unknown field 'spec.policy.preemption' (allowed: "
        "cyclePeriod, reclaimThreshold, consolidation, staleGangGrace, defaultOverQuotaWeight, "
        "allowOversubscription, minRuntime, fairness)"
    ]


def test_unknown_top_level_field(tmp_path: Path) -> None:
    # the misspelt field's "did you mean" is the one error: not also "missing 'spec'"
    found = problems(tmp_path, text_of("Workload", "specs: {project: p}\n", name="w"))
    assert found == [
        "repo.yaml:5:1: Workload/w: unknown field 'specs': did you mean 'spec'? "
        "(allowed: apiVersion, kind, metadata, spec)",
    ]


def test_a_misspelt_required_field_is_one_error_saying_what_it_looks_like(tmp_path: Path) -> None:
    spec = "spec:\n  departmnet: d\n  quota: {gpu: 1}\n"
    assert problems(tmp_path, text_of("Project", spec, name="p")) == [
        "repo.yaml:6:3: Project/p: unknown field 'spec.departmnet': did you mean "
        f"'department'? (allowed: {PROJECT_FIELDS})"
    ]
    # a field that looks like none is no excuse: the required one is still missing
    spec = "spec:\n  colour: d\n  quota: {gpu: 1}\n"
    assert problems(tmp_path, text_of("Project", spec, name="p"))[0] == (
        "repo.yaml:5:1: Project/p: missing required field 'spec.department'"
    )


def test_missing_required_field_points_at_the_mapping_that_lacks_it(tmp_path: Path) -> None:
    spec = "spec:\n  quota: {gpu: 1}\n"
    assert problems(tmp_path, text_of("Project", spec, name="p")) == [
        "repo.yaml:5:1: Project/p: missing required field 'spec.department'"
    ]


def test_missing_name(tmp_path: Path) -> None:
    text = "apiVersion: gitops-sched.io/v1alpha1\nkind: Cluster\nmetadata:\n  labels: {a: b}\n"
    assert problems(tmp_path, text) == [
        "repo.yaml:3:1: Cluster/?: missing required field 'metadata.name'"
    ]


def test_a_project_needs_a_quota_of_some_form(tmp_path: Path) -> None:
    spec = "spec:\n  department: d\n"
    assert problems(tmp_path, text_of("Project", spec, name="p")) == [
        "repo.yaml:5:1: Project/p: spec: needs quota or nodeGroupQuotas"
    ]


def test_bad_enum_value(tmp_path: Path) -> None:
    spec = "spec:\n  project: p\n  type: batch\n"
    assert problems(tmp_path, text_of("Workload", spec, name="w")) == [
        "repo.yaml:7:9: Workload/w: spec.type: 'batch' is not one of "
        "'train', 'interactive', 'inference'"
    ]


DNS_LABEL = (
    "is not a DNS-1123 label (at most 63 lower-case letters, digits and '-', "
    "starting and ending with a letter or digit)"
)


@pytest.mark.parametrize("name", ["Vision", "vision_team", "-vision", "vision-", "a.b"])
def test_names_must_be_dns_1123_labels(tmp_path: Path, name: str) -> None:
    found = problems(tmp_path, text_of("Department", "spec: {quota: {gpu: 1}}\n", name=name))
    assert found == [f"repo.yaml:4:9: Department/{name}: metadata.name: {name!r} {DNS_LABEL}"]


def test_a_final_newline_is_no_part_of_a_name(tmp_path: Path) -> None:
    """Python's `$` matches before a final newline; a schema's `$` (ECMA-262, RE2) does not."""
    spec = 'spec:\n  network: {allowedNamespaces: ["ingress\\n"]}\n'
    found = problems(tmp_path, text_of("Cluster", spec, name='"a\\n"'))
    # the name escaped too: a raw newline would start what reads as another diagnostic
    assert found == [
        f"repo.yaml:4:9: Cluster/a\\n: metadata.name: 'a\\n' {DNS_LABEL}",
        "repo.yaml:6:33: Cluster/a\\n: spec.network.allowedNamespaces[0]: 'ingress\\n' "
        + DNS_LABEL,
    ]


def test_names_are_at_most_63_characters_and_long_values_are_shortened(tmp_path: Path) -> None:
    name = "a" * 64
    (found,) = problems(tmp_path, text_of("Department", "spec: {quota: {gpu: 1}}\n", name=name))
    assert found.startswith(f"repo.yaml:4:9: Department/{name}: metadata.name: 'aaaa")
    assert found.endswith(f"aaaa' {DNS_LABEL}")
    assert "..." in found
    assert problems(tmp_path, text_of("Department", "spec: {quota: {gpu: 1}}\n", "a" * 63)) == []


def test_references_must_be_dns_1123_labels_too(tmp_path: Path) -> None:
    found = problems(tmp_path, text_of("Workload", "spec:\n  project: Vision\n", name="w"))
    assert found == [f"repo.yaml:6:12: Workload/w: spec.project: 'Vision' {DNS_LABEL}"]


def test_allowed_namespaces_are_dns_1123_labels_listed_once(tmp_path: Path) -> None:
    spec = "spec:\n  network:\n    allowedNamespaces: [monitoring, Ingress, monitoring]\n"
    assert problems(tmp_path, text_of("Cluster", spec, name="c")) == [
        "repo.yaml:7:5: Cluster/c: spec.network.allowedNamespaces: "
        "lists 'monitoring' more than once",
        f"repo.yaml:7:37: Cluster/c: spec.network.allowedNamespaces[1]: 'Ingress' {DNS_LABEL}",
    ]


def test_gpu_and_mig_together_point_at_the_second_request(tmp_path: Path) -> None:
    spec = "spec:\n  project: p\n  gpu: 1\n  mig: 1g.10gb\n"
    assert problems(tmp_path, text_of("Workload", spec, name="w")) == [
        "repo.yaml:8:8: Workload/w: spec.mig: '1g.10gb' conflicts with another GPU request "
        "(use only one of gpu, gpuMemory and mig)"
    ]


def test_gpu_memory_and_mig_together_in_a_template(tmp_path: Path) -> None:
    spec = "spec:\n  gpuMemory: 10Gi\n  mig: 1g.10gb\n"
    found = problems(tmp_path, text_of("Template", spec, name="t"))
    assert found == [
        "repo.yaml:7:8: Template/t: spec.mig: '1g.10gb' conflicts with another GPU request "
        "(use only one of gpu, gpuMemory and mig)"
    ]


@pytest.mark.parametrize("value", ["12x", "1KB", "-1", "1.2.3", "Gi", "1 Gi", ""])
def test_bad_quantity_strings(tmp_path: Path, value: str) -> None:
    spec = f"spec:\n  quota:\n    memory: {json.dumps(value)}\n"
    assert problems(tmp_path, text_of("Department", spec, name="d")) == [
        f"repo.yaml:7:13: Department/d: spec.quota.memory: {value!r} is not a Kubernetes "
        "quantity (e.g. 500m, 4, 1.5, 16Gi)"
    ]


def test_negative_numbers(tmp_path: Path) -> None:
    spec = "spec:\n  quota: {gpu: -1, cpu: -2}\n"
    assert problems(tmp_path, text_of("Department", spec, name="d")) == [
        "repo.yaml:6:16: Department/d: spec.quota.gpu: -1 is less than the minimum of 0",
        "repo.yaml:6:25: Department/d: spec.quota.cpu: -2 is less than the minimum of 0",
    ]


def test_wrong_types_are_shown_in_yaml_spelling(tmp_path: Path) -> None:
    spec = "spec:\n  nodeCount: true\n  gpusPerNode: 1.5\n"
    assert problems(tmp_path, text_of("NodeGroup", spec, name="n")) == [
        "repo.yaml:6:14: NodeGroup/n: spec.nodeCount: true is not an integer",
        "repo.yaml:7:16: NodeGroup/n: spec.gpusPerNode: 1.5 is not an integer",
    ]


def test_bad_duration(tmp_path: Path) -> None:
    spec = "spec:\n  department: d\n  quota: {gpu: 1}\n  idleGpuTimeout: 1 hour\n"
    assert problems(tmp_path, text_of("Project", spec, name="p")) == [
        "repo.yaml:8:19: Project/p: spec.idleGpuTimeout: '1 hour' is not a duration "
        "(e.g. 90s, 30m, 8h, 1h30m, 2d, or seconds)"
    ]


def test_a_stale_gang_grace_is_a_duration(tmp_path: Path) -> None:
    spec = "spec:\n  policy: {staleGangGrace: a minute}\n"
    assert problems(tmp_path, text_of("Cluster", spec)) == [
        "repo.yaml:6:28: Cluster/x: spec.policy.staleGangGrace: 'a minute' is not a duration "
        "(e.g. 90s, 30m, 8h, 1h30m, 2d, or seconds)"
    ]


def test_a_minimum_runtime_takes_durations_and_only_preempt_and_reclaim(tmp_path: Path) -> None:
    department = "spec:\n  quota: {gpu: 1}\n  minRuntime:\n    preempt: ten minutes\n"
    project = (
        "spec:\n  department: d\n  quota: {gpu: 1}\n  minRuntime: {reclaim: 30m, resume: 5m}\n"
    )
    assert problems(
        tmp_path, text_of("Department", department, name="d"), text_of("Project", project)
    ) == [
        "repo.yaml:8:14: Department/d: spec.minRuntime.preempt: 'ten minutes' is not a duration "
        "(e.g. 90s, 30m, 8h, 1h30m, 2d, or seconds)",
        "repo.yaml:17:30: Project/x: unknown field 'spec.minRuntime.resume' (allowed: preempt, "
        "reclaim)",
    ]


def test_unquoted_kubernetes_version(tmp_path: Path) -> None:
    assert problems(tmp_path, text_of("Cluster", "spec:\n  kubernetesVersion: 1.30\n")) == [
        "repo.yaml:6:22: Cluster/x: spec.kubernetesVersion: 1.3 is not a quoted Kubernetes "
        'version such as "1.32" (unquoted, 1.30 would read as 1.3)'
    ]


def test_bad_env_name_points_at_the_key_and_values_must_be_strings(tmp_path: Path) -> None:
    spec = "spec:\n  env:\n    1ST: a\n    EPOCHS: 10\n"
    assert problems(tmp_path, text_of("Template", spec, name="t")) == [
        "repo.yaml:7:5: Template/t: spec.env: '1ST' is not an environment variable name "
        "(letters, digits, '_', '-' and '.', not starting with a digit or '..', nor '.': what "
        "every Kubernetes version takes)",
        "repo.yaml:8:13: Template/t: spec.env.EPOCHS: 10 is not a string "
        "(quote numbers and booleans)",
    ]


def test_errors_inside_lists_name_the_item(tmp_path: Path) -> None:
    spec = "spec:\n  ports:\n    - {name: http, containerPort: 80}\n    - {containerPort: 70000}\n"
    assert problems(tmp_path, text_of("Template", spec, name="t")) == [
        "repo.yaml:8:23: Template/t: spec.ports[1].containerPort: 70000 is greater than the "
        "maximum of 65535"
    ]


def test_keys_that_are_not_plain_words_are_bracketed(tmp_path: Path) -> None:
    spec = "spec:\n  nodeCount: 1\n  nodeSelector:\n    matchLabels: {kubernetes.io/arch: 1}\n"
    assert problems(tmp_path, text_of("NodeGroup", spec, name="n")) == [
        'repo.yaml:8:39: NodeGroup/n: spec.nodeSelector.matchLabels["kubernetes.io/arch"]: '
        "1 is not a string (quote numbers and booleans)"
    ]


def test_every_problem_of_a_document_is_reported(tmp_path: Path) -> None:
    spec = "spec:\n  project: P\n  replicas: 0\n  type: job\n  gpu: 0\n  extra: 1\n"
    assert len(problems(tmp_path, text_of("Workload", spec, name="w"))) == 5


# --- the schema files -------------------------------------------------------------------


def schema_files() -> dict[str, dict]:
    folder = resources.files("gitops_sched") / "schemas"
    return {kind: json.loads((folder / f"{kind.lower()}.json").read_text()) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_a_valid_2020_12_schema_with_id_and_title(kind: str) -> None:
    schema = schema_for(kind)
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == f"https://gitops-sched.io/schemas/v1alpha1/{kind.lower()}.json"
    assert schema["title"] == kind
    assert schema["properties"]["kind"]["const"] == kind


def properties(schema: Any, path: str = "") -> list[tuple[str, dict]]:
    """Every named field of a schema, nested ones and those of $defs included."""
    found: list[tuple[str, dict]] = []
    if isinstance(schema, dict):
        for name, sub in schema.get("properties", {}).items():
            found += [(f"{path}.{name}", sub), *properties(sub, f"{path}.{name}")]
        subs = [*schema.get("$defs", {}).items()]
        subs += [(key, schema[key]) for key in ("items", "additionalProperties") if key in schema]
        for name, sub in subs:
            found += properties(sub, f"{path}/{name}")
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_has_a_description(kind: str) -> None:
    undocumented = [path for path, sub in properties(schema_for(kind)) if "description" not in sub]
    assert undocumented == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_object_with_fields_rejects_unknown_ones(kind: str) -> None:
    def objects(schema: Any) -> list[dict]:
        """Objects with fields; dependentSchemas only add rules to their object's fields."""
        if isinstance(schema, dict):
            own = [schema] if "properties" in schema else []
            subs = [v for k, v in schema.items() if k != "dependentSchemas"]
            return own + [o for sub in subs for o in objects(sub)]
        return [o for sub in schema for o in objects(sub)] if isinstance(schema, list) else []

    assert all(o.get("additionalProperties") is False for o in objects(schema_for(kind)))


def test_shared_definitions_are_the_same_in_every_file() -> None:
    definitions: dict[str, list] = {}
    for schema in schema_files().values():
        for name, definition in schema["$defs"].items():
            definitions.setdefault(name, []).append(definition)
    assert {name: len({json.dumps(d) for d in defs}) for name, defs in definitions.items()} == {
        name: 1 for name in definitions
    }


def test_template_and_workload_share_the_pod_fields_of_the_model() -> None:
    template, workload = (schema_for(k)["properties"]["spec"] for k in ("Template", "Workload"))
    pod = {k: v for k, v in template["properties"].items() if k != "default"}
    assert set(pod) == set(POD_FIELDS)
    assert {k: workload["properties"][k] for k in POD_FIELDS} == pod
    assert template["dependentSchemas"] == workload["dependentSchemas"]


def test_cluster_defaults_are_the_models() -> None:
    spec = schema_for("Cluster")["properties"]["spec"]["properties"]
    policy = spec["policy"]["properties"]
    doc = Document("c.yaml", 0, {"metadata": {"name": "c"}}, {})
    cluster = build_cluster(doc)
    assert (
        cluster.kubernetes_version,
        cluster.system_namespace,
        cluster.namespace_prefix,
        cluster.scheduler_name,
    ) == tuple(
        spec[f]["default"]
        for f in ("kubernetesVersion", "systemNamespace", "namespacePrefix", "schedulerName")
    )
    assert cluster.policy.cycle_period_s == 10
    assert policy["cyclePeriod"]["default"] == "10s"
    assert cluster.policy.stale_gang_grace_s == 60 == STALE_GANG_GRACE_S  # KAI's default
    assert policy["staleGangGrace"]["default"] == "60s"
    assert (
        cluster.policy.reclaim_threshold,
        cluster.policy.consolidation,
        cluster.policy.over_quota_weight,
        cluster.policy.allow_oversubscription,
    ) == tuple(
        policy[f]["default"]
        for f in (
            "reclaimThreshold",
            "consolidation",
            "defaultOverQuotaWeight",
            "allowOversubscription",
        )
    )


def test_schema_for_returns_a_copy() -> None:
    schema_for("Workload")["title"] = "changed"
    assert schema_for("Workload")["title"] == "Workload"


def test_schema_for_an_unknown_kind_raises() -> None:
    with pytest.raises(ValueError, match="unknown kind 'Queue'"):
        schema_for("Queue")


# --- the fast path agrees with jsonschema -----------------------------------------------


def mappings(value: Any) -> list[dict]:
    """Every mapping inside `value`, itself included."""
    if isinstance(value, dict):
        return [value] + [m for child in value.values() for m in mappings(child)]
    if isinstance(value, list):
        return [m for child in value for m in mappings(child)]
    return []


def field_names(kind: str) -> list[str]:
    return sorted({path.rsplit(".", 1)[-1] for path, _ in properties(schema_for(kind))})


SCALARS = st.sampled_from(
    [None, True, False, 0, 1, -1, 2, 7, 0.5, 1.0, 63, 65535, 65536, "", "a", "A", "a" * 64]
    + ["x-y", "1Gi", "12x", "5m", "1g.10gb", "1g.10gb+me", "train", "TCP", "/data", "1.32"]
    + ["quota", "mixed", "http", "allowed", "gpu-worker", "MY_VAR", "9VAR"]
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["gpu", "cpu", "name", "a", "1x"]), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=examples(100), deadline=None)
@given(data=st.data())
def test_valid_exactly_when_jsonschema_says_so(kind: str, data: st.DataObject) -> None:
    """The fast path (a compiled check before jsonschema) never lets an invalid document by."""
    document = yaml.safe_load(text_of(kind, FULL[kind]))
    names = [*field_names(kind), "bogus"]
    for _ in range(data.draw(st.integers(1, 3))):
        target = data.draw(st.sampled_from(mappings(document)))
        key = data.draw(st.sampled_from(sorted({*target, *names})))
        if key in target and data.draw(st.booleans()):
            del target[key]
        else:
            target[key] = data.draw(VALUES)
    expected = SchemaValidator(schema_for(kind)).is_valid(document)
    valid = validate_documents([Document("f.yaml", 0, document, {})], Diagnostics())
    assert bool(valid) == expected


# --- hostile values: rejected by the schema stage (both paths), at the value ---------------

HUGE = "9" * 400
SHOWN = "999999999999999999...9999999999999999999"  # as messages shorten HUGE
QUANTITY = "is not a Kubernetes quantity (e.g. 500m, 4, 1.5, 16Gi)"
DECIMAL = "is not an integer (write it without the decimal point)"
NODE_GROUP = "spec:\n  role: gpu-worker\n  nodeCount: 2\n  gpusPerNode: 8\n"


@pytest.mark.parametrize(
    ("kind", "spec", "problem"),
    [
        (
            "NodeGroup",
            NODE_GROUP.replace("2\n", ".inf\n"),
            "7:14: OBJ: spec.nodeCount: inf is not a finite number",
        ),
        (
            "NodeGroup",
            NODE_GROUP.replace("2\n", "2.0\n"),
            "7:14: OBJ: spec.nodeCount: 2.0 " + DECIMAL,
        ),
        (
            "NodeGroup",
            NODE_GROUP.replace("2\n", f"{HUGE}\n"),
            "7:14: OBJ: spec.nodeCount: " + SHOWN + " is greater than the maximum of 100000",
        ),
        (
            "NodeGroup",
            NODE_GROUP.replace("2\n", "1000000000\n"),
            "7:14: OBJ: spec.nodeCount: 1000000000 is greater than the maximum of 100000",
        ),
        (
            "NodeGroup",
            NODE_GROUP.replace(" 8\n", " 1000000\n"),
            "8:16: OBJ: spec.gpusPerNode: 1000000 is greater than the maximum of 64",
        ),
        (
            "NodeGroup",
            NODE_GROUP + "  memoryPerNode: .nan\n",
            "9:18: OBJ: spec.memoryPerNode: nan is not a finite number",
        ),
        (
            "NodeGroup",
            NODE_GROUP + '  memoryPerNode: "5Gi\\n"\n',
            "9:18: OBJ: spec.memoryPerNode: '5Gi\\n' " + QUANTITY,
        ),
        (
            "NodeGroup",
            NODE_GROUP + "  memoryPerNode: 1e999\n",
            "9:18: OBJ: spec.memoryPerNode: '1e999' " + QUANTITY,
        ),
        (
            "NodeGroup",
            NODE_GROUP + "  mig:\n    enabled: true\n    byGpu: [{gpus: [1.0], layout: []}]\n",
            "11:21: OBJ: spec.mig.byGpu[0].gpus[0]: 1.0 " + DECIMAL,
        ),
        (
            "Project",
            "spec:\n  department: d\n  quota: {gpu: .inf}\n",
            "7:16: OBJ: spec.quota.gpu: inf is not a finite number",
        ),
        (
            "Project",
            f"spec:\n  department: d\n  quota: {{gpu: {HUGE}}}\n",
            "7:16: OBJ: spec.quota.gpu: " + SHOWN + " is greater than the maximum of 1000000",
        ),
        (
            "Workload",
            "spec:\n  project: p\n  gpu: .nan\n",
            "7:8: OBJ: spec.gpu: nan is not a finite number",
        ),
        (
            "Workload",
            "spec:\n  project: p\n  replicas: 2.0\n",
            "7:13: OBJ: spec.replicas: 2.0 " + DECIMAL,
        ),
    ],
)
def test_non_finite_huge_and_float_integers_are_rejected(
    tmp_path: Path, kind: str, spec: str, problem: str
) -> None:
    text = text_of(kind, spec, name="x")
    data = yaml.safe_load(text)
    assert not quick_check(kind)(data)  # the fast path never accepts what jsonschema rejects
    assert problems(tmp_path, text) == [f"repo.yaml:{problem.replace('OBJ', f'{kind}/x')}"]
    result = CliRunner().invoke(main, ["validate", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_mapping_as_kind_is_an_unknown_kind(tmp_path: Path) -> None:
    text = "apiVersion: gitops-sched.io/v1alpha1\nkind: {}\nmetadata: {name: x}\n"
    assert problems(tmp_path, text) == [
        "repo.yaml:2:7: ?/x: kind is an empty mapping (expected one of Cluster, NodeGroup, "
        "Department, Project, Template, Workload, Simulation)"
    ]
    result = CliRunner().invoke(main, ["validate", str(tmp_path)])
    assert result.exit_code == 1, result.output
