"""The probes and metrics server the in-cluster processes share (reconciler, scheduler, node
agent): `/metrics` (a Prometheus registry), `/healthz` (the loop is alive) and `/readyz`
(the process has done its first piece of work, or is a standby replica waiting for the
Lease), on one port."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class Health:
    """What the probes report; `beat` is called by the loop every iteration."""

    def __init__(self, stale_after: float):
        self.stale_after = stale_after
        self.last_beat = time.monotonic()
        self.ready = False

    def beat(self) -> None:
        self.last_beat = time.monotonic()

    @property
    def alive(self) -> bool:
        return time.monotonic() - self.last_beat < self.stale_after


def serve(registry: CollectorRegistry, health: Health, host: str, port: int) -> ThreadingHTTPServer:
    """Serve the three endpoints from a daemon thread; `shutdown()` the result to stop and
    `server_close()` it to free the port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                self._send(200 if health.alive else 503, b"ok\n" if health.alive else b"stalled\n")
            elif self.path == "/readyz":
                self._send(
                    200 if health.ready else 503, b"ok\n" if health.ready else b"not ready\n"
                )
            else:
                self._send(404, b"not found\n")

        def _send(self, code: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
