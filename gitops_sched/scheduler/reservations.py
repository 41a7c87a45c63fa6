"""Reservation pods: how a GPU shared by fraction pods is kept from whole-GPU pods.

The NVIDIA device plugin hands out whole GPUs, and a fraction pod asks it for none. So,
as KAI Scheduler does, a GPU the engine shares is first taken by a reservation pod of
ours: `gpu-reservation-<node>-<gpu>` in the system namespace, asking for
`nvidia.com/gpu: 1` and almost nothing else, bound straight to the node. It runs
`gitops-sched reserve`, which reads the GPU the plugin gave it (`NVIDIA_VISIBLE_DEVICES`)
and writes its UUID to its own `GPU_UUID` annotation. Fraction pods bound to that GPU get
the UUID (and their memory share) as annotations, which their template turns into
`NVIDIA_VISIBLE_DEVICES` through the downward API. The reservation pod is deleted once no
pod of ours uses its GPU.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from gitops_sched.contract.labels import MANAGED_BY
from gitops_sched.contract.pods import (
    GPU_RESOURCE,
    RESERVATION_LABEL,
    RESERVATION_NODE_LABEL,
)

DEFAULT_IMAGE = "ghcr.io/gitops-sched/gitops-sched:latest"  # the scheduler's own image
SERVICE_ACCOUNT = "gitops-sched-reservation"  # may get and patch its own pod, nothing else
NAME_PREFIX = "gpu-reservation-"
MAX_NAME = 63  # a DNS label, so the name is also a valid label value and host name
_UNSAFE = re.compile(r"[^a-z0-9-]+")


def reservation_name(node: str, gpu: int) -> str:
    """`gpu-reservation-<node>-<gpu>`, DNS-label safe and at most 63 characters: a node name
    that had to be changed or cut gets a hash of the original, so two nodes never share
    a name."""
    safe = _UNSAFE.sub("-", node.lower()).strip("-")
    name = f"{NAME_PREFIX}{safe}-{gpu}"
    if safe == node and len(name) <= MAX_NAME:
        return name
    tail = f"-{_hash(node)}-{gpu}"
    return f"{NAME_PREFIX}{safe[: MAX_NAME - len(NAME_PREFIX) - len(tail)]}".rstrip("-") + tail


def node_label_value(node: str) -> str:
    """The node as a label value (63 characters at most); spec.nodeName says it in full."""
    return node if len(node) <= MAX_NAME else node[: MAX_NAME - 11] + "-" + _hash(node)


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def reservation_pod(
    node: str, gpu: int, namespace: str, scheduler_name: str, image: str
) -> dict[str, Any]:
    """The reservation pod holding GPU `gpu` of `node` (created, then bound to the node)."""
    env_from_field = [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace"))
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": reservation_name(node, gpu),
            "namespace": namespace,
            "labels": {
                **MANAGED_BY,
                RESERVATION_LABEL: str(gpu),
                RESERVATION_NODE_LABEL: node_label_value(node),
            },
        },
        "spec": {
            "schedulerName": scheduler_name,
            "serviceAccountName": SERVICE_ACCOUNT,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 5,
            # bound straight to the node the scheduler chose for a fraction pod that
            # tolerates its taints: the reservation goes where its GPU is, whatever the taints
            "tolerations": [{"operator": "Exists"}],
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "reserve",
                    "image": image,
                    "command": ["gitops-sched", "reserve"],
                    "env": env_from_field,
                    "resources": {
                        "requests": {"cpu": "5m", "memory": "64Mi"},
                        "limits": {GPU_RESOURCE: "1", "memory": "128Mi"},
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    # the API client keeps its discovery cache in a temporary folder
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}],
        },
    }


def memory_share_mib(fraction: float, gpu_memory_mib: int, requested_mib: int = 0) -> int:
    """A fraction pod's GPU memory, MiB: what it asked for, else its share of the GPU."""
    return requested_mib or int(fraction * gpu_memory_mib)
