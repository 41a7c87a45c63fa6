"""Idle detection: per-pod GPU utilisation over time -> since when a pod has been idle.

The agent observes each watched pod's utilisation every tick; `idle_since` says since when
it has been idle once it has been idle for a whole window, which the agent publishes and the
scheduler compares with the project's `idleGpuTimeout`. Unknown utilisation (the driver
cannot tell, e.g. in MIG mode) counts as active: work nobody can measure is never stopped.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Activity:
    """When a pod was first observed and when it last used its GPU (None: not yet)."""

    first_seen: float
    last_active: float | None = None


def utilisation_by_pod(
    samples: Iterable[tuple[str | None, float | None]], pods: Iterable[str]
) -> dict[str, float | None]:
    """Total SM utilisation per watched pod from (pod UID, utilisation) per GPU process.

    A watched pod without a process on any GPU is at 0; one unknown sample makes the pod's
    total unknown (None).
    """
    totals: dict[str, float | None] = dict.fromkeys(pods, 0.0)
    for uid, util in samples:
        if uid not in totals:
            continue
        current = totals[uid]
        totals[uid] = None if current is None or util is None else current + util
    return totals


def observe(
    state: Mapping[str, Activity],
    utilisation: Mapping[str, float | None],
    now: float,
    threshold: float = 1.0,
) -> dict[str, Activity]:
    """The next state from one observation of every watched pod (percent SM utilisation).

    A pod at or above `threshold` percent, or of unknown utilisation, is active now. Pods not
    in `utilisation` are no longer watched and are dropped.
    """
    next_state = {}
    for uid, util in utilisation.items():
        activity = state.get(uid) or Activity(first_seen=now)
        if util is None or util >= threshold:
            activity = Activity(activity.first_seen, now)
        next_state[uid] = activity
    return next_state


def idle_since(activity: Activity, now: float, window: float) -> float | None:
    """Since when the pod has been idle, once that is at least `window`; else None."""
    since = activity.last_active if activity.last_active is not None else activity.first_seen
    return since if now - since >= window else None
