"""From the config model to the engine's plain data: queues, simulated nodes, jobs.

The same translation serves `simulate`, `plan` (fair-share impact of a change) and the
in-cluster scheduler's policy, so the rules for weights and requests live only here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal
from typing import Protocol

from gitops_sched.config.model import (
    FairnessSettings,
    NodeGroup,
    Repo,
    Resources,
    SchedulerPolicy,
    Workload,
    gpu_request_of,
    over_quota_weight,
    queue_ages,
)
from gitops_sched.engine.types import (
    Fairness,
    Gpu,
    GpuRequest,
    Job,
    Node,
    Policy,
    QueueSpec,
    RequestKind,
)
from gitops_sched.hardware.gfd import gfd_labels
from gitops_sched.hardware.gpus import MIB, gpu_memory_mib, lookup_gpu_model
from gitops_sched.hardware.mig import MigInstance, in_layout_order


def queue_spec(
    name: str,
    quota: Resources,
    weight: float | None,
    limit: Resources,
    rule: str,
    *,
    parent: str = "",
    over_quota_allowed: bool = True,
    over_quota_rank: int = 0,
    interactive_time_limit_s: int | None = None,
    idle_timeout_s: int | None = None,
    preempt_min_runtime_s: int | None = None,
    reclaim_min_runtime_s: int | None = None,
    age: float = 0.0,
    pool_quotas: dict[str, Resources] | None = None,
) -> QueueSpec:
    """A department's or project's queue: its GPU quota is deserved, its weight the explicit
    one or the cluster's rule (the rule the policy document's writer applies too, so the
    scheduler reads the same queue back: `bridge.policy.read_policy_document`)."""
    return QueueSpec(
        name=name,
        deserved=quota.gpu or 0.0,
        over_quota_weight=over_quota_weight(weight, quota, rule),
        over_quota_allowed=over_quota_allowed,
        over_quota_rank=over_quota_rank,
        limit=limit.gpu,
        parent=parent,
        interactive_time_limit_s=interactive_time_limit_s,
        idle_timeout_s=idle_timeout_s,
        preempt_min_runtime_s=float(preempt_min_runtime_s or 0),
        reclaim_min_runtime_s=float(reclaim_min_runtime_s or 0),
        age=age,
        pool_quotas=group_gpu_quotas(pool_quotas or {}),
    )


def group_gpu_quotas(quotas: dict[str, Resources]) -> tuple[tuple[str, float], ...]:
    """A project's GPU quota per node group, by group name (engine.pools)."""
    return tuple(sorted((group, float(q.gpu or 0)) for group, q in quotas.items()))


def engine_policy(
    settings: SchedulerPolicy, departments: Iterable[QueueSpec], projects: Iterable[QueueSpec]
) -> Policy:
    """The engine's policy: the queues by name (whatever order they were declared in, so
    the repo and the policy document give the same Policy) with the cluster's knobs."""
    return Policy(
        departments=tuple(sorted(departments, key=lambda queue: queue.name)),
        projects=tuple(sorted(projects, key=lambda queue: queue.name)),
        reclaim_threshold=settings.reclaim_threshold,
        consolidation=settings.consolidation,
        stale_gang_grace_s=float(settings.stale_gang_grace_s),
        fairness=engine_fairness(settings.fairness),
    )


def engine_fairness(settings: FairnessSettings | None) -> Fairness | None:
    """The engine's fairness over time; None where it is not configured or its window is
    empty (the schema refuses 0s, but 0m0s is 0 too: nothing would be kept)."""
    if settings is None or settings.window_s <= 0:
        return None
    return Fairness(
        history_weight=settings.history_weight,
        window_s=float(settings.window_s),
        half_life_s=float(settings.half_life_s),
    )


def policy_from_repo(repo: Repo) -> Policy:
    """Departments and projects as the engine's queues, with the cluster's policy knobs."""
    settings = repo.cluster.policy if repo.cluster else SchedulerPolicy()
    rule = settings.over_quota_weight
    departments = (
        queue_spec(d.name, d.quota, d.over_quota_weight, d.limit, rule, age=ages[d.name])
        for ages in [queue_ages(repo.departments)]
        for d in repo.departments
    )
    projects = (
        queue_spec(
            p.name,
            p.quota,
            p.over_quota_weight,
            p.limit,
            rule,
            parent=p.department,
            over_quota_allowed=p.over_quota_allowed,
            over_quota_rank=p.over_quota_rank,
            interactive_time_limit_s=p.interactive_time_limit_s,
            idle_timeout_s=p.idle_gpu_timeout_s,
            preempt_min_runtime_s=repo.min_runtime(p).preempt_s,
            reclaim_min_runtime_s=repo.min_runtime(p).reclaim_s,
            age=ages[p.name],
            pool_quotas=p.node_group_quotas,
        )
        for ages in [queue_ages(repo.projects)]
        for p in repo.projects
    )
    return engine_policy(settings, departments, projects)


