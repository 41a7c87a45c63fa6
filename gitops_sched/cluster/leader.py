"""Leader election through a `coordination.k8s.io/v1` Lease, as client-go's leaderelection.

A candidate takes the Lease when it is free or its holder stopped renewing it for
`lease_duration` seconds, as measured on the candidate's own clock from the moment it last
saw the record change (so clocks need not agree). The leader renews every `retry_period`; it
stops calling itself leader once a renewal has not succeeded for `renew_deadline`, which is
shorter than `lease_duration`, so its successor cannot start before it has stopped. Every
write carries the resourceVersion read just before: of two candidates, one gets a 409.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gitops_sched.cluster.client import ClusterClient, ObjectRef
from gitops_sched.cluster.errors import ApiFailure

log = logging.getLogger(__name__)
LEASE_API = "coordination.k8s.io/v1"
# A killed leader's successor takes the Lease within LEASE_DURATION_S + 2 * RETRY_PERIOD_S of
# the kill (it sees the last renewal up to one period late, and looks once a period): 14 s
LEASE_DURATION_S = 10.0
RETRY_PERIOD_S = 2.0


class NotLeader(Exception):
    """This replica lost (or never had) the Lease: its work stops before its next write."""


def default_identity() -> str:
    """This replica's name in the Lease: the pod's name (else the host's) and a random suffix,
    so a restarted pod is a new candidate."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}-{uuid.uuid4().hex[:6]}"


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: ClusterClient,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = LEASE_DURATION_S,
        renew_deadline: float = 8.0,
        retry_period: float = RETRY_PERIOD_S,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[bool], None] | None = None,
    ):
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("need retry_period < renew_deadline < lease_duration")
        self.client = client
        self.ref = ObjectRef(LEASE_API, "Lease", namespace, name)
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.on_change = on_change
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # our last successful acquire or renew
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def is_leader(self) -> bool:
        return self._renewed_at is not None and (
            self.clock() - self._renewed_at < self.renew_deadline
        )

    def guard_writes(self, client: ClusterClient) -> None:
        """Make every write of `client` raise NotLeader while this replica does not lead, so a
        replica that lost the Lease mid-cycle stops before its next write."""

        def guard(method: str, path: str) -> None:
            if method != "GET" and not self.is_leader():
                raise NotLeader("lost the Lease; stopping before the next write")

        client.before_request.append(guard)

    def try_acquire_or_renew(self) -> bool:
        """One round: read the Lease and take or renew it when allowed. True when leading."""
        was_leader = self.is_leader()
        try:
            leading = self._round()
        except ApiFailure as exc:
            log.info("leader election: %s", exc)
            leading = False
        except Exception:  # an answer that does not decode, a bug: the next round tries again
            log.exception("leader election round failed")
            leading = False
        if leading:
            self._renewed_at = self.clock()
        if self.on_change is not None and leading != was_leader and self.is_leader() == leading:
            self.on_change(leading)
        return self.is_leader()

    def _round(self) -> bool:
        now = self.clock()
        lease = self.client.get(self.ref)
        stamp = _micro_time()
        if lease is None:
            body = {
                "apiVersion": LEASE_API,
                "kind": "Lease",
                "metadata": {"name": self.ref.name, "namespace": self.ref.namespace},
                "spec": self._spec(stamp, stamp, transitions=0),
            }
            self.client.create(body)
            return True
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        holder = spec.get("holderIdentity") or ""
        expired = self._observed_at + float(spec.get("leaseDurationSeconds") or 0) <= now
        if holder and holder != self.identity and not expired:
            return False
        if holder == self.identity:
            acquired, transitions = (
                spec.get("acquireTime") or stamp,
                spec.get("leaseTransitions", 0),
            )
        else:
            acquired, transitions = stamp, spec.get("leaseTransitions", 0) + 1
        lease["spec"] = self._spec(acquired, stamp, transitions)
        self.client.replace(lease)  # carries the resourceVersion we read: 409 if we lost a race
        return True

    def _spec(self, acquired: str, renewed: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": acquired,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }

    def release(self) -> None:
        """Give the Lease up (when leading), so a successor need not wait for it to expire."""
        if not self.is_leader():
            return
        self._renewed_at = None
        try:
            lease = self.client.get(self.ref)
            if lease and lease.get("spec", {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                self.client.replace(lease)
        except ApiFailure as exc:
            log.info("leader election: release failed: %s", exc)
        if self.on_change is not None:
            self.on_change(False)

    # --- background renewal ----------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.try_acquire_or_renew()
            self._stop.wait(self.retry_period)

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if release:
            self.release()
        else:
            self._renewed_at = None
