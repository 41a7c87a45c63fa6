"""Dynamic MIG on a node: the scheduler's request and the node agent's answer.

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
"""

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from gitops_sched.contract import foreignjson
from gitops_sched.hardware.mig import MigInstance

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


def answered_error(request: str | None, status: str | None, gpu: int) -> str:
    """What the answer `status` says went wrong with `request` on `gpu` (the whole request's
    error, else the GPU's), or "" when it answers another request or says no error."""
    try:
        answer = foreignjson.loads(status or "")
    except ValueError:
        return ""
    if request is None or not isinstance(answer, dict):
        return ""
    if answer.get("observed") != request_digest(request):
        return ""
    if answer.get("error"):
        return str(answer["error"])
    for entry in answer.get("gpus") or ():
        if isinstance(entry, dict) and entry.get("index") == gpu and entry.get("state") == "error":
            return str(entry.get("message") or "error")
    return ""
