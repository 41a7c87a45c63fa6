"""The CI side of `plan`: the comment script against a fake GitHub API, and the workflow
and action files against GitHub's schemas (as check-jsonschema ships them)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from gitops_sched.plan.comment import main as comment_main
from gitops_sched.plan.markdown import MARKER

ROOT = Path(__file__).resolve().parent.parent


class FakeGitHub(BaseHTTPRequestHandler):
    comments: list[dict] = []
    calls: list[tuple[str, str, dict | None]] = []

    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict | None:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else None

    def do_GET(self) -> None:
        self.calls.append(("GET", self.path, None))
        assert self.headers["Authorization"] == "Bearer secret"
        query = parse_qs(urlsplit(self.path).query)
        page = int(query.get("page", ["1"])[0])
        self._reply(200, self.comments[(page - 1) * 100 : page * 100])

    def do_PATCH(self) -> None:
        body = self._body()
        self.calls.append(("PATCH", self.path, body))
        comment_id = int(self.path.rsplit("/", 1)[1])
        for comment in self.comments:
            if comment["id"] == comment_id:
                comment["body"] = body["body"]
        self._reply(200, {"id": comment_id})

    def do_POST(self) -> None:
        body = self._body()
        self.calls.append(("POST", self.path, body))
        new = {"id": 1000 + len(self.comments), "body": body["body"]}
        self.comments.append(new)
        self._reply(201, new)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeGitHub]]:
    FakeGitHub.comments = [{"id": i, "body": f"looks good {i}"} for i in range(1, 151)]
    FakeGitHub.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGitHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "synchronize", "pull_request": {"number": 42}}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    monkeypatch.setenv("GITHUB_REPOSITORY", "org/cluster-config")
    monkeypatch.setenv("GITHUB_TOKEN", "secret")
    monkeypatch.setenv("GITHUB_API_URL", f"http://127.0.0.1:{server.server_port}")
    yield FakeGitHub
    server.shutdown()


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


def test_the_reusable_workflow_is_called_and_may_comment() -> None:
    import yaml

    workflow = yaml.safe_load((ROOT / ".github/workflows/config-repo.yml").read_text())
    assert "workflow_call" in workflow[True]  # `on:` reads as True in YAML 1.1
    job = workflow["jobs"]["gitops-sched"]
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    runs = " ".join(step.get("run", "") for step in job["steps"])
    assert "validate" in runs and "--format github" in runs and "plan" in runs
    assert "gitops_sched.plan.comment" in runs
    assert 'gitops-sched test "$CONFIG_PATH" --junit' in runs
