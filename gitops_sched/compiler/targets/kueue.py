"""`render --target kueue`: the repo for Kueue (`kueue.x-k8s.io/v1beta2`), with kube-scheduler
placing the pods Kueue admits.

- A ResourceFlavor per node group, its `nodeLabels` the group's node selector.
- A Cohort per department under one root Cohort named after the cluster (hierarchical
  cohorts), the department's over-quota weight as its fair-sharing weight.
- A ClusterQueue per project in its department's cohort: one resource group covering cpu,
  memory, `nvidia.com/gpu` and the MIG resources workloads ask for, a flavor per node group
  the project may use. GPU `nominalQuota` is the node group's quota (or the overall quota on
  the first group); cpu and memory the project's quota, else the group's capacity (our
  scheduler does not limit them). `borrowingLimit` is limit - quota, 0 when over quota is
  denied; no `lendingLimit`, as idle quota is lent in full. Fair-sharing weight from the
  over-quota weight; preemption: reclaim from borrowers in the cohort (`Any`), lower priority
  inside the queue, never to borrow.
- MIG instances are lent by the root cohort (its own nominal quota: what the node groups hold),
  since our quotas count MIG as a share of GPUs, not per profile.
- A LocalQueue per project namespace; WorkloadPriorityClasses (and the PriorityClasses pods
  name) per workload type; Jobs created suspended, Jobs and Deployments labelled with their
  queue and priority class; an elastic Job's gang size is Kueue's minimum parallelism.
"""

from __future__ import annotations

from collections.abc import Collection
from decimal import Decimal
from typing import Any

from gitops_sched.compiler.meta import object_meta
from gitops_sched.compiler.priorities import (
    DESCRIPTIONS,
    priority_class_name,
    render_priority_classes,
)
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
    DEFAULT_PRIORITY,
    NodeGroup,
    Project,
    Repo,
    Resources,
    Workload,
    over_quota_weight,
)
from gitops_sched.contract.pods import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from gitops_sched.hardware.mig import compute_share

NAME = "Kueue"
API_VERSION = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
PREEMPTION = {
    "reclaimWithinCohort": "Any",
    "withinClusterQueue": "LowerPriority",
    "borrowWithinCohort": {"policy": "Never"},
}

CHECKS = (
    differences.idle_timeout,
    differences.fractions,
    differences.dynamic_mig,
    differences.priority_override,
    differences.over_quota_rank,
    differences.spread_quota,
    differences.department,
    differences.cohort_names,
    differences.unknown_capacity,
)


def render_kueue(repo: Repo, skip: Collection[tuple[str, str]] = ()) -> Rendered:
    cluster = repo.required_cluster
    rule = cluster.policy.over_quota_weight
    migs = _mig_resources(repo)
    own: list[dict[str, Any]] = [_flavor(g) for g in repo.node_groups]
    own.append(_cohort(cluster.name, None, None, _mig_pool(repo, migs)))
    for d in repo.departments:
        weight = over_quota_weight(d.over_quota_weight, d.quota, rule)
        own.append(_cohort(d.name, cluster.name, weight, []))
    for p in repo.projects:
        own.append(
            _cluster_queue(repo, p, migs, over_quota_weight(p.over_quota_weight, p.quota, rule))
        )
        own.append(_local_queue(cluster.project_namespace(p.name), p.name))
    own += render_priority_classes()
    own += [_workload_priority_class(wtype, value) for wtype, value in DEFAULT_PRIORITY.items()]
    return render_for(repo, own, _mark, CHECKS, NAME, skip)


def _obj(
    kind: str, name: str, spec: dict[str, Any], namespace: str | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": object_meta(name, namespace),
        "spec": spec,
    }


def _flavor(group: NodeGroup) -> dict[str, Any]:
    return _obj(
        "ResourceFlavor", group.name, {"nodeLabels": dict(sorted(group.node_selector.items()))}
    )


