"""Dynamic MIG on a node: the scheduler's request, each GPU converged to it, the answer.

The scheduler writes the node's `NODE_MIG_REQUEST` annotation: the full list of instances it
wants on each GPU it wants changed (GPUs not listed are left alone),

    {"version": 1, "gpus": [{"index": 0, "instances": [{"profile": "1g.10gb", "start": 0}]}]}

and the agent answers in `NODE_MIG_STATUS`, naming the request it answers by its digest,

    {"version": 1, "observed": "<sha256 of the request>",
     "gpus": [{"index": 0, "state": "done", "message": "created 1g.10gb@0"}]}

A GPU is `done` when its instances are exactly the requested ones, `pending` while an
instance to destroy still has processes on it (the agent tries again every tick), `error`
when it cannot be done (static layout, no MIG, a layout NVIDIA does not allow, an NVML
error, named): final for that request. A request that cannot be read (not JSON, over 256 KiB,
nested too deep), or that lists more GPUs than the node has, gets an answer with no GPUs and
an `error`. Each message is cut to `MAX_MESSAGE` characters, so an answer stays a few KiB
whatever was asked (the API server refuses an object's annotations over 256 KiB in all).

A GPU is planned whole before anything is touched: nothing is destroyed while another
instance to destroy is busy, and a requested layout NVIDIA does not allow is refused, so a
GPU is never left half-way between two layouts by a rule the agent could have checked.
"""

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from gitops_sched import foreignjson
from gitops_sched.agent.errors import GpuError, InUse
from gitops_sched.agent.gpus import Gpu, GpuBackend
from gitops_sched.hardware.gpus import lookup_gpu_model
from gitops_sched.hardware.mig import MigInstance, is_valid_layout

MIG_VERSION = 1
MAX_MESSAGE = 256  # characters of one message in the status
State = Literal["done", "pending", "error"]


@dataclass(frozen=True)
class GpuLayout:
    """The instances the scheduler wants on one GPU, sorted by start."""

    index: int
    instances: tuple[MigInstance, ...]


@dataclass(frozen=True)
class GpuAnswer:
    """How one GPU of a request stands; `changed` when instances were created or destroyed."""

    index: int
    state: State
    message: str
    changed: bool = False


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


def encode_request(layouts: Mapping[int, Sequence[MigInstance]]) -> str:
    """The request annotation for the wanted instances of each GPU to change (canonical JSON)."""
    gpus = [
        {
            "index": index,
            "instances": [
                {"profile": i.profile, "start": i.start}
                for i in sorted(layouts[index], key=lambda i: i.start)
            ],
        }
        for index in sorted(layouts)
    ]
    return _canonical({"version": MIG_VERSION, "gpus": gpus})


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def request_digest(text: str) -> str:
    """The sha256 (hex) of the request annotation's text, as the status names it."""
    return hashlib.sha256(text.encode()).hexdigest()


def parse_request(text: str) -> tuple[GpuLayout, ...]:
    """The GPUs a request annotation lists; ValueError saying what is wrong with it."""
    data = foreignjson.loads(text)
    if not isinstance(data, dict) or data.get("version") != MIG_VERSION:
        raise ValueError(f"expected an object with version {MIG_VERSION}")
    gpus = data.get("gpus")
    if not isinstance(gpus, list):
        raise ValueError("`gpus` must be a list")
    layouts: dict[int, GpuLayout] = {}
    for n, entry in enumerate(gpus):
        index = entry.get("index") if isinstance(entry, dict) else None
        instances = entry.get("instances") if isinstance(entry, dict) else None
        if not _whole(index) or not isinstance(instances, list):
            raise ValueError(f"gpus[{n}]: needs an `index` (>= 0) and an `instances` list")
        if index in layouts:
            raise ValueError(f"gpus[{n}]: GPU {index} is listed twice")
        wanted = []
        for instance in instances:
            if not (
                isinstance(instance, dict)
                and isinstance(instance.get("profile"), str)
                and _whole(instance.get("start"))
            ):
                raise ValueError(f"gpus[{n}]: each instance needs a `profile` and a `start`")
            wanted.append(MigInstance(instance["profile"], instance["start"]))
        layouts[index] = GpuLayout(index, tuple(sorted(wanted, key=lambda i: i.start)))
    return tuple(layouts[index] for index in sorted(layouts))


def _whole(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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
    gpu: Gpu, wanted: GpuLayout, busy: Collection[int], static: bool
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


def encode_status(digest: str, answers: Iterable[GpuAnswer], error: str | None = None) -> str:
    """The status annotation answering the request with this digest (canonical JSON)."""
    status: dict[str, Any] = {
        "version": MIG_VERSION,
        "observed": digest,
        "gpus": [{"index": a.index, "state": a.state, "message": _cut(a.message)} for a in answers],
    }
    if error is not None:
        status["error"] = _cut(error)
    return _canonical(status)


def _cut(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def needs_work(request: str, status: str | None) -> bool:
    """Whether the request is not yet answered, or was answered with a GPU still pending."""
    try:
        answer = foreignjson.loads(status or "")
    except ValueError:
        return True
    if not isinstance(answer, dict) or answer.get("observed") != request_digest(request):
        return True
    gpus = answer.get("gpus")
    return not isinstance(gpus, list) or any(
        not isinstance(gpu, dict) or gpu.get("state") == "pending" for gpu in gpus
    )
