"""A CustomResourceDefinition per gitops-sched kind, so the config lives in the cluster too.

The spec schema comes from the kind's JSON Schema (see `structural`); the status schema is
what the scheduler and reconciler write back: per project and department the deserved quota,
fair share, allocated and queued GPUs; per workload its phase and placement; for the cluster
the synced commit and the objects that drifted. Workloads live in their project's namespace;
every other kind is cluster-scoped.
"""

from __future__ import annotations

from typing import Any

from gitops_sched.compiler.meta import object_meta
from gitops_sched.compiler.structural import structural_schema
from gitops_sched.config.document import KINDS
from gitops_sched.config.schema import schema_for
from gitops_sched.contract.labels import API_VERSION, GROUP

VERSION = API_VERSION.split("/")[1]
NAMESPACED_KINDS = ("Workload",)


def plural(kind: str) -> str:
    return f"{kind.lower()}s"


def _number(description: str) -> dict[str, Any]:
    return {"type": "number", "description": description}


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


_CONDITIONS = {
    "type": "array",
    "description": "Observations of the object's state, one per condition type.",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
    "items": {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": _string("The condition, e.g. Ready or Synced."),
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": _string("A CamelCase reason for the last transition."),
            "message": _string("A human-readable explanation."),
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        },
    },
}

_QUEUE_STATUS = {
    "deserved": _number("GPUs guaranteed by the quota (the deserved share)."),
    "fairShare": _number("GPUs this level gets under the current demand, quota plus spare."),
    "allocated": _number("GPUs its running workloads hold."),
    "queued": _number("GPUs its pending workloads ask for."),
}

STATUS_FIELDS: dict[str, dict[str, Any]] = {
    "Cluster": {
        "syncedCommit": _string("The config repo commit the cluster was last synced to."),
        "lastAttemptedCommit": _string("The last commit the reconciler tried, valid or not."),
        "lastSyncTime": {
            "type": "string",
            "format": "date-time",
            "description": "When the last sync that changed something (or failed) ended.",
        },
        "objects": {"type": "integer", "description": "Objects the synced commit renders."},
        "applied": {"type": "integer", "description": "Objects the last sync applied."},
        "replaced": {
            "type": "integer",
            "description": "Objects the last sync deleted and created again, because a "
            "field Kubernetes fixes at creation changed (a Job's pod template); their "
            "running pods were stopped. Counted in applied too.",
        },
        "pruned": {"type": "integer", "description": "Objects the last sync deleted."},
        "drift": {
            "type": "array",
            "description": "Managed objects whose live state differed from the repo and were "
            "restored by the last sync (Kind/ns/name: fields).",
            "items": {"type": "string"},
        },
        "replacing": {
            "type": "array",
            "description": "Replacements whose old object is still being deleted (its pods "
            "stopping); a later sync creates them (Kind/ns/name: why).",
            "items": {"type": "string"},
        },
        "errors": {
            "type": "array",
            "description": "Why the last sync failed: invalid config or objects not applied.",
            "items": {"type": "string"},
        },
        "warnings": {
            "type": "array",
            "description": "What the last sync left for a reason that is no failure: a "
            "namespace the repo dropped kept because it holds objects gitops-sched does not "
            "manage (Kind/name: why).",
            "items": {"type": "string"},
        },
    },
    "NodeGroup": {},
    "Department": _QUEUE_STATUS,
    "Project": {
        **_QUEUE_STATUS,
        "nodeGroups": {
            "type": "object",
            "description": "With quotas per node group: the same numbers per node group.",
            "additionalProperties": {"type": "object", "properties": _QUEUE_STATUS},
        },
    },
    "Template": {},
    "Workload": {
        "phase": _string("Queued, Running, Preempted, Succeeded or Failed."),
        "node": _string("The node its (first) pod runs on."),
        "gpus": _number("GPUs it holds, fractions and MIG slices included."),
        "reason": _string("Why it is in this phase, e.g. why it waits in the queue."),
    },
}

_USAGE_BUCKETS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "start": _number("When the bucket starts (Unix seconds)."),
            "gpuSeconds": _number("GPU-seconds the project's pods held in it."),
        },
    },
}

# fairness over time: a Project's past usage, kept here by the scheduler (scheduler.usage)
STATUS_FIELDS["Project"] = {
    **STATUS_FIELDS["Project"],
    "usage": {
        "type": "object",
        "description": "Past GPU usage in the policy's fairness window (fairness over time): "
        "GPU-seconds per closed bucket of the window, oldest first, kept by the scheduler.",
        "properties": {
            "buckets": _USAGE_BUCKETS,
            "nodeGroups": {
                "type": "object",
                "description": "With quotas per node group: the same per node group, GPU-seconds "
                "held there (the project's over-quota share in a group goes by its usage there).",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"buckets": _USAGE_BUCKETS},
                },
            },
        },
    },
}

_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _column(name: str, kind: str, path: str) -> dict[str, str]:
    return {"name": name, "type": kind, "jsonPath": path}


_QUEUE_COLUMNS = [
    _column("Quota GPU", "number", ".spec.quota.gpu"),
    _column("Fair share", "number", ".status.fairShare"),
    _column("Allocated", "number", ".status.allocated"),
]

PRINTER_COLUMNS: dict[str, list[dict[str, str]]] = {
    "Cluster": [
        _column("Kubernetes", "string", ".spec.kubernetesVersion"),
        _column("Synced commit", "string", ".status.syncedCommit"),
    ],
    "NodeGroup": [
        _column("Nodes", "integer", ".spec.nodeCount"),
        _column("GPUs per node", "integer", ".spec.gpusPerNode"),
        _column("Model", "string", ".spec.gpu.model"),
    ],
    "Department": _QUEUE_COLUMNS,
    "Project": [_column("Department", "string", ".spec.department"), *_QUEUE_COLUMNS],
    "Template": [
        _column("Image", "string", ".spec.image"),
        _column("Default", "boolean", ".spec.default"),
    ],
    "Workload": [
        _column("Type", "string", ".spec.type"),
        _column("Phase", "string", ".status.phase"),
        _column("Node", "string", ".status.node"),
        _column("GPUs", "number", ".status.gpus"),
    ],
}


def render_crds() -> list[dict[str, Any]]:
    return [crd_for(kind) for kind in KINDS]


def crd_for(kind: str) -> dict[str, Any]:
    schema = schema_for(kind)
    spec_schema = structural_schema(schema["properties"]["spec"], schema.get("$defs", {}))
    status_schema = {
        "type": "object",
        "description": "Written by the gitops-sched scheduler and reconciler.",
        "properties": {**STATUS_FIELDS[kind], "conditions": _CONDITIONS},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": object_meta(f"{plural(kind)}.{GROUP}"),
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural(kind),
                "singular": kind.lower(),
                "categories": ["gitops-sched"],
            },
            "scope": "Namespaced" if kind in NAMESPACED_KINDS else "Cluster",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [*PRINTER_COLUMNS[kind], _AGE],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": schema.get("description", ""),
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }
