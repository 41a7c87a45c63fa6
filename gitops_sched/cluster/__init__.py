"""The only code that talks to a Kubernetes API server: connection config, a client with
retries over the official client's DynamicClient, and leader election through a Lease;
and what the API server makes of an object we render: `diff` (is the live object what we
want) and `replace` (which changes it refuses to make in place).

Shared by the in-cluster reconciler, scheduler and node agent, and by `plan` (`diff`,
`replace`). The names below load their module (and the Kubernetes client) when first used,
so importing `cluster.diff` does not load the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitops_sched.lazy import exports

if TYPE_CHECKING:
    from gitops_sched.cluster.client import ClusterClient, ObjectRef
    from gitops_sched.cluster.config import load_configuration
    from gitops_sched.cluster.errors import ApiFailure, Conflict, NotFound
    from gitops_sched.cluster.retry import Backoff

_MODULES = {
    "ApiFailure": "errors",
    "Backoff": "retry",
    "ClusterClient": "client",
    "Conflict": "errors",
    "NotFound": "errors",
    "ObjectRef": "client",
    "load_configuration": "config",
}

__all__ = [
    "ApiFailure",
    "Backoff",
    "ClusterClient",
    "Conflict",
    "NotFound",
    "ObjectRef",
    "load_configuration",
]

__getattr__ = exports(__name__, _MODULES)
