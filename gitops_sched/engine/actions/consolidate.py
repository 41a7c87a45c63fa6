"""Consolidate: when free GPUs are scattered so a pending job fits nowhere, move work.

Only when the allowed nodes have enough room in total (the job is blocked by
fragmentation, not by capacity) and its quota allows it -- no fair-share condition, as in
KAI's consolidation: the only rule is that every job moved is placed again, so nothing is
lost, only restarted. Whole GPUs, fractions and `gpuMemory` requests, gangs included, are
consolidated; MIG work is neither moved nor made room for (a MIG pod's instance would have
to be created on the target first, and dynamic MIG already reshapes idle instances).

Each node (for whole GPUs) or GPU (for shares) gets a plan: the preemptible jobs to move
off it so one pod fits, the fewest first, the youngest among equals. Plans are tried in
that order -- the fewest and youngest moves first; a gang takes several -- and a try is
kept only if every job moved finds a place; one the job did not need keeps its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitops_sched.engine.actions.victims import Taken, Victim, evict, give_back, place_within
from gitops_sched.engine.admission import quota_blocker
from gitops_sched.engine.session import Session, victim_order
from gitops_sched.engine.types import GPU_EPSILON, EvictReason, Job, RequestKind
from gitops_sched.engine.usage import GpuUse, NodeUse

MAX_TRIES = 4  # plans a job's try may start from, which bounds a cycle's work
MAX_MOVES = 32  # jobs moved in one try
SHARED = (RequestKind.FRACTION, RequestKind.MEMORY)


@dataclass(frozen=True)
class Plan:
    """Jobs to move off one node (or GPU) so one pod of the job fits there."""

    key: tuple  # fewest moves, youngest moves, fewest GPUs moved, where
    moves: tuple[str, ...]


def consolidate(session: Session) -> None:
    if not session.snapshot.policy.consolidation:
        return
    queues = session.pending_by_project()
    failed: set[tuple] = set()
    # plans per (node groups, request), and whole-GPU plans per (node, GPUs), kept while
    # nothing is moved: a failed try leaves no trace, so the next job of that request (or
    # of that size on other node groups) finds the same plans
    plans: dict[tuple, list[Plan]] = {}
    node_plans: dict[tuple[str, int], Plan | None] = {}
    for name in session.serve_order(queues):
        for job in queues[name]:
            job = session.jobs[job.key]
            kind = job.request.kind
            if job.missing == 0 or (kind is not RequestKind.WHOLE and kind not in SHARED):
                continue
            shape = (job.request, job.next_pods, job.node_groups)
            if shape in failed or quota_blocker(session, job):
                continue
            # moves keep the room in total: a job without enough of it never fits this cycle
            if room_in_total(session, job) < pod_need(session, job) * job.next_pods - GPU_EPSILON:
                failed.add(shape)
            elif _consolidate_for(session, job, plans, node_plans):
                session.pending_reasons.pop(job.key, None)
                plans.clear()
                node_plans.clear()
            else:
                failed.add(shape)


def pod_need(session: Session, job: Job) -> float:
    """What one pod needs of a GPU (on the largest GPU it may use, for gpuMemory)."""
    if job.request.kind is RequestKind.WHOLE:
        return float(job.request.count)
    return session.wanted_gpus(job, 1)


def room_in_total(session: Session, job: Job) -> float:
    """Free GPUs plus the room left on shared ones, on the job's schedulable nodes."""
    room = float(session.free_whole(job))
    for group in session.groups_of(job):
        # shared GPUs are indexed as (-used, node, index)
        room += sum(1.0 + minus_used for minus_used, _, _ in session.usage.shared.get(group, ()))
    return room


def _consolidate_for(
    session: Session,
    job: Job,
    cache: dict[tuple, list[Plan]],
    node_plans: dict[tuple[str, int], Plan | None],
) -> bool:
    if job.running:  # its own pods are not movable: its plans are its own
        plans = _plans(session, job, {})
    else:
        key = (job.node_groups, job.request)
        if key not in cache:
            cache[key] = _plans(session, job, node_plans)
        plans = cache[key]
    for start in range(min(len(plans), MAX_TRIES)):
        with session.statement() as commit:
            taken: list[Taken] = []
            # one plan per pod at most: a gang's other pods may fit where there is room
            for plan in plans[start : start + job.next_pods]:
                for moved in plan.moves:
                    current = session.jobs[moved]
                    if current.running and len(taken) < MAX_MOVES:
                        move = Victim(moved, None, frozenset(), move_only=True)
                        taken.append(evict(session, move, EvictReason.CONSOLIDATE, job))
                if place_within(session, job, lambda: True):
                    if give_back(session, taken, lambda: True):
                        commit()
                        return True
                    break
    return False


