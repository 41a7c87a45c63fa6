"""Quota checks: guarantees must add up, stay under limits and be backed by GPUs.

Projects' quotas must fit in their department's, departments' GPU quotas in the
cluster's GPUs and projects' per-node-group GPU quotas in that group's GPUs (all three
warnings instead of errors when the cluster's policy allows oversubscription), each
reported at the quota that tips the sum over, with the ways to fix it; a hard
limit must not be below the quota it would take back; and non-preemptible workloads,
which can only run inside quota, must fit in their project's GPU quota alone and together.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from gitops_sched.config import codes
from gitops_sched.config.baseline import NO_BASELINE, Baseline, path_order
from gitops_sched.config.checks.common import (
    Number,
    diagnostic_at,
    error_at,
    format_memory,
    format_number,
    itemized,
)
from gitops_sched.config.checks.pods import mig_tables, workload_gpu_groups
from gitops_sched.config.diagnostics import Diagnostic, Severity
from gitops_sched.config.document import Document, Path_
from gitops_sched.config.model import (
    Department,
    NodeGroup,
    Project,
    Repo,
    Workload,
    gpu_request_of,
)
from gitops_sched.hardware.gpus import gpu_memory_bytes
from gitops_sched.hardware.mig import compute_share

# GPU quantities are floats (fractions, MIG shares); a sum may miss a bound by rounding noise.
EPSILON = 1e-6
NODE_COUNT: Path_ = ("spec", "nodeCount")  # where a node group's share of a capacity is written


# (field of Resources, how messages name it, how they print it)
RESOURCES: tuple[tuple[str, str, Callable[[Number], str]], ...] = (
    ("gpu", "GPU", format_number),
    ("cpu", "CPU", format_number),
    ("memory", "memory", format_memory),
)


def _over(total: Number, bound: Number) -> bool:
    # never mixed: a sum is of GPUs (floats) or of CPU/memory (Decimals), its bound alike
    return total - bound > EPSILON  # type: ignore[operator]


def check_department_quotas(repo: Repo, baseline: Baseline = NO_BASELINE) -> Iterator[Diagnostic]:
    """A department's quota caps its projects' guarantees; more would promise what is not there.

    Reported where the sum tips over (see `_blame`). Unless the cluster's policy allows
    oversubscription: then it is a warning, and under contention the department's quota
    caps what its projects get together.
    """
    severity = _capacity_severity(repo)
    for department in repo.departments:
        projects = [p for p in repo.projects if p.department == department.name]
        for field, label, fmt in RESOURCES:
            bound = getattr(department.quota, field)
            if bound is None:
                continue
            parts = [
                (p.doc, p.name, v) for p in projects if (v := getattr(p.quota, field)) is not None
            ]
            path = _quota_path(field)
            sum_ = _Sum(parts, path, bound, [(department.doc, path)], ("spec", "nodeGroupQuotas"))
            blame = _blame(sum_, baseline)
            if blame is None:
                continue
            message = (
                f"projects' {label} quotas in department '{department.name}' add up to "
                f"{fmt(blame.total)} ({itemized([(n, v) for _, n, v in parts], fmt)}), more "
                f"than its {label} quota of {fmt(bound)}"
            )
            fix = f"raise Department/{department.name}'s spec.quota.{field} to {fmt(blame.total)}"
            capped = " (the department's quota caps their sum)"
            yield diagnostic_at(
                blame.doc,
                blame.path,
                codes.PROJECTS_OVER_DEPARTMENT,
                message + _remedy(severity, blame, fmt, fix, capped),
                severity,
            )


def _quota_path(field: str) -> Path_:
    return ("spec", "quota", field)


@dataclass(frozen=True)
class _Sum:
    """Values that must add up to at most a bound: each part's document, name and value
    (written at `path` in its document, else at `otherwise`: a project may give only
    nodeGroupQuotas, whose sum is its quota), and where the bound is written."""

    parts: Sequence[tuple[Document, str, Number]]
    path: Path_
    bound: Number
    bound_at: Sequence[tuple[Document, Path_]]
    otherwise: Path_ = ()


@dataclass(frozen=True)
class _Blame:
    """Where a sum over its bound is reported, the total, and how low the blamed part would
    have to go for the sum to fit (negative: lowering it alone is not enough; None: the
    bound is blamed)."""

    doc: Document
    path: Path_
    total: Number
    room: Number | None


def _blame(sum_: _Sum, baseline: Baseline) -> _Blame | None:
    """None when the sum fits. Else the part whose value takes the running total over,
    adding established parts first and then those the change introduced or changed, each in
    path order; or, when the change touched no part but lowered the bound, the bound."""
    values = {id(doc): value for doc, _, value in sum_.parts}
    total = sum(values.values(), start=0)
    if not _over(total, sum_.bound):
        return None
    docs = [doc for doc, _, _ in sum_.parts]
    if not any(baseline.changed(doc, sum_.path) for doc in docs):
        lowered = [(doc, path) for doc, path in sum_.bound_at if baseline.changed(doc, path)]
        if lowered:
            doc, path = min(lowered, key=lambda at: path_order(at[0]))
            return _Blame(doc, path, total, None)
    running: Number = 0
    for doc in baseline.order(docs, sum_.path):
        running += values[id(doc)]  # type: ignore[operator]  # never mixed (see _over)
        if _over(running, sum_.bound):
            path = sum_.path if sum_.path in doc.positions else sum_.otherwise
            room = sum_.bound - (total - values[id(doc)])  # type: ignore[operator]
            return _Blame(doc, path, total, room)
    raise AssertionError("a sum over its bound has a part that takes it over")


def _remedy(
    severity: Severity, blame: _Blame, fmt: Callable[[Number], str], fix: str, capped: str = ""
) -> str:
    """How to fix a sum over its bound, or (allowed by the policy) why it is only a warning."""
    if severity is Severity.WARNING:
        return f"; allowed by policy.allowOversubscription{capped}"
    knob = "or set the Cluster's spec.policy.allowOversubscription: true"
    if blame.room is None:
        return f": {fix}, lower the quotas that add up, {knob}"
    room = blame.room
    lower = f"lower this quota to {fmt(room)} or less" if room >= 0 else "lower the quotas"
    return f": {lower}, {fix}, {knob}"


def _limits_below_quota(owner: Department | Project) -> Iterator[Diagnostic]:
    for field, label, fmt in RESOURCES:
        limit, quota = getattr(owner.limit, field), getattr(owner.quota, field)
        if limit is not None and quota is not None and _over(quota, limit):
            yield error_at(
                owner.doc,
                ("spec", "limit", field),
                codes.LIMIT_BELOW_QUOTA,
                f"{label} limit {fmt(limit)} is less than the {label} quota {fmt(quota)}",
            )


def check_limits(repo: Repo) -> Iterator[Diagnostic]:
    """A hard limit below the guaranteed quota would take back the guarantee."""
    owners: list[Department | Project] = [*repo.departments, *repo.projects]
    for owner in owners:
        yield from _limits_below_quota(owner)


def _capacity_severity(repo: Repo) -> Severity:
    allowed = repo.cluster is not None and repo.cluster.policy.allow_oversubscription
    return Severity.WARNING if allowed else Severity.ERROR


def _capacity_text(groups: list[NodeGroup]) -> str:
    return ", ".join(f"{g.name} {g.node_count}x{g.gpus_per_node}" for g in groups if g.gpu_capacity)


def check_cluster_capacity(repo: Repo, baseline: Baseline = NO_BASELINE) -> Iterator[Diagnostic]:
    """Department guarantees must be backed by GPUs the node groups declare; reported where
    the sum tips over (see `_blame`)."""
    if repo.cluster is None:
        return
    parts = [(d.doc, d.name, d.quota.gpu) for d in repo.departments if d.quota.gpu is not None]
    counts = [(g.doc, NODE_COUNT) for g in repo.node_groups]
    blame = _blame(_Sum(parts, _quota_path("gpu"), repo.gpu_capacity, counts), baseline)
    if blame is None:
        return
    severity = _capacity_severity(repo)
    message = (
        f"departments' GPU quotas add up to {format_number(blame.total)} "
        f"({itemized([(n, v) for _, n, v in parts], format_number)}), more than the cluster's "
        f"{repo.gpu_capacity} GPUs ({_capacity_text(repo.node_groups) or 'no GPU node groups'})"
    )
    fix = "add GPU nodes to the node groups"
    yield diagnostic_at(
        blame.doc,
        blame.path,
        codes.DEPARTMENTS_OVER_CLUSTER,
        message + _remedy(severity, blame, format_number, fix),
        severity,
    )


def check_node_group_capacity(repo: Repo, baseline: Baseline = NO_BASELINE) -> Iterator[Diagnostic]:
    """Per-node-group guarantees must be backed by that group's own GPUs; reported where the
    sum tips over (see `_blame`)."""
    severity = _capacity_severity(repo)
    for group in repo.node_groups:
        parts = [
            (p.doc, p.name, quota.gpu)
            for p in repo.projects
            if (quota := p.node_group_quotas.get(group.name)) is not None and quota.gpu is not None
        ]
        path = ("spec", "nodeGroupQuotas", group.name, "gpu")
        sum_ = _Sum(parts, path, group.gpu_capacity, [(group.doc, NODE_COUNT)])
        blame = _blame(sum_, baseline)
        if blame is None:
            continue
        message = (
            f"projects' GPU quotas on node group '{group.name}' add up to "
            f"{format_number(blame.total)} "
            f"({itemized([(n, v) for _, n, v in parts], format_number)}), "
            f"more than its {group.gpu_capacity} GPUs "
            f"({group.node_count} x {group.gpus_per_node} per node)"
        )
        fix = f"raise NodeGroup/{group.name}'s spec.nodeCount"
        yield diagnostic_at(
            blame.doc,
            blame.path,
            codes.NODE_GROUP_QUOTAS_OVER_CAPACITY,
            message + _remedy(severity, blame, format_number, fix),
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
    groups = workload_gpu_groups(repo, workload)
    if request.gpu_memory is not None:
        sizes = [size for g in groups if (size := gpu_memory_bytes(g.gpu_model, g.gpu_memory))]
        return min((float(request.gpu_memory / size) for size in sizes), default=None)
    if request.mig is not None:
        tables = mig_tables(groups)
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
                    f" ({workload.replicas} x {format_number(per_pod)})"
                    if workload.replicas > 1
                    else ""
                )
                yield error_at(
                    workload.doc,
                    ("spec", "type"),
                    codes.NON_PREEMPTIBLE_OVER_QUOTA,
                    f"non-preemptible {workload.type} workload needs "
                    f"{format_number(total)} GPUs{pods}, "
                    f"more than the GPU quota of project '{project.name}' ({format_number(quota)})",
                )
        needs = [(w.name, per_pod * w.replicas) for w, per_pod in workloads]
        total = sum(value for _, value in needs)
        if len(needs) > 1 and _over(total, quota):
            yield error_at(
                project.doc,
                ("spec", "quota", "gpu"),
                codes.NON_PREEMPTIBLE_TOGETHER_OVER_QUOTA,
                f"non-preemptible workloads need {format_number(total)} GPUs together "
                f"({itemized(needs, format_number)}), more than the project's GPU quota "
                f"of {format_number(quota)}",
            )
