"""Choosing running work to evict, shared by reclaim, preempt and consolidate.

Victims are evicted one at a time until the job fits and its action's rules hold; then
every victim is offered its place back, as KAI's solvers re-allocate their victims once
the preemptor is placed: first every victim whose GPUs the job did not take stays where
it was (no decision at all), then one that fits elsewhere is moved (evicted and bound in
the same cycle), and only the rest are stopped. Staying comes before moving because
KAI's by-node solver never evicts, even for a while, a victim on a node other than the
one it makes room on: an older victim whose GPUs the job took may not move into a
younger one's place and stop it in its stead.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from gitops_sched.engine.admission import fits_quota
from gitops_sched.engine.min_runtime import protected_until
from gitops_sched.engine.placement import place, surely_no_room
from gitops_sched.engine.pools import ran_in
from gitops_sched.engine.session import (
    Entry,
    InOrder,
    Session,
    Victim,
    job_order,
    victim_order,
)
from gitops_sched.engine.types import GPU_EPSILON, EvictReason, Job, PodPlacement, RequestKind

# tries of a job on the room its victims freed that found it did not fit
MAX_MISSES = 32

# An action's own cap on what the job's project may gain, told before placing (see
# evict_until_placed): whether `job`'s pods adding `gain` GPUs keep within it.
Ceiling = Callable[[Job, float], bool]


def gpu_kind(job: Job) -> bool | None:
    """The kind of GPU the job's pods take (and, running, hold), the only kind a victim's
    eviction makes room for: MIG instances (True) or plain GPUs, whole or shared (False);
    None for pods of no GPU."""
    kind = job.request.kind
    return None if kind is RequestKind.NONE else kind is RequestKind.MIG


def still_running(session: Session, victim: Victim) -> bool:
    """Whether everything the victim would give back is still running."""
    current = session.jobs.get(victim.job)
    if current is None or not current.running:
        return False
    return victim.pods is None or all(p in current.placement for p in victim.pods)


@dataclass(frozen=True, slots=True)
class Taken:
    """An eviction made for a job: whose pods, which, since when they ran."""

    job: str
    pods: tuple[PodPlacement, ...]
    started_at: float | None
    move_only: bool


def evict_until_placed(
    session: Session,
    job: Job,
    reason: EvictReason,
    next_victim: Callable[[], Victim | None],
    accept: Callable[[], bool] = lambda: True,
    together: bool = False,
    ceiling: Ceiling | None = None,
) -> bool:
    """Evict victims one at a time until `job` fits and `accept()` holds; then give back
    what it does not need (see give_back), or, `together`, place the job and its victims
    again in allocation order (see replace_together). Undo everything if that fails.
    Callers try place_in_room first: a job that fits already evicts nothing.

    The job is tried on the room freed at most MAX_MISSES times without fitting, which
    bounds a cycle's work when a job cannot fit however much is evicted. An eviction
    after which the job surely has no room (placement.surely_no_room) costs no try: a
    whole-node job may need many small victims spread over many nodes before one node is
    free (KAI's solver, which has no such bound, goes on through its victims node by node).

    `ceiling`, where the action caps what the job's project may gain (a rule `accept`
    checks too, once placed): a placement of whole GPUs that surely breaks it, the job's or
    a victim's given back, is not made only to be undone (see _surely_refused).
    """
    with session.statement() as commit:
        taken: list[Taken] = []
        misses = 0
        while misses < MAX_MISSES:
            victim = next_victim()
            if victim is None:
                break
            if not still_running(session, victim):
                continue
            taken.append(evict(session, victim, reason, job))
            if surely_no_room(session, job):
                continue  # what the victims freed is not enough yet
            misses += 1  # unless it fits, below
            if together:
                placed = replace_together(session, job, taken, accept)
                if placed:
                    commit()
                    return True
                if placed is None:
                    return False  # a move-only victim found no place, as give_back's
                continue  # not enough room yet, or a victim took its place back first
            if not _surely_refused(session, job, ceiling) and place_within(session, job, accept):
                if give_back(session, taken, accept, ceiling):
                    commit()
                    return True
                return False
    return False


def place_in_room(
    session: Session, job: Job, accept: Callable[[], bool], ceiling: Ceiling | None = None
) -> bool:
    """Place the job with no victim, on room free now (freed earlier in the cycle), if it
    fits and `accept()` holds; else change nothing. `ceiling` as for evict_until_placed."""
    return (
        not surely_no_room(session, job)
        and not _surely_refused(session, job, ceiling)
        and place_within(session, job, accept)
    )


def _surely_refused(
    session: Session, job: Job, ceiling: Ceiling | None, pods: tuple[PodPlacement, ...] = ()
) -> bool:
    """Whether placing the job's next pods (or giving back `pods`, where they ran or
    elsewhere) would surely break the action's `ceiling`: told before placing for pods of
    whole GPUs only, which count the same wherever they land, to the last bit (a share of
    GPU memory counts by the GPU it lands on: the placement tells)."""
    if ceiling is None or job.request.kind is not RequestKind.WHOLE:
        return False
    gain = session.placed_gpus(job, pods) if pods else session.wanted_gpus(job)
    return not ceiling(job, gain)


def evict(session: Session, victim: Victim, reason: EvictReason, job: Job) -> Taken:
    current = session.jobs[victim.job]
    pods = current.placement if victim.pods is None else victim.pods
    session.evict(current, reason, by=job.key, pods=pods)
    return Taken(victim.job, pods, current.started_at, victim.move_only)


def place_within(session: Session, job: Job, accept: Callable[[], bool]) -> bool:
    """Place the job's next pods if they fit and `accept()` holds with them; else nothing."""
    with session.statement() as commit:
        if place(session, job) and accept():
            commit()
            return True
    return False


