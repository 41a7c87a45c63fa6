"""The only code that talks to a Kubernetes API server: connection config, a client with
retries over the official client's DynamicClient, and leader election through a Lease.

Shared by the in-cluster reconciler, scheduler and node agent.
"""

from gitops_sched.cluster.client import ClusterClient, ObjectRef
from gitops_sched.cluster.config import load_configuration
from gitops_sched.cluster.errors import ApiFailure, Conflict, NotFound
from gitops_sched.cluster.retry import Backoff

__all__ = [
    "ApiFailure",
    "Backoff",
    "ClusterClient",
    "Conflict",
    "NotFound",
    "ObjectRef",
    "load_configuration",
]
