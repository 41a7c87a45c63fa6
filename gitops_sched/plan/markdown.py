"""The plan as one pull-request comment: the summary line, warnings, tables, a chart.

GitHub Markdown only (no terminal box drawing): tables, alerts, a before/after table with
a bar per value (GPUs per project), and the long parts (object changes, every project)
collapsed in <details>. The first line is a hidden marker the comment script finds the
comment by, so a new push updates the comment instead of adding another.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from gitops_sched.compiler.targets import OURS, SCHEDULERS
from gitops_sched.gcpause import paused_gc
from gitops_sched.plan.build import Plan, Side
from gitops_sched.plan.impact import Moved, ProjectImpact, Scenario
from gitops_sched.plan.objects import ACTIONS, ObjectChange
from gitops_sched.plan.summary import summary
from gitops_sched.plan.warnings import Problem

MARKER = "<!-- gitops-sched-plan -->"
CHART_PROJECTS = 20  # the projects whose fair share moves most, in the chart
BAR_WIDTH = 20  # characters of the chart's longest bar
MAX_VALUE = 60  # characters of a field value shown in the object table


def _v(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    if isinstance(value, dict | list):
        text = json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def _cell(value: Any) -> str:
    return _v(value).replace("|", "\\|").replace("\n", " ")


def arrow(pair: tuple[Any, Any]) -> str:
    before, after = pair
    if before == after:
        return _cell(after)
    return f"{_cell(before)} → **{_cell(after)}**"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def _side(side: Side) -> str:
    commit = f" ({side.commit[:12]})" if side.commit else ""
    return f"`{side.ref}`{commit}"


@paused_gc()  # right after a plan of a large repo, a collection would walk all it holds
def render(plan: Plan) -> str:
    lines = [
        MARKER,
        f"### gitops-sched plan: `{plan.path}`"
        + ("" if plan.target == OURS else f" (for {SCHEDULERS[plan.target]})"),
        "",
        f"{_side(plan.base)} → {_side(plan.head)}",
        "",
        f"**{summary(plan)}**",
        "",
    ]
    lines += _warnings(plan)
    if not plan.head.valid:
        lines += _problems("Validation errors in the head", plan.new_problems, only_errors=True)
        return "\n".join(lines).rstrip() + "\n"
    if plan.base.absent:
        return "\n".join(lines).rstrip() + "\n"  # the summary says it: nothing to compare
    if not plan.base.valid:
        lines += [
            f"The base {_side(plan.base)} does not validate ({plan.base.errors} error(s)), "
            "so there is nothing to compare with; the head validates.",
            "",
        ]
        lines += _problems("Problems this change fixes", plan.fixed_problems)
        return "\n".join(lines).rstrip() + "\n"
    lines += _quotas(plan)
    lines += _fairness(plan)
    lines += _target_differences(plan)
    lines += _objects(plan.objects)
    lines += _problems("Problems this change fixes", plan.fixed_problems)
    return "\n".join(lines).rstrip() + "\n"


def _target_differences(plan: Plan) -> list[str]:
    """For `--target kai|kueue`: where that scheduler may decide otherwise than the fair-share
    simulation above (our engine's), from what the target cannot express."""
    if plan.target == OURS:
        return []
    name = SCHEDULERS[plan.target]
    if not plan.target_differences:
        return [
            f"{name} expresses this config in full: no known difference from the simulation above.",
            "",
        ]
    lines = [
        f"#### Where {name} may decide otherwise",
        "",
        f"The impact above is simulated by gitops-sched's engine; {name} runs the objects "
        "below and may decide otherwise here:",
        "",
    ]
    return lines + _problem_block(plan.target_differences)


def _warnings(plan: Plan) -> list[str]:
    shown = [w for w in plan.warnings if w.kind != "new-problem"]
    shown += [w for w in plan.warnings if w.kind == "new-problem"][:20]
    if not shown:
        return []
    lines = ["> [!WARNING]"]
    lines += [f"> - **{w.subject}**: {w.message}" for w in shown]
    if len(shown) < len(plan.warnings):
        lines.append(f"> - … and {len(plan.warnings) - len(shown)} more (see the JSON)")
    return [*lines, ""]


def _problems(title: str, problems: tuple, only_errors: bool = False) -> list[str]:
    items = [p for p in problems if p.severity == "error" or not only_errors]
    if not items:
        return []
    return [f"#### {title}", "", *_problem_block(items)]


def _problem_block(items: Iterable[Problem]) -> list[str]:
    """Problems as `validate` prints them: FILE:LINE:COL: error GS301 Kind/name: message."""
    lines = ["```text"]
    for p in items:
        head = " ".join(filter(None, (p.severity, p.code, p.obj)))
        lines.append(f"{p.location}: {head}: {p.message}")
    return [*lines, "```", ""]


# --- quotas ------------------------------------------------------------------------------

QUOTA_COLUMNS = {
    "Department": [
        ("GPUs guaranteed", "quotaGpu"),
        ("CPU", "quotaCpu"),
        ("Memory GiB", "quotaMemoryGiB"),
        ("Share of cluster %", "clusterSharePct"),
        ("Over-quota weight", "overQuotaWeight"),
        ("GPU limit", "limitGpu"),
    ],
    "Project": [
        ("Department", "department"),
        ("GPUs guaranteed", "quotaGpu"),
        ("Per node group", "nodeGroupQuotas"),
        ("CPU", "quotaCpu"),
        ("Memory GiB", "quotaMemoryGiB"),
        ("Share of cluster %", "clusterSharePct"),
        ("Over quota", "overQuota"),
        ("Weight", "overQuotaWeight"),
        ("Rank", "overQuotaRank"),
        ("GPU limit", "limitGpu"),
    ],
    "NodeGroup": [
        ("Role", "role"),
        ("Nodes", "nodes"),
        ("GPUs per node", "gpusPerNode"),
        ("GPU model", "gpuModel"),
        ("GPUs", "gpus"),
        ("MIG", "mig"),
    ],
}
TITLES = {"Department": "Departments", "Project": "Projects", "NodeGroup": "Node groups"}


def _quotas(plan: Plan) -> list[str]:
    lines: list[str] = []
    capacity = plan.capacity
    if capacity is not None:
        over = capacity.oversubscribed
        lines += [
            "#### Quotas and capacity",
            "",
            f"Cluster GPUs: {arrow(capacity.gpus)}; department quotas: "
            f"{arrow(capacity.department_quota)} GPUs"
            + (" (**oversubscribed**)" if over[1] else "")
            + (" (no longer oversubscribed)" if over[0] and not over[1] else ""),
            "",
        ]
    for kind, columns in QUOTA_COLUMNS.items():
        changes = [c for c in plan.quotas if c.kind == kind]
        if not changes:
            continue
        # only the columns where something changes, so the table stays narrow
        used = [(t, f) for t, f in columns if any(c.delta(f)[0] != c.delta(f)[1] for c in changes)]
        rows = [[f"`{c.name}`", c.status] + [arrow(c.delta(f)) for _, f in used] for c in changes]
        lines += [f"**{TITLES[kind]}**", ""]
        lines += _table([kind, "Change", *(t for t, _ in used)], rows)
    return lines


# --- fairness ----------------------------------------------------------------------------


def _fairness(plan: Plan) -> list[str]:
    full, work = plan.full_demand, plan.workloads
    if full is None or work is None:
        return []
    by_name = {row.name: row for row in work.projects}
    changed = [row for row in full.projects if row.changed or by_name.get(row.name, row).changed]
    source = "the --state given" if work.name == "state" else "the repo's workloads"
    lines = [
        "#### Fair share",
        "",
        "Simulated by the scheduling engine: *full demand* has every project asking for the "
        f"whole cluster; *now* is {source} under the base config, then the change applied.",
        "",
    ]
    if changed:
        lines += _table(
            [
                "Project",
                "Guaranteed",
                "Fair share, full demand",
                "Fair share, now",
                "Allocated, now",
            ],
            [line for row in changed for line in _fair_rows(row, by_name.get(row.name))],
        )
    else:
        lines += ["No project's fair share or allocation changes.", ""]
    lines += _moved("Would be evicted", work.evicted)
    lines += _moved("Would be moved or shrunk (pods restart or stop)", work.shrunk)
    lines += _moved("Could start", work.started)
    lines += _chart(full)
    every = [line for row in full.projects for line in _fair_rows(row, by_name.get(row.name))]
    lines += [f"<details><summary>Every project ({len(full.projects)})</summary>", ""]
    lines += _table(
        ["Project", "Guaranteed", "Fair share, full demand", "Fair share, now", "Allocated, now"],
        every,
    )
    lines += ["</details>", ""]
    return lines


def _fair_rows(full: ProjectImpact, now: ProjectImpact | None) -> list[list[str]]:
    """The project's row, then, for a project with per-node-group quotas, one per node
    group either scenario has numbers for (engine.pools)."""
    rows = [_fair_row(full, now)]
    at_full = {group.name: group for group in full.node_groups}
    at_now = {group.name: group for group in now.node_groups} if now else {}
    for name in sorted(at_full.keys() | at_now.keys()):
        in_full, in_now = at_full.get(name), at_now.get(name)
        rows.append(
            [
                f"↳ in `{name}`",
                arrow((in_now or in_full or full).deserved),
                arrow(in_full.fair_share) if in_full else "",
                arrow(in_now.fair_share) if in_now else "",
                arrow(in_now.allocated) if in_now else "",
            ]
        )
    return rows


def _fair_row(full: ProjectImpact, now: ProjectImpact | None) -> list[str]:
    none = (None, None)
    return [
        f"`{full.name}`",
        arrow(full.deserved),
        arrow(full.fair_share),
        arrow(now.fair_share if now else none),
        arrow(now.allocated if now else none),
    ]


def _moved(title: str, moved: tuple[Moved, ...]) -> list[str]:
    if not moved:
        return []
    rows = [[f"`{m.workload}`", f"`{m.project}`", _cell(m.gpus), _cell(m.reason)] for m in moved]
    return [
        f"**{title}** ({len(moved)})",
        "",
        *_table(["Workload", "Project", "GPUs", "Why"], rows),
    ]


def _chart(full: Scenario) -> list[str]:
    """Fair share at full demand per project, before and after, as a table with a bar for
    each value: a rising value cannot hide its before bar, as one bar chart's overlaid
    series would."""
    rows = [r for r in full.projects if r.fair_share[0] != r.fair_share[1]]
    rows.sort(key=lambda r: (-abs((r.fair_share[1] or 0) - (r.fair_share[0] or 0)), r.name))
    rows = sorted(rows[:CHART_PROJECTS], key=lambda r: r.name)
    if not rows:
        return []
    top = max(max(r.fair_share[0] or 0.0, r.fair_share[1] or 0.0) for r in rows) or 1.0
    table = [[f"`{r.name}`", _bar(r.fair_share[0], top), _bar(r.fair_share[1], top)] for r in rows]
    return [
        "<details open><summary>Fair share at full demand (GPUs), before and after</summary>",
        "",
        *_table(["Project", "Before", "After"], table),
        "</details>",
        "",
    ]


def _bar(value: float | None, top: float) -> str:
    """`value` as a bar of block characters, BAR_WIDTH wide at `top`, then the number."""
    if value is None:
        return _v(value)
    eighths = round(value / top * BAR_WIDTH * 8)
    bar = "█" * (eighths // 8) + ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]
    return f"`{bar}` {_v(value)}" if bar else _v(value)


# --- objects -----------------------------------------------------------------------------


def _objects(objects: tuple[ObjectChange, ...]) -> list[str]:
    if not objects:
        return ["No Kubernetes object changes.", ""]
    counts = {a: sum(c.action == a for c in objects) for a in ACTIONS}
    title = ", ".join(f"{n} {a}" for a, n in counts.items() if n)
    lines = [f"<details><summary>Kubernetes objects: {title}</summary>", ""]
    if counts["replaced"]:
        lines += [
            "*Replaced*: a field Kubernetes fixes at creation changes (a Job's pod template), "
            "so the reconciler deletes the object and creates it again. A replaced Job's "
            "running pods stop and it starts over (a finished Job runs again).",
            "",
        ]
    groups: dict[tuple[str, str], list[ObjectChange]] = defaultdict(list)
    for change in objects:
        groups[(change.kind, change.project)].append(change)
    for (kind, project), changes in groups.items():
        lines += [f"**{kind}**" + (f" · project `{project}`" if project else ""), ""]
        rows = []
        for c in changes:
            name = f"{c.namespace}/{c.name}" if c.namespace else c.name
            if not c.fields:
                rows.append([f"`{name}`", c.action, "", "", ""])
            action = "replaced (running pods restart)" if c.restarts else c.action
            for f in c.fields:
                rows.append([f"`{name}`", action, f"`{f.path}`", _cell(f.before), _cell(f.after)])
        lines += _table(["Object", "Change", "Field", "Before", "After"], rows)
    return [*lines, "</details>", ""]
