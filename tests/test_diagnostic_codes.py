"""Diagnostic codes: one registry, every code used, every diagnostic coded, every format
showing it, `plan` comparing problems by code and object, and the README listing them all."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gitops_sched.cli import main
from gitops_sched.config import codes
from gitops_sched.config.codes import CODES, Code
from gitops_sched.config.diagnostics import (
    Diagnostic,
    Diagnostics,
    Location,
    Severity,
    format_diagnostics,
)
from gitops_sched.plan.warnings import fixed_problems, new_problems
from gitops_sched.validate import check_repo
from testkit.config_builders import doc, node_group

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gitops_sched"
EXAMPLES = ROOT / "examples" / "clusters"
README = ROOT / "README.md"
START, END = "<!-- codes:start -->", "<!-- codes:end -->"

# hostile files the examples cannot hold, each with the code it must get
LOADER_CASES = {
    "too-deep.yaml": ("a: " + "[" * 70 + "]" * 70 + "\n", codes.TOO_DEEP),
    "merge.yaml": ("a: &x {b: 1}\nc:\n  <<: *x\n", codes.UNSUPPORTED_YAML),
    "tag.yaml": ("a: !!int abc\n", codes.BAD_SCALAR),
    "list.yaml": ("- 1\n- 2\n", codes.NOT_A_MAPPING),
    "empty.yaml": ("---\n---\na: 1\n", codes.EMPTY_DOCUMENT),
}


def _constants() -> dict[str, Code]:
    return {name: value for name, value in vars(codes).items() if isinstance(value, Code)}


def codes_table() -> str:
    """The README's list of codes, generated from the registry."""
    rows = [f"| `{c.id}` | {c.title} | {c.hint} |" for c in sorted(CODES.values(), key=str)]
    return "\n".join(["| Code | Problem | Usual fix |", "|---|---|---|", *rows])


def test_codes_are_grouped_by_family_and_each_constant_is_registered_once() -> None:
    assert all(re.fullmatch(r"GS[1-9]\d\d", code) for code in CODES)
    assert sorted(_constants().values(), key=str) == sorted(CODES.values(), key=str)
    assert len({c.title for c in CODES.values()}) == len(CODES)  # no two codes alike


def test_every_registered_code_is_used_by_the_package() -> None:
    sources = "\n".join(
        path.read_text() for path in PACKAGE.rglob("*.py") if path.name != "codes.py"
    )
    unused = [name for name in _constants() if not re.search(rf"\b{name}\b", sources)]
    assert unused == []


def _every_diagnostic(tmp_path: Path) -> list[Diagnostic]:
    """Validate's diagnostics over every example repo, broken or not, and hostile files."""
    found = []
    for repo in sorted(p for p in EXAMPLES.rglob("cluster.yaml")):
        found += check_repo(repo.parent)[1].items
    for name, (text, _) in LOADER_CASES.items():
        (tmp_path / name).write_text(text)
    found += check_repo(tmp_path)[1].items
    return found


def test_every_diagnostic_has_a_registered_code(tmp_path: Path) -> None:
    found = _every_diagnostic(tmp_path)
    assert len(found) > 50
    uncoded = [d.text() for d in found if d.code is None or CODES.get(d.code.id) is not d.code]
    assert uncoded == []


def test_hostile_files_get_their_codes(tmp_path: Path) -> None:
    for name, (text, _) in LOADER_CASES.items():
        (tmp_path / name).write_text(text)
    found = {(Path(d.location.file).name, d.code) for d in check_repo(tmp_path)[1].items}
    assert [
        (name, code) for name, (_, code) in LOADER_CASES.items() if (name, code) not in found
    ] == []


def test_an_empty_folder_and_a_file_path(tmp_path: Path) -> None:
    empty = check_repo(tmp_path)[1].items
    assert [(d.code, d.message) for d in empty] == [
        (codes.NO_YAML_FILES, f"no YAML files found under {tmp_path.as_posix()}")
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(doc("Cluster", "lab")))
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "cluster.yaml")])
    assert result.exit_code == 2
    assert "is a file" in result.output


# --- formats --------------------------------------------------------------------------------

ERROR = Diagnostic(
    Location("teams.yaml", 7, 10),
    "over",
    "Project/a",
    Severity.ERROR,
    codes.PROJECTS_OVER_DEPARTMENT,
)
WARNING = Diagnostic(
    Location("x.yaml", 3), "empty document ignored", "", Severity.WARNING, codes.EMPTY_DOCUMENT
)


def test_text_puts_the_severity_and_code_before_the_object() -> None:
    assert format_diagnostics([ERROR, WARNING], "text").splitlines() == [
        "teams.yaml:7:10: error GS401 Project/a: over",
        "x.yaml:3:1: warning GS113: empty document ignored",
    ]


