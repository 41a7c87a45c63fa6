"""`gitops-sched test`: the repo's own Simulation documents, run and reported (text, JSON,
JUnit XML); `validate` checks them and `render` never compiles them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner, Result

from gitops_sched.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "netapp-dgx"
SCENARIO = "scenarios/idle-quota-is-lent.yaml"
HEADER = "apiVersion: gitops-sched.io/v1alpha1\nkind: Simulation\n"


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root)
    return root


def break_expectation(repo: Path) -> int:
    """Expect team-d to get 7 GPUs instead of its 8; the line of the wrong value."""
    path = repo / SCENARIO
    text = path.read_text()
    wrong = text.replace("team-d: {allocated: 8, queued: 0}", "team-d: {allocated: 7, queued: 0}")
    assert wrong != text
    path.write_text(wrong)
    return next(i for i, line in enumerate(wrong.splitlines(), 1) if "allocated: 7" in line)


def test_the_examples_scenario_passes_and_its_junit_file_says_so(tmp_path: Path) -> None:
    junit = tmp_path / "report.xml"
    result = run("test", str(EXAMPLE), "--junit", str(junit))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"PASS Simulation/idle-quota-is-lent ({EXAMPLE}/{SCENARIO}): 3 expect steps"
    assert lines[1].startswith(f"  ok   step 2 at {EXAMPLE}/{SCENARIO}:")
    assert lines[-1] == "1 scenario: 1 passed, 0 failed"
    root = ET.parse(junit).getroot()
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "3", "0")
    (suite,) = root
    assert suite.get("name") == "Simulation/idle-quota-is-lent"
    assert [case.get("name") for case in suite] == [
        "step 2 expect (line 13)",
        "step 4 expect (line 26)",
        "step 6 expect (line 41)",
    ]
    assert all(case.find("failure") is None for case in suite)


def test_a_wrong_expectation_fails_with_what_happened(repo: Path, tmp_path: Path) -> None:
    line = break_expectation(repo)
    junit = tmp_path / "out" / "report.xml"
    junit.parent.mkdir()
    result = run("test", str(repo), "--junit", str(junit))
    assert result.exit_code == 1
    at = f"{repo}/{SCENARIO}:{line}:"
    assert result.stdout.splitlines()[:4] == [
        f"FAIL Simulation/idle-quota-is-lent ({repo}/{SCENARIO}): 3 expect steps",
        f"  ok   step 2 at {repo}/{SCENARIO}:13:5: 8 values as expected",
        f"  FAIL step 4 at {repo}/{SCENARIO}:26:5: 1 of 12 values differ",
        f"       {at}{line_col(repo, line)}: project team-d allocated: expected 7, got 8",
    ]
    assert result.stdout.splitlines()[-1] == "1 scenario: 0 passed, 1 failed"
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures")) == ("3", "1")
    failures = root.findall("./testsuite/testcase/failure")
    assert [f.get("message") for f in failures] == ["1 of 12 expected values differ"]
    assert "project team-d allocated: expected 7, got 8" in (failures[0].text or "")


def line_col(repo: Path, line: int) -> int:
    """The column of the wrong value on its line."""
    return (repo / SCENARIO).read_text().splitlines()[line - 1].index("7") + 1


def test_json_reports_each_expect_step(repo: Path) -> None:
    break_expectation(repo)
    result = run("test", str(repo), "--format", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["passed"], report["failed"]) == (0, 1)
    (scenario,) = report["scenarios"]
    assert [(e["step"], e["checked"], e["passed"]) for e in scenario["expectations"]] == [
        (2, 8, True),
        (4, 12, False),
        (6, 4, True),
    ]
    (failure,) = scenario["expectations"][1]["failures"]
    assert (failure["name"], failure["field"], failure["expected"], failure["actual"]) == (
        "team-d",
        "allocated",
        7,
        8.0,
    )


def test_a_repo_without_scenarios_has_nothing_to_test(repo: Path, tmp_path: Path) -> None:
    shutil.rmtree(repo / "scenarios")
    junit = tmp_path / "report.xml"
    result = run("test", str(repo), "--junit", str(junit))
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == f"{repo}: no Simulation documents found (nothing to test)\n"
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures"), len(root)) == ("0", "0", 0)


def test_an_invalid_repo_is_reported_not_tested(repo: Path) -> None:
    (repo / "projects" / "team-d.yaml").unlink()
    result = run("test", str(repo))
    assert result.exit_code == 1
    assert "unknown" in result.stderr and "team-d" in result.stderr
    assert "PASS" not in result.stdout and "FAIL" not in result.stdout


@pytest.mark.parametrize("target", ["missing-folder/report.xml", "."])
def test_a_junit_path_that_cannot_be_written_is_a_usage_error(repo: Path, target: str) -> None:
    result = run("test", str(repo), "--junit", str(repo / target))
    assert result.exit_code == 2
    assert "report.xml" in result.output or "directory" in result.output


def test_a_scenario_without_expectations_passes_by_running(repo: Path, tmp_path: Path) -> None:
    (repo / "scenarios" / "smoke.yaml").write_text(
        HEADER + "metadata: {name: smoke}\nsteps:\n  - submit: [bert-finetune]\n"
    )
    junit = tmp_path / "report.xml"
    result = run("test", str(repo), "--junit", str(junit))
    assert result.exit_code == 0, result.output
    assert f"PASS Simulation/smoke ({repo}/scenarios/smoke.yaml): 0 expect steps" in result.stdout
    suites = {suite.get("name"): suite for suite in ET.parse(junit).getroot()}
    assert [case.get("name") for case in suites["Simulation/smoke"]] == [
        "runs to its end (no expect: steps)"
    ]


def test_junit_escapes_what_it_quotes(repo: Path, tmp_path: Path) -> None:
    """An expected reason with XML's special characters (and a control character) still
    makes a file that parses, and says them back."""
    (repo / "scenarios" / "odd.yaml").write_text(
        HEADER + "metadata: {name: odd}\nsteps:\n"
        "  - submit: [bert-finetune]\n"
        '  - expect: {workloads: {bert-finetune: {reason: "<a & \\"b\\" \\x01>"}}}\n'
    )
    junit = tmp_path / "report.xml"
    result = run("test", str(repo), "--junit", str(junit))
    assert result.exit_code == 1
    (failure,) = ET.parse(junit).getroot().iter("failure")
    assert 'expected <a & "b" \ufffd>, got (none)' in (failure.text or "")


# --- validate and render ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("  - submitt: [bert-finetune]\n", "steps[0]"),  # the schema
        ("  - expect: {workloads: {nope: running}}\n", "unknown workload 'nope'"),
        ("  - node-down: dgx1-9\n", "unknown node 'dgx1-9'"),
        ("  - expect: {projects: {team-z: {allocated: 1}}}\n", "unknown project 'team-z'"),
        (
            "  - expect: {projects: {team-a: {nodeGroups: {dgx: {allocated: 1}}}}}\n",
            "unknown node group 'dgx' (not in the repo or the Simulation's nodes: "
            "did you mean 'dgx1'?)",
        ),
    ],
)
def test_validate_checks_the_repos_simulations(repo: Path, step: str, message: str) -> None:
    (repo / "scenarios" / "broken.yaml").write_text(
        HEADER + "metadata: {name: broken}\nsteps:\n" + step
    )
    result = run("validate", str(repo))
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{repo}/scenarios/broken.yaml:5:")
    assert "Simulation/broken" in line and message in line


def test_test_reports_an_unknown_node_group_as_invalid_not_as_a_failed_expectation(
    repo: Path,
) -> None:
    (repo / "scenarios" / "typo.yaml").write_text(
        HEADER + "metadata: {name: typo}\nsteps:\n"
        "  - expect: {projects: {team-a: {nodeGroups: {dgx: {allocated: 0}}}}}\n"
    )
    result = run("test", str(repo))
    assert result.exit_code == 1
    assert f"{repo}/scenarios/typo.yaml:5:47: error GS805 Simulation/typo: " in result.stderr
    assert "PASS" not in result.stdout and "FAIL" not in result.stdout


def test_validate_counts_the_simulations_it_checked() -> None:
    result = run("validate", str(EXAMPLE))
    assert result.exit_code == 0
    assert result.stderr == f"{EXAMPLE}: valid (4 projects, 11 workloads, 16 GPUs, 1 Simulation)\n"


def test_two_simulations_may_not_share_a_name(repo: Path) -> None:
    shutil.copy(repo / SCENARIO, repo / "scenarios" / "copy.yaml")
    result = run("validate", str(repo))
    assert result.exit_code == 1
    assert "duplicate Simulation 'idle-quota-is-lent'" in result.stderr


def test_simulations_are_checked_once_the_rest_is_sound(repo: Path) -> None:
    """A broken project is the one error: the scenario naming it does not add another."""
    path = repo / "projects" / "team-d.yaml"
    path.write_text(path.read_text().replace("gpu: 8", "gpu: many"))
    result = run("validate", str(repo))
    assert result.exit_code == 1
    assert "Simulation" not in result.stderr
    assert "projects/team-d.yaml" in result.stderr


def test_render_never_compiles_a_simulation() -> None:
    result = run("render", str(EXAMPLE), "-o", "-")
    assert result.exit_code == 0
    assert "Simulation" not in result.stdout
    assert "idle-quota-is-lent" not in result.stdout


def test_simulate_ignores_the_repos_scenarios_but_runs_one_given(repo: Path) -> None:
    plain = json.loads(run("simulate", str(repo), "--format", "json").stdout)
    shutil.rmtree(repo / "scenarios")
    assert json.loads(run("simulate", str(repo), "--format", "json").stdout) == plain
    result = run("simulate", str(EXAMPLE), "--events", str(EXAMPLE / SCENARIO), "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["expectations"] == {"checked": 24, "failed": []}