def canonical_model(model: str | None) -> str:
    """The catalogue's name for the model, so every GPU of a kind is spelt one way."""
    known = lookup_gpu_model(model) if model else None
    return known.name if known else model or ""


class MigDeclaration(Protocol):
    """What a node group declares about MIG: a config NodeGroup, or the policy's read back."""

    @property
    def mig_enabled(self) -> bool: ...

    @property
    def mig_static(self) -> bool: ...

    def mig_layout(self, gpu: int) -> tuple[MigInstance, ...] | None: ...


def group_gpu(group: MigDeclaration, index: int, memory: int) -> Gpu:
    """One GPU of each node of the group; a static group's with its declared instances."""
    if not group.mig_static:
        return Gpu(index=index, memory_mib=memory, mig_enabled=group.mig_enabled)
    layout = in_layout_order(group.mig_layout(index) or ())
    return Gpu(index, memory, mig_enabled=True, mig_instances=layout, mig_static=True)


def group_node_labels(
    selector: dict[str, str],
    gpu_model: str | None,
    gpus: int,
    gpu_memory_bytes: Decimal | int | None,
    mig_enabled: bool,
) -> dict[str, str]:
    """The labels a node of a group carries in a real cluster, and nothing more: GPU Feature
    Discovery's for its GPUs and its group's selector (labels an admin or a cloud's node pool
    put; where both name one, the selector says what the group's nodes carry)."""
    memory = gpu_memory_mib(gpu_model, gpu_memory_bytes)
    return gfd_labels(gpu_model, gpus, memory, mig_enabled) | selector


def _group_nodes(group: NodeGroup) -> tuple[Node, ...]:
    memory = gpu_memory_mib(group.gpu_model, group.gpu_memory)
    gpus = tuple(group_gpu(group, i, memory) for i in range(group.gpus_per_node))
    per_domain = group.nodes_per_topology_domain or group.node_count
    group_labels = group_node_labels(
        group.node_selector,
        group.gpu_model,
        group.gpus_per_node,
        group.gpu_memory,
        group.mig_enabled,
    )
    nodes = []
    for i in range(group.node_count):
        labels = dict(group_labels)
        topology = ""
        if group.topology_label:
            topology = f"{group.name}-d{i // per_domain}"
            labels[group.topology_label] = topology
        nodes.append(
            Node(
                name=f"{group.name}-{i}",
                node_group=group.name,
                gpu_model=canonical_model(group.gpu_model),
                gpus=gpus,
                topology=topology,
                labels=tuple(sorted(labels.items())),
            )
        )
    return tuple(nodes)


def nodes_from_repo(repo: Repo) -> tuple[Node, ...]:
    """The nodes each worker node group expects: `<group>-0` .. `<group>-<count-1>`, with
    the labels a real cluster gives them (`group_node_labels`) and a topology domain.

    With a topology label, consecutive nodes share a domain `<group>-d<k>` of
    `nodesPerDomain` nodes (all in one domain when that is not given).
    """
    return tuple(
        node for group in repo.node_groups if group.runs_workloads for node in _group_nodes(group)
    )


def gpu_request(spec: dict) -> GpuRequest:
    """A pod's GPU request in the engine's terms, from its merged pod fields."""
    request = gpu_request_of(spec)
    if request.mig:
        return GpuRequest(RequestKind.MIG, mig_profile=request.mig)
    if request.gpu_memory is not None:
        return GpuRequest(RequestKind.MEMORY, memory_mib=math.ceil(request.gpu_memory / MIB))
    if not request.gpu:
        return GpuRequest(RequestKind.NONE)
    if float(request.gpu).is_integer():
        return GpuRequest(RequestKind.WHOLE, count=int(request.gpu))
    return GpuRequest(RequestKind.FRACTION, fraction=request.gpu)


def job_from_workload(repo: Repo, workload: Workload, submitted: int) -> Job:
    """A pending job for a workload, on the node groups Repo.workload_node_group_names allows."""
    return Job(
        name=workload.name,
        namespace=repo.project_namespace(workload.project),
        project=workload.project,
        type=workload.type,
        priority=workload.priority,
        preemptible=workload.preemptible,
        request=gpu_request(repo.pod_spec(workload)),
        pods=workload.replicas,
        min_available=workload.min_available,
        node_groups=repo.workload_node_group_names(workload),
        submitted=submitted,
    )
