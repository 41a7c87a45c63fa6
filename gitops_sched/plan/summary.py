"""The plan in one line, for the top of the comment: who gains or loses what.

team-b +2 GPUs guaranteed; 3 jobs of team-c would be evicted; 1 pending job could start;
2 workloads replaced (running pods restart)
"""

from __future__ import annotations

from collections import Counter

from gitops_sched.hardware.gpus import gpus_text
from gitops_sched.plan.build import Plan

MAX_NAMED = 3  # projects named one by one before "and N more"


def _gpus(value: float) -> str:
    return f"{value:+g} GPU" + ("" if abs(value) == 1 else "s")


def _listed(parts: list[str]) -> list[str]:
    if len(parts) <= MAX_NAMED:
        return parts
    return [*parts[:MAX_NAMED], f"{len(parts) - MAX_NAMED} more"]


def _jobs(count: int) -> str:
    return f"{count} job" + ("" if count == 1 else "s")


def summary(plan: Plan) -> str:
    if not plan.head.valid:
        return f"Invalid: {plan.head.errors} error(s) in the config at {plan.head.ref}"
    if plan.base.absent:
        return f"A new config: {plan.path} is not in the base {plan.base.ref}"
    if not plan.base.valid:
        return f"The base {plan.base.ref} does not validate; nothing to compare the head with"
    parts: list[str] = []
    guaranteed = []
    for change in plan.quotas:
        if change.kind != "Project":
            continue
        before, after = change.delta("quotaGpu")
        if change.status == "added":
            guaranteed.append(f"{change.name} added ({gpus_text(after)} GPUs guaranteed)")
        elif change.status == "removed":
            guaranteed.append(f"{change.name} removed ({gpus_text(before)} GPUs guaranteed)")
        elif before != after:
            guaranteed.append(f"{change.name} {_gpus(after - before)} guaranteed")
        else:
            old, new = change.delta("department")
            if old != new:
                guaranteed.append(f"{change.name} moves from {old} to {new}")
    parts += _listed(guaranteed)
    if plan.capacity and plan.capacity.gpus[0] != plan.capacity.gpus[1]:
        parts.append(f"capacity {plan.capacity.gpus[0]} → {plan.capacity.gpus[1]} GPUs")
    scenario = plan.workloads
    if scenario is not None:
        for moved, what in ((scenario.evicted, "evicted"), (scenario.shrunk, "moved or shrunk")):
            by_project = Counter(m.project for m in moved)
            counted = _listed([f"{_jobs(n)} of {p}" for p, n in sorted(by_project.items())])
            if counted:
                last = counted.pop()
                text = f"{', '.join(counted)} and {last}" if counted else last
                parts.append(f"{text} would be {what}")
        if scenario.started:
            count = len(scenario.started)
            parts.append(f"{_jobs(count)} could start")
    restarted = sum(c.restarts for c in plan.objects)
    if restarted:
        parts.append(
            f"{restarted} workload{'' if restarted == 1 else 's'} replaced (running pods restart)"
        )
    if not parts:
        objects = len(plan.objects)
        if objects:
            return f"No change to quotas, capacity or fair share; {objects} object(s) change"
        return "No change"
    return "; ".join(parts)
