"""Prometheus metrics and the health endpoints, served together on one port:
`/metrics`, `/healthz` (the loop is alive) and `/readyz` (it has fetched and compiled the
repo once, or is a standby replica waiting for the Lease)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.sync_duration = Histogram(
            "gitops_sched_reconcile_duration_seconds",
            "Time of one sync.",
            registry=r,
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
        )
        self.syncs = Counter(
            "gitops_sched_reconcile_syncs", "Syncs by outcome.", ["outcome"], registry=r
        )
        self.applied = Counter(
            "gitops_sched_reconcile_objects_applied", "Objects applied.", registry=r
        )
        self.pruned = Counter(
            "gitops_sched_reconcile_objects_pruned", "Objects pruned.", registry=r
        )
        self.drift = Gauge(
            "gitops_sched_reconcile_drifted_objects",
            "Objects repaired in the last sync.",
            registry=r,
        )
        self.errors = Counter(
            "gitops_sched_reconcile_errors", "Errors (objects, invalid commits, API).", registry=r
        )
        self.managed = Gauge(
            "gitops_sched_reconcile_managed_objects", "Objects the repo renders.", registry=r
        )
        self.last_sync = Gauge(
            "gitops_sched_reconcile_last_sync_timestamp_seconds",
            "End of the last successful sync.",
            registry=r,
        )
        self.commit = Gauge(
            "gitops_sched_reconcile_synced_commit_info",
            "The last synced commit (value 1).",
            ["commit"],
            registry=r,
        )
        self.leader = Gauge(
            "gitops_sched_reconcile_leader", "1 while this replica holds the Lease.", registry=r
        )
        self._commit: str | None = None

    def synced_commit(self, commit: str) -> None:
        if self._commit is not None and self._commit != commit:
            self.commit.remove(self._commit)
        self.commit.labels(commit=commit).set(1)
        self._commit = commit


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


def serve(metrics: Metrics, health: Health, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
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
