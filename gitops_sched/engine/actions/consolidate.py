"""Consolidate: when free GPUs are scattered so a pending job fits nowhere, move work.

Only when the cluster has enough room in total and the job's quota allows it -- no
fair-share condition, as in KAI's consolidation (its IsEnoughGPUsAllocatableForJob counts
the idle GPUs of every node): the only rule is that every job moved is placed again, so
nothing is lost, only restarted. The room counted is the whole cluster's, not only that of
the job's node groups: work that may run in several groups moves out of the job's into
another that has room, so a job pinned to the group its project is guaranteed GPUs in
(engine.pools) is not kept out by work that could run elsewhere. Whole GPUs, fractions
and `gpuMemory` requests, gangs included, are consolidated; MIG work is neither moved nor
made room for (a MIG pod's instance would have to be created on the target first, and
dynamic MIG already reshapes idle instances).

What to move goes in KAI's victim order (its consolidation takes victims from the same
queue of victims as reclaim): queues in reverse allocation order (Session.victim_queue_key),
inside a queue the lowest priority first, then the newest job -- the latest start, then
the latest submission; never by node name. Each node (for whole GPUs) or GPU (for shares)
gets a plan: its preemptible jobs in that order until one pod fits there, leaving out
those with no room for them on any other node (they would have to come back). Plans are tried
by the victim order of their last move (the plan that needs to go least far down the
order first), then the fewest moves, then the fewest GPUs moved; a gang takes several.
A try is kept only if every job moved finds a place; one the job did not need keeps its own.
When the job fits but a job moved finds no place, the next movable jobs of the plans'
nodes (or GPUs) move too, one at a time in victim order, until all land (KAI's solver adds
victims to its scenario one by one).
Only a moved job's pods on the node (or GPU) the plan frees move: a gang's pods elsewhere
keep running, as KAI moves only the pods on the node it frees.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter

from gitops_sched.engine.actions.victims import Taken, evict, give_back, place_within
from gitops_sched.engine.admission import quota_blocker
from gitops_sched.engine.session import Session, Victim, victim_order
from gitops_sched.engine.types import GPU_EPSILON, EvictReason, Job, PodPlacement, RequestKind
from gitops_sched.engine.usage import GpuUse, NodeUse

MAX_TRIES = 4  # plans a job's try may start from, which bounds a cycle's work
MAX_MOVES = 32  # jobs moved in one try
SHARED = (RequestKind.FRACTION, RequestKind.MEMORY)


@dataclass(frozen=True)
class Plan:
    """Jobs to move off one node (or GPU) so one pod of the job fits there."""

    key: tuple  # its last move's victim order, fewest moves, fewest GPUs, every move's
    moves: tuple[str, ...]
    node: str  # where it makes room
    gpu: int | None = None  # on which GPU, for a share; None: whole GPUs of the node

    def pods(self, job: Job) -> tuple[PodPlacement, ...]:
        """The job's pods the plan moves: those where it makes room."""
        return _pods_at(job, self.node, self.gpu)


def _pods_at(job: Job, node: str, gpu: int | None = None) -> tuple[PodPlacement, ...]:
    """The job's pods on the node (and, given, on that GPU of it)."""
    return tuple([p for p in job.placement if p.node == node and (gpu is None or gpu in p.gpus)])


class _VictimRanks:
    """Each movable job's place in victim order, worked out once per set of plans."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._queues: dict[str, tuple] = {}
        self._jobs: dict[str, tuple] = {}

    def of(self, job: Job) -> tuple:
        """The project's place in victim_queue_key, then victim_order inside it."""
        found = self._jobs.get(job.key)
        if found is None:
            queue = self._queues.get(job.project)
            if queue is None:
                queue = self._queues[job.project] = self.session.victim_queue_key(job.project)
            found = self._jobs[job.key] = (queue, *victim_order(job))
        return found


def consolidate(session: Session) -> None:
    if not session.snapshot.policy.consolidation:
        return
    queues = session.pending_by_project()
    failed: set[tuple] = set()
    # plans per (node groups, request), whole-GPU plans per (node, GPUs), each node's movable
    # jobs in victim order and the victim ranks, kept while nothing is moved: a failed try
    # leaves no trace, so the next job of that request (or of another size, or on other
    # node groups) finds the same plans, jobs and ranks
    cache = _Plans(session)
    for name in session.serve_order(queues):
        for job in queues[name]:
            job = session.jobs[job.key]
            kind = job.request.kind
            if job.missing == 0 or (kind is not RequestKind.WHOLE and kind not in SHARED):
                continue
            shape = (job.request, job.next_pods, job.node_groups)
            if shape in failed or quota_blocker(session, job):
                continue
            # moves keep the room in total: a job needing more never fits this cycle
            if room_anywhere(session) < pod_need(session, job) * job.next_pods - GPU_EPSILON:
                failed.add(shape)
            elif _consolidate_for(session, job, cache):
                session.pending_reasons.pop(job.key, None)
                cache = _Plans(session)
            else:
                failed.add(shape)


