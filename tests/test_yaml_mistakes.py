"""Common YAML mistakes give one error where the mistake is, with a hint, and no echoes.

A file that fails to parse leaves its objects unknown, not missing: references to names it
may define, "no Cluster", and sums over the kinds it may hold are not reported elsewhere.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gitops_sched.cli import main

API = "apiVersion: gitops-sched.io/v1alpha1\n"
CLUSTER = f"""\
{API}kind: Cluster
metadata:
  name: lab
spec:
  kubernetesVersion: "1.32"
  namespacePrefix: team-
"""
NODES = f"""\
{API}kind: NodeGroup
metadata:
  name: a100
spec:
  nodeSelector: {{matchLabels: {{pool: a100}}}}
  nodeCount: 2
  gpusPerNode: 8
  gpu:
    model: A100-SXM4-80GB
"""
TEAMS = f"""\
{API}kind: Department
metadata:
  name: research
spec:
  quota:
    gpu: 16
---
{API}kind: Project
metadata:
  name: vision
spec:
  department: research
  quota:
    gpu: 8
"""
WORKLOADS = f"""\
{API}kind: Workload
metadata:
  name: resnet
spec:
  project: vision
  gpu: 1
---
{API}kind: Workload
metadata:
  name: bert
spec:
  project: vision
  gpu: 1
