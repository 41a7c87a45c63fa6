"""A fault-injecting HTTP proxy in front of the real kube-apiserver, for what a real server
cannot be made to do on demand: answers 429 with Retry-After, 5xx, connections dropped
before the request reaches the server, an answer swallowed after the write happened, an
answer cut short (200, half its JSON), a watch that stays open but silent.

The proxy listens on plain HTTP on 127.0.0.1 and passes each request on to the API server
over TLS (the client's bearer token with it). Faults come from two places, checked in this
order for each request:

- `rules` (`proxy.add(Rule(...))`): scripted faults for requests whose method and path
  match, each for a number of requests (`times`): "the next two GETs of
  /apis/gitops-sched.io/v1alpha1 answer 503";
- `rates` (`proxy.rates = Rates(...)`): random faults, each request drawing from one
  `random.Random(seed)` in the order requests arrive, so one client's run is reproducible.

`proxy.injected` lists what was done ("503 GET /version"), `proxy.seen` every request;
`proxy.passed` counts requests passed on to the server (a test can act after the Nth).
`configuration(base)` and `write_kubeconfig(path, token)` point a client or a process at
the proxy.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import re
import socket
import ssl
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from kubernetes import client

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "host", "te"}
REASONS = {
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
}
WATCH = re.compile(r"[?&]watch=(true|1)(&|$)")


@dataclass(frozen=True)
class Fault:
    """What is done to a request: `status` answers it with that code without passing it on
    (`retry_after` seconds in a Retry-After header); `drop` closes the connection without
    passing it on; `swallow` passes it on, then closes the connection without the answer;
    `garble` passes it on and answers 200 with the first half of the server's answer;
    `silent` (a watch) passes it on and answers its headers, then no event until the server
    ends it (or the faults are cleared)."""

    action: str  # status | drop | swallow | garble | silent
    status: int = 0
    retry_after: float | None = None

    def __str__(self) -> str:
        return str(self.status) if self.action == "status" else self.action


THROTTLED = Fault("status", 429, retry_after=0.2)
UNAVAILABLE = Fault("status", 503)
INTERNAL = Fault("status", 500)
DROP = Fault("drop")
SWALLOW = Fault("swallow")
GARBLE = Fault("garble")
SILENT = Fault("silent")


@dataclass
class Rule:
    """`fault` for `times` requests (None: every one) whose method is `method` (None: any)
    and whose path and query match the regular expression `path`, after letting the first
    `after` of them through; with `armed_by`, only once a fault was injected on a request
    matching that regular expression ("a 500 on /version once discovery got a 503")."""

    fault: Fault
    path: str = ""
    method: str | None = None
    times: int | None = 1
    after: int = 0
    armed_by: str | None = None

    def matches(self, method: str, target: str) -> bool:
        return (self.method in (None, method)) and re.search(self.path, target) is not None


@dataclass(frozen=True)
class Rates:
    """The chance of each random fault per request: `throttle` (429, Retry-After
    `retry_after`), `error` (500, 502, 503 or 504), `drop`, `swallow` (writes only: the
    write happens, the answer is lost), `garble` (not watches), `silent` (watches only)."""

    throttle: float = 0.0
    error: float = 0.0
    drop: float = 0.0
    swallow: float = 0.0
    garble: float = 0.0
    silent: float = 0.0
    retry_after: float = 0.1

    def draw(self, rng: random.Random, method: str, watch: bool) -> Fault | None:
        roll = rng.random()
        choices: list[tuple[float, Fault]] = [
            (self.throttle, Fault("status", 429, retry_after=self.retry_after)),
            (self.error, Fault("status", rng.choice((500, 502, 503, 504)))),
            (self.drop, DROP),
            (self.swallow if method != "GET" else 0.0, SWALLOW),
            (self.garble if not watch else 0.0, GARBLE),
            (self.silent if watch else 0.0, SILENT),
        ]
        for chance, fault in choices:
            if roll < chance:
                return fault
            roll -= chance
        return None


@dataclass
class _State:
    rng: random.Random
    rates: Rates = field(default_factory=Rates)
    rules: list[Rule] = field(default_factory=list)
    injected: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    silenced: set[http.client.HTTPSConnection] = field(default_factory=set)  # silent watches
    passed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, method: str, target: str) -> Fault | None:
        watch = WATCH.search(target) is not None
        with self.lock:
            self.seen.append(f"{method} {target}")
            for rule in self.rules:
                if rule.armed_by is not None and not any(
                    re.search(rule.armed_by, done) for done in self.injected
                ):
                    continue
                if rule.matches(method, target) and rule.after > 0:
                    rule.after -= 1
                    fault = None
                    break
                if rule.matches(method, target):
                    if rule.times is not None:
                        rule.times -= 1
                        if rule.times <= 0:
                            self.rules.remove(rule)
                    fault: Fault | None = rule.fault
                    break
            else:
                fault = self.rates.draw(self.rng, method, watch)
            if fault is not None:
                self.injected.append(f"{fault} {method} {target}")
            if fault is None or fault.action in ("swallow", "garble", "silent"):
                self.passed += 1
            return fault


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a process killed mid-request) is no error of ours."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FaultProxy:
    """`FaultProxy(upstream, ca_file, seed).start()`; `stop()` closes it."""

    def __init__(self, upstream: str, ca_file: str | Path, seed: int = 0):
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "", parts.port or 443
        self.tls = ssl.create_default_context(cafile=str(ca_file))
        self.state = _State(random.Random(seed))
        self.server = _Server(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # --- control ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def rates(self) -> Rates:
        return self.state.rates

    @rates.setter
    def rates(self, rates: Rates) -> None:
        with self.state.lock:
            self.state.rates = rates

    def add(self, *rules: Rule) -> None:
        with self.state.lock:
            self.state.rules.extend(rules)

    def clear(self) -> None:
        """No more faults: no rules, no random ones; the watches kept silent end (as the
        server ends a watch), so their clients watch again and get what they missed."""
        with self.state.lock:
            self.state.rules.clear()
            self.state.rates = Rates()
            silenced, self.state.silenced = self.state.silenced, set()
        for upstream in silenced:
            with contextlib.suppress(OSError, AttributeError):
                upstream.sock.shutdown(socket.SHUT_RDWR)

    @property
    def injected(self) -> list[str]:
        with self.state.lock:
            return list(self.state.injected)

    @property
    def seen(self) -> list[str]:
        """Every request that reached the proxy, as "METHOD path?query", in order."""
        with self.state.lock:
            return list(self.state.seen)

    def seen_since(self, start: int) -> list[str]:
        """The requests of `seen` after the first `start`: what is new since a count."""
        with self.state.lock:
            return self.state.seen[start:]

    @property
    def passed(self) -> int:
        return self.state.passed

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="fault-proxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def configuration(self, base: client.Configuration) -> client.Configuration:
        """`base` (the API server's, with its token) pointed at the proxy."""
        config = client.Configuration()
        config.host = self.url
        config.api_key = dict(base.api_key)
        return config

    def write_kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig for a process (the CLI) that talks to the server through the proxy."""
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
            "users": [{"name": "admin", "user": {"token": token}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "admin"}}],
            "current-context": "proxy",
        }
        path.write_text(yaml.safe_dump(kubeconfig), encoding="utf-8")
        return path

    # --- serving ---------------------------------------------------------------------

    def _upstream(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.upstream_host, self.upstream_port, context=self.tls, timeout=600
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            upstream: http.client.HTTPSConnection | None = None

            def do_GET(self) -> None:
                self._serve()

            do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                fault = proxy.state.decide(self.command, self.path)
                if fault is not None and fault.action == "status":
                    return self._status(fault)
                if fault is not None and fault.action == "drop":
                    return self._hang_up()
                try:
                    answer = self._pass_on(body)
                except (OSError, http.client.HTTPException):
                    self._drop_upstream()
                    return self._hang_up()
                if fault is not None and fault.action == "swallow":
                    answer.read()
                    return self._hang_up()
                if fault is not None and fault.action == "garble":
                    data = answer.read()
                    return self._answer(200, data[: len(data) // 2])
                try:
                    self._relay(answer, silent=fault is not None)
                except (OSError, http.client.HTTPException):  # either side went away
                    self.close_connection = True
                    self._drop_upstream()

            def finish(self) -> None:
                """The client's connection is over: so is the one to the API server."""
                super().finish()
                self._drop_upstream()

            def _drop_upstream(self) -> None:
                if self.upstream is not None:
                    self.upstream.close()
                    self.upstream = None

            def _pass_on(self, body: bytes | None) -> http.client.HTTPResponse:
                if self.upstream is None:
                    self.upstream = proxy._upstream()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                self.upstream.request(self.command, self.path, body=body, headers=headers)
                return self.upstream.getresponse()

            def _relay(self, answer: http.client.HTTPResponse, silent: bool) -> None:
                self.send_response(answer.status, answer.reason)
                for key, value in answer.getheaders():
                    if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                length = answer.getheader("Content-Length")
                if length is not None:
                    data = answer.read()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                if silent:
                    return self._keep_silent(answer)
                while chunk := answer.read1(65536):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def _keep_silent(self, answer: http.client.HTTPResponse) -> None:
                """Read the watch's events and pass none on, until the server ends it or
                `clear()` cuts it; then end the answer as the server does."""
                upstream = self.upstream
                with proxy.state.lock:
                    proxy.state.silenced.add(upstream)  # type: ignore[arg-type]
                try:
                    while answer.read1(65536):
                        pass
                except (OSError, http.client.HTTPException):
                    self._drop_upstream()
                finally:
                    with proxy.state.lock:
                        proxy.state.silenced.discard(upstream)  # type: ignore[arg-type]
                self.wfile.write(b"0\r\n\r\n")

            def _status(self, fault: Fault) -> None:
                reason = REASONS.get(fault.status, "InternalError")
                data = json.dumps(
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "message": f"injected by the fault proxy: {fault.status}",
                        "reason": reason,
                        "code": fault.status,
                    }
                ).encode()
                retry_after = None if fault.retry_after is None else f"{fault.retry_after:g}"
                self._answer(fault.status, data, retry_after)

            def _answer(self, status: int, data: bytes, retry_after: str | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(data)

            def _hang_up(self) -> None:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)

        return Handler