def test_json_has_a_code_field() -> None:
    payload = json.loads(format_diagnostics([ERROR, WARNING], "json"))
    assert [(d["code"], d["severity"]) for d in payload["diagnostics"]] == [
        ("GS401", "error"),
        ("GS113", "warning"),
    ]
    assert (payload["errors"], payload["warnings"]) == (1, 1)


def test_github_annotations_carry_the_code_in_the_title() -> None:
    assert format_diagnostics([ERROR, WARNING], "github").splitlines() == [
        "::error file=teams.yaml,line=7,col=10,title=GS401 Project/a::over",
        "::warning file=x.yaml,line=3,col=1,title=GS113::empty document ignored",
    ]


# --- plan compares problems by code and object ----------------------------------------------


def _diagnostics(*items: tuple[str, Code, str, Severity]) -> Diagnostics:
    found = Diagnostics()
    found.extend(
        Diagnostic(Location("f.yaml", i + 1), m, o, s, c) for i, (o, c, m, s) in enumerate(items)
    )
    return found


def test_a_problem_whose_numbers_or_place_changed_is_not_new() -> None:
    over = codes.PROJECTS_OVER_DEPARTMENT
    base = _diagnostics(("Project/a", over, "add up to 10", Severity.ERROR))
    head = _diagnostics(
        ("Project/b", codes.UNKNOWN_FIELD, "unknown field", Severity.ERROR),
        ("Project/a", over, "add up to 12", Severity.ERROR),
    )
    assert [(p.code, p.obj) for p in new_problems(base, head)] == [("GS203", "Project/b")]
    assert fixed_problems(base, head) == ()
    assert [p.obj for p in fixed_problems(head, base)] == ["Project/b"]


def test_a_second_problem_of_one_code_and_object_is_new_and_the_same_message_matches() -> None:
    field = codes.UNKNOWN_FIELD
    base = _diagnostics(("Workload/w", field, "unknown field 'spec.gpus'", Severity.ERROR))
    head = _diagnostics(
        ("Workload/w", field, "unknown field 'spec.nodes'", Severity.ERROR),
        ("Workload/w", field, "unknown field 'spec.gpus'", Severity.ERROR),
    )
    assert [p.message for p in new_problems(base, head)] == ["unknown field 'spec.nodes'"]


def test_a_warning_that_becomes_an_error_is_new() -> None:
    over = codes.DEPARTMENTS_OVER_CLUSTER
    base = _diagnostics(("Department/d", over, "over", Severity.WARNING))
    head = _diagnostics(("Department/d", over, "over", Severity.ERROR))
    assert [p.severity for p in new_problems(base, head)] == ["error"]


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_plan_reports_a_duplicate_on_the_definition_the_change_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "cfg"
    (repo / "teams").mkdir(parents=True)
    base = [
        doc("Cluster", "lab"),
        node_group("a100", nodeCount=1, gpusPerNode=8, gpu={"model": "A100-SXM4-80GB"}),
        doc("Department", "research", quota={"gpu": 8}),
    ]
    (repo / "cluster.yaml").write_text(yaml.safe_dump_all(base, sort_keys=False))
    team = yaml.safe_dump(doc("Project", "vision", department="research", quota={"gpu": 2}))
    (repo / "teams" / "zeta.yaml").write_text(team)
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    # the pull request adds a second `vision`, in a file that comes first in path order
    (repo / "teams" / "alpha.yaml").write_text(team)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["plan", "cfg", "--base", "main", "--format", "json"])
    assert result.exit_code == 1, result.output
    [problem] = json.loads(result.stdout)["validation"]["new"]
    assert (problem["code"], problem["location"]) == ("GS303", "cfg/teams/alpha.yaml:4:9")
    assert problem["message"] == (
        "duplicate Project 'vision' (first defined at cfg/teams/zeta.yaml:4:9)"
    )
    # validate alone knows no base: the later one in path order
    [line] = CliRunner().invoke(main, ["validate", "cfg"]).stderr.splitlines()
    assert line.startswith("cfg/teams/zeta.yaml:4:9: error GS303 Project/vision: ")
    assert line.endswith("(first defined at cfg/teams/alpha.yaml:4:9)")


# --- the README's list ----------------------------------------------------------------------


def test_the_readme_lists_every_code() -> None:
    text = README.read_text()
    if START not in text or END not in text:
        pytest.skip(
            f"README.md has no {START} ... {END} section yet: paste the table that "
            "tests/test_diagnostic_codes.py:codes_table() prints between those markers"
        )
    listed = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert listed == codes_table(), "README's codes differ from gitops_sched/config/codes.py"