def _plans(
    session: Session, job: Job, node_plans: dict[tuple[str, int], Plan | None]
) -> list[Plan]:
    """Every node's (whole GPUs) or GPU's (shares) plan, the fewest and youngest first.
    A node's whole-GPU plan depends only on the node and the GPUs needed (the job's own
    pods aside): `node_plans` keeps them for other jobs of that size."""
    plans = []
    need = pod_need(session, job)
    for use in session.candidate_nodes(job):
        if job.request.kind is RequestKind.WHOLE:
            key = (use.name, int(need))
            if key not in node_plans:
                node_plans[key] = _node_plan(session, job, use, int(need))
            plan = node_plans[key]
            if plan is not None:
                plans.append(plan)
        else:
            for gpu in use.gpus:
                plan = _gpu_plan(session, job, use, gpu)
                if plan is not None:
                    plans.append(plan)
    return sorted(plans, key=lambda p: p.key)


def _movable(session: Session, holder: str, job: Job) -> Job | None:
    """The running preemptible non-MIG job holding GPUs under `holder`, if any."""
    held = session.jobs.get(holder)
    if held is None or held.key == job.key or not held.preemptible or not held.running:
        return None
    return None if held.request.kind is RequestKind.MIG else held


def _plan(moves: list[Job], gpus: float, where: tuple) -> Plan:
    """Fewest moves first; among equals the plan whose oldest move started last."""
    oldest = max(victim_order(m)[1] for m in moves)  # minus the start of the oldest
    return Plan((len(moves), oldest, gpus, where), tuple(m.key for m in moves))


def _node_plan(session: Session, job: Job, use: NodeUse, count: int) -> Plan | None:
    """Move whole jobs off the node until `count` of its GPUs are free."""
    deficit = count - use.free_whole
    if deficit <= 0:
        return None
    holders: dict[str, list[int]] = {}  # job -> GPUs of this node it holds
    blocked: set[int] = set()
    sole: dict[str, int] = {}  # job -> GPUs it holds alone: what moving it alone frees
    movable: dict[str, Job | None] = {}
    for gpu in use.gpus:
        if gpu.is_free or gpu.mig_enabled or gpu.held:
            continue
        names = [gpu.whole] if gpu.whole else list(gpu.shares)
        for name in names:
            if name not in movable:
                movable[name] = _movable(session, name, job)
            holders.setdefault(name, []).append(gpu.index)
        if not all(movable[name] for name in names):
            blocked.add(gpu.index)
        if len(names) == 1:
            sole[names[0]] = sole.get(names[0], 0) + 1
    candidates = [
        session.jobs[name]
        for name, gpus in holders.items()
        if not blocked.intersection(gpus) and movable[name]
    ]
    # the youngest job that frees enough alone; else the most GPUs freed per move first
    candidates.sort(key=lambda m: victim_order(m)[1:])
    alone = [m for m in candidates if sole.get(m.key, 0) >= deficit]
    if alone:
        return _plan(alone[:1], session.placed_gpus(alone[0]), (use.name,))
    candidates.sort(key=lambda m: -len(holders[m.key]))
    moves: list[Job] = []
    for candidate in candidates:
        moves.append(candidate)
        if len(_freed(use, {m.key for m in moves})) >= deficit:
            gpus = sum(session.placed_gpus(m) for m in moves)
            return _plan(moves, gpus, (use.name,))
    return None


def _freed(use: NodeUse, moved: set[str]) -> set[int]:
    """The node's GPUs left free once the `moved` jobs have gone."""
    return {
        gpu.index
        for gpu in use.gpus
        if not (gpu.is_free or gpu.mig_enabled or gpu.held)
        and ({gpu.whole} if gpu.whole else set(gpu.shares)) <= moved
    }


def _gpu_plan(session: Session, job: Job, use: NodeUse, gpu: GpuUse) -> Plan | None:
    """Move shares off the GPU until the job's share fits on it."""
    if gpu.mig_enabled or gpu.whole or gpu.used <= GPU_EPSILON:
        return None  # a free GPU needs no plan: the job would have taken it
    if job.request.kind is RequestKind.FRACTION:
        share = job.request.fraction
    else:
        share = job.request.memory_mib / gpu.memory_mib if gpu.memory_mib else 2.0
    if share > 1 + GPU_EPSILON:
        return None
    candidates = [m for m in map(lambda n: _movable(session, n, job), gpu.shares) if m]
    candidates.sort(key=lambda m: (-gpu.shares[m.key], victim_order(m)[1:]))
    room = 1.0 - gpu.used
    moves: list[Job] = []
    for candidate in candidates:
        if room >= share - GPU_EPSILON:
            break
        moves.append(candidate)
        room += gpu.shares[candidate.key]
    if not moves or room < share - GPU_EPSILON:
        return None
    gpus = sum(gpu.shares[m.key] for m in moves)
    return _plan(moves, gpus, (use.name, gpu.index))