def _cohort(
    name: str, parent: str | None, weight: float | None, groups: list[dict[str, Any]]
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parentName"] = parent
    if weight is not None:
        spec["fairSharing"] = {"weight": str(plain_number(weight))}
    if groups:
        spec["resourceGroups"] = groups
    return _obj("Cohort", name, spec)


def _mig_resources(repo: Repo) -> list[str]:
    """The MIG resources workloads ask for: a queue must cover every resource it admits."""
    profiles = {repo.pod_spec(w).get("mig") for w in repo.workloads}
    return sorted(f"{MIG_RESOURCE_PREFIX}{p}" for p in profiles if p)


def _mig_pool(repo: Repo, migs: list[str]) -> list[dict[str, Any]]:
    """The root cohort's MIG instances per MIG node group: a static layout's declared ones, or
    as many as fit on every GPU for a dynamic group."""
    groups = [g for g in repo.node_groups if g.mig_enabled and g.gpu_model]
    if not migs or not groups:
        return []
    flavors = []
    for g in groups:
        resources = []
        for resource in migs:
            profile = resource.removeprefix(MIG_RESOURCE_PREFIX)
            resources.append({"name": resource, "nominalQuota": str(_mig_count(g, profile))})
        flavors.append({"name": g.name, "resources": resources})
    return [{"coveredResources": migs, "flavors": flavors}]


def _mig_count(group: NodeGroup, profile: str) -> int:
    assert group.gpu_model is not None
    if group.mig_static:
        per_node = sum(
            sum(1 for i in group.mig_layout(gpu) or () if i.profile == profile)
            for gpu in range(group.gpus_per_node)
        )
        return per_node * group.node_count
    try:
        per_gpu = int(1 / compute_share(group.gpu_model, profile) + 1e-9)
    except (KeyError, ValueError, ZeroDivisionError):  # a profile the model does not have
        return 0
    return per_gpu * group.gpus_per_node * group.node_count


def _cluster_queue(repo: Repo, project: Project, migs: list[str], weight: float) -> dict[str, Any]:
    groups = {g.name: g for g in repo.node_groups}
    flavors = []
    for index, name in enumerate(differences.spread_groups(repo, project.name)):
        group = groups[name]
        if project.node_group_quotas:
            quota = project.node_group_quotas.get(name) or _none_of(project.quota)
        else:  # an overall quota sits on the first flavor (GS909): borrowed on the others
            quota = project.quota if index == 0 else _none_of(project.quota)
        resources = [
            _resource("cpu", quota.cpu, group.cpu_per_node, group, project),
            _resource("memory", quota.memory, group.memory_per_node, group, project),
            _gpu(quota.gpu, project),
            *({"name": m, "nominalQuota": "0"} for m in migs),
        ]
        flavors.append({"name": name, "resources": resources})
    spec: dict[str, Any] = {
        "cohortName": project.department,
        "namespaceSelector": {
            "matchLabels": {
                "kubernetes.io/metadata.name": repo.required_cluster.project_namespace(project.name)
            }
        },
        "fairSharing": {"weight": str(plain_number(weight))},
        "preemption": PREEMPTION,
        "resourceGroups": [
            {"coveredResources": ["cpu", "memory", GPU_RESOURCE, *migs], "flavors": flavors}
        ],
    }
    return _obj("ClusterQueue", project.name, spec)


def _none_of(quota: Resources) -> Resources:
    """No quota on this flavor of what the project limits: 0 where it sets a quota (it
    borrows there), unset (the group's capacity) where it sets none."""
    zero = Decimal(0)
    return Resources(
        gpu=None if quota.gpu is None else 0.0,
        cpu=None if quota.cpu is None else zero,
        memory=None if quota.memory is None else zero,
    )


def _resource(
    name: str, quota: Any, per_node: Any, group: NodeGroup, project: Project
) -> dict[str, Any]:
    """cpu or memory: the project's quota where it sets one (borrowing nothing when over quota
    is denied), else the node group's capacity, which our scheduler leaves unlimited."""
    if quota is not None:
        entry = {"name": name, "nominalQuota": str(quota)}
        if not project.over_quota_allowed:
            entry["borrowingLimit"] = "0"
        return entry
    capacity = (per_node or 0) * group.node_count
    return {"name": name, "nominalQuota": str(capacity)}


def _gpu(quota: float | None, project: Project) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": GPU_RESOURCE, "nominalQuota": str(plain_number(quota or 0))}
    if not project.over_quota_allowed:
        entry["borrowingLimit"] = "0"
    elif project.limit.gpu is not None:
        entry["borrowingLimit"] = str(
            plain_number(max(project.limit.gpu - (project.quota.gpu or 0), 0))
        )
    return entry


def _local_queue(namespace: str, project: str) -> dict[str, Any]:
    return _obj("LocalQueue", project, {"clusterQueue": project}, namespace)


def _workload_priority_class(wtype: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": object_meta(priority_class_name(wtype)),
        "value": value,
        "description": DESCRIPTIONS[wtype],
    }


def _mark(obj: dict[str, Any], workload: Workload, project: Project) -> None:
    """Queue and priority labels; a Job starts suspended until Kueue admits it; pods go to
    kube-scheduler."""
    labels = {QUEUE_LABEL: project.name, PRIORITY_LABEL: priority_class_name(workload.type)}
    add_labels(obj["metadata"], labels)
    template = pod_template(obj)
    add_labels(template["metadata"], labels)
    template["spec"].pop("schedulerName", None)
    if obj["kind"] == "Job":
        obj["spec"] = {"suspend": True, **obj["spec"]}
        if workload.min_available < workload.replicas:
            add_annotations(obj["metadata"], {MIN_PARALLELISM: str(workload.min_available)})
