"""Fraction enforcement: a pod over its share of a GPU's memory is warned, then evicted.

A pure function of the watched pods, the memory each uses, the time and the previous state:
the agent turns the returned actions into an Event on the pod (`warn`) or an Eviction
(`evict`). Per pod the policy is its project's: `warn` only ever emits the Event; `evict`
also evicts once the pod has stayed over its share for the whole grace period. Going back
under the share ends the episode, so a later overrun is warned again.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

Policy = Literal["warn", "evict"]
GIB = 1024**3


@dataclass(frozen=True)
class FractionPod:
    """A pod holding a share of one GPU (by UUID): `share` bytes of its memory."""

    uid: str
    namespace: str
    name: str
    gpu_uuid: str
    share: int
    policy: Policy = "warn"


@dataclass(frozen=True)
class OverShare:
    """Since when a pod has been over its share, and whether it was warned or evicted."""

    since: float
    evicted: bool = False


@dataclass(frozen=True)
class Action:
    kind: Literal["warn", "evict"]
    pod: FractionPod
    used: int
    message: str


def memory_by_pod(
    observations: Iterable[tuple[str | None, str, int | None]],
) -> dict[tuple[str, str], int]:
    """Sum GPU memory per (pod UID, GPU UUID) from (pod UID, GPU UUID, bytes) per process.

    Processes outside pods (UID None) and unknown memory (None) are left out.
    """
    usage: dict[tuple[str, str], int] = {}
    for uid, gpu_uuid, used in observations:
        if uid is not None and used is not None:
            usage[uid, gpu_uuid] = usage.get((uid, gpu_uuid), 0) + used
    return usage


def _gib(value: int) -> str:
    return f"{value / GIB:.1f} GiB"


def enforce(
    pods: Iterable[FractionPod],
    usage: Mapping[tuple[str, str], int],
    now: float,
    state: Mapping[str, OverShare],
    grace: float,
) -> tuple[tuple[Action, ...], dict[str, OverShare]]:
    """Actions to take now and the next state (by pod UID), from memory used per pod and GPU.

    Only memory on the pod's own GPU counts. Actions are ordered by namespace and name.
    """
    actions: list[Action] = []
    next_state: dict[str, OverShare] = {}
    for pod in sorted(pods, key=lambda pod: (pod.namespace, pod.name, pod.uid)):
        used = usage.get((pod.uid, pod.gpu_uuid), 0)
        if used <= pod.share:
            continue
        over = state.get(pod.uid)
        what = f"uses {_gib(used)} of GPU {pod.gpu_uuid}, over its share of {_gib(pod.share)}"
        if over is None:
            over = OverShare(since=now)
            then = (
                f"evicted if still over after {grace:g}s"
                if pod.policy == "evict"
                else "policy warn: not evicted"
            )
            actions.append(Action("warn", pod, used, f"{what}; {then}"))
        if pod.policy == "evict" and not over.evicted and now - over.since >= grace:
            over = replace(over, evicted=True)
            actions.append(
                Action("evict", pod, used, f"{what} for {now - over.since:g}s (grace {grace:g}s)")
            )
        next_state[pod.uid] = over
    return tuple(actions), next_state
