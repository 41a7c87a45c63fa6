"""`render --target kai`: the repo for NVIDIA KAI Scheduler.

Queues (`scheduling.run.ai/v2`): a parent queue per department, a leaf per project (KAI
schedules only on leaves). Each has `resources.gpu|cpu|memory` with `quota` (GPUs, millicores,
megabytes of 10^6 bytes), `limit` and `overQuotaWeight`; -1 is KAI's "unlimited". CPU or memory
the repo leaves unset is unlimited (quota and limit -1), as it is for our scheduler (an unset
GPU quota is 0); over quota
denied is a limit equal to the quota. A leaf's `priority` is the project's over-quota rank
(KAI serves higher priorities first and reclaims from them last).

Workloads name `kai-scheduler`, carry the queue label on the Job or Deployment and its pods
(KAI's pod grouper reads the top owner first), KAI's priority classes (train 50,
build-preemptible 75, build 100, inference 125: installed by KAI, so not rendered here) and
the preemptibility label; fractions and GPU memory (MiB) are KAI's `gpu-fraction` and
`gpu-memory` annotations; whole GPUs and MIG stay the device plugin's resources.
"""

from __future__ import annotations

from collections.abc import Collection
from decimal import Decimal
from typing import Any

from gitops_sched.compiler.meta import object_meta
from gitops_sched.compiler.targets import differences
from gitops_sched.compiler.targets.common import (
    Rendered,
    add_annotations,
    add_labels,
    plain_number,
    pod_template,
    render_for,
)
from gitops_sched.config.model import (
    Project,
    Repo,
    Resources,
    Workload,
    over_quota_weight,
    quantity,
)
from gitops_sched.contract.pods import GPU_FRACTION as OUR_FRACTION
from gitops_sched.contract.pods import GPU_MEMORY as OUR_MEMORY

NAME = "KAI Scheduler"
API_VERSION = "scheduling.run.ai/v2"
SCHEDULER_NAME = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
GPU_FRACTION = "gpu-fraction"
GPU_MEMORY_MIB = "gpu-memory"
UNLIMITED = -1
MIB = 1024 * 1024
# KAI's priority classes by workload type; an interactive workload that opts in to preemption
# is KAI's build-preemptible
PRIORITY_CLASSES = {"train": "train", "interactive": "build", "inference": "inference"}
BUILD_PREEMPTIBLE = "build-preemptible"

CHECKS = (
    differences.node_group_quota,
    differences.idle_timeout,
    differences.batch_gang,
    differences.dynamic_mig,
    differences.fraction_policy,
    differences.priority_override,
    differences.queue_names,
)


def render_kai(repo: Repo, skip: Collection[tuple[str, str]] = ()) -> Rendered:
    rule = repo.required_cluster.policy.over_quota_weight
    queues = [
        _queue(
            d.name, None, d.quota, d.limit, over_quota_weight(d.over_quota_weight, d.quota, rule)
        )
        for d in repo.departments
    ]
    for p in repo.projects:
        weight = over_quota_weight(p.over_quota_weight, p.quota, rule)
        limit = p.limit if p.over_quota_allowed else _capped(p.quota, p.limit)
        queues.append(_queue(p.name, p, p.quota, limit, weight))
    return render_for(repo, queues, _mark, CHECKS, NAME, skip)


def _capped(quota: Resources, limit: Resources) -> Resources:
    """Over quota denied: each resource's limit is its quota (or the limit, if lower)."""

    def cap(q: Any, lim: Any) -> Any:
        return q if lim is None else (lim if q is None else min(q, lim))

    return Resources(
        cap(quota.gpu, limit.gpu), cap(quota.cpu, limit.cpu), cap(quota.memory, limit.memory)
    )


def _queue(
    name: str, project: Project | None, quota: Resources, limit: Resources, weight: float
) -> dict[str, Any]:
    """A department's queue (`project` None) or a project's leaf under its department's."""
    units = {"gpu": Decimal(1), "cpu": Decimal("0.001"), "memory": Decimal(10**6)}
    resources = {}
    for resource, unit in units.items():
        amount, cap = getattr(quota, resource), getattr(limit, resource)
        if resource == "gpu" and amount is None:  # no GPU quota: nothing deserved
            amount = 0
        resources[resource] = {
            "quota": _number(amount, unit),
            "limit": _number(cap, unit),
            "overQuotaWeight": plain_number(weight),
        }
    spec: dict[str, Any] = {"displayName": name}
    if project is not None:
        spec["parentQueue"] = project.department
        spec["priority"] = project.over_quota_rank
    spec["resources"] = resources
    return {"apiVersion": API_VERSION, "kind": "Queue", "metadata": object_meta(name), "spec": spec}


def _number(amount: Any, unit: Decimal) -> int | float:
    return UNLIMITED if amount is None else plain_number(Decimal(str(amount)) / unit)


def _mark(obj: dict[str, Any], workload: Workload, project: Project) -> None:
    """Point a Job or Deployment and its pods at KAI and the project's leaf queue."""
    queue = {QUEUE_LABEL: project.name}
    add_labels(obj["metadata"], queue)
    template = pod_template(obj)
    preemptibility = "preemptible" if workload.preemptible else "non-preemptible"
    add_labels(template["metadata"], {**queue, PREEMPTIBILITY_LABEL: preemptibility})
    spec = template["spec"]
    spec["schedulerName"] = SCHEDULER_NAME
    interactive_preemptible = workload.type == "interactive" and workload.preemptible
    spec["priorityClassName"] = (
        BUILD_PREEMPTIBLE if interactive_preemptible else PRIORITY_CLASSES[workload.type]
    )
    add_annotations(template["metadata"], _sharing(obj))


def _sharing(obj: dict[str, Any]) -> dict[str, str]:
    """KAI's GPU sharing annotations, from ours on the pod template."""
    ours = pod_template(obj)["metadata"].get("annotations", {})
    if OUR_FRACTION in ours:
        return {GPU_FRACTION: ours[OUR_FRACTION]}
    if OUR_MEMORY in ours:
        return {GPU_MEMORY_MIB: str(int(quantity(ours[OUR_MEMORY]) // MIB))}
    return {}
