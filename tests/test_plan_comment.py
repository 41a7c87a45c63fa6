"""The CI side of `plan`: the comment script against a fake GitHub API, and the workflow
and action files against GitHub's schemas (as check-jsonschema ships them)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitops_sched.plan.comment import main as comment_main
from gitops_sched.plan.markdown import MARKER
from tests.fake_github import TOKEN, FakeGitHub, fake_github

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeGitHub]]:
    comments = [{"id": i, "body": f"looks good {i}"} for i in range(1, 151)]
    with fake_github(comments) as (url, server):
        event = tmp_path / "event.json"
        event.write_text(json.dumps({"action": "synchronize", "pull_request": {"number": 42}}))
        monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
        monkeypatch.setenv("GITHUB_REPOSITORY", "org/cluster-config")
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("GITHUB_API_URL", url)
        yield server


def plan_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "plan.md"
    path.write_text(f"{MARKER}\n{text}\n")
    return str(path)


def test_first_run_creates_the_plan_comment(github: type[FakeGitHub], tmp_path: Path) -> None:
    assert comment_main([plan_file(tmp_path, "plan one")]) == 0
    posts = [c for c in github.calls if c[0] == "POST"]
    assert [(path, body["body"]) for _, path, body in posts] == [
        ("/repos/org/cluster-config/issues/42/comments", f"{MARKER}\nplan one\n")
    ]


def test_next_run_updates_the_comment_instead_of_adding_another(
    github: type[FakeGitHub], tmp_path: Path
) -> None:
    assert comment_main([plan_file(tmp_path, "plan one")]) == 0
    assert comment_main([plan_file(tmp_path, "plan two")]) == 0
    marked = [c for c in github.comments if c["body"].startswith(MARKER)]
    assert marked == [{"id": 1150, "body": f"{MARKER}\nplan two\n"}]  # one comment, updated
    assert [c[0] for c in github.calls].count("POST") == 1
    patch = [c for c in github.calls if c[0] == "PATCH"]
    assert patch == [
        ("PATCH", "/repos/org/cluster-config/issues/comments/1150", {"body": marked[0]["body"]})
    ]


def test_not_a_pull_request_event_fails_with_a_message(
    github: type[FakeGitHub], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    event = tmp_path / "push.json"
    event.write_text(json.dumps({"ref": "refs/heads/main"}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    assert comment_main([plan_file(tmp_path, "x")]) == 1
    assert "not a pull_request event" in capsys.readouterr().err


def test_an_empty_plan_is_not_posted(github: type[FakeGitHub], tmp_path: Path, capsys) -> None:
    empty = tmp_path / "plan.md"
    empty.write_text("\n")
    assert comment_main([str(empty)]) == 1
    assert github.calls == []
    assert f"{empty} is empty (did plan fail?): nothing posted" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("schema", "files"),
    [
        ("vendor.github-workflows", [".github/workflows/config-repo.yml"]),
        ("vendor.github-actions", ["action.yml"]),
    ],
)
def test_workflow_and_action_validate_against_githubs_schemas(
    schema: str, files: list[str]
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_reusable_workflow_runs_the_action_of_the_gitops_sched_ref_it_is_given() -> None:
    import yaml

    workflow = yaml.safe_load((ROOT / ".github/workflows/config-repo.yml").read_text())
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = workflow[True]["workflow_call"]["inputs"]  # `on:` reads as True in YAML 1.1
    job = workflow["jobs"]["gitops-sched"]
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    config, tool, run = job["steps"][:3]
    assert config["uses"].startswith("actions/checkout@") and config["with"] == {"fetch-depth": 0}
    assert tool["uses"].startswith("actions/checkout@")
    assert tool["with"] == {
        "repository": "${{ inputs.gitops-sched-repository }}",
        "ref": "${{ inputs.gitops-sched-ref }}",
        "path": ".gitops-sched",  # hidden: a config at the repo's root does not load it
    }
    assert inputs["gitops-sched-repository"]["required"] and inputs["gitops-sched-ref"]["required"]
    assert run["uses"] == "./.gitops-sched"
    assert set(run["with"]) <= set(action["inputs"])
    assert run["with"]["path"] == "${{ inputs.path }}"
    assert inputs["python-version"]["default"] == action["inputs"]["python-version"]["default"]


def test_help_is_usage_and_an_option_is_no_plan_file(capsys) -> None:
    assert comment_main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: python -m gitops_sched.plan.comment PLAN.md")
    assert comment_main(["--verbose"]) == 2  # never read as a file named --verbose
    assert "usage:" in capsys.readouterr().err
