"""Reclaim: a project below its fair share (or its deserved quota) takes GPUs back.

Reclaimers are served in allocate's queue order (Session.serve_order). Victims are
preemptible jobs of other projects, taken one at a time in the order queues give up work
(Session.victim_queue_key: KAI's allocation order reversed, department first, then
project; recomputed after each eviction); within a project the cheapest to lose first
(lowest priority, then youngest). A victim's queue (and, across departments, its
department) may lose a victim as long as, before losing it, it holds more than
max(deserved, fair share) capped by its limit -- so the last victim may take it below --
and, when the claimant would end above its own fair share, its allocated/fair-share
ratio stays above the claimant's (KAI's MaintainFairShare strategy and sibling check). A
project still within its deserved quota with the job may take any work of projects over
their own deserved quota (GuaranteeDeservedQuota): deserved quota is guaranteed.

Once the victims make room, the job and its victims are placed again together in
allocation order (see victims.replace_together): a victim whose queue ranks ahead of the
claimant's takes its GPUs back first, so a job never reclaims from a queue that ranks
ahead of its own; one the job did not need keeps its place. When the projects that may
lose work cannot make room on their own, preemptible work of any other project on the
nodes they freed may be moved (never stopped) -- consolidation inside reclaim, as KAI's
consolidating reclaim does -- unless its queue ranks ahead of the claimant's (it would
take its place back first, like a victim of such a queue: see ranks_ahead). Quota and
hard limits are checked once the victims have left: a department at its hard limit can
reclaim from a sibling project.

Only victims on the kind of GPU the job takes are asked (MIG instances for a MIG request,
plain GPUs for the others; moves alike): stopping the other kind makes no room for it and
would spend the job's MAX_MISSES tries. The exception is a victim of the job's own
department under a hard limit, which frees the quota the job may need whatever it runs
on.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import replace
from enum import StrEnum
from functools import partial

from gitops_sched.engine.actions.victims import (
    VictimPool,
    evict_until_placed,
    gpu_kind,
    place_in_room,
    ranks_ahead,
    surely_ranks_ahead,
)
from gitops_sched.engine.admission import fits_quota, may_reclaim, quota_blocker
from gitops_sched.engine.pools import pool_of, restricted, tries
from gitops_sched.engine.session import Session, Victim, victim_order
from gitops_sched.engine.types import GPU_EPSILON, EvictReason, Job


def reclaim(session: Session) -> None:
    """Reclaim for the pending work of every project."""
    queues = session.pending_by_project()
    pool = VictimPool(session, EvictReason.RECLAIM)
    order = _VictimQueues(session, pool.projects)
    # A job shape that could not reclaim for a project is not tried again for it this
    # cycle: every reclaim only lowers what victims can still give, so a later try would
    # fail the same way. The project is part of the shape: its own work is never a victim
    # and its quota and ratio decide which victims it may take; so is preemptibility, as
    # non-preemptible work must also fit in the deserved quota.
    failed_shapes: set[tuple] = set()
    for name in session.serve_order(queues):
        for job in queues[name]:
            if session.pools is None:
                _reclaim_job(session, job, pool, order, failed_shapes)
                continue
            for groups in tries(session, job):
                with restricted(session, job, groups) as each:
                    if _reclaim_job(session, each, pool, order, failed_shapes):
                        break


def _reclaim_job(
    session: Session, job: Job, pool: VictimPool, order: _VictimQueues, failed_shapes: set[tuple]
) -> bool:
    """Reclaim for the job if it may; whether it was placed. The cheapest checks first:
    most jobs a cycle asks about may not reclaim at all (nor may work of a project the
    policy does not name, which quota_blocker holds)."""
    job = session.jobs[job.key]
    if job.missing == 0 or job.project not in session.projects:
        return False
    if not may_reclaim(session, job):
        return False
    gain = session.wanted_gpus(job)
    guaranteed = within_deserved(session, job, gain)
    shape = (job.project, job.request, job.next_pods, job.node_groups, guaranteed, job.preemptible)
    if shape in failed_shapes or quota_blocker(session, job, _freeable(session, job)):
        return False
    if _reclaim_for(session, job, pool, order, gain, guaranteed):
        session.pending_reasons.pop(job.key, None)
        return True
    failed_shapes.add(shape)
    return False


def within_deserved(session: Session, job: Job, gain: float) -> bool:
    """Whether the job's project stays within its deserved quota gaining `gain` GPUs: then
    it may take any work of projects over their own deserved quota (see module doc). A
    project with per-group quotas is judged in the group the job is tried in."""
    project = session.projects[job.project]
    pools = session.pools
    if pools is not None and (group := pool_of(session, job)) is not None:
        held = pools.held(project.name, (group,))
        return held + gain <= pools.deserved(project.name, (group,)) + GPU_EPSILON
    return session.allocated[project.name] + gain <= project.deserved + GPU_EPSILON


def _freeable(session: Session, job: Job) -> dict[str, float]:
    """The most reclaim could free in the job's department: its sibling projects'
    preemptible work (victims are never in the job's own project)."""
    department = session.department_of(job.project)
    if department not in session.allocated:
        return {}
    others = session.allocated[department] - session.allocated[job.project]
    fixed = session.fixed[department] - session.fixed[job.project]
    return {department: max(others - fixed, 0.0)}


class _VictimQueues:
    """The projects that may give work to a claimant, in Session.victim_queue_key order,
    in two views: for a claimant within its deserved quota (`guaranteed`), those over
    their deserved quota; for the others, those holding more than their allocatable share
    (Session.allocatable). Either way only projects whose department may also lose work
    (likewise) are in a view, except in the claimant's own department (`open`), whose
    projects compete only with each other.

    Each view is two levels, as the order is: its departments sorted by
    Session.victim_key (those with a project in the view), and each department's projects
    sorted by theirs. A key changes only with its queue's allocation, a project's place in
    a view only with what it holds (per node group, where it has per-group quotas), and a
    department's standing only with its projects', so after an eviction or a try only the
    queues it touched are put back in place, instead of sorting every project per job.
    Mid-try a view is a superset of the projects _may_lose_any allows: departments only
    lose work then, and its `blocked` set finds those that drop out.
    """

    def __init__(self, session: Session, projects: list[str]) -> None:
        self.session = session
        self.open = ""  # the current claimant's department
        self.by_department: dict[str, list[str]] = {}
        for project in projects:
            self.by_department.setdefault(session.department_of(project), []).append(project)
        # each queue's holding (see _holding) when its key was last worked out, and that key
        self.held: dict[str, tuple[float, ...]] = {}
        self.keys: dict[str, tuple] = {}
        self.standing: dict[str, tuple[bool, bool]] = {}
        # guaranteed -> (departments in order, department -> its projects in order)
        self.views: dict[bool, tuple[list[tuple], dict[str, list[tuple]]]] = {}
        self.rebuild()

    def rebuild(self) -> None:
        """Work out every queue's key and standing, and both views, from the session (the
        upkeep below keeps them so as the session changes)."""
        session = self.session
        projects = [p for members in self.by_department.values() for p in members]
        for queue in [*projects, *self.by_department]:
            self.held[queue] = self._holding(queue)
            self.keys[queue] = session.victim_key(queue)
        self.standing = {d: self._department_may_give(d) for d in self.by_department}
        for guaranteed in (False, True):
            members: dict[str, list[tuple]] = {}
            for project in projects:
                if self._may_give(project, guaranteed):
                    department = session.department_of(project)
                    members.setdefault(department, []).append(self.keys[project])
            for keys in members.values():
                keys.sort()
            self.views[guaranteed] = (sorted(self.keys[d] for d in members), members)

    def _holding(self, queue: str) -> tuple[float, ...]:
        """What a queue's key and place in the views follow: its allocation and, for a
        project with per-group quotas, what it holds in each group (a job moved from one
        group to another keeps the total, but may change whether the project may give)."""
        holding: tuple[float, ...] = (self.session.allocated.get(queue, 0.0),)
        pools = self.session.pools
        if pools is not None and queue in pools.quotas:
            holding += tuple(pools.held(queue, (group,)) for group in pools.groups(queue))
        return holding

    def _department_may_give(self, department: str) -> tuple[bool, bool]:
        """Whether the department may lose anything, to a claimant above and within its
        deserved quota."""
        if department == self.open:
            return True, True
        session = self.session
        if session.pools is not None:
            return True, True  # judged per victim, in its node groups (engine.pools)
        allocated = session.allocated.get(department, 0.0)
        return (
            allocated > session.allocatable(department) + GPU_EPSILON,
            _over_deserved(session, department),
        )

    def _may_give(self, project: str, guaranteed: bool) -> bool:
        """Whether the project, and its department, may lose anything at all."""
        if not self.standing[self.session.department_of(project)][guaranteed]:
            return False
        pools = self.session.pools
        if pools is not None and project in pools.quotas:
            return pools.may_give_any(project, guaranteed)
        if guaranteed:
            return _over_deserved(self.session, project)
        allocated = self.session.allocated.get(project, 0.0)
        return allocated > self.session.allocatable(project) + GPU_EPSILON

    def claim_for(self, project: str) -> None:
        """A try for a claimant of `project` begins: its department's projects may give.
        The department stays open until a claimant of another one comes (a project's
        claimants come one after another), so its projects are not re-placed per try."""
        department = self.session.department_of(project)
        if department != self.open:
            previous, self.open = self.open, department
            self._restand(previous)
            self._restand(department)

    def settle(self, projects: Iterable[str]) -> None:
        """The try has ended: re-place the projects it touched and, where their
        department's standing changed, its other projects."""
        self.refresh(projects)
        for department in sorted({self.session.department_of(p) for p in projects}):
            self._restand(department)

    def _restand(self, department: str) -> None:
        standing = self._department_may_give(department)
        if department in self.standing and self.standing[department] != standing:
            self.standing[department] = standing
            for project in self.by_department[department]:
                self._place(project, self.keys[project])

    def refresh(self, projects: Iterable[str]) -> None:
        """Re-place those of the projects, and of their departments, whose holding
        changed."""
        for project in sorted(set(projects)):
            department = self.session.department_of(project)
            for queue in (project, department):
                if queue not in self.held:
                    continue
                held = self._holding(queue)
                if held == self.held[queue]:
                    continue
                self.held[queue] = held
                old, self.keys[queue] = self.keys[queue], self.session.victim_key(queue)
                if queue == project:
                    self._place(project, old)
                else:
                    self._move_department(queue, old)

    def _place(self, project: str, old: tuple) -> None:
        """Put the project where its current key and standing say, in both views (its
        `old` key, if a view holds it, is its own: a key ends with its queue's name)."""
        department = self.session.department_of(project)
        for guaranteed, (departments, members) in self.views.items():
            keys = members.setdefault(department, [])
            was = bool(keys)
            at = bisect.bisect_left(keys, old)
            if at < len(keys) and keys[at] == old:
                del keys[at]
            if self._may_give(project, guaranteed):
                bisect.insort(keys, self.keys[project])
            if was != bool(keys):
                key = self.keys[department]
                if keys:
                    bisect.insort(departments, key)
                else:
                    del departments[bisect.bisect_left(departments, key)]

    def _move_department(self, department: str, old: tuple) -> None:
        """Put the department where its new key says, in the views that hold it."""
        for departments, members in self.views.values():
            if members.get(department):
                del departments[bisect.bisect_left(departments, old)]
                bisect.insort(departments, self.keys[department])

    def walk(self, guaranteed: bool, after: tuple | None) -> Iterator[tuple[tuple, list[tuple]]]:
        """Each department of a view in order, with its project keys in order, from
        `after` (a (department key, project key) pair) on: the pairs before it are skipped
        (none if None: from the start)."""
        departments, members = self.views[guaranteed]
        start = 0 if after is None else bisect.bisect_left(departments, after[0])
        for department in departments[start:]:
            keys = members[department[-1]]
            first = 0
            if after is not None and department == after[0]:
                first = bisect.bisect_left(keys, after[1])
            yield department, keys[first:]


def _reclaim_for(
    session: Session,
    job: Job,
    pool: VictimPool,
    order: _VictimQueues,
    gain: float,
    guaranteed: bool,
) -> bool:
    accept = partial(fits_quota, session, job)
    if place_in_room(session, job, accept):  # before setting up a try: no victim to seek
        order.settle((job.project,))
        return True
    allowed = set(job.node_groups) or None
    pool.begin()
    order.claim_for(job.project)
    touched = {job.project}  # projects whose allocation this try may change
    cursors: dict[str, int] = {}  # project -> its next victim to consider for this job
    done = {job.project}  # projects with nothing (more) to give this job
    last: list[str] = []  # the project that gave the last victim: its key has changed
    freed_nodes: set[str] = set()  # where the victims that may be stopped ran
    movable: list[Victim] | None = None
    # the (department, project) keys before `scan` are done for this job: a key only grows
    # as its queue loses work, so those that move go back (or leave the view) and no key
    # of a project not yet asked comes before it (None: from the start)
    scan: tuple | None = None
    asked_all = False  # every project was asked
    blocked: set[str] = set()  # departments that may lose nothing to this job
    own = session.department_of(job.project)
    kind = gpu_kind(job)
    # a victim of the job's own department frees quota under its hard limit, whatever
    # kind of GPU it holds
    own_kind = None if _limited(session, own) else kind
    # the job's order key and level (see ranks_ahead): its key is kept for the whole try
    # (a victim is never of its project), its department's level until a victim of its
    # department is taken
    known: dict[str, tuple] = {}
    took_own = False  # the last victim was of the job's department

    def usable(department: str, project: str) -> int | None:
        """The project's next victim worth trying for the job (its index), or None: a
        project of the job's department whose every victim would rank ahead gives none
        (they are not tried one by one), nor one that may lose nothing."""
        if department == own and surely_ranks_ahead(session, job, gain, project, known):
            return None
        if not _may_lose_any(session, job, gain, project, guaranteed, blocked):
            return None
        usable = own_kind if department == own else kind
        return pool.first_usable(project, cursors.get(project, 0), allowed, usable)

    def next_victim() -> Victim | None:
        nonlocal movable, scan, asked_all, took_own
        order.refresh(last)
        last.clear()
        if took_own:
            known.pop("department", None)
        if not asked_all:
            for department_key, keys in order.walk(guaranteed, scan):
                department = department_key[-1]
                keys = [key for key in keys if key[-1] not in done]
                # another department's every victim ranking ahead is told by its level
                # alone (see surely_ranks_ahead): then none of its projects gives one now
                if (
                    keys
                    and department != own
                    and surely_ranks_ahead(session, job, gain, keys[0][-1], known)
                ):
                    done.update(key[-1] for key in keys)
                    continue
                for key in keys:
                    project = key[-1]
                    index = usable(department, project)
                    if index is not None:
                        victim = pool.victims(project)[index]
                        amount = pool.gpus(victim)
                        if _may_lose(
                            session, job, gain, project, amount, guaranteed, victim.groups
                        ) and not ranks_ahead(session, job, gain, victim, known):
                            cursors[project] = index + 1
                            last.append(project)
                            touched.add(project)
                            freed_nodes.update(_nodes(session, victim))
                            scan = (department_key, key)
                            took_own = department == own
                            return victim
                    done.add(project)
            asked_all = True
        if movable is None:
            movable = (
                _movable(session, job, pool, freed_nodes, allowed, kind) if freed_nodes else []
            )
        while movable:
            victim = movable.pop()
            if not pool.still_running(victim):
                continue
            # one whose queue ranks ahead would take its place back first, moving nothing
            project = session.jobs[victim.job].project
            if surely_ranks_ahead(session, job, gain, project, known) or ranks_ahead(
                session, job, gain, victim, known
            ):
                continue
            touched.add(project)
            took_own = session.department_of(project) == own
            return replace(victim, move_only=True)
        return None

    placed = evict_until_placed(
        session,
        job,
        EvictReason.RECLAIM,
        next_victim,
        accept,
        together=True,
    )
    order.settle(touched)  # kept or undone, the allocations may have moved
    return placed


def _limited(session: Session, department: str) -> bool:
    """Whether the department has a hard limit."""
    spec = session.departments.get(department)
    return spec is not None and spec.limit is not None


def _nodes(session: Session, victim: Victim) -> set[str]:
    current = session.jobs[victim.job]
    pods = current.placement if victim.pods is None else victim.pods
    return {pod.node for pod in pods}


def _movable(
    session: Session,
    job: Job,
    pool: VictimPool,
    nodes: set[str],
    allowed: set[str] | None,
    kind: bool | None,
) -> list[Victim]:
    """The victims that may be moved (not yet marked move-only: few of them are asked),
    the next one last: other projects' preemptible jobs running on `nodes` (where
    stopped victims made room) on GPUs of the job's `kind` (a move frees no quota: only
    room of that kind helps), youngest first."""
    found: dict[str, Victim] = {}  # whole jobs, as on_nodes gives them
    for victim in pool.on_nodes(nodes):
        current = session.jobs[victim.job]
        if current.project == job.project or not pool.still_running(victim):
            continue
        if kind is not None and victim.mig != kind:
            continue
        if allowed is None or not victim.groups.isdisjoint(allowed):
            found[victim.job] = victim
    ordered = sorted(found, key=lambda key: victim_order(session.jobs[key]), reverse=True)
    return [found[key] for key in ordered]


def _may_lose(
    session: Session,
    job: Job,
    gain: float,
    project: str,
    amount: float,
    guaranteed: bool,
    groups: frozenset[str] = frozenset(),
) -> bool:
    """Whether the victim's project (and department) may lose `amount` GPUs, of work on
    node groups `groups`, to the job."""
    return loss_refused(session, job, gain, project, amount, guaranteed, groups=groups) is None


def loss_refused(
    session: Session,
    job: Job,
    gain: float,
    project: str,
    amount: float,
    guaranteed: bool,
    taken: float = 0.0,
    groups: frozenset[str] = frozenset(),
) -> tuple[str, Floor] | None:
    """The queue (the project, or its department) that may not lose a victim of `amount`
    GPUs of the project's work to the job, `taken` GPUs of it being gone already, and
    which floor stops it; None if neither. Pending reasons name it (see engine.why).
    Where the victim's project or the claimant has per-group quotas, the projects are
    judged in the victim's node groups `groups` (and the group the job is tried in)."""
    pooled = _judged_in_pools(session, job, project)
    if pooled:
        broken = _pool_floor_broken(session, job, gain, project, amount, guaranteed, groups)
    else:
        broken = _floor_broken(session, gain, project, job.project, amount, guaranteed, taken)
    if broken is not None:
        return project, broken
    department, claimant = session.department_of(project), session.department_of(job.project)
    if department == claimant:
        return None
    if pooled:
        assert session.pools is not None
        where = groups or frozenset(session.pools.groups(project))
        broken = _pool_department_floor(
            session, gain, department, claimant, amount, guaranteed, where
        )
        return None if broken is None else (department, broken)
    broken = _floor_broken(session, gain, department, claimant, amount, guaranteed, taken)
    return None if broken is None else (department, broken)


def _judged_in_pools(session: Session, job: Job, project: str) -> bool:
    """Whether a victim of `project` and the job are judged per node group (engine.pools):
    the victim's project has per-group quotas, or the job is tried in one group."""
    pools = session.pools
    return pools is not None and (project in pools.quotas or pool_of(session, job) is not None)


def _pool_department_floor(
    session: Session,
    gain: float,
    department: str,
    claimant: str,
    amount: float,
    guaranteed: bool,
    groups: frozenset[str],
) -> Floor | None:
    """_floor_broken of the department of a victim with per-group quotas: judged by its
    projects with per-group quotas in the victim's groups (their sums there: a department
    deserves in a node group what its projects do), so that a project's deserved quota in
    a group is guaranteed there across departments too."""
    pools = session.pools
    assert pools is not None
    held, deserved, allocatable, share = pools.department_in(department, groups)
    claimant_after = _utilisation(
        session.allocated[claimant] + gain, session.fair_share.get(claimant, 0.0)
    )
    return _floor((held, deserved, allocatable), share, claimant_after, amount, guaranteed)


def _may_lose_any(
    session: Session, job: Job, gain: float, project: str, guaranteed: bool, blocked: set[str]
) -> bool:
    """_may_lose of nothing, the most a project may do: if it may not, no victim of its
    will. `blocked` keeps for the job's try the departments that may lose nothing: their
    allocation only falls while the try goes on, so none of their projects may later."""
    department = session.department_of(project)
    if department in blocked:
        return False
    pooled = _judged_in_pools(session, job, project)  # then per victim, in its groups
    if not pooled and _floor_broken(session, gain, project, job.project, 0.0, guaranteed):
        return False
    claimant = session.department_of(job.project)
    if (
        department != claimant
        and not pooled
        and _floor_broken(session, gain, department, claimant, 0.0, guaranteed)
    ):
        blocked.add(department)
        return False
    return True


class Floor(StrEnum):
    """Why a queue may not lose a victim to a claimant."""

    DESERVED = "deserved"  # a claimant within its deserved quota takes only work over quota
    SHARE = "share"  # it holds no more than max(deserved, fair share), capped by its limit
    RATIO = "ratio"  # its allocated/fair-share ratio would not stay above the claimant's


def _floor_broken(
    session: Session,
    gain: float,
    queue: str,
    claimant: str,
    amount: float,
    guaranteed: bool,
    taken: float = 0.0,
) -> Floor | None:
    """Why `queue`, which holds its allocation less `taken`, may not lose `amount` GPUs to
    `claimant` (its sibling at the same level), which gains `gain`; None if it may.

    KAI's reclaim strategies judge the victim's queue *before* it loses the victim: it
    must hold more than its deserved quota (a claimant within its own: the
    GuaranteeDeservedQuota strategy), or more than its allocatable share, max(deserved,
    fair share) capped by its limit (MaintainFairShare), so the last victim may take it
    below. The allocated/fair-share ratios are compared only when the claimant would end
    above its own fair share: then the victim's queue must stay above the claimant's."""
    held = session.allocated[queue] - taken
    if guaranteed:
        # deserved quota is guaranteed: any work over the victim's own quota may go,
        # even a gang that leaves it below its quota once evicted whole
        return None if held > _deserved(session, queue) + GPU_EPSILON else Floor.DESERVED
    if held <= session.allocatable(queue) + GPU_EPSILON:
        return Floor.SHARE
    claimant_after = _utilisation(
        session.allocated[claimant] + gain, session.fair_share.get(claimant, 0.0)
    )
    share = session.fair_share.get(queue, 0.0)
    return _ratio_floor(held, share, claimant_after, amount)


def _pool_floor_broken(
    session: Session,
    job: Job,
    gain: float,
    project: str,
    amount: float,
    guaranteed: bool,
    groups: frozenset[str],
) -> Floor | None:
    """_floor_broken of the victim's project, each side with per-group quotas judged in
    its node groups (engine.pools): the victim's project in the groups the victim runs
    on, the claimant in the group it is tried in."""
    pools = session.pools
    assert pools is not None
    if project in pools.quotas:
        groups = groups or frozenset(pools.groups(project))
        held = pools.held(project, groups)
        victim = (held, pools.deserved(project, groups), pools.allocatable(project, groups))
        share = pools.share(project, groups)
    else:
        held = session.allocated[project]
        victim = (held, _deserved(session, project), session.allocatable(project))
        share = session.fair_share.get(project, 0.0)
    group = pool_of(session, job)
    if group is not None:
        claimant = (pools.held(job.project, (group,)), pools.share(job.project, (group,)))
    else:
        claimant = (session.allocated[job.project], session.fair_share.get(job.project, 0.0))
    claimant_after = _utilisation(claimant[0] + gain, claimant[1])
    return _floor(victim, share, claimant_after, amount, guaranteed)


def _floor(
    victim: tuple[float, float, float],
    share: float,
    claimant_after: float,
    amount: float,
    guaranteed: bool,
) -> Floor | None:
    """_floor_broken's rule on numbers: the victim's queue holds, deserves and may hold
    (`victim`) so much and has fair share `share`; the claimant would end at
    `claimant_after` of its fair share."""
    held, deserved, allocatable = victim
    if guaranteed:
        return None if held > deserved + GPU_EPSILON else Floor.DESERVED
    if held <= allocatable + GPU_EPSILON:
        return Floor.SHARE
    return _ratio_floor(held, share, claimant_after, amount)


def _ratio_floor(held: float, share: float, claimant_after: float, amount: float) -> Floor | None:
    """RATIO when the claimant ends above its fair share and the victim's queue, holding
    `held` of its `share`, would not stay above it after losing `amount`."""
    over = claimant_after > 1 + GPU_EPSILON and share > GPU_EPSILON
    if over and claimant_after >= (held - amount) / share - GPU_EPSILON:
        return Floor.RATIO
    return None


def _utilisation(allocated: float, share: float) -> float:
    """Allocated over fair share; a queue holding GPUs on no fair share is infinitely over."""
    if share <= GPU_EPSILON:
        return float("inf") if allocated > GPU_EPSILON else 0.0
    return allocated / share


def _deserved(session: Session, queue: str) -> float:
    """A project's or department's deserved quota (a queue the policy lacks is never over)."""
    spec = session.projects.get(queue) or session.departments.get(queue)
    return spec.deserved if spec is not None else float("inf")


def _over_deserved(session: Session, queue: str) -> bool:
    """Whether a project or department holds more than its deserved quota."""
    return session.allocated.get(queue, 0.0) > _deserved(session, queue) + GPU_EPSILON
