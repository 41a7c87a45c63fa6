"""Pod and node annotations: what the compiler renders and what the scheduler and node agent
read and write on live objects.

The compiler writes a workload's pods with the labels of `labels` (project, workload, type) and
the annotations below (gang size, replicas, priority, preemptible, fraction or GPU memory).
A pod a user creates by hand follows the same contract; a pod without the workload label is
a job of its own.

The scheduler writes, on a pod it binds, where the engine placed it (`PLACEMENT`, the
engine codec's pod shape in `encode_placement`'s JSON, read back by `parse_placement`, so a
restarted scheduler reads its placements back) and, for a fraction
pod, the UUID of its GPU and its memory share, which the rendered pod template reads back
through the downward API into `NVIDIA_VISIBLE_DEVICES` and `GPU_MEMORY_LIMIT_ENV`.

A shared GPU is held by a reservation pod in the system namespace (`RESERVATION_LABEL` =
the GPU's index on its node); the pod learns its GPU's UUID from the device plugin and
writes it to its own `GPU_UUID` annotation.

The node agent publishes the node's GPUs (`NODE_GPUS`, `contract.inventory`'s JSON), reads the
scheduler's MIG requests (`NODE_MIG_REQUEST`, `contract.mig`'s format) and answers in
`NODE_MIG_STATUS`, and marks an idle pod with `IDLE_SINCE` (RFC 3339). It never changes the
MIG layout of a node labelled `MIG_STATIC_LABEL=true`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from gitops_sched.contract import foreignjson
from gitops_sched.contract.labels import GROUP

# --- written by the compiler on a workload's pods -------------------------------------------
MIN_AVAILABLE = f"{GROUP}/min-available"  # gang size
REPLICAS = f"{GROUP}/replicas"  # pods the workload runs (elastic pods above the gang)
PREEMPTIBLE = f"{GROUP}/preemptible"  # "true" / "false"
PRIORITY = f"{GROUP}/priority"  # the engine's priority (an int)
GPU_FRACTION = f"{GROUP}/gpu-fraction"  # share of one GPU, e.g. "0.5"
GPU_MEMORY = f"{GROUP}/gpu-memory"  # GPU memory as a quantity, e.g. "10Gi"
FRACTION_POLICY = f"{GROUP}/fraction-policy"  # warn | evict: the project's, for the agent
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"  # + profile, e.g. nvidia.com/mig-1g.10gb
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # the pod's index in a gang

# --- written by the scheduler ---------------------------------------------------------------
PLACEMENT = f"{GROUP}/placement"  # JSON: engine.codec.pod_to_dict of the pod's placement
GPU_UUID = f"{GROUP}/gpu-uuid"  # a fraction pod's (and a reservation pod's) GPU
GPU_MEMORY_LIMIT = f"{GROUP}/gpu-memory-limit-mib"  # a fraction pod's share, MiB
RESERVATION_LABEL = f"{GROUP}/reserved-gpu"  # on reservation pods: the GPU index reserved
RESERVATION_NODE_LABEL = f"{GROUP}/reserved-node"  # on reservation pods: the node
PENDING_CONDITION_REASON = "Unschedulable"  # PodScheduled=False, as kube-scheduler says it

# env variables the rendered template sets from the annotations above (downward API)
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
GPU_MEMORY_LIMIT_ENV = "GITOPS_SCHED_GPU_MEMORY_LIMIT_MIB"

# --- written by the node agent --------------------------------------------------------------
NODE_GPUS = f"{GROUP}/gpus"  # JSON inventory (contract.inventory)
NODE_MIG_REQUEST = f"{GROUP}/mig-request"  # JSON, written by the scheduler
NODE_MIG_STATUS = f"{GROUP}/mig-status"  # JSON, the agent's answer to the request
IDLE_SINCE = f"{GROUP}/gpu-idle-since"  # on a pod: RFC 3339 time its GPUs went idle
MIG_STATIC_LABEL = f"{GROUP}/mig-static"  # node label set by the admin: "true" = never changed


def encode_placement(placement: Mapping[str, Any]) -> str:
    """The `PLACEMENT` annotation for a pod placement (the engine codec's pod shape):
    canonical JSON, so an unchanged placement is never rewritten."""
    return json.dumps(placement, sort_keys=True, separators=(",", ":"))


def parse_placement(text: str) -> dict[str, Any]:
    """The `PLACEMENT` annotation's fields, each checked; ValueError saying which is wrong.

    What it gives is the codec's pod shape without the node (the pod's binding says that)."""
    data = foreignjson.loads(text)
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    gpus, fraction, mig, index = (data.get(k) for k in ("gpus", "fraction", "mig", "index"))
    if not isinstance(gpus, list) or not all(_natural(g) for g in gpus):
        raise ValueError("gpus must be a list of GPU indexes")
    if fraction is not None and (not _number(fraction) or not 0 < fraction <= 1):
        raise ValueError("fraction must be a number in (0, 1]")
    if mig is not None and not (
        isinstance(mig, dict) and isinstance(mig.get("profile"), str) and _natural(mig.get("start"))
    ):
        raise ValueError("mig must be {profile, start}")
    if index is not None and not _natural(index):
        raise ValueError("index must be a pod index")
    return data


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
