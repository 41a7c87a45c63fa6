"""Post the plan on the pull request: one comment, updated in place on every push.

    python -m gitops_sched.plan.comment plan.md

Runs inside GitHub Actions: the pull request comes from `GITHUB_EVENT_PATH`, the
repository from `GITHUB_REPOSITORY`, the API from `GITHUB_API_URL`, the token from
`GITHUB_TOKEN` (needs only `pull-requests: write`). The comment is found by the hidden
marker the plan's Markdown starts with; when it exists it is edited, else one is created.
Standard library only (urllib), so the action needs nothing beyond gitops-sched.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from gitops_sched.plan.markdown import MARKER

MAX_BODY = 65_000  # GitHub refuses comments over 65,536 characters
PER_PAGE = 100


class CommentError(Exception):
    pass


class GitHub:
    def __init__(self, api: str, repository: str, token: str) -> None:
        self.api, self.repository, self.token = api.rstrip("/"), repository, token

    def call(self, method: str, path: str, body: dict | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.api}{path}", data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise CommentError(f"{method} {path}: HTTP {exc.code} {exc.reason}") from exc
        except urllib.error.URLError as exc:
            raise CommentError(f"{method} {path}: {exc.reason}") from exc

    def comments(self, number: int) -> list[dict]:
        found, page = [], 1
        while True:
            path = f"/repos/{self.repository}/issues/{number}/comments"
            batch = self.call("GET", f"{path}?per_page={PER_PAGE}&page={page}")
            found += batch
            if len(batch) < PER_PAGE:
                return found
            page += 1


def pull_request_number(event_path: str) -> int:
    event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    number = (event.get("pull_request") or {}).get("number") or event.get("number")
    if not isinstance(number, int):
        raise CommentError(f"{event_path}: not a pull_request event (no pull request number)")
    return number


def body_of(markdown: str) -> str:
    body = markdown if markdown.startswith(MARKER) else f"{MARKER}\n{markdown}"
    if len(body) > MAX_BODY:
        note = "\n\n*The plan is too long for a comment; the job summary has all of it.*\n"
        body = body[: MAX_BODY - len(note)] + note
    return body


def upsert(github: GitHub, number: int, markdown: str) -> tuple[str, int]:
    """Edit the plan comment of pull request `number`, or create it: (action, comment id)."""
    body = body_of(markdown)
    for comment in github.comments(number):
        if (comment.get("body") or "").startswith(MARKER):
            github.call(
                "PATCH",
                f"/repos/{github.repository}/issues/comments/{comment['id']}",
                {"body": body},
            )
            return "updated", comment["id"]
    created = github.call(
        "POST", f"/repos/{github.repository}/issues/{number}/comments", {"body": body}
    )
    return "created", created["id"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    usage = "usage: python -m gitops_sched.plan.comment PLAN.md"
    if args in (["--help"], ["-h"]):
        print(f"{usage}\n\n{__doc__.strip().splitlines()[0]}")
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        print(usage, file=sys.stderr)
        return 2
    try:
        env = {
            k: os.environ.get(k, "")
            for k in ("GITHUB_EVENT_PATH", "GITHUB_REPOSITORY", "GITHUB_TOKEN")
        }
        missing = [k for k, v in env.items() if not v]
        if missing:
            raise CommentError(f"not set: {', '.join(missing)}")
        api = os.environ.get("GITHUB_API_URL") or "https://api.github.com"
        github = GitHub(api, env["GITHUB_REPOSITORY"], env["GITHUB_TOKEN"])
        number = pull_request_number(env["GITHUB_EVENT_PATH"])
        markdown = Path(args[0]).read_text(encoding="utf-8")
        if not markdown.strip():  # plan failed before writing: a bare marker tells nobody why
            raise CommentError(f"{args[0]} is empty (did plan fail?): nothing posted")
        action, comment = upsert(github, number, markdown)
    except (CommentError, OSError, json.JSONDecodeError) as exc:
        print(f"gitops-sched plan comment: {exc}", file=sys.stderr)
        return 1
    print(f"plan comment {action} on pull request #{number} (comment {comment})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
