"""The contract between what the compiler renders and what the scheduler and node agent read
and write on live objects: pod labels and annotations, node annotations.

The compiler writes a workload's pods with the labels of `meta` (project, workload, type) and
the annotations below (gang size, replicas, priority, preemptible, fraction or GPU memory).
A pod a user creates by hand follows the same contract; a pod without the workload label is
a job of its own.

The scheduler writes, on a pod it binds, where the engine placed it (`PLACEMENT`, the
codec's pod shape, so a restarted scheduler reads its placements back) and, for a fraction
pod, the UUID of its GPU and its memory share, which the rendered pod template reads back
through the downward API into `NVIDIA_VISIBLE_DEVICES` and `GPU_MEMORY_LIMIT_ENV`.

A shared GPU is held by a reservation pod in the system namespace (`RESERVATION_LABEL` =
the GPU's index on its node); the pod learns its GPU's UUID from the device plugin and
writes it to its own `GPU_UUID` annotation.

The node agent publishes the node's GPUs (`NODE_GPUS`, `agent.inventory`'s JSON), reads the
scheduler's MIG requests (`NODE_MIG_REQUEST`, `agent.mig`'s format) and answers in
`NODE_MIG_STATUS`, and marks an idle pod with `IDLE_SINCE` (RFC 3339). It never changes the
MIG layout of a node labelled `MIG_STATIC_LABEL=true`.
"""

from __future__ import annotations

from gitops_sched.compiler.meta import GROUP

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
NODE_GPUS = f"{GROUP}/gpus"  # JSON inventory (agent.inventory.node_inventory)
NODE_MIG_REQUEST = f"{GROUP}/mig-request"  # JSON, written by the scheduler
NODE_MIG_STATUS = f"{GROUP}/mig-status"  # JSON, the agent's answer to the request
IDLE_SINCE = f"{GROUP}/gpu-idle-since"  # on a pod: RFC 3339 time its GPUs went idle
MIG_STATIC_LABEL = f"{GROUP}/mig-static"  # node label set by the admin: "true" = never changed