def give_back(
    session: Session, taken: list[Taken], accept: Callable[[], bool], ceiling: Ceiling | None = None
) -> bool:
    """Offer each victim its place back, the last taken first: where it ran, to every
    victim whose GPUs are still free, then anywhere it fits (a move) to the others, as
    long as its own project's quota rules and `accept()` still hold (a victim of its own
    project's preemption may not take the project past a hard limit again). False when a
    move-only victim finds no place. `ceiling` as for evict_until_placed."""
    moving = [v for v in reversed(taken) if not _take_back(session, v, accept, False, ceiling)]
    return _move_back(session, moving, accept, ceiling)


def _move_back(
    session: Session,
    moving: list[Taken],
    accept: Callable[[], bool],
    ceiling: Ceiling | None = None,
) -> bool:
    """Offer each victim that could not stay where it ran a place anywhere, in turn; False
    (at once) when a move-only one finds none."""
    return all(
        _take_back(session, victim, accept, True, ceiling) or not victim.move_only
        for victim in moving
    )


def ranks_ahead(
    session: Session, job: Job, gain: float, victim: Victim, known: dict[str, tuple] | None = None
) -> bool:
    """Whether the victim's queue, having lost the victim, comes before the job's queue
    (the job adding `gain`) in allocation order: placed again together (see
    replace_together), the victim would take its GPUs back first -- and so would every
    later victim of that queue, as losing more only moves it further ahead.

    `known`: the job's key and level kept between calls (Session.serves_before) while
    nothing changes its project's or department's allocation; a victim is never of the
    job's project and is compared by level only with a job of another department, so
    taking it out changes neither. The session is left exactly as it was (the numbers put
    back, not added back), so the job's key stays what it was for the next call."""
    current = session.jobs[victim.job]
    pods = current.placement if victim.pods is None else victim.pods
    back = session.placed_gpus(current, victim.pods)  # the whole job's is kept per job
    queues = (current.project, session.department_of(current.project))
    allocated = session.allocated
    saved = [(q, allocated[q]) for q in queues if q in allocated]
    for queue, held in saved:
        allocated[queue] = held - back
    # and in the node groups it runs in, which the order reads for a project with
    # per-group quotas and for a department with such projects (Pools.in_groups), and
    # only there
    pools = session.pools
    restore = None
    if pools is not None and pools.reads(current.project):
        amounts = [session.pod_gpus(current, pod) for pod in pods]
        restore = pools.uncounted(current, pods, amounts)
    try:
        return session.serves_before((current, back, (1,)), (job, gain, (0,)), known)
    finally:
        for queue, held in saved:
            allocated[queue] = held
        if restore is not None:
            restore()


