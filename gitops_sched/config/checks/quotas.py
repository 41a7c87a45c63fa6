"""Quota checks: guarantees must add up, stay under limits and be backed by GPUs.

Projects' quotas must fit in their department's, departments' GPU quotas in the
cluster's GPUs and projects' per-node-group GPU quotas in that group's GPUs (all three
warnings instead of errors when the cluster's policy allows oversubscription); a hard
limit must not be below the quota it would take back; and non-preemptible workloads,
which can only run inside quota, must fit in their project's GPU quota alone and together.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from gitops_sched.config import codes
from gitops_sched.config.checks.common import (
    Number,
    _diagnostic,
    _error,
    _itemized,
    _memory,
    _number,
)
from gitops_sched.config.checks.pods import _gpu_memory, _mig_tables, _workload_node_groups
from gitops_sched.config.diagnostics import Diagnostic, Severity
from gitops_sched.config.model import (
    Department,
    NodeGroup,
    Project,
    Repo,
    Workload,
    gpu_request_of,
)
from gitops_sched.hardware.mig import compute_share

# GPU quantities are floats (fractions, MIG shares); a sum may miss a bound by rounding noise.
EPSILON = 1e-6


# (field of Resources, how messages name it, how they print it)
RESOURCES: tuple[tuple[str, str, Callable[[Number], str]], ...] = (
    ("gpu", "GPU", _number),
    ("cpu", "CPU", _number),
    ("memory", "memory", _memory),
)


def _over(total: Number, bound: Number) -> bool:
    return total - bound > EPSILON


def check_department_quotas(repo: Repo) -> Iterator[Diagnostic]:
    """A department's quota caps its projects' guarantees; more would promise what is not there.

    Unless the cluster's policy allows oversubscription: then it is a warning, and under
    contention the department's quota caps what its projects get together.
    """
    severity = _capacity_severity(repo)
    if severity is Severity.WARNING:
        note = _oversubscription_note(severity) + " (the department's quota caps their sum)"
    else:
        note = " (allowed only with the Cluster's policy.allowOversubscription: true)"
    for department in repo.departments:
        projects = [p for p in repo.projects if p.department == department.name]
        for field, label, fmt in RESOURCES:
            bound = getattr(department.quota, field)
            items = [
                (p.name, value) for p in projects if (value := getattr(p.quota, field)) is not None
            ]
            total = sum((value for _, value in items), start=0)
            if bound is not None and _over(total, bound):
                yield _diagnostic(
                    department.doc,
                    ("spec", "quota", field),
                    codes.PROJECTS_OVER_DEPARTMENT,
                    f"projects' {label} quotas add up to {fmt(total)} ({_itemized(items, fmt)}), "
                    f"more than the department's {label} quota of {fmt(bound)}" + note,
                    severity,
                )


def _limits_below_quota(owner: Department | Project) -> Iterator[Diagnostic]:
    for field, label, fmt in RESOURCES:
        limit, quota = getattr(owner.limit, field), getattr(owner.quota, field)
        if limit is not None and quota is not None and _over(quota, limit):
            yield _error(
                owner.doc,
                ("spec", "limit", field),
                codes.LIMIT_BELOW_QUOTA,
                f"{label} limit {fmt(limit)} is less than the {label} quota {fmt(quota)}",
            )


def check_limits(repo: Repo) -> Iterator[Diagnostic]:
    """A hard limit below the guaranteed quota would take back the guarantee."""
    for owner in [*repo.departments, *repo.projects]:
        yield from _limits_below_quota(owner)


def _capacity_severity(repo: Repo) -> Severity:
    allowed = repo.cluster is not None and repo.cluster.policy.allow_oversubscription
    return Severity.WARNING if allowed else Severity.ERROR


def _oversubscription_note(severity: Severity) -> str:
    return "; allowed by policy.allowOversubscription" if severity is Severity.WARNING else ""


def _capacity_text(groups: list[NodeGroup]) -> str:
    return ", ".join(f"{g.name} {g.node_count}x{g.gpus_per_node}" for g in groups if g.gpu_capacity)


def check_cluster_capacity(repo: Repo) -> Iterator[Diagnostic]:
    """Department guarantees must be backed by GPUs the node groups declare."""
    if repo.cluster is None:
        return
    items = [(d.name, d.quota.gpu) for d in repo.departments if d.quota.gpu is not None]
    total = sum(value for _, value in items)
    if _over(total, repo.gpu_capacity):
        severity = _capacity_severity(repo)
        yield _diagnostic(
            repo.cluster.doc,
            (),
            codes.DEPARTMENTS_OVER_CLUSTER,
            f"departments' GPU quotas add up to {_number(total)} ({_itemized(items, _number)}), "
            f"more than the cluster's {repo.gpu_capacity} GPUs "
            f"({_capacity_text(repo.node_groups) or 'no GPU node groups'})"
            + _oversubscription_note(severity),
            severity,
        )


def check_node_group_capacity(repo: Repo) -> Iterator[Diagnostic]:
    """Per-node-group guarantees must be backed by that group's own GPUs."""
    quotas: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for project in repo.projects:
        for group, quota in project.node_group_quotas.items():
            if quota.gpu is not None:
                quotas[group].append((project.name, quota.gpu))
    severity = _capacity_severity(repo)
    for group in repo.node_groups:
        items = quotas.get(group.name, [])
        total = sum(value for _, value in items)
        if _over(total, group.gpu_capacity):
            yield _diagnostic(
                group.doc,
                ("spec", "nodeCount"),
                codes.NODE_GROUP_QUOTAS_OVER_CAPACITY,
                f"projects' GPU quotas on node group '{group.name}' add up to {_number(total)} "
                f"({_itemized(items, _number)}), more than its {group.gpu_capacity} GPUs "
                f"({group.node_count} x {group.gpus_per_node} per node)"
                + _oversubscription_note(severity),
                severity,
            )


