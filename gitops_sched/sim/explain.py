"""`gitops-sched explain`: why a workload runs where it runs, or why it waits, and how its
project's fair share came about.

It runs the same simulation as `simulate` and reads the answer off the settled cluster:
where the pods are and the rules that put them there (the node groups it may use, bin
packing, the topology domain of a gang, the MIG instance it got), or the one-line pending
reason `simulate` prints (engine.why, so both say it in the same words) with the numbers
behind it; then the fair-share split, step by step, that gave its project its share
(engine.fairshare's trace: deserved quotas, whole-GPU rounds by weight, the remainder).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from gitops_sched.config.model import Repo, Workload
from gitops_sched.engine.fairshare import Give, Step, Trace, fair_shares
from gitops_sched.engine.min_runtime import protected_until
from gitops_sched.engine.pools import pool_queues
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import (
    GPU_EPSILON,
    EvictReason,
    Fairness,
    GpuRequest,
    Job,
    QueueSpec,
    QueueStatus,
    RequestKind,
)
from gitops_sched.engine.why import Pending, PendingKind, PendingReasons
from gitops_sched.hardware.gpus import gpus_text, rounded_gpus
from gitops_sched.sim.events import Simulation
from gitops_sched.sim.report import (
    decision_text,
    duration,
    pods_text,
    queue_json,
    request_text,
)
from gitops_sched.sim.run import SimulationResult, WorkloadState, simulate

RULES = {
    RequestKind.WHOLE: "bin packing: whole GPUs go to the fullest allowed node that still has "
    "room for them, so empty nodes stay free for large jobs",
    RequestKind.FRACTION: "fractions go to the partly used GPU they fill best (GPUs shared "
    "only with its own project first), else to a free GPU on the fullest node",
    RequestKind.MEMORY: "a GPU-memory share goes to the partly used GPU it fills best (GPUs "
    "shared only with its own project first), else to a free GPU on the fullest node",
    RequestKind.MIG: "MIG: an idle instance of the profile first, else one created where "
    "NVIDIA's placements leave the most room, on the GPU with the most busy instances",
    RequestKind.NONE: "no GPU: the first allowed node, by name",
}


class ExplainError(Exception):
    """The workload asked about is unknown or ambiguous (a usage error)."""


@dataclass(frozen=True)
class Explanation:
    state: WorkloadState
    department: str
    node_groups: tuple[str, ...]  # the node groups it may use
    allowed_by: str  # which setting gives it those groups
    why_there: tuple[str, ...]  # running: the rules that placed it
    protection: tuple[str, ...]  # running: until when it is no victim (minimum runtime)
    pending: Pending | None  # pending: why
    details: tuple[str, ...]  # the numbers behind the pending reason
    history: tuple[str, ...]  # its binds and evictions, as simulate's decisions show them
    project: QueueSpec | None
    department_spec: QueueSpec | None
    fair_share: float
    allocated: float
    demand: float  # what its project holds and asks for: what the split caps it at
    capacity: float  # GPUs of the schedulable nodes: what the cluster level splits
    steps: tuple[Step, ...]  # the split's steps at the cluster and in its department
    # a project with quotas per node group: its numbers per group (engine.pools)
    pools: tuple[QueueStatus, ...] = ()
    # fairness over time, if configured: the policy and the decayed past usage of each
    # queue the steps name (a share of what the cluster could give in the window)
    fairness: Fairness | None = None
    usage: tuple[tuple[str, float], ...] = ()


def explain(repo: Repo, simulation: Simulation | None, spec: str) -> Explanation:
    """Run the simulation and explain workload `spec` (`name` or `project/name`)."""
    result = simulate(repo, simulation)
    state = find_workload(result, spec)
    workload = state.workload
    session = Session(result.snapshot)
    trace = Trace()
    policy = result.snapshot.policy
    fair_shares(
        session.capacity,
        policy.departments,
        policy.projects,
        session.demand,
        trace,
        usage=session.past_usage,
        history_weight=policy.fairness.history_weight if policy.fairness else 0.0,
    )
    project = session.projects.get(workload.project)
    department = project.parent if project else ""
    job = next(
        (
            j
            for j in result.snapshot.jobs
            if (j.project, j.name) == (workload.project, workload.name)
        ),
        None,
    )
    pending = None
    if state.status == "pending" and job is not None:
        pending = PendingReasons(result.snapshot).of(job)
    return Explanation(
        state=state,
        department=department,
        node_groups=repo.workload_node_group_names(workload),
        allowed_by=_allowed_by(repo, workload),
        why_there=_why_there(result, state) if state.status == "running" else (),
        protection=_protection(job, project, result.snapshot.now)
        if job is not None and job.running
        else (),
        pending=pending,
        details=_details(session, job, pending) if job is not None and pending else (),
        history=_history(result, workload.name),
        project=project,
        department_spec=session.departments.get(department),
        fair_share=session.fair_share.get(workload.project, 0.0),
        allocated=session.allocated.get(workload.project, 0.0),
        demand=session.demand.get(workload.project, 0.0),
        capacity=session.capacity,
        steps=tuple(s for s in trace.steps if s.level in ("", department)),
        pools=_pools(session, workload.project),
        fairness=policy.fairness,
        usage=_usage(session, trace.steps, department),
    )


def _usage(session: Session, steps: list[Step], department: str) -> tuple[tuple[str, float], ...]:
    """The past usage of the queues the shown split steps name, by name."""
    if session.snapshot.policy.fairness is None:
        return ()
    names = {g.queue for s in steps if s.level in ("", department) for g in s.gives}
    return tuple((name, session.usage_of(name)) for name in sorted(names))


def _pools(session: Session, project: str) -> tuple[QueueStatus, ...]:
    """The project's deserved quota, fair share, holdings and queue per node group."""
    if session.pools is None:
        return ()
    return session.pools.statuses(project, pool_queues(session, session.pending()))


