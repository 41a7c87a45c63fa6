"""The policy ConfigMap the compiler wrote (`compiler.policy`), read back for the in-cluster
scheduler: the engine's Policy, each queue's values as written (the writer already applied
the cluster's rules, so the cluster schedules with exactly the policy `simulate` and `plan`
use), and the projects and node groups the scheduler matches live objects against.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import yaml

from gitops_sched.bridge.build import engine_policy, group_gpu_quotas
from gitops_sched.config.model import (
    FairnessSettings,
    MigLayout,
    NodeGroup,
    Project,
    Resources,
    SchedulerPolicy,
)
from gitops_sched.contract.policy import POLICY_KEY, PolicyFields, PolicyFormatError
from gitops_sched.engine.types import Policy, QueueSpec
from gitops_sched.hardware.mig import MigInstance


@dataclass(frozen=True)
class PolicyProject:
    """What the scheduler needs of a project beyond its queue: its namespace and groups."""

    name: str
    department: str
    namespace: str
    node_groups: tuple[str, ...]  # allowed node groups; empty = every group that runs work
    node_groups_by_type: dict[str, tuple[str, ...]]

    # the model's rule: the list for the type, else the overall list (a ClassVar typed
    # loosely: mypy would check its `self` against Project)
    allowed_node_groups: ClassVar[Callable[..., tuple[str, ...]]] = Project.allowed_node_groups


@dataclass(frozen=True)
class PolicyNodeGroup:
    """A node group as the policy says it: how its nodes are found and what GPUs they hold
    when a node publishes nothing itself."""

    name: str
    role: str
    node_selector: dict[str, str]  # the group's nodes: those with every one of these labels
    gpus_per_node: int
    gpu_model: str | None
    gpu_memory_bytes: int | None
    mig_enabled: bool
    mig_strategy: str
    mig_layouts: tuple[MigLayout, ...]
    topology_label: str | None

    # the model's rules, shared rather than restated (the properties ClassVars typed Any:
    # mypy would check their `self` against NodeGroup)
    mig_static: ClassVar[Any] = NodeGroup.mig_static
    mig_layout = NodeGroup.mig_layout
    runs_workloads: ClassVar[Any] = NodeGroup.runs_workloads


@dataclass(frozen=True)
class ClusterPolicy:
    """The policy document read back: the engine's `Policy` (built by the same code as
    `bridge.policy_from_repo`) and what the in-cluster scheduler needs besides."""

    policy: Policy
    cluster: str
    scheduler_name: str
    system_namespace: str
    cycle_period_s: float
    projects: dict[str, PolicyProject]  # by name
    namespaces: dict[str, str]  # namespace -> project
    node_groups: tuple[PolicyNodeGroup, ...]  # by name


def policy_from_configmap(config_map: dict[str, Any]) -> ClusterPolicy:
    """The policy in the `gitops-sched-policy` ConfigMap (its `policy.yaml`)."""
    text = (config_map.get("data") or {}).get(POLICY_KEY)
    if not isinstance(text, str):
        raise PolicyFormatError(f"data.{POLICY_KEY}: missing")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise PolicyFormatError(f"data.{POLICY_KEY}: not YAML: {error}") from None
    except RecursionError:  # PyYAML's Python parts recurse per level of nesting
        raise PolicyFormatError(f"data.{POLICY_KEY}: not YAML: nested too deep") from None
    return read_policy_document(data)


def read_policy_document(data: Any) -> ClusterPolicy:
    """The `policy_document` a compiler wrote, read back; PolicyFormatError where it is
    malformed. Keys the writer leaves out when unset take the model's defaults."""
    doc = PolicyFields(data, "")
    settings = SchedulerPolicy(
        cycle_period_s=doc.integer("cyclePeriodSeconds", SchedulerPolicy.cycle_period_s),
        reclaim_threshold=float(doc.number("reclaimThreshold", 0)),
        consolidation=doc.flag("consolidation", True),
        stale_gang_grace_s=doc.integer("staleGangGraceSeconds", SchedulerPolicy.stale_gang_grace_s),
        fairness=_read_fairness(doc),
    )
    departments, queues, projects = [], [], {}
    for department in doc.items("departments"):
        name = department.text("name")
        departments.append(_read_queue(department, name))
        for entry in department.items("projects"):
            project = _read_project(entry, name)
            projects[project.name] = project
            queues.append(
                _read_queue(
                    entry,
                    project.name,
                    parent=name,
                    over_quota_allowed=entry.flag("overQuotaAllowed", True),
                    over_quota_rank=entry.integer("overQuotaRank", 0),
                    interactive_time_limit_s=entry.integer("interactiveTimeLimitSeconds", None),
                    idle_timeout_s=entry.integer("idleGpuTimeoutSeconds", None),
                    preempt_min_runtime_s=float(entry.integer("preemptMinRuntimeSeconds", 0)),
                    reclaim_min_runtime_s=float(entry.integer("reclaimMinRuntimeSeconds", 0)),
                    pool_quotas=_read_group_quotas(entry),
                )
            )
    groups = sorted((_read_node_group(g) for g in doc.items("nodeGroups")), key=lambda g: g.name)
    return ClusterPolicy(
        policy=engine_policy(settings, departments, queues),
        cluster=doc.text("cluster", ""),
        scheduler_name=doc.text("schedulerName"),
        system_namespace=doc.text("systemNamespace"),
        cycle_period_s=float(settings.cycle_period_s),
        projects=projects,
        namespaces={p.namespace: p.name for p in projects.values()},
        node_groups=tuple(groups),
    )