def surely_ranks_ahead(
    session: Session, job: Job, gain: float, project: str, known: dict[str, tuple]
) -> bool:
    """Whether every victim of `project` would rank ahead of the job (ranks_ahead), told
    from what its queue holds before losing any (Session.surely_before): reclaim then
    skips the project without trying its victims one by one. False when unsure: always
    for a project of the job's department with per-group quotas, whose share items the
    order judges per node group. For a project of another department the answer is its
    department's, told by the department's level alone (its over-quota item taken at its
    latest where the department has projects with per-group quotas), so it holds for
    every project of that department. `known` as for ranks_ahead."""
    pools = session.pools
    department, claimant = session.department_of(project), session.department_of(job.project)
    if department == claimant:
        if pools is not None and project in pools.quotas:
            return False
        if "project" not in known:
            known["project"] = session.project_order_key(job.project, job, gain)
        return session.surely_before(project, known["project"])
    if "department" not in known:
        known["department"] = (session.department_order_level(claimant, job, gain), claimant)
    per_group = pools is not None and pools.has_pooled(department)
    return session.surely_before(department, known["department"][0], per_group)


def _fits_alone(session: Session, job: Job, accept: Callable[[], bool]) -> bool:
    """Whether the job would fit now, with no victim given its place back: cheaper than
    serving victims first, which can only do worse. Leaves nothing placed."""
    with session.statement():
        return place(session, job) and accept()


def replace_together(
    session: Session, job: Job, taken: list[Taken], accept: Callable[[], bool]
) -> bool | None:
    """Place the job and offer every victim its place back, one at a time in allocation
    order (session.InOrder), as KAI's solvers allocate the preemptor and its
    victims together: a victim whose queue ranks ahead of the job's takes its GPUs back
    first. Inside a project the entries go by job order, move-only victims before those
    the action may stop (which, being cheaper to lose, are the ones left stopped when
    room is short), a job's gang before its extra pods (see _within). Victims served
    after the job first stay where they ran if they can, then the others move, in the
    same order (see the module doc). True, with all of
    it kept, when the job is placed and `accept()` holds and every move-only victim
    found a place; else nothing is kept, and the answer is None when a move-only victim
    found no place, False when the job did not fit. A job that does not fit even with no
    victim back is told so before any victim ahead of it is served (_fits_alone): where
    the job comes first, its own placement tells."""
    with session.statement() as commit:
        waiting: list[Taken | None] = [None, *taken]  # None: the job itself

        def entry(at: int) -> Entry:
            victim = waiting[at]
            current = session.jobs[job.key if victim is None else victim.job]
            if victim is not None:  # a victim is judged where it ran (engine.pools)
                current = ran_in(session, current, victim.pods)
            return current, _gain(session, current, victim), _within(current, victim)

        order = InOrder(session, entry, range(len(waiting)))
        moving: list[Taken] | None = None  # once the job is placed: victims it displaced
        left = set(range(1, len(waiting)))  # the victims not served yet
        for served in range(len(waiting)):
            at = order.pop()
            if served == 0 and at != 0 and not _fits_alone(session, job, accept):
                return False
            left.discard(at)
            victim = waiting[at]
            if victim is None:
                if not place_within(session, job, accept):
                    return False
                if _stranded(session, [taken[i - 1] for i in sorted(left)]):
                    return None
                moving = []
            elif moving is not None:
                if not _take_back(session, victim, accept, anywhere=False):
                    moving.append(victim)
            elif not _take_back(session, victim, accept) and victim.move_only:
                return None
        if moving and not _move_back(session, moving, accept):
            return None
        commit()
        return True


def _stranded(session: Session, left: Iterable[Taken]) -> bool:
    """Whether a move-only victim still to be served can neither run where it ran nor
    anywhere else now: the job is placed, and what is served after it only takes room, so
    it will not find a place later either (replace_together then fails, told early)."""
    for victim in left:
        if victim.move_only and surely_no_room(session, session.jobs[victim.job], len(victim.pods)):
            with session.statement():  # never committed: only whether it could run there
                if not restore(session, victim):
                    return True
    return False


def _within(job: Job, victim: Taken | None) -> tuple:
    """An entry's place among its project's entries: see replace_together. An elastic
    job's gang goes before its extra pods, which cannot start without it
    (Job.starts_short): offered first, they would fail and not be offered again."""
    extra = victim is not None and len(victim.pods) < min(job.min_available, job.pods)
    return (victim is not None and not victim.move_only, job_order(job), extra)


def _gain(session: Session, job: Job, victim: Taken | None) -> float:
    """What placing the job (or giving the victim its pods back) adds to its queue."""
    if victim is None:
        return session.wanted_gpus(job)
    return session.placed_gpus(job, victim.pods)