def find_workload(result: SimulationResult, spec: str) -> WorkloadState:
    """The workload named `spec` (`name`, or `project/name`); ExplainError if there is not
    exactly one, with the candidates or the nearest names."""
    project, _, name = spec.rpartition("/")
    matches = [
        s
        for s in result.workloads
        if s.workload.name == name and (not project or s.workload.project == project)
    ]
    if len(matches) == 1:
        return matches[0]
    if matches:
        found = ", ".join(f"{s.workload.project}/{s.workload.name}" for s in matches)
        raise ExplainError(f"workload '{spec}' is in several projects: {found}; name one")
    known = [s.workload.name for s in result.workloads]
    known += [f"{s.workload.project}/{s.workload.name}" for s in result.workloads]
    guesses = difflib.get_close_matches(spec, known, n=3)
    hint = f" (did you mean {' or '.join(repr(g) for g in guesses)}?)" if guesses else ""
    raise ExplainError(f"unknown workload '{spec}'{hint}")


def _allowed_by(repo: Repo, workload: Workload) -> str:
    """Which setting decides its node groups (`Repo.node_group_setting`)."""
    setting, _ = repo.node_group_setting(workload)
    return {
        "nodeGroup": "its own nodeGroup",
        "byType": f"project {workload.project}'s nodeGroups.byType.{workload.type}",
        "allowed": f"project {workload.project}'s nodeGroups.allowed",
        "every": "no setting: every node group that runs workloads",
    }[setting]


def _why_there(result: SimulationResult, state: WorkloadState) -> tuple[str, ...]:
    lines = [RULES[state.request.kind]]
    domains = {node.name: node.topology for node in result.snapshot.nodes}
    used = {domains.get(pod.node, "") for pod in state.pods}
    if len(state.pods) > 1 and len(used) == 1 and "" not in used:
        lines.append(f"its pods were kept in one topology domain ({used.pop()})")
    created = {
        (p.node, p.gpus, p.mig) for e in result.log if e.action == "mig-create" for p in e.pods
    }
    for pod in state.pods:
        if pod.mig is not None:
            how = "created" if (pod.node, pod.gpus, pod.mig) in created else "an existing one"
            lines.append(
                f"{pod.mig.profile} instance at slice {pod.mig.start} on {pod.node} "
                f"GPU {pod.gpus[0]}: {how}"
            )
    return tuple(dict.fromkeys(lines))


def _protection(job: Job, project: QueueSpec | None, now: float) -> tuple[str, ...]:
    """Per action with a minimum runtime: until when the job is no victim of it."""
    if not job.preemptible:
        return ()
    lines = []
    for reason in (EvictReason.PREEMPT, EvictReason.RECLAIM):
        until = protected_until(job, project, reason)
        if until is not None:
            state = "protected" if now < until else "was protected"
            lines.append(
                f"{state} from {reason.value} until {duration(until)} "
                f"(started at {duration(job.started_at or 0.0)}, minimum runtime "
                f"{duration(until - (job.started_at or 0.0))})"
            )
    return tuple(lines)


def _history(result: SimulationResult, name: str) -> tuple[str, ...]:
    projects = {s.workload.name: s.workload.project for s in result.workloads}
    return tuple(
        f"step {entry.step} at {duration(entry.time)}: {entry.action} "
        f"{decision_text(entry, projects)}"
        for entry in result.log
        if entry.workload == name
    )


