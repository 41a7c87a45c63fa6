"""The scheduler's policy as a ConfigMap in the system namespace (rendered with the namespace).

`policy.yaml` is everything the scheduler needs from the repo in one document: its settings,
the department/project tree with quotas, weights, ranks, limits and time limits, and the node
groups. Quantities are plain numbers: GPUs, CPU cores, bytes, seconds.

Node labels for node groups: the NodeGroup custom resources (see `resources`) carry the
selector that finds a group's nodes and the label that marks them; the reconciler labels the
matching nodes from those, since nodes are not objects a config repo creates.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gitops_sched.compiler.meta import object_meta
from gitops_sched.compiler.yamltext import dump_object
from gitops_sched.config.model import (
    Cluster,
    Department,
    MigLayout,
    NodeGroup,
    Project,
    Repo,
    Resources,
)

POLICY_CONFIGMAP = "gitops-sched-policy"
POLICY_KEY = "policy.yaml"


def render_policy(repo: Repo) -> list[dict[str, Any]]:
    cluster = repo.cluster
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": object_meta(cluster.system_namespace),
    }
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(POLICY_CONFIGMAP, cluster.system_namespace),
        "data": {POLICY_KEY: dump_object(policy_document(repo))},
    }
    return [namespace, config_map]


def policy_document(repo: Repo) -> dict[str, Any]:
    cluster: Cluster = repo.cluster
    policy = cluster.policy
    projects: dict[str, list[Project]] = {}
    for project in sorted(repo.projects, key=lambda p: p.name):
        projects.setdefault(project.department, []).append(project)
    return {
        "cluster": cluster.name,
        "schedulerName": cluster.scheduler_name,
        "systemNamespace": cluster.system_namespace,
        "cyclePeriodSeconds": policy.cycle_period_s,
        "reclaimThreshold": _number(policy.reclaim_threshold),
        "consolidation": policy.consolidation,
        "staleGangGraceSeconds": policy.stale_gang_grace_s,
        "defaultOverQuotaWeight": policy.over_quota_weight,
        "allowOversubscription": policy.allow_oversubscription,
        "departments": [
            _department(cluster, d, projects.get(d.name, []))
            for d in sorted(repo.departments, key=lambda d: d.name)
        ],
        "nodeGroups": [_node_group(g) for g in sorted(repo.node_groups, key=lambda g: g.name)],
    }


def _department(
    cluster: Cluster, department: Department, projects: list[Project]
) -> dict[str, Any]:
    return _compact(
        {
            "name": department.name,
            "quota": _resources(department.quota),
            "overQuotaWeight": _number(department.over_quota_weight),
            "limit": _resources(department.limit),
            "projects": [_project(cluster, p) for p in projects],
        }
    )


def _project(cluster: Cluster, project: Project) -> dict[str, Any]:
    by_group = sorted(project.node_group_quotas.items())
    by_type = sorted(project.node_groups_by_type.items())
    return _compact(
        {
            "name": project.name,
            "namespace": cluster.project_namespace(project.name),
            "quota": _resources(project.quota),
            "nodeGroupQuotas": {group: _resources(quota) for group, quota in by_group},
            "overQuotaAllowed": project.over_quota_allowed,
            "overQuotaWeight": _number(project.over_quota_weight),
            "overQuotaRank": project.over_quota_rank,
            "limit": _resources(project.limit),
            "nodeGroups": list(project.node_groups),
            "nodeGroupsByType": {wtype: list(groups) for wtype, groups in by_type},
            "interactiveTimeLimitSeconds": project.interactive_time_limit_s,
            "idleGpuTimeoutSeconds": project.idle_gpu_timeout_s,
        }
    )


def _node_group(group: NodeGroup) -> dict[str, Any]:
    key, value = group.node_label
    return _compact(
        {
            "name": group.name,
            "role": group.role,
            "nodeSelector": dict(sorted(group.node_selector.items())),
            "nodeLabel": {"key": key, "value": value},
            "nodeCount": group.node_count,
            "gpusPerNode": group.gpus_per_node,
            "gpuModel": group.gpu_model,
            "gpuMemoryBytes": _number(group.gpu_memory),
            "mig": _mig(group),
            "topology": _compact(
                {"label": group.topology_label, "nodesPerDomain": group.nodes_per_topology_domain}
            ),
            "cpuPerNode": _number(group.cpu_per_node),
            "memoryPerNodeBytes": _number(group.memory_per_node),
        }
    )


def _mig(group: NodeGroup) -> dict[str, Any]:
    """MIG mode; when on, who decides the instances, and a static group's layout as written."""
    if not group.mig_enabled:
        return {"enabled": False}
    layouts = group.mig_layouts if group.mig_static else ()
    return _compact(
        {
            "enabled": True,
            "strategy": group.mig_strategy,
            "layout": next((_instances(m) for m in layouts if m.gpus is None), None),
            "byGpu": [
                {"gpus": list(m.gpus), "layout": _instances(m)}
                for m in layouts
                if m.gpus is not None
            ],
        }
    )


def _instances(layout: MigLayout) -> list[dict[str, Any]]:
    return [{"profile": i.profile, "start": i.start} for i in layout.instances]


def _resources(resources: Resources) -> dict[str, Any]:
    return _compact(
        {
            "gpu": _number(resources.gpu),
            "cpu": _number(resources.cpu),
            "memoryBytes": _number(resources.memory),
        }
    )


def _number(value: float | Decimal | None) -> int | float | None:
    """Whole values as ints so `4` does not read `4.0`; None stays None."""
    if value is None:
        return None
    return int(value) if value == int(value) else float(value)


def _compact(values: dict[str, Any]) -> dict[str, Any]:
    """Without unset entries (None, empty lists and maps): the policy says only what is set."""
    return {k: v for k, v in values.items() if v is not None and v != [] and v != {}}
