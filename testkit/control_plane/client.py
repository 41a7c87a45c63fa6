"""The product's cluster client on the test control plane, with quick retries (a local
server answers in milliseconds). Kept free of pytest: `make dev-cluster` uses it from a
plain install."""

from __future__ import annotations

from gitops_sched.cluster import Backoff, ClusterClient
from testkit.control_plane.cluster import ControlPlane

FAST_BACKOFF = Backoff(attempts=6, base=0.05, cap=0.5)


def connect(plane: ControlPlane, timeout: float = 30.0) -> ClusterClient:
    return ClusterClient(plane.configuration(), backoff=FAST_BACKOFF, timeout=timeout)