def _pod_gpus(repo: Repo, workload: Workload, spec: dict[str, Any]) -> float | None:
    """What one pod counts against quota, on the most favourable node group it may use.

    Whole GPUs and fractions count as written, GPU memory as its share of the GPU's
    memory, a MIG instance as its share of the GPU's compute slices. None: not known
    (no node group to measure against; other checks say why).
    """
    request = gpu_request_of(spec)
    if request.gpu is not None:
        return request.gpu
    groups = _workload_node_groups(repo, workload)
    if request.gpu_memory is not None:
        sizes = [size for g in groups if (size := _gpu_memory(g))]
        return min((float(request.gpu_memory / size) for size in sizes), default=None)
    if request.mig is not None:
        tables = _mig_tables(groups)
        shares = [compute_share(m, request.mig) for m, t in tables.items() if request.mig in t]
        return min(shares, default=None)
    return 0.0


def _non_preemptible(repo: Repo) -> dict[str, list[tuple[Workload, float]]]:
    """Non-preemptible workloads by project, with their GPUs per pod, where measurable."""
    found: dict[str, list[tuple[Workload, float]]] = defaultdict(list)
    for workload in repo.workloads:
        if not workload.preemptible:
            per_pod = _pod_gpus(repo, workload, repo.pod_spec(workload))
            if per_pod is not None:
                found[workload.project].append((workload, per_pod))
    return found


def check_non_preemptible_quota(repo: Repo) -> Iterator[Diagnostic]:
    """Work that cannot be preempted must fit in the deserved quota, alone and together."""
    by_project = _non_preemptible(repo)
    for project in repo.projects:
        quota = project.quota.gpu or 0.0
        workloads = by_project.get(project.name, [])
        for workload, per_pod in workloads:
            total = per_pod * workload.replicas
            if _over(total, quota):
                pods = (
                    f" ({workload.replicas} x {_number(per_pod)})" if workload.replicas > 1 else ""
                )
                yield _error(
                    workload.doc,
                    ("spec", "type"),
                    codes.NON_PREEMPTIBLE_OVER_QUOTA,
                    f"non-preemptible {workload.type} workload needs {_number(total)} GPUs{pods}, "
                    f"more than the GPU quota of project '{project.name}' ({_number(quota)})",
                )
        needs = [(w.name, per_pod * w.replicas) for w, per_pod in workloads]
        total = sum(value for _, value in needs)
        if len(needs) > 1 and _over(total, quota):
            yield _error(
                project.doc,
                ("spec", "quota", "gpu"),
                codes.NON_PREEMPTIBLE_TOGETHER_OVER_QUOTA,
                f"non-preemptible workloads need {_number(total)} GPUs together "
                f"({_itemized(needs, _number)}), more than the project's GPU quota "
                f"of {_number(quota)}",
            )