"""


def _validate(root: Path, files: dict[str, str]) -> tuple[int, list[str]]:
    for name, text in files.items():
        (root / name).write_text(text)
    result = CliRunner().invoke(main, ["validate", str(root)])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    prefix = f"{root.as_posix()}/"
    return result.exit_code, [line.removeprefix(prefix) for line in result.stderr.splitlines()]


def _repo(**changed: str) -> dict[str, str]:
    files = {"cluster.yaml": CLUSTER, "nodes.yaml": NODES, "teams.yaml": TEAMS}
    return {**files, "workloads.yaml": WORKLOADS, **changed}


MISTAKES = {
    "tab": (
        TEAMS.replace("  department: research", "\tdepartment: research"),
        "teams.yaml:14:1: error GS106: YAML syntax error: ",
        "; line 14 is indented with a tab: YAML indents with spaces only",
    ),
    "key-too-deep": (
        TEAMS.replace("  quota:\n    gpu: 8", "    quota:\n      gpu: 8"),
        "teams.yaml:15:10: error GS106: YAML syntax error: mapping values are not allowed ",
        "; `quota:` is indented deeper than `department:` on line 14, which already has a "
        "value: indent it like `department:` (under `spec:`)?",
    ),
    "key-between-levels": (
        TEAMS + "   overQuotaWeight: 2\n",
        "teams.yaml:17:4: error GS106: YAML syntax error: while parsing a block mapping, ",
        "; line 17 is indented 3 spaces, between `quota:` (2) and `gpu:` (4): indent it like "
        "`gpu:` (under `quota:`) or like `quota:` (under `spec:`)?",
    ),
    "key-not-lined-up": (
        TEAMS.replace("  department: research", "   department: research"),
        "teams.yaml:15:3: error GS106: YAML syntax error: while parsing a block mapping, ",
        "; line 15 is indented 2 spaces, between `spec:` (0) and `department:` (3): indent it "
        "like `department:` (under `spec:`) or like `spec:`?",
    ),
}


@pytest.mark.usefixtures("each_yaml_parser")  # the parsers word the error differently
@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_syntax_mistake_is_one_error_with_a_hint_and_no_echoes(
    tmp_path: Path, mistake: str
) -> None:
    teams, starts, ends = MISTAKES[mistake]
    code, lines = _validate(tmp_path, _repo(**{"teams.yaml": teams}))
    assert code == 1
    # the workloads' project is in the broken file: no "unknown Project 'vision'" for them
    [line] = lines
    assert line.startswith(starts) and line.endswith(ends), line


@pytest.mark.usefixtures("each_yaml_parser")
def test_a_name_the_broken_file_does_not_mention_is_still_unknown(tmp_path: Path) -> None:
    teams = TEAMS.replace("  department: research", "\tdepartment: research")
    workloads = WORKLOADS.replace(
        "name: bert\nspec:\n  project: vision", "name: bert\nspec:\n  project: nlp"
    )
    code, lines = _validate(tmp_path, _repo(**{"teams.yaml": teams, "workloads.yaml": workloads}))
    assert code == 1
    assert lines[1:] == [
        "workloads.yaml:14:12: error GS304 Workload/bert: unknown Project 'nlp' "
        "(no Project is defined)"
    ]


def test_a_broken_cluster_file_is_not_also_a_missing_cluster(tmp_path: Path) -> None:
    cluster = CLUSTER.replace('  kubernetesVersion: "1.32"', '  kubernetesVersion: "1.32\n')
    code, lines = _validate(tmp_path, _repo(**{"cluster.yaml": cluster}))
    assert code == 1
    [line] = lines
    assert line.startswith("cluster.yaml:") and " GS106: YAML syntax error" in line, line


def test_a_broken_node_group_file_leaves_capacity_sums_unchecked(tmp_path: Path) -> None:
    # without the 16 GPUs of the broken file, research's 16-GPU quota would be "over the
    # cluster's capacity" and every workload "can never fit"
    nodes = NODES.replace("  nodeCount: 2", "  nodeCount: 2\n nodeCount: 3")
    code, lines = _validate(tmp_path, _repo(**{"nodes.yaml": nodes}))
    assert code == 1
    [line] = lines
    assert line.startswith("nodes.yaml:8:2:") and " GS106: YAML syntax error" in line, line


def test_a_dropped_document_leaves_its_names_unknown_too(tmp_path: Path) -> None:
    teams = TEAMS.replace("  quota:\n    gpu: 8", "  quota:\n    gpu: 8\n  department: again")
    code, lines = _validate(tmp_path, _repo(**{"teams.yaml": teams}))
    assert code == 1
    assert lines == ["teams.yaml:17:3: error GS107: duplicate key 'department' (first at line 14)"]


@pytest.mark.parametrize(
    ("teams", "problem"),
    [
        (
            TEAMS.replace("  department: research\n  quota:", "  department: research\nquota:"),
            "teams.yaml:15:1: error GS203 Project/vision: unknown field 'quota': indent it "
            "under 'spec'? (allowed: apiVersion, kind, metadata, spec)",
        ),
        (
            TEAMS + "    overQuotaWeight: 2\n",
            "teams.yaml:17:5: error GS203 Project/vision: unknown field "
            "'spec.quota.overQuotaWeight': indented one level too deep? 'overQuotaWeight' is a "
            "field of 'spec' (allowed: gpu, cpu, memory)",
        ),
    ],
    ids=["too-shallow", "too-deep"],
)
def test_a_key_indented_a_level_wrong_that_still_parses_gets_the_hint(
    tmp_path: Path, teams: str, problem: str
) -> None:
    code, lines = _validate(tmp_path, _repo(**{"teams.yaml": teams}))
    assert code == 1
    assert problem in lines


# --- the invariant, over the example repos --------------------------------------------------

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
VALID_REPOS = {
    name: {
        p.relative_to(EXAMPLES / name).as_posix(): p.read_text()
        for p in (EXAMPLES / name).rglob("*.yaml")
    }
    for name in ("clusters/netapp-dgx", "walkthrough")
}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_a_file_that_does_not_parse_has_every_error_to_itself(
    tmp_path: Path, data: st.DataObject
) -> None:
    # a valid repo with one file broken by a tab before one of its lines: whatever that file
    # defined, every error is in that file (no unknown references, no missing Cluster, no
    # sums over what is left)
    name = data.draw(st.sampled_from(sorted(VALID_REPOS)))
    files = VALID_REPOS[name]
    broken = data.draw(st.sampled_from(sorted(files)))
    lines = files[broken].splitlines(keepends=True)
    at = data.draw(st.integers(0, len(lines) - 1))
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    for path, text in files.items():
        if path == broken:
            text = "".join([*lines[:at], "\t" + lines[at], *lines[at + 1 :]])
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    code, found = _validate(root, {})
    assume(any(" error GS106: " in line for line in found))  # a tab in a comment is fine
    assert code == 1
    assert [line for line in found if not line.startswith(f"{broken}:")] == []


def test_a_key_without_a_space_after_its_colon_gets_the_hint(tmp_path: Path) -> None:
    teams = TEAMS.replace("  quota:\n    gpu: 8", "  quota: gpu:8")
    code, lines = _validate(tmp_path, _repo(**{"teams.yaml": teams}))
    assert code == 1
    assert lines == [
        "teams.yaml:15:10: error GS205 Project/vision: spec.quota: 'gpu:8' is not a mapping "
        "(a space missing after ':'?)"
    ]