def _take_back(
    session: Session,
    victim: Taken,
    accept: Callable[[], bool],
    anywhere: bool = True,
    ceiling: Ceiling | None = None,
) -> bool:
    """Give the victim its pods back where they ran, or (`anywhere`) wherever they fit (a
    move), if its project's quota rules and `accept()` still hold; else change nothing.
    `ceiling` as for evict_until_placed."""
    current = session.jobs[victim.job]
    if _surely_refused(session, current, ceiling, victim.pods):
        return False
    with session.statement() as keep:
        if (
            (restore(session, victim) or (anywhere and _move(session, current, len(victim.pods))))
            and fits_quota(session, session.jobs[victim.job])
            and accept()
        ):
            keep()
            return True
    return False


def _move(session: Session, job: Job, count: int) -> bool:
    """Place `count` pods of the job wherever they fit: most victims that could not stay
    have surely no room elsewhere either (the cluster is full), told without a try."""
    return not surely_no_room(session, job, count) and place(session, job, count)


def restore(session: Session, victim: Taken) -> bool:
    """Run the victim's pods again exactly where they ran, if nothing took their GPUs and
    the job would not run short of its gang (an elastic pod whose gang has gone) and none
    of their indexes runs again already (a sibling pod given back elsewhere before it
    took the lowest free index, see placement.place): a pod never runs twice."""
    current = session.jobs[victim.job]
    if current.starts_short(len(victim.pods)):
        return False
    running = {pod.index for pod in current.placement}
    if any(pod.index in running for pod in victim.pods):
        return False
    shared: dict[tuple[str, int], float] = {}  # what the victim's own pods add per GPU
    for pod in victim.pods:
        use = session.nodes.get(pod.node)
        if use is None:
            return False
        gpus = [use.gpus[i] for i in pod.gpus]
        if pod.mig is not None:
            if gpus[0].mig.get(pod.mig) != "":
                return False
        elif pod.fraction:
            gpu = gpus[0]
            key = (pod.node, gpu.index)
            shared[key] = shared.get(key, gpu.used) + pod.fraction
            if gpu.whole or gpu.mig_enabled or shared[key] > 1 + GPU_EPSILON:
                return False
        elif not all(gpu.is_free for gpu in gpus):
            return False
    session.bind(current, victim.pods, started_at=victim.started_at)
    return True