def _read_fairness(doc: PolicyFields) -> FairnessSettings | None:
    """Fairness over time as the writer wrote it (in seconds); None where it is left out."""
    if doc.data.get("fairness") is None:
        return None
    fairness = doc.mapping("fairness")
    return FairnessSettings(
        history_weight=float(fairness.number("historyWeight", 1)),
        window_s=fairness.integer("windowSeconds", FairnessSettings().window_s),
        half_life_s=fairness.integer("halfLifeSeconds", 0),
    )


def _read_queue(entry: PolicyFields, name: str, **project: Any) -> QueueSpec:
    """A department's or project's queue, its values as the writer worked them out."""
    limit = entry.mapping("limit").number("gpu", None)
    return QueueSpec(
        name=name,
        deserved=float(entry.mapping("quota").number("gpu", 0)),
        over_quota_weight=float(entry.number("overQuotaWeight")),
        limit=None if limit is None else float(limit),
        age=entry.integer("age", 0),
        **project,
    )


def _read_group_quotas(entry: PolicyFields) -> tuple[tuple[str, float], ...]:
    """`nodeGroupQuotas`: the project's GPU quota per node group (engine.pools)."""
    by_group = entry.mapping("nodeGroupQuotas")
    quotas = {g: Resources(gpu=by_group.mapping(g).number("gpu", 0)) for g in by_group.data}
    return group_gpu_quotas(quotas)


def _read_project(entry: PolicyFields, department: str) -> PolicyProject:
    by_type = entry.mapping("nodeGroupsByType")
    return PolicyProject(
        name=entry.text("name"),
        department=department,
        namespace=entry.text("namespace"),
        node_groups=entry.texts("nodeGroups"),
        node_groups_by_type={wtype: by_type.texts(wtype) for wtype in sorted(by_type.data)},
    )


def _read_node_group(entry: PolicyFields) -> PolicyNodeGroup:
    selector = entry.mapping("nodeSelector")
    mig = entry.mapping("mig")
    memory = entry.number("gpuMemoryBytes", None)
    return PolicyNodeGroup(
        name=entry.text("name"),
        role=entry.text("role", "gpu-worker"),
        node_selector={key: selector.text(key) for key in sorted(selector.data)},
        gpus_per_node=entry.integer("gpusPerNode", 0),
        gpu_model=entry.text("gpuModel", None),
        gpu_memory_bytes=None if memory is None else int(memory),
        mig_enabled=mig.flag("enabled", False),
        mig_strategy=mig.text("strategy", "dynamic"),
        mig_layouts=_read_layouts(mig),
        topology_label=entry.mapping("topology").text("label", None),
    )


def _read_layouts(mig: PolicyFields) -> tuple[MigLayout, ...]:
    """`layout` (every GPU) then each `byGpu` entry, as the model keeps them."""
    layouts = []
    if "layout" in mig.data:
        layouts.append(MigLayout(None, _read_instances(mig, "layout"), ("mig", "layout")))
    for i, entry in enumerate(mig.items("byGpu")):
        gpus = tuple(entry.integers("gpus"))
        layouts.append(MigLayout(gpus, _read_instances(entry, "layout"), ("mig", "byGpu", i)))
    return tuple(layouts)


def _read_instances(entry: PolicyFields, key: str) -> tuple[MigInstance, ...]:
    return tuple(MigInstance(i.text("profile"), i.integer("start")) for i in entry.items(key))
