"""Field shapes: a value of the wrong shape is told in YAML words with the shape we want
(never a Python repr), and an unknown field lists the fields allowed where it is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.cli import main
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.document import KINDS
from gitops_sched.config.schema import schema_for, validate_documents
from gitops_sched.config.yamlbuild import load_text
from gitops_sched.contract.labels import API_VERSION

WORKLOAD = f"""\
apiVersion: {API_VERSION}
kind: Workload
metadata:
  name: resnet
spec:
  project: vision
  gpu: 1
"""


def _validate_file(root: Path, text: str) -> list[str]:
    (root / "w.yaml").write_text(text)
    result = CliRunner().invoke(main, ["validate", str(root)])
    assert result.exit_code == 1, result.output
    return [line.removeprefix(f"{root.as_posix()}/") for line in result.stderr.splitlines()]


def test_env_as_a_kubernetes_list_says_the_mapping_it_takes(tmp_path: Path) -> None:
    text = WORKLOAD + "  env:\n    - name: PROJECT\n      value: vision\n"
    assert _validate_file(tmp_path, text)[1:] == [  # after "no Cluster document"
        "w.yaml:8:3: error GS205 Workload/resnet: spec.env: must be a mapping of variable name "
        "to value, e.g. `env: {PROJECT: vision}` (not Kubernetes' list of `- name: PROJECT` / "
        "`value: vision` entries)"
    ]


def test_kubernetes_resource_requests_list_the_allowed_fields_and_the_shape(
    tmp_path: Path,
) -> None:
    text = WORKLOAD + "  resources:\n    requests:\n      cpu: 4\n"
    assert _validate_file(tmp_path, text)[1:] == [
        "w.yaml:9:5: error GS203 Workload/resnet: unknown field 'spec.resources.requests' "
        "(allowed: cpu, memory); spec.resources takes cpu and memory per pod directly, e.g. "
        "`resources: {cpu: 4, memory: 16Gi}` (not Kubernetes' requests/limits: both are set "
        "to these values)"
    ]


def test_a_scalar_or_list_where_a_mapping_belongs_lists_the_mapping_s_fields(
    tmp_path: Path,
) -> None:
    text = WORKLOAD.replace("Workload", "Project").replace(
        "project: vision\n  gpu: 1", "department: research\n  quota: 8\n  members: [alice]"
    )
    assert _validate_file(tmp_path, text)[1:] == [
        "w.yaml:7:10: error GS205 Project/resnet: spec.quota: 8 is not a mapping "
        "(its fields: gpu, cpu, memory)",
        "w.yaml:8:3: error GS205 Project/resnet: spec.members: a list of 1 item is not a "
        "mapping (its fields: users, groups)",
    ]


# --- properties over every field of every kind ----------------------------------------------

# lower-case words only: a generated `None` or `True` must not pass for Python's
_WORDS = st.text("abcxyz019-", min_size=1, max_size=5)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | _WORDS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_WORDS, inner, max_size=3),
    max_leaves=6,
)
# what Python prints for a list, a mapping or a constant, and jsonschema's words for types
_PYTHON = re.compile(r"[\[{]'|\[\]|\{\}|\[\{|\bNone\b|\bTrue\b|\bFalse\b|of type '")


def _spec_fields(kind: str) -> list[str]:
    return list(schema_for(kind)["properties"]["spec"].get("properties", {}))


@st.composite
def _documents(draw: st.DrawFn) -> tuple[str, str, Any]:
    kind = draw(st.sampled_from(KINDS))
    field = draw(st.sampled_from(_spec_fields(kind) or ["x"]))
    return kind, field, draw(_VALUES)


def _messages(kind: str, spec: dict[str, Any]) -> list[str]:
    data = {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": "x"}, "spec": spec}
    diagnostics = Diagnostics()
    validate_documents(load_text(yaml.safe_dump(data), "x.yaml", diagnostics), diagnostics)
    return [d.message for d in diagnostics.items]


# a message that says what a value "is not" names the value first
_NO_SUBJECT = re.compile(r"^[^ ]+: is ")


@settings(max_examples=300)
@given(_documents())
def test_no_message_shows_a_python_repr(document: tuple[str, str, Any]) -> None:
    kind, field, value = document
    for message in _messages(kind, {field: value}):
        assert not _PYTHON.search(message), message
        assert not _NO_SUBJECT.search(message), message


def test_a_list_or_mapping_where_a_string_belongs_is_named_by_what_it_is() -> None:
    spec = {"project": "p", "gpu": 1, "env": {"B": ["x"], "D": {"x": 1}}}
    assert sorted(_messages("Workload", spec)) == [
        "spec.env.B: a list of 1 item is not a string (quote numbers and booleans)",
        "spec.env.D: a mapping of 1 key is not a string (quote numbers and booleans)",
    ]


@settings(max_examples=100)
@given(st.sampled_from(KINDS), _WORDS.map(lambda word: f"zz{word}"))
def test_every_unknown_field_lists_the_allowed_ones(kind: str, key: str) -> None:
    [message] = [m for m in _messages(kind, {key: 1}) if m.startswith("unknown field")]
    assert f"(allowed: {', '.join(_spec_fields(kind))})" in message