class VictimPool:
    """Running preemptible work per project, cheapest to lose first, with its size and
    node groups taken once per action (a victim's placement does not change while it runs).

    An elastic job above its gang offers its extra pods one at a time, highest index
    first; every such pod of a priority comes before any job of that priority as a whole.
    The jobs are those running when the action began; a project's victims are listed
    when it is first asked about (most never are, and sorting every running job when an
    action begins would be done again by each action that evicts).

    A job still within its project's minimum runtime for the action's `reason` (see
    engine.min_runtime) offers only its pods above its gang, never the gang itself.
    """

    def __init__(
        self, session: Session, reason: EvictReason, projects: Collection[str] | None = None
    ) -> None:
        """The victims of `reason` of every project, or only of `projects`."""
        self.session = session
        self._jobs: dict[str, list[Job]] = {}  # project -> its running preemptible jobs
        self._protected: dict[str, float] = {}  # job -> until when its minimum runtime lasts
        for job in session.running():
            if job.preemptible and (projects is None or job.project in projects):
                self._jobs.setdefault(job.project, []).append(job)
                until = protected_until(job, session.projects.get(job.project), reason)
                if until is not None and session.now < until:
                    self._protected[job.key] = until
        self._victims: dict[str, list[Victim]] = {}
        # the jobs that may be taken whole, by the nodes they run on
        self._by_node: dict[str, list[Job]] | None = None
        self._group = {name: use.node.node_group for name, use in session.nodes.items()}
        # (project, allowed groups, GPU kind) -> index of its first victim that may still be
        # usable: those before it are gone for good, run outside those groups or hold the
        # other kind of GPU (see first_usable)
        self._frontier: dict[tuple[str, frozenset[str] | None, bool | None], int] = {}
        self._mark = 0  # session.evictions before the current job's try

    @property
    def projects(self) -> list[str]:
        """The projects with victims."""
        return list(self._jobs)

    def victims(self, project: str) -> list[Victim]:
        """The project's victims, cheapest to lose first: by priority, the elastic jobs'
        pods above their gang before any job whole (KAI's elastic plugin puts a job
        running past its gang before one at its gang in its job order, which its victim
        order reverses), each in victim order."""
        found = self._victims.get(project)
        if found is None:
            jobs = sorted(self._jobs.get(project, ()), key=victim_order)
            listed = [
                (job.priority, victim.pods is None, victim)
                for job in jobs
                for victim in self._entry(job)
                if self._offered(victim)
            ]
            listed.sort(key=lambda entry: entry[:2])  # stable: victim order within
            found = self._victims[project] = [victim for *_, victim in listed]
        return found

    def lowest_priority(self, project: str) -> int | None:
        """The lowest priority of the project's running preemptible work (None: it has
        none), told without listing its victims: none has a lower one."""
        jobs = self._jobs.get(project)
        return min([job.priority for job in jobs]) if jobs else None

    def _offered(self, victim: Victim) -> bool:
        """Whether the action may take the victim: not a protected job's gang."""
        return victim.pods is not None or victim.job not in self._protected

    def _entry(self, job: Job) -> list[Victim]:
        """The job's victims, kept in the session for the next pool while the job is
        unchanged (a changed job is a new object)."""
        entry = self.session.victim_cache.get(job.key)
        if entry is None or entry[0] is not job:
            entry = self.session.victim_cache[job.key] = (job, self._list(job))
        return entry[1]

    def groups(self, job: Job) -> frozenset[str]:
        group = self._group
        return frozenset(group[p.node] for p in job.placement if p.node in group)

    def _list(self, job: Job) -> list[Victim]:
        groups = self.groups(job)
        extra = sorted(job.placement, key=lambda p: -p.index)[
            : len(job.placement) - job.min_available
        ]
        mig = gpu_kind(job) is True
        victims = [Victim(job.key, (pod,), groups, mig=mig) for pod in extra]
        victims.append(Victim(job.key, None, groups, mig=mig))
        return victims

    def protected_for(self, project: str, allowed: set[str] | None) -> float | None:
        """Seconds until the first of the project's jobs on `allowed` node groups that its
        minimum runtime protects may be taken; None when none is protected."""
        left = [
            self._protected[job.key] - self.session.now
            for job in self._jobs.get(project, ())
            if job.key in self._protected
            and (allowed is None or not self.groups(job).isdisjoint(allowed))
        ]
        return min(left, default=None)

    def on_nodes(self, nodes: set[str]) -> list[Victim]:
        """The whole-job victims that ran on one of `nodes` when the action began."""
        if self._by_node is None:  # the jobs, not their victims: few nodes are asked about
            self._by_node = {}
            for jobs in self._jobs.values():
                for job in jobs:
                    if job.key not in self._protected:  # else its whole job is not offered
                        for node in {pod.node for pod in job.placement}:
                            self._by_node.setdefault(node, []).append(job)
        by_node = self._by_node
        return [self._entry(job)[-1] for node in sorted(nodes) for job in by_node.get(node, ())]

    def gpus(self, victim: Victim) -> float:
        """What evicting the victim now gives back."""
        current = self.session.jobs[victim.job]
        return self.session.placed_gpus(current, victim.pods)

    def still_running(self, victim: Victim) -> bool:
        return still_running(self.session, victim)

    def begin(self) -> None:
        """A job's try starts: what is evicted from now on may still be given back."""
        self._mark = len(self.session.evictions)

    def first_usable(
        self, project: str, start: int, allowed: set[str] | None, mig: bool | None = None
    ) -> int | None:
        """Index of the project's next victim, at `start` or after, still running on an
        allowed node group (and, `mig` given, holding MIG instances or plain GPUs, as said).

        Within an action a victim that has stopped (and was not stopped by the current
        try, which may give it back) never runs again, so each (project, allowed groups)
        keeps a frontier past such victims and past those outside the groups (or of the
        other GPU kind): later jobs start there instead of rescanning them.
        """
        candidates = self.victims(project)
        key = (project, frozenset(allowed) if allowed else None, mig)
        frontier = self._frontier.get(key, 0)
        index = max(start, frontier)
        trying: set[str] | None = None  # jobs the current try evicted
        while index < len(candidates):
            victim = candidates[index]
            inside = (allowed is None or not victim.groups.isdisjoint(allowed)) and (
                mig is None or victim.mig == mig
            )
            if inside and self.still_running(victim):
                return index
            if index == frontier:
                if inside and trying is None:
                    trying = {e.job for e in self.session.evictions[self._mark :]}
                if not inside or victim.job not in trying:  # type: ignore[operator]
                    frontier += 1
                    self._frontier[key] = frontier
            index += 1
        return None
