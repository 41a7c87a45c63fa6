"""The composite action (`action.yml`) run end to end as the GitHub runner runs it, for a
pull request on a config repo kept at the root of its Git repo: installed from the action's
own files into a fresh virtual environment, then validate, the scenarios, plan, comment.

The runner is `tests/actions_runner.py`, the GitHub API `tests/fake_github.py`. Offline:
what the package index gives a real runner (the dependencies and the build backend) comes
from the test environment's packages on PYTHONPATH, pip told to use no index and the build
backend it finds; gitops-sched itself is not among them, so it can only come from the
action's files.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from gitops_sched.plan.markdown import MARKER
from tests.actions_runner import ActionError, ActionRun, Runner, condition, substitute
from tests.fake_github import TOKEN, fake_github
from tests.test_plan import git

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "clusters" / "netapp-dgx"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
NOT_FROM_THE_INDEX = ("gitops_sched", "__editable__", "pip")
PULL_REQUEST = 7


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package index of this offline runner: the test environment's packages but
    gitops-sched itself (and pip, which comes with the Python), as one PYTHONPATH folder."""
    folder = tmp_path_factory.mktemp("index")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(NOT_FROM_THE_INDEX):
            (folder / entry.name).symlink_to(entry)
    return folder


@pytest.fixture(scope="module")
def action(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The action as the runner fetches it for `uses: <org>/gitops-sched@<ref>`: the repo's
    files (those Git tracks or would add), nothing built or installed."""
    folder = tmp_path_factory.mktemp("action")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_symlink() or source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name, follow_symlinks=False)
    return folder


def pull_request(tmp_path: Path, depth: int | None) -> tuple[Path, str]:
    """A config repo with the example at its root (`main`) and a pull request shortening
    team-b's notebook time limit; the workspace is a clone of the pull request, `depth` as
    actions/checkout's fetch-depth (None: the history). Returns (workspace, base commit)."""
    origin = tmp_path / "origin"
    shutil.copytree(EXAMPLE, origin)
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "base")
    base = git(origin, "rev-parse", "HEAD").strip()
    git(origin, "checkout", "-q", "-b", "notebook-limit")
    team_b = origin / "projects" / "team-b.yaml"
    team_b.write_text(team_b.read_text().replace("TimeLimit: 8h", "TimeLimit: 4h"))
    git(origin, "commit", "-q", "-am", "team-b: 4 h notebooks")
    workspace = tmp_path / "workspace"
    shallow = ["--depth", str(depth)] if depth else []
    git(tmp_path, "clone", "-q", *shallow, "-b", "notebook-limit", origin.as_uri(), str(workspace))
    return workspace, base


def setup_python(inputs: dict[str, str]) -> dict[str, str]:
    """actions/setup-python: an installed Python of the asked version (the one this test
    environment was made from, not the environment), its interpreter as `python-path`."""
    if inputs.get("python-version") != PYTHON:
        raise ActionError(f"setup-python: only Python {PYTHON} is here")
    interpreter = Path(sys.base_prefix) / "bin" / f"python{PYTHON}"
    return {"python-path": str(interpreter), "python-version": platform.python_version()}


def run_action(
    action: Path, index: Path, workspace: Path, base: str, api_url: str, tmp_path: Path
) -> ActionRun:
    """The action with its defaults (the config at the root), for pull request 7."""
    test_bin = str(Path(sys.prefix) / "bin")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != test_bin)
    (tmp_path / "home").mkdir()
    (tmp_path / "temp").mkdir()
    runner = Runner(
        workspace=workspace,
        temp=tmp_path / "temp",
        event_name="pull_request",
        event={
            "number": PULL_REQUEST,
            "pull_request": {"number": PULL_REQUEST, "base": {"sha": base}},
        },
        env={
            "PATH": path,
            "HOME": str(tmp_path / "home"),
            "LANG": "C.UTF-8",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            # the offline index: the folder above, no other (pip reads the 0 as "off")
            "PYTHONPATH": str(index),
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_NO_INDEX": "1",
            "PIP_NO_BUILD_ISOLATION": "0",
        },
        uses={"actions/setup-python": setup_python},
        token=TOKEN,  # the default input `token` is github.token
        api_url=api_url,
    )
    return runner.run_action(action, {"python-version": PYTHON})


