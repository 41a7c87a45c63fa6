"""The plan as JSON: the same content as the Markdown, stable for machines.

Every before/after pair is `{"before": x, "after": y}` (null where that side has none),
lists are sorted, GPU numbers rounded to 4 decimals, keys always present. `version`
changes only when a key changes meaning.
"""

from __future__ import annotations

from typing import Any

from gitops_sched.gcpause import paused_gc
from gitops_sched.plan.build import Plan, Side
from gitops_sched.plan.impact import Moved, ProjectImpact, Scenario
from gitops_sched.plan.objects import ACTIONS
from gitops_sched.plan.summary import summary

VERSION = 1


def pair(values: tuple[Any, Any]) -> dict[str, Any]:
    return {"before": values[0], "after": values[1]}


def _side(side: Side) -> dict[str, Any]:
    return {
        "ref": side.ref,
        "commit": side.commit,
        "valid": side.valid,
        "errors": side.errors,
        "absent": side.absent,
    }


def _row(row: ProjectImpact, allocated: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": row.name,
        "department": pair(row.department),
        "deserved": pair(row.deserved),
        "fairShare": pair(row.fair_share),
    }
    if allocated:
        out["allocated"] = pair(row.allocated)
    if row.node_groups:
        out["nodeGroups"] = [_row(group, allocated) for group in row.node_groups]
    return out


def _moved(moved: Moved) -> dict[str, Any]:
    return {
        "workload": moved.workload,
        "project": moved.project,
        "reason": moved.reason,
        "gpus": moved.gpus,
    }


def _scenario(scenario: Scenario | None, allocated: bool) -> dict[str, Any] | None:
    if scenario is None:
        return None
    out: dict[str, Any] = {
        "source": scenario.name,
        "projects": [_row(row, allocated) for row in scenario.projects],
    }
    if allocated:
        out["evicted"] = [_moved(m) for m in scenario.evicted]
        out["started"] = [_moved(m) for m in scenario.started]
        out["shrunk"] = [_moved(m) for m in scenario.shrunk]
    return out


def _problem(problem: Any) -> dict[str, Any]:
    return {
        "severity": problem.severity,
        "code": problem.code,
        "object": problem.obj,
        "message": problem.message,
        "location": problem.location,
    }


@paused_gc()  # as markdown.render
def to_json(plan: Plan) -> dict[str, Any]:
    capacity = plan.capacity
    return {
        "version": VERSION,
        "path": plan.path,
        "base": _side(plan.base),
        "head": _side(plan.head),
        "valid": plan.head.valid,
        "compared": plan.compared,
        "summary": summary(plan),
        "objects": {action: sum(c.action == action for c in plan.objects) for action in ACTIONS}
        | {
            "items": [
                {
                    "action": c.action,
                    "kind": c.kind,
                    "namespace": c.namespace or None,
                    "name": c.name,
                    "project": c.project or None,
                    "fields": [
                        {"path": f.path, "before": f.before, "after": f.after} for f in c.fields
                    ],
                }
                for c in plan.objects
            ]
        },
        "quotas": [
            {
                "kind": q.kind,
                "name": q.name,
                "status": q.status,
                "changes": {d.field: pair((d.before, d.after)) for d in q.deltas},
            }
            for q in plan.quotas
        ],
        "capacity": None
        if capacity is None
        else {
            "gpus": pair(capacity.gpus),
            "departmentQuotaGpus": pair(capacity.department_quota),
            "oversubscribed": pair(capacity.oversubscribed),
        },
        "fairness": {
            "fullDemand": _scenario(plan.full_demand, allocated=False),
            "workloads": _scenario(plan.workloads, allocated=True),
        },
        "warnings": [
            {"kind": w.kind, "subject": w.subject, "message": w.message} for w in plan.warnings
        ],
        "validation": {
            "new": [_problem(p) for p in plan.new_problems],
            "fixed": [_problem(p) for p in plan.fixed_problems],
        },
        "target": plan.target,
        "targetDifferences": [_problem(p) for p in plan.target_differences],
    }
