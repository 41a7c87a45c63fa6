"""Dynamic MIG on a node: each GPU of the scheduler's request planned, then converged to it.

The request and the answer are `contract.mig`'s. A GPU is planned whole before anything is
touched: nothing is destroyed while another instance to destroy is busy, and a requested
layout NVIDIA does not allow is refused, so a GPU is never left half-way between two layouts
by a rule the agent could have checked.
"""

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from gitops_sched.agent.errors import GpuError, InUse
from gitops_sched.agent.gpus import DeviceGpu, GpuBackend
from gitops_sched.contract.mig import GpuAnswer, GpuLayout
from gitops_sched.hardware.gpus import lookup_gpu_model
from gitops_sched.hardware.mig import MigInstance, is_valid_layout


@dataclass(frozen=True)
class MigPlan:
    """What converging one GPU takes: instances to destroy, then instances to create."""

    index: int
    destroy: tuple[MigInstance, ...]
    create: tuple[MigInstance, ...]

    def describe(self) -> str:
        parts = [f"destroy {_names(self.destroy)}"] if self.destroy else []
        parts += [f"create {_names(self.create)}"] if self.create else []
        return f"GPU {self.index}: " + ("; ".join(parts) or "as requested")


def _names(instances: Iterable[MigInstance]) -> str:
    return ", ".join(f"{i.profile}@{i.start}" for i in instances)


def beyond_node(layouts: Sequence[GpuLayout], gpus: Collection[int]) -> str | None:
    """Why a request is refused whole: it lists GPUs the node does not have (`gpus`, its
    indexes), said with the first three; None when it lists only the node's GPUs."""
    missing = [layout.index for layout in layouts if layout.index not in gpus]
    if not missing:
        return None
    shown = ", ".join(map(str, missing[:3])) + (
        f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    )
    return f"the request lists GPUs this node does not have: {shown} (it has {len(gpus)})"


def plan_gpu(
    gpu: DeviceGpu, wanted: GpuLayout, busy: Collection[int], static: bool
) -> MigPlan | GpuAnswer:
    """The plan converging `gpu` to `wanted`, or the answer when it cannot be (now).

    `busy` holds the starts of instances with processes on them.
    """
    index = wanted.index
    if static:
        return GpuAnswer(index, "error", "static MIG layout: the agent does not change it")
    if gpu.mig_mode != "enabled":
        return GpuAnswer(index, "error", f"MIG mode is {gpu.mig_mode} on GPU {index}")
    if lookup_gpu_model(gpu.model) and not is_valid_layout(gpu.model, wanted.instances):
        return GpuAnswer(
            index,
            "error",
            f"not a valid {gpu.model} MIG layout: {_names(wanted.instances) or 'none'}",
        )
    current = tuple(MigInstance(i.profile, i.start) for i in gpu.instances)
    destroy = tuple(i for i in current if i not in wanted.instances)
    if in_use := [i for i in destroy if i.start in busy]:
        return GpuAnswer(index, "pending", f"{_names(in_use)} still in use by a process")
    create = tuple(i for i in wanted.instances if i not in current)
    return MigPlan(index, destroy, create)


def apply_plan(backend: GpuBackend, plan: MigPlan) -> GpuAnswer:
    """Carry a plan out through the backend: destroy, then create, stopping at an error."""
    done: list[str] = []
    try:
        for instance in plan.destroy:
            backend.destroy_instance(plan.index, instance.start)
            done.append(f"destroyed {instance.profile}@{instance.start}")
        for instance in plan.create:
            backend.create_instance(plan.index, instance.profile, instance.start)
            done.append(f"created {instance.profile}@{instance.start}")
    except InUse as exc:  # a process started between the check and the destroy
        return GpuAnswer(plan.index, "pending", _after(done, str(exc)), bool(done))
    except GpuError as exc:
        return GpuAnswer(plan.index, "error", _after(done, str(exc)), bool(done))
    return GpuAnswer(plan.index, "done", "; ".join(done) or "as requested", bool(done))


def _after(done: list[str], message: str) -> str:
    return "; ".join([*done, message])