def outcomes(run: ActionRun) -> dict[str, str]:
    return {step.name: step.outcome for step in run.steps}


def logs(run: ActionRun) -> str:
    return "\n".join(f"--- {s.name} ({s.outcome})\n{s.log}" for s in run.steps)


def test_the_action_installs_itself_and_comments_the_plan_of_a_pull_request(
    action: Path, index: Path, tmp_path: Path
) -> None:
    workspace, base = pull_request(tmp_path, depth=None)
    with fake_github([]) as (api_url, github):
        run = run_action(action, index, workspace, base, api_url, tmp_path)
    assert set(outcomes(run).values()) == {"success"}, logs(run)
    # its own Python and venv; the job's environment is left alone
    assert run.step("Python for gitops-sched").inputs["update-environment"] == "false"
    assert run.job_env_changes == ""
    venv = tmp_path / "temp" / "gitops-sched"
    (dist,) = (venv / "lib").glob("python*/site-packages/gitops_sched-*.dist-info")
    assert json.loads((dist / "direct_url.json").read_text())["url"] == action.as_uri()
    assert (dist.parent / "gitops_sched" / "cli.py").is_file()  # a copy, not a link back
    # the scenarios' report, the plan in the summary and as the one comment
    assert (workspace / "gitops-sched-tests.xml").is_file()
    plan = Path(run.outputs["plan"]).read_text()
    assert plan.startswith(MARKER) and "team-b" in plan
    assert run.summary == plan
    posted = [(path, body) for method, path, body in github.calls if method == "POST"]
    comments = f"/repos/org/cluster-config/issues/{PULL_REQUEST}/comments"
    assert posted == [(comments, {"body": plan})]


def test_no_comment_when_plan_fails(action: Path, index: Path, tmp_path: Path) -> None:
    # a checkout without the history (fetch-depth 1): plan cannot read the base
    workspace, base = pull_request(tmp_path, depth=1)
    with fake_github([]) as (api_url, github):
        run = run_action(action, index, workspace, base, api_url, tmp_path)
    assert outcomes(run) == {
        "Python for gitops-sched": "success",
        "Install gitops-sched": "success",
        "Validate": "success",
        "Test scenarios": "success",
        "Plan": "failure",
        "Comment on the pull request": "skipped",
    }, logs(run)
    assert "shallow clone" in run.step("Plan").log
    assert github.calls == []
    assert run.outputs["plan"] == "" and run.summary == ""


@pytest.mark.parametrize(
    ("expression", "failed", "expected"),
    [
        ("inputs.missing == ''", False, True),  # null and '' are both 0 when compared
        ("steps.plan.outputs.file != ''", False, False),  # a skipped step has no outputs
        ("inputs.comment == 'TRUE'", False, True),  # strings compare ignoring case
        ("!(inputs.base)", False, True),
        ("inputs.comment == 'true'", True, False),  # success() implied: a step failed
        ("failure() && steps.plan.outcome == 'skipped'", True, True),
        ("always() && (inputs.base != '' || github.event_name == 'pull_request')", True, True),
    ],
)
def test_the_runner_evaluates_conditions_as_github_documents(
    expression: str, failed: bool, expected: bool
) -> None:
    contexts = {
        "inputs": {"comment": "true", "base": ""},
        "github": {"event_name": "pull_request"},
        "steps": {"plan": {"outputs": {}, "outcome": "skipped"}},
    }
    assert condition(expression, contexts, failed) is expected


def test_the_runner_substitutes_an_operand_of_or() -> None:
    contexts = {
        "inputs": {"base": ""},
        "github": {"event": {"pull_request": {"base": {"sha": "abc"}}}},
    }
    assert substitute("${{ inputs.base || github.event.pull_request.base.sha }}", contexts) == "abc"
    assert substitute("x${{ inputs.nothing }}y${{ true }}", contexts) == "xytrue"