class _Plans:
    """What _plans works out that holds until something is moved (see consolidate)."""

    def __init__(self, session: Session) -> None:
        self.by_request: dict[tuple, list[Plan]] = {}  # (node groups, request) -> plans
        self.node_plans: dict[tuple[str, int], Plan | None] = {}  # (node, GPUs) -> plan
        self.node_moves: dict[str, _NodeMoves] = {}  # node -> its movable whole-GPU jobs
        # shared GPU -> the jobs that may move off it, in victim order (see _gpu_movable)
        self.gpu_moves: dict[tuple[str, int], list[Job]] = {}
        self.ranks = _VictimRanks(session)
        # (node groups, whole GPUs, one pod's need) -> where such a pod finds room (_spots)
        self.spots: dict[tuple[tuple[str, ...], bool, float], list[tuple[str, int]]] = {}


def pod_need(session: Session, job: Job) -> float:
    """What one pod needs of a GPU (on the largest GPU it may use, for gpuMemory)."""
    if job.request.kind is RequestKind.WHOLE:
        return float(job.request.count)
    return session.wanted_gpus(job, 1)


def room_in_total(session: Session, job: Job) -> float:
    """Free GPUs plus the room left on shared ones, on the job's schedulable nodes."""
    return _room(session, session.groups_of(job))


def room_anywhere(session: Session) -> float:
    """Free GPUs plus the room left on shared ones, on every schedulable node: the most
    that moves can free for any job (a move takes its room with it)."""
    return _room(session, session.usage.free_total)


def _room(session: Session, groups: Iterable[str]) -> float:
    usage = session.usage
    room = float(sum([usage.free_total.get(g, 0) for g in groups]))
    for group in groups:
        # shared GPUs are indexed as (-used, node, index)
        # a list, not a generator: a generator's every step is a call
        room += sum([1.0 + minus_used for minus_used, _, _ in usage.shared.get(group, ())])
    return room


def _consolidate_for(session: Session, job: Job, cache: _Plans) -> bool:
    if job.running:  # its own pods are not movable: its plans there are its own
        plans = _plans(session, job, cache, frozenset(pod.node for pod in job.placement))
    else:
        key = (job.node_groups, job.request)
        if key not in cache.by_request:
            cache.by_request[key] = _plans(session, job, cache)
        plans = cache.by_request[key]
    for start in range(min(len(plans), MAX_TRIES)):
        with session.statement() as commit:
            taken: list[Taken] = []
            # one plan per pod at most: a gang's other pods may fit where there is room
            chosen = plans[start : start + job.next_pods]
            for plan in chosen:
                for moved in plan.moves:
                    _move_off(session, job, plan, moved, taken)
                fits, placed = _place_and_give_back(session, job, taken)
                if placed:
                    commit()
                    return True
                if fits:
                    break
            else:
                continue
            # the job fits, but what was moved finds no place: move the next work of the
            # plans' nodes too, in victim order, until all of it lands (KAI's consolidation
            # adds victims to its scenario one by one) or nothing is left to move there
            for plan, moved in _further(session, job, chosen, cache):
                if len(taken) >= MAX_MOVES:
                    break
                _move_off(session, job, plan, moved, taken)
                if _place_and_give_back(session, job, taken)[1]:
                    commit()
                    return True
    return False


def _move_off(session: Session, job: Job, plan: Plan, moved: str, taken: list[Taken]) -> None:
    """Evict, to be moved, the pods of `moved` where the plan makes room."""
    pods = plan.pods(session.jobs[moved])
    if pods and len(taken) < MAX_MOVES:
        move = Victim(moved, pods, frozenset(), move_only=True)
        taken.append(evict(session, move, EvictReason.CONSOLIDATE, job))


def _place_and_give_back(session: Session, job: Job, taken: list[Taken]) -> tuple[bool, bool]:
    """(whether the job fits, whether every job moved then finds a place); nothing is
    left placed unless both."""
    fits = False
    with session.statement() as commit:
        if place_within(session, job, lambda: True):
            fits = True
            if give_back(session, taken, lambda: True):
                commit()
                return True, True
    return fits, False