def _details(session: Session, job: Job, pending: Pending) -> tuple[str, ...]:
    """The numbers behind a pending reason."""
    project = session.projects.get(job.project)
    wanted = gpus_text(session.wanted_gpus(job))
    pods = f"{job.next_pods} pod" + ("" if job.next_pods == 1 else "s")
    lines = [f"it asks for {wanted} GPUs now ({pods})"]
    if pending.kind in (PendingKind.QUOTA, PendingKind.LIMIT) and project is not None:
        fixed = session.fixed.get(job.project, 0.0)
        limit = "none" if project.limit is None else gpus_text(project.limit)
        lines.append(
            f"project {project.name}: deserved {gpus_text(project.deserved)}, holds "
            f"{gpus_text(session.allocated[project.name])} ({gpus_text(fixed)} non-preemptible), "
            f"hard limit {limit}, over quota "
            + ("allowed" if project.over_quota_allowed else "denied")
        )
    elif pending.kind in (PendingKind.GANG, PendingKind.FRAGMENTATION):
        free = sorted(
            ((n.free_whole, n.name) for n in session.candidate_nodes(job) if n.free_whole),
            reverse=True,
        )
        listed = ", ".join(f"{name} {count}" for count, name in free[:8]) or "none"
        lines.append(f"{pending.fit_now} of {job.next_pods} pods fit now")
        lines.append(f"free whole GPUs per node it may use: {listed}")
    return tuple(lines)


# --- output --------------------------------------------------------------------------------


def to_text(e: Explanation) -> str:
    w = e.state.workload
    lines = [
        f"{w.project}/{w.name}: {e.state.status}",
        f"  {w.type}, {len(e.state.pods)} of {w.replicas} pods running, each with "
        + _request_phrase(e.state.request)
        + (f"; gang of {w.min_available}" if w.min_available > 1 else ""),
        f"  node groups it may use: {', '.join(e.node_groups) or 'none'} ({e.allowed_by})",
    ]
    if e.state.status == "running":
        lines.append(f"Runs on: {pods_text(e.state.pods)}")
        lines += ["Why there:", *(f"  {line}" for line in e.why_there)]
        if e.protection:
            lines += ["Minimum runtime:", *(f"  {line}" for line in e.protection)]
    elif e.pending is not None:
        lines.append(f"Why pending: {e.pending.text}")
        lines += [f"  {line}" for line in e.details]
    elif e.state.reason:
        lines.append(f"Why {e.state.status}: {e.state.reason}")
    if e.history:
        lines += ["History:", *(f"  {line}" for line in e.history)]
    lines += _share_text(e)
    return "\n".join(lines) + "\n"


def _request_phrase(request: GpuRequest) -> str:
    text = request_text(request)
    return {
        RequestKind.WHOLE: f"{text} GPU{'' if request.count == 1 else 's'}",
        RequestKind.FRACTION: f"{text} of a GPU",
        RequestKind.MEMORY: f"{text} of GPU memory",
        RequestKind.MIG: f"a {text} MIG instance",
        RequestKind.NONE: "no GPU",
    }[request.kind]


def _share_text(e: Explanation) -> list[str]:
    w = e.state.workload
    if e.project is None:
        return [f"Fair share: project {w.project} is not in the policy"]
    p = e.project
    lines = [
        f"Fair share of {p.name}: {gpus_text(e.fair_share)} GPUs (holds {gpus_text(e.allocated)}, "
        f"asks for {gpus_text(e.demand)} in all)",
        f"  {p.name}: deserved {gpus_text(p.deserved)}, over-quota weight "
        f"{gpus_text(p.over_quota_weight)}, rank {p.over_quota_rank}, over quota "
        + ("allowed" if p.over_quota_allowed else "denied")
        + ("" if p.limit is None else f", hard limit {gpus_text(p.limit)}"),
    ]
    d = e.department_spec
    if d is not None:
        lines.append(
            f"  department {d.name}: deserved {gpus_text(d.deserved)}, over-quota weight "
            f"{gpus_text(d.over_quota_weight)}"
            + ("" if d.limit is None else f", hard limit {gpus_text(d.limit)}")
        )
    lines += _fairness_text(e)
    levels = (
        ("", f"the cluster's {gpus_text(e.capacity)} GPUs among departments"),
        (e.department, f"department {e.department}'s share among its projects"),
    )
    for level, title in levels:
        steps = [s for s in e.steps if s.level == level]
        if steps:
            lines.append(f"  split of {title}:")
            lines += [f"    {_step_text(step)}" for step in steps]
    if e.pools:
        lines.append(
            f"  per node group ({p.name} has quotas per node group: each group's GPUs are "
            "split among such projects, and a job is judged in the group it lands on):"
        )
        lines += [
            f"    {pool.name}: deserved {gpus_text(pool.deserved)}, fair share "
            f"{gpus_text(pool.fair_share)}, holds {gpus_text(pool.allocated)}, asks for "
            f"{gpus_text(pool.queued)} more"
            + ("" if e.fairness is None else f", past usage there {pool.usage:.2f}")
            for pool in e.pools
        ]
    return lines


