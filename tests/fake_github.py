"""A fake GitHub REST API for the plan comment: the three issue-comment calls it makes,
served on the loopback address, each call recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

TOKEN = "secret"


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
        assert self.headers["Authorization"] == f"Bearer {TOKEN}"
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


@contextmanager
def fake_github(comments: list[dict]) -> Iterator[tuple[str, type[FakeGitHub]]]:
    """(API URL, the handler class holding `comments` and the recorded `calls`)."""
    FakeGitHub.comments = comments
    FakeGitHub.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGitHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", FakeGitHub
    finally:
        server.shutdown()
        server.server_close()