def _further(
    session: Session, job: Job, plans: list[Plan], cache: _Plans
) -> Iterator[tuple[Plan, str]]:
    """The movable work of the plans' nodes (or GPUs) the plans do not move, each plan's in
    victim order, the plans in turn."""
    for plan in plans:
        use = session.nodes[plan.node]
        if plan.gpu is None:
            moves = cache.node_moves.get(plan.node) or _NodeMoves(session, job, use, cache)
            candidates = [candidate.key for candidate, _ in moves.candidates]
        else:
            gpu = use.gpus[plan.gpu]
            candidates = [m.key for m in _gpu_movable(session, use, gpu, cache) if m.key != job.key]
        for moved in candidates:
            if moved not in plan.moves:
                yield plan, moved


def _plans(
    session: Session, job: Job, cache: _Plans, own: frozenset[str] = frozenset()
) -> list[Plan]:
    """Every node's (whole GPUs) or GPU's (shares) plan, the fewest and youngest first.
    A node's whole-GPU plan depends only on the node and the GPUs needed (the job's own
    pods aside): `cache` keeps them for other jobs of that size, and each node's movable
    jobs for jobs of any size. On the nodes `own`, where the job runs pods of its own
    (which never move), its plans are worked out for it alone and not kept."""
    plans = []
    need = pod_need(session, job)
    ranks = cache.ranks
    node_plans = cache.node_plans
    for use in session.candidate_nodes(job):
        if job.request.kind is RequestKind.WHOLE and use.name in own:
            plan = _NodeMoves(session, job, use, cache).plan(session, use, int(need), ranks)
            if plan is not None:
                plans.append(plan)
        elif job.request.kind is RequestKind.WHOLE:
            key = (use.name, int(need))
            if key not in node_plans:
                moves = cache.node_moves.get(use.name)
                if moves is None:
                    moves = cache.node_moves[use.name] = _NodeMoves(session, job, use, cache)
                node_plans[key] = moves.plan(session, use, int(need), ranks)
            plan = node_plans[key]
            if plan is not None:
                plans.append(plan)
        else:
            for gpu in use.gpus:
                plan = _gpu_plan(session, job, use, gpu, cache)
                if plan is not None:
                    plans.append(plan)
    return sorted(plans, key=attrgetter("key"))


def _movable(session: Session, holder: str) -> Job | None:
    """The running preemptible non-MIG job holding GPUs under `holder`, if any."""
    held = session.jobs.get(holder)
    if held is None or not held.preemptible or not held.running:
        return None
    return None if held.request.kind is RequestKind.MIG else held


def _may_leave(
    session: Session, held: Job, use: NodeUse, gpu: int, whole: bool, cache: _Plans
) -> bool:
    """Whether one pod of the job, on GPU `gpu` of the node `use`, could run elsewhere
    than where the plan makes room: off that GPU, and off the node's free GPUs for a plan
    of whole GPUs (`whole`), which takes them with those it frees. A share may go to
    another shared GPU of the node; a pod of whole GPUs, in such a plan only, goes off the
    node. One that could not is no move: it would have to come back to the GPUs the plan
    makes room on, so a plan that counts on moving it fails (and hides the plan of the same
    node, or GPU, that moves work with somewhere to go)."""
    node = use.name
    return any(
        name != node or (index != gpu and (index != -1 or not whole))
        for name, index in _spots(session, held, cache)
    )


def _spots(session: Session, held: Job, cache: _Plans) -> list[tuple[str, int]]:
    """Where one pod of the job would find room now, in its node groups, as (node, GPU):
    for whole GPUs a node with as many free (GPU -1: any of them); for a share a free GPU
    (likewise) or a shared GPU with room for its share on the largest GPU it may use (no
    GPU gives it less). Only up to the first two nodes: _may_leave leaves out at most one
    node, so two are enough to tell. Worked out once per node groups and need while nothing
    moves."""
    whole = held.request.kind is RequestKind.WHOLE
    need = float(max(held.request.count, 1)) if whole else pod_need(session, held)
    key = (held.node_groups, whole, need)
    found = cache.spots.get(key)
    if found is None:
        found = []
        nodes: set[str] = set()
        usage = session.usage
        least = need if whole else 1.0  # free GPUs a node needs for the pod
        for group in session.groups_of(held):
            for free, bucket in usage.free_index[group].items():
                if free >= least - GPU_EPSILON:
                    for node in bucket[: max(2 - len(nodes), 0)]:  # a node is in one bucket
                        found.append((node, -1))
                        nodes.add(node)
            # shared GPUs, least used last: those with room for the share are at the end
            for minus_used, node, index in () if whole else reversed(usage.shared.get(group, ())):
                if len(nodes) >= 2 or 1.0 + minus_used < need - GPU_EPSILON:
                    break
                found.append((node, index))
                nodes.add(node)
            if len(nodes) >= 2:
                break
        cache.spots[key] = found
    return found


