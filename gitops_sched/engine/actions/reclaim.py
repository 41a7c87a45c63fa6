"""Reclaim: a project below its fair share (or its deserved quota) takes GPUs back.

Reclaimers are served in allocate's queue order. Victims are preemptible jobs of projects
above their fair share, taken one at a time: from projects over their fair share first,
lower over-quota rank first, then the project furthest above its share (recomputed after
each eviction), so the order of projects by allocated/fair-share is kept; within a project
the cheapest to lose first (lowest priority, then youngest). Never so many that a victim
project (or its department) drops below its fair share. A project still below its deserved
quota may take any work of projects over their own deserved quota, because deserved quota
is guaranteed.

When the projects that may lose work cannot make room on their own, preemptible work of
any other project on the nodes they freed may be moved (never stopped) -- consolidation
inside reclaim, as KAI's consolidating reclaim does. Victims the job turns out not to need
get their place back (see victims.give_back). Quota and hard limits are checked once the
victims have left: a department at its hard limit can reclaim from a sibling project.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable
from enum import StrEnum

from gitops_sched.engine.actions.victims import Victim, VictimPool, evict_until_placed
from gitops_sched.engine.admission import fits_quota, may_reclaim, quota_blocker
from gitops_sched.engine.session import Session, victim_order
from gitops_sched.engine.types import GPU_EPSILON, EvictReason, Job


def reclaim(session: Session, claimants: Collection[str] | None = None) -> None:
    """Reclaim for the pending work of every project, or only of `claimants`."""
    queues = session.pending_by_project()
    if claimants is not None:
        queues = {name: jobs for name, jobs in queues.items() if name in claimants}
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
            job = session.jobs[job.key]
            if job.missing == 0 or quota_blocker(session, job, _freeable(session, job)):
                continue
            if not may_reclaim(session, job):
                continue
            gain = session.wanted_gpus(job)
            guaranteed = within_deserved(session, job, gain)
            shape = (name, job.request, job.next_pods, job.node_groups, guaranteed, job.preemptible)
            if shape in failed_shapes:
                continue
            if _reclaim_for(session, job, pool, order, gain, guaranteed):
                session.pending_reasons.pop(job.key, None)
            else:
                failed_shapes.add(shape)


def within_deserved(session: Session, job: Job, gain: float) -> bool:
    """Whether the job's project stays within its deserved quota gaining `gain` GPUs: then
    it may take any work of projects over their own deserved quota (see module doc)."""
    project = session.projects[job.project]
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
    """The projects that may give work to a claimant, kept sorted by
    Session.victim_queue_key in two views: for a claimant within its deserved quota
    (`guaranteed`), those over their deserved quota; for the others, those above their
    fair share. Either way only projects whose department may also lose work (over its
    deserved quota, or at or above its fair share) are in a view, except in the claimant's
    own department (`open`), whose projects compete only with each other.

    A project's key changes only with its allocation, and a department's standing only
    with its projects', so after a try only what it touched is put back in place, instead
    of sorting every project per job. Mid-try a view is a superset of the projects
    _may_lose_any allows: departments only lose work then, and its `blocked` set finds
    those that drop out.
    """

    def __init__(self, session: Session, projects: list[str]) -> None:
        self.session = session
        self.open = ""  # the current claimant's department
        self.allocated = {p: session.allocated.get(p, 0.0) for p in projects}
        self.keys = {p: session.victim_queue_key(p) for p in projects}
        self.by_department: dict[str, list[str]] = {}
        for project in projects:
            self.by_department.setdefault(session.department_of(project), []).append(project)
        self.standing = {d: self._department_may_give(d) for d in self.by_department}
        self.views: dict[bool, list[tuple]] = {
            guaranteed: sorted(self.keys[p] for p in projects if self._may_give(p, guaranteed))
            for guaranteed in (False, True)
        }

    def _department_may_give(self, department: str) -> tuple[bool, bool]:
        """Whether the department may lose anything, to a claimant above and within its
        deserved quota."""
        if department == self.open:
            return True, True
        session = self.session
        allocated = session.allocated.get(department, 0.0)
        return (
            allocated >= session.fair_share.get(department, 0.0) - GPU_EPSILON,
            _over_deserved(session, department),
        )

    def _may_give(self, project: str, guaranteed: bool) -> bool:
        """Whether the project, and its department, may lose anything at all."""
        if not self.standing[self.session.department_of(project)][guaranteed]:
            return False
        if guaranteed:
            return _over_deserved(self.session, project)
        allocated = self.session.allocated.get(project, 0.0)
        return allocated > self.session.fair_share.get(project, 0.0) + GPU_EPSILON

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
        """Re-place those of the projects whose allocation changed."""
        for project in projects:
            old = self.keys.get(project)
            allocated = self.session.allocated.get(project, 0.0)
            if old is not None and allocated != self.allocated[project]:
                self.allocated[project] = allocated
                self.keys[project] = self.session.victim_queue_key(project)
                self._place(project, old)

    def _place(self, project: str, old: tuple) -> None:
        """Put the project where its current key and standing say, in both views (its
        `old` key, if a view holds it, is its own: a key ends with its project's name)."""
        for guaranteed, view in self.views.items():
            at = bisect.bisect_left(view, old)
            if at < len(view) and view[at] == old:
                del view[at]
            if self._may_give(project, guaranteed):
                bisect.insort(view, self.keys[project])


def _reclaim_for(
    session: Session,
    job: Job,
    pool: VictimPool,
    order: _VictimQueues,
    gain: float,
    guaranteed: bool,
) -> bool:
    allowed = set(job.node_groups) or None
    pool.begin()
    order.claim_for(job.project)
    touched = {job.project}  # projects whose allocation this try may change
    cursors: dict[str, int] = {}  # project -> its next victim to consider for this job
    done = {job.project}  # projects with nothing (more) to give this job
    last: list[str] = []  # the project that gave the last victim: its key has changed
    freed_nodes: set[str] = set()  # where the victims that may be stopped ran
    movable: list[Victim] | None = None
    # keys[:scan] are done for this job: a project's key only grows as it loses work, so
    # the one that gave the last victim moves back (or leaves the view) and the prefix stays
    scan = 0
    blocked: set[str] = set()  # departments that may lose nothing to this job

    def next_victim() -> Victim | None:
        nonlocal movable, scan
        order.refresh(last)
        last.clear()
        keys = order.views[guaranteed]
        position = scan
        floor = None if guaranteed else _ratio_floor(session, job, gain)
        while position < len(keys):
            key = keys[position]
            project = key[-1]
            if floor is not None and -key[2] < floor:
                # below the job's ratio after it, as is the rest of its over-quota rank:
                # none of them may lose anything (see _may_lose)
                position = bisect.bisect_left(keys, (False, key[1] + 1))
                continue
            if project not in done:
                index = None
                if _may_lose_any(session, job, gain, project, guaranteed, blocked):
                    index = pool.first_usable(project, cursors.get(project, 0), allowed)
                if index is not None:
                    victim = pool.victims(project)[index]
                    if _may_lose(session, job, gain, project, pool.gpus(victim), guaranteed):
                        cursors[project] = index + 1
                        last.append(project)
                        touched.add(project)
                        freed_nodes.update(_nodes(session, victim))
                        scan = position
                        return victim
                done.add(project)
            position += 1
        scan = position
        if movable is None:
            movable = _movable(session, job, pool, freed_nodes, allowed) if freed_nodes else []
        while movable:
            victim = movable.pop()
            if pool.still_running(victim):
                touched.add(session.jobs[victim.job].project)
                return victim
        return None

    placed = evict_until_placed(
        session, job, EvictReason.RECLAIM, next_victim, lambda: fits_quota(session, job)
    )
    order.settle(touched)  # kept or undone, the allocations may have moved
    return placed


def _nodes(session: Session, victim: Victim) -> set[str]:
    current = session.jobs[victim.job]
    pods = current.placement if victim.pods is None else victim.pods
    return {pod.node for pod in pods}


def _movable(
    session: Session, job: Job, pool: VictimPool, nodes: set[str], allowed: set[str] | None
) -> list[Victim]:
    """Move-only victims, the next one last: other projects' preemptible jobs running on
    `nodes` (where stopped victims made room), youngest first."""
    found: dict[str, Job] = {}
    for victim in pool.on_nodes(nodes):
        current = session.jobs[victim.job]
        if current.project == job.project or not pool.still_running(victim):
            continue
        if allowed is None or not victim.groups.isdisjoint(allowed):
            found[victim.job] = current
    ordered = sorted(found.values(), key=victim_order, reverse=True)
    return [Victim(j.key, None, pool.groups(j), move_only=True) for j in ordered]


def _ratio_floor(session: Session, job: Job, gain: float) -> float | None:
    """The allocated/fair-share ratio below which a project with a fair share may lose
    nothing to the job (its ratio would fall below the job's project's), minus the
    tolerance; None when the job's project has no fair share (no such floor)."""
    share = session.fair_share.get(job.project, 0.0)
    if share <= GPU_EPSILON:
        return None
    return (session.allocated[job.project] + gain) / share - GPU_EPSILON


def _may_lose(
    session: Session, job: Job, gain: float, project: str, amount: float, guaranteed: bool
) -> bool:
    """Whether the victim's project (and department) stays at or above its floor once it
    loses `amount` GPUs to the job."""
    return loss_refused(session, job, gain, project, amount, guaranteed) is None


def loss_refused(
    session: Session, job: Job, gain: float, project: str, amount: float, guaranteed: bool
) -> tuple[str, Floor] | None:
    """The queue (the project, or its department) that would break its floor losing
    `amount` GPUs of the project's work to the job, and which floor; None if neither would.
    Pending reasons name it (see engine.why)."""
    broken = _floor_broken(session, gain, project, job.project, amount, guaranteed)
    if broken is not None:
        return project, broken
    department, claimant = session.department_of(project), session.department_of(job.project)
    if department == claimant:
        return None
    broken = _floor_broken(session, gain, department, claimant, amount, guaranteed)
    return None if broken is None else (department, broken)


def _may_lose_any(
    session: Session, job: Job, gain: float, project: str, guaranteed: bool, blocked: set[str]
) -> bool:
    """_may_lose of nothing, the most a project may do: if it may not, no victim of its
    will. `blocked` keeps for the job's try the departments that may lose nothing: their
    allocation only falls while the try goes on, so none of their projects may later."""
    department = session.department_of(project)
    if department in blocked:
        return False
    if _floor_broken(session, gain, project, job.project, 0.0, guaranteed):
        return False
    claimant = session.department_of(job.project)
    if department != claimant and _floor_broken(
        session, gain, department, claimant, 0.0, guaranteed
    ):
        blocked.add(department)
        return False
    return True


class Floor(StrEnum):
    """What a queue may not drop below when it loses work to a claimant."""

    DESERVED = "deserved"  # a claimant within its deserved quota takes only work over quota
    FAIR_SHARE = "fair share"
    RATIO = "ratio"  # its allocated/fair-share ratio may not fall below the claimant's


def _floor_broken(
    session: Session, gain: float, queue: str, claimant: str, amount: float, guaranteed: bool
) -> Floor | None:
    """The floor `queue` would break losing `amount` GPUs to `claimant` (its sibling at the
    same level), which gains `gain`; None if it keeps them all."""
    if guaranteed:
        # deserved quota is guaranteed: any work over the victim's own quota may go,
        # even a gang that leaves it below its quota once evicted whole
        return None if _over_deserved(session, queue) else Floor.DESERVED
    share = session.fair_share.get(queue, 0.0)
    left = session.allocated[queue] - amount
    if left < share - GPU_EPSILON:
        return Floor.FAIR_SHARE
    claimant_share = session.fair_share.get(claimant, 0.0)
    if share > GPU_EPSILON and claimant_share > GPU_EPSILON:
        claimant_after = (session.allocated[claimant] + gain) / claimant_share
        if left / share < claimant_after - GPU_EPSILON:
            return Floor.RATIO
    return None


def _over_deserved(session: Session, queue: str) -> bool:
    """Whether a project or department holds more than its deserved quota."""
    spec = session.projects.get(queue) or session.departments.get(queue)
    return spec is not None and session.allocated.get(queue, 0.0) > spec.deserved + GPU_EPSILON
