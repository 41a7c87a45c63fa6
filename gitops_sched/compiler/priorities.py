"""PriorityClasses for the workload types, in KAI's order: inference > interactive > train.

The gitops-sched scheduler decides preemption itself, from quotas and the preemptible flag;
the classes give pods their priority value and stop any other scheduler in the cluster from
preempting on behalf of the types that must never need to (interactive and inference run
inside their project's deserved quota).
"""

from __future__ import annotations

from typing import Any

from gitops_sched.compiler.meta import object_meta
from gitops_sched.config.model import DEFAULT_PRIORITY, PREEMPTIBLE_TYPES

DESCRIPTIONS = {
    "train": "gitops-sched training jobs: preemptible, may run over quota on idle GPUs.",
    "interactive": "gitops-sched interactive (build) workloads: inside the deserved quota.",
    "inference": "gitops-sched inference services: inside the deserved quota, outrank training.",
}


def priority_class_name(workload_type: str) -> str:
    return f"gitops-sched-{workload_type}"


def render_priority_classes() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": object_meta(priority_class_name(wtype)),
            "value": value,
            "globalDefault": False,
            "preemptionPolicy": ("PreemptLowerPriority" if wtype in PREEMPTIBLE_TYPES else "Never"),
            "description": DESCRIPTIONS[wtype],
        }
        for wtype, value in DEFAULT_PRIORITY.items()
    ]