def _plan(
    moves: list[Job], gpus: float, ranks: _VictimRanks, node: str, gpu: int | None = None
) -> Plan:
    """The moves in victim order: later plans are those whose last move comes later."""
    order = tuple([ranks.of(m) for m in moves])
    return Plan((order[-1], len(moves), gpus, order), tuple([m.key for m in moves]), node, gpu)


class _NodeMoves:
    """A node's whole-GPU plans for any number of GPUs: the jobs that may move off it (every
    GPU they hold there holds only movable jobs) in victim order, and how many jobs hold
    each of its busy GPUs. Worked out once per node, not once per size of job."""

    def __init__(self, session: Session, job: Job, use: NodeUse, cache: _Plans) -> None:
        holders: dict[str, list[int]] = {}  # job -> GPUs of this node it holds
        blocked: set[int] = set()
        movable: dict[str, Job | None] = {}
        self.holding: dict[int, int] = {}  # busy GPU -> how many jobs hold it
        for gpu in use.gpus:
            if gpu.is_free or gpu.mig_enabled or gpu.held:
                continue
            names = [gpu.whole] if gpu.whole else list(gpu.shares)
            self.holding[gpu.index] = len(names)
            for name in names:
                if name not in movable:
                    held = _movable(session, name) if name != job.key else None
                    leaves = held and _may_leave(session, held, use, gpu.index, True, cache)
                    movable[name] = held if leaves else None
                holders.setdefault(name, []).append(gpu.index)
            if not all([movable[name] for name in names]):  # a list: no call a step
                blocked.add(gpu.index)
        candidates = [
            (session.jobs[name], gpus)
            for name, gpus in holders.items()
            if not blocked.intersection(gpus) and movable[name]
        ]
        candidates.sort(key=lambda c: cache.ranks.of(c[0]))
        self.candidates = candidates

    def plan(self, session: Session, use: NodeUse, count: int, ranks: _VictimRanks) -> Plan | None:
        """Move jobs off the node, in victim order, until `count` of its GPUs are free."""
        deficit = count - use.free_whole
        if deficit <= 0:
            return None
        left = dict(self.holding)  # GPU -> its holders not moved yet
        freed = 0
        moves: list[Job] = []
        for candidate, gpus in self.candidates:
            moves.append(candidate)
            for index in gpus:
                left[index] -= 1
                freed += left[index] == 0
            if freed >= deficit:
                total = sum([session.placed_gpus(m, _pods_at(m, use.name)) for m in moves])
                return _plan(moves, total, ranks, use.name)
        return None


def _gpu_plan(session: Session, job: Job, use: NodeUse, gpu: GpuUse, cache: _Plans) -> Plan | None:
    """Move shares off the GPU, in victim order, until the job's share fits on it."""
    if gpu.mig_enabled or gpu.whole or gpu.used <= GPU_EPSILON:
        return None  # a free GPU needs no plan: the job would have taken it
    if job.request.kind is RequestKind.FRACTION:
        share = job.request.fraction
    else:
        share = job.request.memory_mib / gpu.memory_mib if gpu.memory_mib else 2.0
    if share > 1 + GPU_EPSILON:
        return None
    candidates = _gpu_movable(session, use, gpu, cache)
    if job.running:  # its own share never moves
        candidates = [m for m in candidates if m.key != job.key]
    room = 1.0 - gpu.used
    moves: list[Job] = []
    for candidate in candidates:
        if room >= share - GPU_EPSILON:
            break
        moves.append(candidate)
        room += gpu.shares[candidate.key]
    if not moves or room < share - GPU_EPSILON:
        return None
    gpus = sum([gpu.shares[m.key] for m in moves])
    return _plan(moves, gpus, cache.ranks, use.name, gpu.index)


def _gpu_movable(session: Session, use: NodeUse, gpu: GpuUse, cache: _Plans) -> list[Job]:
    """The jobs sharing the GPU that may move off it (_movable, _may_leave), in victim
    order: worked out once per GPU while nothing moves, for jobs of any share (a job's
    own share is left out by the caller)."""
    key = (use.name, gpu.index)
    found = cache.gpu_moves.get(key)
    if found is None:
        found = [
            m
            for n in gpu.shares
            if (m := _movable(session, n)) and _may_leave(session, m, use, gpu.index, False, cache)
        ]
        found.sort(key=cache.ranks.of)
        cache.gpu_moves[key] = found
    return found
