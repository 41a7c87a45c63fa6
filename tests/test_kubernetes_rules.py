"""What Kubernetes would refuse is refused by `validate`, at the line the mistake is on.

Each case is a repo that rendered objects the API server refuses (tests/
test_kubernetes_rules_apiserver.py shows it refusing them): now `validate` names the
file, line and object with the rule's code and exits 1, and `render` exits 1 writing
nothing. The label syntax is property-tested against Kubernetes' own regular expressions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.cli import main
from gitops_sched.config import codes
from gitops_sched.config.codes import Code
from gitops_sched.config.kubernetes_names import label_key_problem, valid_label_value
from testkit.config_builders import doc, node_group
from tests.conftest import examples

CLUSTER = doc("Cluster", "lab", namespacePrefix="team-")
A100 = node_group("a100", nodeCount=2, gpusPerNode=8, gpu={"model": "A100-SXM4-80GB"})
DEPARTMENT = doc("Department", "research", quota={"gpu": 16})
PROJECT = doc("Project", "vision", department="research", quota={"gpu": 8})


def workload(name: str = "w", **spec: Any) -> dict[str, Any]:
    """An inference workload; its image from its template, if it names one."""
    image = {} if "template" in spec else {"image": "pytorch:24.05"}
    return doc("Workload", name, project="vision", type="inference", gpu=1, **image, **spec)


BASE = [CLUSTER, A100, DEPARTMENT, PROJECT, workload()]  # a workload: a pod to refuse


def template(**spec: Any) -> dict[str, Any]:
    return doc("Template", "t", **{"image": "pytorch:24.05", **spec})


def vol(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "claimName": name, "mountPath": path}


def with_spec(document: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {**document, "spec": {**document["spec"], **spec}}


# (documents replacing or added to BASE, code, object, text on the line the error points at)
CASES: dict[str, tuple[list[dict[str, Any]], Code, str, str]] = {
    "mount path twice": (
        [workload(volumes=[vol("a", "/data"), vol("b", "/data")])],
        codes.MOUNT_PATH_TWICE,
        "Workload/w",
        "mountPath: /data",
    ),
    "a volume at /dev/shm beside sharedMemory": (
        [template(sharedMemory="1Gi"), workload(template="t", volumes=[vol("a", "/dev/shm")])],
        codes.MOUNT_PATH_TWICE,
        "Workload/w",
        "mountPath: /dev/shm",
    ),
    "mount paths that meet once rendered": (
        [
            template(volumes=[vol("a", "/x/{{ project.name }}"), vol("b", "/x/{{ 'vision' }}")]),
            workload(template="t"),
        ],
        codes.MOUNT_PATH_TWICE,
        "Template/t",
        "mountPath: /x/{{ 'vision' }}",
    ),
    "port name twice": (
        [
            workload(
                ports=[{"containerPort": 80, "name": "web"}, {"containerPort": 81, "name": "web"}]
            )
        ],
        codes.PORT_TWICE,
        "Workload/w",
        "name: web",
    ),
    "an unnamed port and one named after its number": (
        [
            template(ports=[{"containerPort": 80}, {"containerPort": 81, "name": "port-80"}]),
            workload(template="t"),
        ],
        codes.PORT_TWICE,
        "Template/t",
        "name: port-80",
    ),
    "containerPort and protocol twice": (
        [workload(ports=[{"containerPort": 80}, {"containerPort": 80, "name": "web"}])],
        codes.PORT_TWICE,
        "Workload/w",
        "containerPort: 80",
    ),
    "node selector key": (
        [with_spec(A100, nodeSelector={"matchLabels": {"gpu type": "a100"}})],
        codes.BAD_LABEL_KEY,
        "NodeGroup/a100",
        "gpu type: a100",
    ),
    "node selector key with a bad prefix": (
        [with_spec(A100, nodeSelector={"matchLabels": {"Nvidia.com/gpu": "a100"}})],
        codes.BAD_LABEL_KEY,
        "NodeGroup/a100",
        "Nvidia.com/gpu: a100",
    ),
    "node selector value": (
        [with_spec(A100, nodeSelector={"matchLabels": {"pool": "a" * 64}})],
        codes.BAD_LABEL_VALUE,
        "NodeGroup/a100",
        "a" * 64,
    ),
    "topology label": (
        [with_spec(A100, topology={"label": "rack/"})],
        codes.BAD_LABEL_KEY,
        "NodeGroup/a100",
        "label: rack/",
    ),
    "a document's own label key": (
        [{**PROJECT, "metadata": {"name": "vision", "labels": {"team name": "cv"}}}],
        codes.BAD_LABEL_KEY,
        "Project/vision",
        "team name: cv",
    ),
    "a templated label value": (
        [{**workload(), "metadata": {"name": "w", "labels": {"team": "{{ project.name }}"}}}],
        codes.BAD_LABEL_VALUE,
        "Workload/w",
        "team: '{{ project.name }}'",
    ),
    "an annotation key": (
        [{**PROJECT, "metadata": {"name": "vision", "annotations": {"example.com/": "x"}}}],
        codes.BAD_LABEL_KEY,
        "Project/vision",
        "example.com/: x",
    ),
    "schedulerName": (
        [with_spec(CLUSTER, schedulerName="My_Scheduler")],
        codes.INVALID_VALUE,
        "Cluster/lab",
        "schedulerName: My_Scheduler",
    ),
    "an empty member": (
        [with_spec(PROJECT, members={"users": ["alice", ""]})],
        codes.INVALID_VALUE,
        "Project/vision",
        "''",
    ),
    "a member of spaces": (
        [with_spec(PROJECT, members={"groups": ["  "]})],
        codes.INVALID_VALUE,
        "Project/vision",
        "'  '",
    ),
    "an empty admin": (
        [with_spec(DEPARTMENT, admins=[""])],
        codes.INVALID_VALUE,
        "Department/research",
        "''",
    ),
    "a template rendering an empty image": (
        [template(image="{{ '' }}"), workload(template="t")],
        codes.OUT_OF_RANGE,
        "Template/t",
        "image: '{{ '''' }}'",
    ),
    "a workload rendering an empty claim name": (
        [workload(volumes=[{"name": "a", "claimName": "{{ '' }}", "mountPath": "/a"}])],
        codes.OUT_OF_RANGE,
        "Workload/w",
        "claimName: '{{ '''' }}'",
    ),
}


def write_repo(path: Path, documents: list[dict[str, Any]]) -> None:
    """BASE with `documents` in place of the base documents of their kind and name."""
    names = {(d["kind"], d["metadata"]["name"]) for d in documents}
    base = [d for d in BASE if (d["kind"], d["metadata"]["name"]) not in names]
    path.mkdir()
    (path / "repo.yaml").write_text(yaml.safe_dump_all([*base, *documents], sort_keys=False))


TEXT = re.compile(r"(?P<file>[^:]+):(?P<line>\d+):\d+: error (?P<code>GS\d+) (?P<obj>[^:]+): ")


@pytest.mark.parametrize("case", CASES)
def test_validate_refuses_what_kubernetes_would_at_its_line(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents, code, obj, text = CASES[case]
    monkeypatch.chdir(tmp_path)
    write_repo(tmp_path / "repo", documents)
    result = CliRunner().invoke(main, ["validate", "repo"])
    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()  # one mistake, one error
    match = TEXT.match(line)
    assert match, line
    assert (match["file"], match["code"], match["obj"]) == ("repo/repo.yaml", code.id, obj)
    source = (tmp_path / match["file"]).read_text().splitlines()[int(match["line"]) - 1]
    assert text in source, (line, source)
    rendered = CliRunner().invoke(main, ["render", "repo", "-o", "out"])
    assert rendered.exit_code == 1 and line in rendered.output
    assert not (tmp_path / "out").exists()


def test_a_templated_label_value_is_told_labels_are_not_rendered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jinja2 renders pod fields only: a label written `{{ project.name }}` reaches the API
    server as those characters, and the error says why they were not rendered."""
    monkeypatch.chdir(tmp_path)
    write_repo(tmp_path / "repo", CASES["a templated label value"][0])
    result = CliRunner().invoke(main, ["validate", "repo"])
    assert result.exit_code == 1
    assert "labels are not rendered: Jinja2 is for pod fields" in result.output, result.output


# The neighbours of each mistake, which Kubernetes takes: one port number for TCP and UDP
# (unnamed, as `port-53` and `port-53-udp`), a mount below /dev/shm, a prefixed selector
# key with an empty value, a dotted scheduler name, a member name with a space inside,
# annotation keys Kubernetes checks in lower case, an image rendered from the project's name,
# environment variables named with '.' and '-' (Kubernetes' C-identifier-like rule).
ACCEPTED = [
    with_spec(A100, nodeSelector={"matchLabels": {"nvidia.com/gpu.product": ""}}),
    with_spec(CLUSTER, schedulerName="kai.scheduler-1"),
    {
        **with_spec(PROJECT, members={"users": ["Alice Smith"], "groups": ["ml:team"]}),
        "metadata": {
            "name": "vision",
            "annotations": {
                "Example.COM/Some_Key": "x",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
        },
    },
    template(
        image="{{ project.name }}:1",
        sharedMemory="1Gi",
        ports=[
            {"containerPort": 53},
            {"containerPort": 53, "protocol": "UDP"},
            {"containerPort": 54, "protocol": "UDP", "name": "dns"},
        ],
    ),
    workload(
        template="t",
        volumes=[vol("a", "/dev/shm/x"), vol("b", "/data")],
        env={"spring.profiles.active": "prod", "log-level": "info", "_X": "1"},
    ),
]


def test_what_kubernetes_takes_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_repo(tmp_path / "repo", ACCEPTED)
    result = CliRunner().invoke(main, ["validate", "repo"])
    assert result.exit_code == 0, result.output


# Kubernetes' own expressions (apimachinery/pkg/util/validation): a qualified name's
# parts, and a label value
K8S_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
K8S_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
K8S_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def kubernetes_accepts_key(key: str) -> bool:
    """IsQualifiedName, as apimachinery writes it."""
    parts = key.split("/")
    if len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not K8S_SUBDOMAIN.fullmatch(prefix):
            return False
    elif len(parts) == 1:
        name = parts[0]
    else:
        return False
    return 0 < len(name) <= 63 and K8S_NAME.fullmatch(name) is not None


def kubernetes_accepts_value(value: str) -> bool:
    return len(value) <= 63 and K8S_VALUE.fullmatch(value) is not None


NAME_CHARS = st.sampled_from("aZ09-_./ \n:é")
SEGMENT = st.text(NAME_CHARS, max_size=70)
KEYS = st.one_of(
    SEGMENT,
    st.builds(lambda p, n: f"{p}/{n}", SEGMENT, SEGMENT),
    st.from_regex(K8S_SUBDOMAIN, fullmatch=True).map(lambda p: f"{p}/x"),
    st.from_regex(K8S_NAME, fullmatch=True),
)


@settings(max_examples=examples(300))
@given(KEYS)
def test_a_label_key_passes_exactly_when_kubernetes_takes_it(key: str) -> None:
    assert (label_key_problem(key) is None) == kubernetes_accepts_key(key)


@settings(max_examples=examples(300))
@given(st.one_of(SEGMENT, st.from_regex(K8S_VALUE, fullmatch=True)))
def test_a_label_value_passes_exactly_when_kubernetes_takes_it(value: str) -> None:
    assert valid_label_value(value) == kubernetes_accepts_value(value)
