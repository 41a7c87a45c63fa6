"""Quota and capacity deltas: what each department and project is guaranteed before and
after, its claim on spare GPUs, and what the node groups hold.

Weights are the ones the engine uses (`bridge.build.over_quota_weight`, the cluster's
default rule applied), so a project whose weight follows its quota shows the weight change.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gitops_sched.config.model import Department, Project, Repo, Resources, over_quota_weight
from gitops_sched.hardware.gpus import rounded_gpus

GIB = Decimal(1024**3)


@dataclass(frozen=True)
class Delta:
    """One field of one object, before -> after (None where the object does not exist)."""

    field: str
    before: Any
    after: Any


@dataclass(frozen=True)
class QuotaChange:
    kind: str  # Department | Project | NodeGroup
    name: str
    status: str  # added | removed | changed
    deltas: tuple[Delta, ...]  # the fields that differ (all of them when added or removed)
    values: dict[str, tuple[Any, Any]]  # every field, before and after, for the tables

    def delta(self, name: str) -> tuple[Any, Any]:
        return self.values.get(name, (None, None))


@dataclass(frozen=True)
class Capacity:
    gpus: tuple[int, int]  # of the worker node groups, before and after
    department_quota: tuple[float, float]  # the departments' GPU quotas added up

    @property
    def oversubscribed(self) -> tuple[bool, bool]:
        return tuple(q > c for q, c in zip(self.department_quota, self.gpus))  # type: ignore[return-value]


def _gpus(value: float | None) -> float:
    return rounded_gpus(value or 0.0)


def _cpu(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _gib(value: Decimal | None) -> float | None:
    return None if value is None else round(float(value / GIB), 3)


def capacity_of(repo: Repo) -> int:
    return sum(g.gpu_capacity for g in repo.node_groups if g.runs_workloads)


def _resources(prefix: str, r: Resources) -> dict[str, Any]:
    return {
        f"{prefix}Gpu": _gpus(r.gpu),
        f"{prefix}Cpu": _cpu(r.cpu),
        f"{prefix}MemoryGiB": _gib(r.memory),
    }


def _share(gpu: float | None, capacity: int) -> float:
    return round(100 * (gpu or 0.0) / capacity, 1) if capacity else 0.0


def _department(repo: Repo, d: Department) -> dict[str, Any]:
    rule = repo.cluster.policy.over_quota_weight if repo.cluster else "quota"
    limit = d.limit.gpu
    return {
        **_resources("quota", d.quota),
        "clusterSharePct": _share(d.quota.gpu, capacity_of(repo)),
        "overQuotaWeight": over_quota_weight(d.over_quota_weight, d.quota, rule),
        "limitGpu": None if limit is None else _gpus(limit),
    }


def _project(repo: Repo, p: Project) -> dict[str, Any]:
    rule = repo.cluster.policy.over_quota_weight if repo.cluster else "quota"
    limit = p.limit.gpu
    return {
        "department": p.department,
        **_resources("quota", p.quota),
        "nodeGroupQuotas": {g: _gpus(r.gpu) for g, r in sorted(p.node_group_quotas.items())}
        or None,
        "clusterSharePct": _share(p.quota.gpu, capacity_of(repo)),
        "overQuota": "allowed" if p.over_quota_allowed else "denied",
        "overQuotaWeight": over_quota_weight(p.over_quota_weight, p.quota, rule),
        "overQuotaRank": p.over_quota_rank,
        "limitGpu": None if limit is None else _gpus(limit),
    }


def _node_group(group: Any) -> dict[str, Any]:
    return {
        "role": group.role,
        "nodes": group.node_count,
        "gpusPerNode": group.gpus_per_node,
        "gpuModel": group.gpu_model,
        "gpus": group.gpu_capacity,
        "mig": (group.mig_strategy if group.mig_enabled else None),
    }


# `clusterSharePct` follows from the quota and the capacity: it changes with either, and is
# shown, but a capacity change alone does not make every project a change of its own
DERIVED = ("clusterSharePct",)


def _changes(kind: str, before: dict[str, dict], after: dict[str, dict]) -> list[QuotaChange]:
    changes = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        fields = list((new or old or {}).keys())
        values = {f: ((old or {}).get(f), (new or {}).get(f)) for f in fields}
        status = "added" if old is None else "removed" if new is None else "changed"
        deltas = tuple(Delta(f, b, a) for f, (b, a) in values.items() if b != a)
        if status == "changed" and all(d.field in DERIVED for d in deltas):
            continue
        changes.append(QuotaChange(kind, name, status, deltas, values))
    return changes


def quota_changes(base: Repo, head: Repo) -> tuple[QuotaChange, ...]:
    """Departments, then projects, then node groups that changed, each sorted by name."""
    return tuple(
        _changes(
            "Department",
            {d.name: _department(base, d) for d in base.departments},
            {d.name: _department(head, d) for d in head.departments},
        )
        + _changes(
            "Project",
            {p.name: _project(base, p) for p in base.projects},
            {p.name: _project(head, p) for p in head.projects},
        )
        + _changes(
            "NodeGroup",
            {g.name: _node_group(g) for g in base.node_groups},
            {g.name: _node_group(g) for g in head.node_groups},
        )
    )


def capacity(base: Repo, head: Repo) -> Capacity:
    def quota(repo: Repo) -> float:
        return _gpus(sum(d.quota.gpu or 0.0 for d in repo.departments))

    return Capacity((capacity_of(base), capacity_of(head)), (quota(base), quota(head)))
