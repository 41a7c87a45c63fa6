"""The only code that talks to a Kubernetes API server: connection config, a client with
retries over the official client's DynamicClient, and leader election through a Lease;
and what the API server makes of an object we render: `diff` (is the live object what we
want) and `replace` (which changes it refuses to make in place).

Shared by the in-cluster reconciler, scheduler and node agent, and by `plan` (`diff`,
`replace`). The names below load their module (and the Kubernetes client) when first used,
so importing `cluster.diff` does not load the client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
