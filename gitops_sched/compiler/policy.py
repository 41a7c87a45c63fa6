"""The scheduler's policy as a ConfigMap in the system namespace (rendered with the namespace).

`policy.yaml` is everything the scheduler needs from the repo in one document
(`contract.policy` says its name and how it is read): its settings, the department/project
tree with the values the engine's queues take (GPU quota and limit, the over-quota weight
after the cluster's default rule, ranks, time limits, ages), and the node groups as the
scheduler matches nodes against them. Quantities are plain numbers: GPUs, bytes, seconds.
It carries nothing the scheduler does not read: the scheduler reads it back with
`bridge.policy.read_policy_document`, which derives nothing again.

Node groups find their nodes by `nodeSelector` alone: labels a real cluster gives its nodes
(GPU Feature Discovery's, a cloud's node pool, an admin's). Nothing labels nodes for us; the
scheduler matches live nodes against the selectors written here, and the workloads' pods
require the same labels (`workloads`).
"""

from __future__ import annotations

from typing import Any

from gitops_sched.compiler.meta import object_meta
from gitops_sched.compiler.yamltext import dump_object
from gitops_sched.config.model import (
    Department,
    FairnessSettings,
    MigLayout,
    NodeGroup,
    Project,
    Repo,
    Resources,
    over_quota_weight,
    queue_ages,
)
from gitops_sched.contract.policy import POLICY_CONFIGMAP, POLICY_KEY, compact, policy_number


def render_policy(repo: Repo, written: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The system namespace and the policy ConfigMap; `written`: its policy document, added
    by its text."""
    cluster = repo.required_cluster
    document = policy_document(repo)
    text = dump_object(document)
    if written is not None:
        written[text] = document
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": object_meta(cluster.system_namespace),
    }
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(POLICY_CONFIGMAP, cluster.system_namespace),
        "data": {POLICY_KEY: text},
    }
    return [namespace, config_map]


def policy_document(repo: Repo) -> dict[str, Any]:
    cluster = repo.required_cluster
    policy = cluster.policy
    projects: dict[str, list[Project]] = {}
    for project in sorted(repo.projects, key=lambda p: p.name):
        projects.setdefault(project.department, []).append(project)
    return {
        "cluster": cluster.name,
        "schedulerName": cluster.scheduler_name,
        "systemNamespace": cluster.system_namespace,
        "cyclePeriodSeconds": policy.cycle_period_s,
        "reclaimThreshold": policy_number(policy.reclaim_threshold),
        "consolidation": policy.consolidation,
        "staleGangGraceSeconds": policy.stale_gang_grace_s,
        **_fairness(policy.fairness),
        "departments": [
            _department(repo, d, projects.get(d.name, []))
            for d in sorted(repo.departments, key=lambda d: d.name)
        ],
        "nodeGroups": [_node_group(g) for g in sorted(repo.node_groups, key=lambda g: g.name)],
    }


def _fairness(fairness: FairnessSettings | None) -> dict[str, Any]:
    """`fairness:` in seconds, or nothing where it is not configured (the documents of
    repos without it stay as they were)."""
    if fairness is None:
        return {}
    return {
        "fairness": {
            "historyWeight": policy_number(fairness.history_weight),
            "windowSeconds": fairness.window_s,
            "halfLifeSeconds": fairness.half_life_s,
        }
    }


def _department(repo: Repo, department: Department, projects: list[Project]) -> dict[str, Any]:
    """The department's entry; its `age` and its projects' are the repo's stand-ins for
    creation times (bridge.queue_ages), written because the document is sorted by name."""
    project_ages = queue_ages(repo.projects)
    return compact(
        {
            "name": department.name,
            "age": queue_ages(repo.departments)[department.name],
            "quota": _gpus(department.quota),
            "overQuotaWeight": _weight(repo, department.over_quota_weight, department.quota),
            "limit": _gpus(department.limit),
            "projects": [_project(repo, p, project_ages[p.name]) for p in projects],
        }
    )


def _project(repo: Repo, project: Project, age: int) -> dict[str, Any]:
    by_type = sorted(project.node_groups_by_type.items())
    min_runtime = repo.min_runtime(project)
    return compact(
        {
            "name": project.name,
            "age": age,
            "namespace": repo.required_cluster.project_namespace(project.name),
            "quota": _gpus(project.quota),
            "nodeGroupQuotas": {g: _gpus(q) for g, q in sorted(project.node_group_quotas.items())},
            "overQuotaAllowed": project.over_quota_allowed,
            "overQuotaWeight": _weight(repo, project.over_quota_weight, project.quota),
            "overQuotaRank": project.over_quota_rank,
            "limit": _gpus(project.limit),
            "nodeGroups": list(project.node_groups),
            "nodeGroupsByType": {wtype: list(groups) for wtype, groups in by_type},
            "interactiveTimeLimitSeconds": project.interactive_time_limit_s,
            "idleGpuTimeoutSeconds": project.idle_gpu_timeout_s,
            "preemptMinRuntimeSeconds": min_runtime.preempt_s,
            "reclaimMinRuntimeSeconds": min_runtime.reclaim_s,
        }
    )


def _node_group(group: NodeGroup) -> dict[str, Any]:
    return compact(
        {
            "name": group.name,
            "role": group.role,
            "nodeSelector": dict(sorted(group.node_selector.items())),
            "gpusPerNode": group.gpus_per_node,
            "gpuModel": group.gpu_model,
            "gpuMemoryBytes": policy_number(group.gpu_memory),
            "mig": _mig(group),
            "topology": compact({"label": group.topology_label}),
        }
    )


def _mig(group: NodeGroup) -> dict[str, Any]:
    """MIG mode; when on, who decides the instances, and a static group's layout as written."""
    if not group.mig_enabled:
        return {"enabled": False}
    layouts = group.mig_layouts if group.mig_static else ()
    return compact(
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


def _gpus(resources: Resources) -> dict[str, Any]:
    """The GPU part of a quota or limit: all the engine's queues take of them (cpu and
    memory are checked by `validate`, not scheduled on)."""
    return compact({"gpu": policy_number(resources.gpu)})


def _weight(repo: Repo, explicit: float | None, quota: Resources) -> int | float | None:
    """The over-quota weight the queue gets: the explicit one, else the cluster's rule."""
    rule = repo.required_cluster.policy.over_quota_weight
    return policy_number(over_quota_weight(explicit, quota, rule))