def _fairness_text(e: Explanation) -> list[str]:
    """Fairness over time: the policy and each queue's past usage the rounds weigh."""
    f = e.fairness
    if f is None:
        return []
    decay = f"half-life {duration(f.half_life_s)}" if f.half_life_s > 0 else "no decay"
    used = ", ".join(f"{name} {usage:.2f}" for name, usage in e.usage) or "none"
    return [
        f"  fairness over time (historyWeight {f.history_weight:g}, window "
        f"{duration(f.window_s)}, {decay}): past usage, a share of what the cluster gave in "
        f"the window: {used}; above its weight's part it lowers a queue's part of the spare "
        "GPUs in each round (KAI's time-aware fairness)",
    ]


def _step_text(step: Step) -> str:
    if step.kind == "deserved":
        short = " (of {}: asks no more)"
        gives = ", ".join(
            f"{g.queue} {gpus_text(g.given)}"
            + (short.format(gpus_text(g.offered)) if g.given < g.offered - GPU_EPSILON else "")
            for g in step.gives
        )
        return f"deserved quotas first: {gives}"
    if step.kind == "round":
        gives = ", ".join(f"{g.queue} +{gpus_text(g.given)} ({_part(g)})" for g in step.gives)
        return f"round at rank {step.rank}, {gpus_text(step.offer)} spare GPUs by weight: {gives}"
    gives = ", ".join(f"{g.queue} +{gpus_text(g.given)}" for g in step.gives)
    return f"remainder, {gpus_text(step.offer)} GPUs left by rounding: {gives}"


def _part(give: Give) -> str:
    """A round's part for a queue, and why it took less: it asks no more, or the part was
    rounded down to whole GPUs (the fraction waits for the remainder)."""
    part = f"part {gpus_text(give.offered)}"
    if give.given >= give.offered - GPU_EPSILON:
        return part
    if give.given >= give.asks - GPU_EPSILON:
        return f"{part}: all it asks"
    return f"{part}: whole GPUs only"


def to_json(e: Explanation) -> dict[str, Any]:
    w = e.state.workload
    return {
        "workload": w.name,
        "project": w.project,
        "department": e.department or None,
        "type": w.type,
        "status": e.state.status,
        "pods": len(e.state.pods),
        "replicas": w.replicas,
        "nodeGroups": list(e.node_groups),
        "nodeGroupsFrom": e.allowed_by,
        "runsOn": pods_text(e.state.pods) if e.state.pods else None,
        "whyThere": list(e.why_there),
        "protection": list(e.protection),
        "pending": None
        if e.pending is None
        else {"kind": e.pending.kind.value, "reason": e.pending.text, "details": list(e.details)},
        "history": list(e.history),
        "fairShare": {
            "fairShare": rounded_gpus(e.fair_share),
            "allocated": rounded_gpus(e.allocated),
            "demand": rounded_gpus(e.demand),
            "deserved": rounded_gpus(e.project.deserved) if e.project else None,
            "overQuotaWeight": rounded_gpus(e.project.over_quota_weight) if e.project else None,
            "rank": e.project.over_quota_rank if e.project else None,
            "capacity": rounded_gpus(e.capacity),
            "steps": [_step_json(step) for step in e.steps],
            "nodeGroups": {
                pool.name: {
                    **queue_json(pool),
                    **({} if e.fairness is None else {"usage": pool.usage}),
                }
                for pool in e.pools
            },
            "fairness": None
            if e.fairness is None
            else {
                "historyWeight": e.fairness.history_weight,
                "windowSeconds": e.fairness.window_s,
                "halfLifeSeconds": e.fairness.half_life_s,
                "usage": dict(e.usage),
            },
        },
    }


def _step_json(step: Step) -> dict[str, Any]:
    return {
        "level": step.level or None,
        "kind": step.kind,
        "rank": step.rank,
        "offer": rounded_gpus(step.offer),
        "gives": [
            {
                "queue": g.queue,
                "offered": rounded_gpus(g.offered),
                "given": rounded_gpus(g.given),
                "asks": rounded_gpus(g.asks),
            }
            for g in step.gives
        ],
    }
