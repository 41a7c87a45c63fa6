"""Small builders for engine snapshots, so scenario tests read like the situation they pin."""

from __future__ import annotations

from itertools import count

from gitops_sched.engine.types import (
    Gpu,
    GpuRequest,
    Job,
    Node,
    Policy,
    QueueSpec,
    RequestKind,
    Snapshot,
)
from gitops_sched.hardware.mig import MigInstance

_order = count()


def project(name: str, quota: float, department: str = "dept", **kw) -> QueueSpec:
    return QueueSpec(name, quota, kw.pop("weight", quota), parent=department, **kw)


def department(name: str, quota: float, **kw) -> QueueSpec:
    return QueueSpec(name, quota, kw.pop("weight", quota), **kw)


def policy(*projects: QueueSpec, departments: tuple[QueueSpec, ...] = (), **kw) -> Policy:
    if not departments:
        total = sum(p.deserved for p in projects)
        departments = (department("dept", total),)
    return Policy(departments=departments, projects=projects, **kw)


def nodes(
    prefix: str,
    n: int,
    gpus: int = 8,
    model: str = "V100-SXM2-32GB",
    memory_mib: int = 32768,
    group: str = "",
    mig: bool = False,
    topology: tuple[str, ...] = (),
    instances: tuple[MigInstance, ...] = (),
) -> tuple[Node, ...]:
    return tuple(
        Node(
            f"{prefix}-{i}",
            group or prefix,
            model,
            tuple(Gpu(k, memory_mib, mig, instances if mig else ()) for k in range(gpus)),
            topology=topology[i] if topology else "",
        )
        for i in range(n)
    )


def job(name: str, proj: str, gpu: float | str = 1, type: str = "train", **kw) -> Job:
    """gpu: an int (whole GPUs), a float < 1 (fraction), or a MIG profile name."""
    if isinstance(gpu, str):
        request = GpuRequest(RequestKind.MIG, mig_profile=gpu)
    elif gpu < 1:
        request = GpuRequest(RequestKind.FRACTION, fraction=gpu)
    else:
        request = GpuRequest(RequestKind.WHOLE, count=int(gpu))
    defaults = {"train": 50, "interactive": 100, "inference": 125}
    kw.setdefault("priority", defaults[type])
    kw.setdefault("preemptible", type == "train")
    kw.setdefault("submitted", next(_order))
    pods = kw.pop("pods", 1)
    kw.setdefault("min_available", pods)
    return Job(name, proj, type, request=request, pods=pods, **kw)


def jobs(prefix: str, proj: str, n: int, gpu: float | str = 1, **kw) -> list[Job]:
    return [job(f"{prefix}-{i}", proj, gpu, **kw) for i in range(n)]


def snapshot(pol: Policy, node_list: tuple[Node, ...], job_list, now: float = 0.0) -> Snapshot:
    return Snapshot(pol, node_list, tuple(job_list), now)


def allocated(decisions, name: str) -> float:
    for status in (*decisions.projects, *decisions.departments):
        if status.name == name:
            return round(status.allocated, 6)
    raise KeyError(name)
