"""Allocate: place pending work on free GPUs, the queue furthest below its fair share first.

Work is served one job at a time in KAI's queue order, level by level: first the
department, then the project inside it (Session.serve_key), each
judged by its own totals with the job: those still within their deserved quota with it,
higher over-quota rank, then the lowest (allocated + job) / max(deserved, fair share),
the smaller allocatable share, the older queue, the oldest pending work, the name -- so free
GPUs spread in proportion to fair shares; within a project in job order (session.job_order:
priority, then short of its gang before at it before past it, then submission). A job
places its gang (or the rest of a gang in flight) at once, then each elastic pod queues
again like a job of its own, by that order. A job shape that found no room is not tried
again in a pass, since allocation only ever takes GPUs away. Releasing pods' GPUs are
used only by a second pass, once the free ones are spent (pipelining) -- or where a
fraction would otherwise open an untouched GPU (see placement._shared).
"""

from __future__ import annotations

import bisect
import heapq

from gitops_sched.engine.admission import quota_blocker
from gitops_sched.engine.placement import place
from gitops_sched.engine.pools import restricted, tries
from gitops_sched.engine.session import Session, job_order
from gitops_sched.engine.types import Job


def allocate(session: Session) -> None:
    """Place on free GPUs; then pipeline what is left onto GPUs being released."""
    _allocate_free(session)
    if session.release_all():
        _allocate_free(session)


def _allocate_free(session: Session) -> None:
    queues = session.pending_by_project()
    # the age of a queue at each position: the earliest submission of its work left
    ages = {name: _suffix_minima([j.submitted for j in jobs]) for name, jobs in queues.items()}
    positions = dict.fromkeys(queues, 0)
    # each project's next job, its age there and the GPUs it adds, as its entry was last
    # worked out: serving another project's job changes none of its jobs
    heads: dict[str, tuple[Job, float, float]] = {}
    jobs, serve_key, wanted = session.jobs, session.serve_key, session.wanted_gpus

    def project_entry(name: str) -> tuple:
        """The project's key (Session.serve_key, which ends with its name)."""
        position = positions[name]
        job = jobs[queues[name][position].key]
        age = ages[name][position]
        gain = wanted(job)
        heads[name] = (job, age, gain)
        return serve_key(name, gain, age)

    # two levels, as KAI's queue tree: departments by their totals with the next job of
    # their first project, and each department's projects; serving a job changes the
    # keys of its project and department only, so only those two entries are pushed again
    inside: dict[str, list[tuple]] = {}
    for name in queues:
        inside.setdefault(session.department_of(name), []).append(project_entry(name))

    def department_entry(department: str) -> tuple:
        _, age, gain = heads[inside[department][0][-1]]
        return serve_key(department, gain, age)

    for entries in inside.values():
        heapq.heapify(entries)
    heap = [department_entry(department) for department in inside]
    heapq.heapify(heap)
    no_room: dict[tuple, str] = {}  # shape -> why it found none
    serve = _allocate_job if session.pools is None else _allocate_in_pools
    reasons, heappop, heappush = session.pending_reasons, heapq.heappop, heapq.heappush
    while heap:
        department = heappop(heap)[-1]
        projects = inside[department]
        name = heappop(projects)[-1]
        job = heads[name][0]
        placed, reason = serve(session, job, no_room)
        if reason is not None:
            reasons[job.key] = gang_reason(job, reason)
        position = positions[name]
        if placed and (job := jobs[job.key]).missing > 0:
            # its next elastic pod queues again: behind the project's ratio, and behind the
            # project's jobs that now come first in job order
            _requeue(queues[name], position, job)
            ages[name][position:] = _suffix_minima([j.submitted for j in queues[name][position:]])
        else:
            if reason is None and jobs[job.key].missing == 0:
                reasons.pop(job.key, None)
            position += 1
            positions[name] = position
        if position < len(queues[name]):
            heappush(projects, project_entry(name))
        if projects:
            heappush(heap, department_entry(department))


def _allocate_job(session: Session, job: Job, no_room: dict[tuple, str]) -> tuple[bool, str | None]:
    """Place the job if its quota rules let it and it finds room: (placed, why not)."""
    reason = quota_blocker(session, job)
    if reason is not None:
        return False, reason
    shape = (job.request, job.next_pods, job.node_groups)
    why = no_room.get(shape)
    if why is None:
        if place(session, job):
            return True, None
        why = no_room[shape] = no_room_reason(job)
    return False, why


def _allocate_in_pools(
    session: Session, job: Job, no_room: dict[tuple, str]
) -> tuple[bool, str | None]:
    """_allocate_job in each node group the job may be tried in (engine.pools.tries), until
    it is placed; why not in the first group, if nowhere."""
    first: str | None = None
    for groups in tries(session, job):
        with restricted(session, job, groups) as each:
            placed, reason = _allocate_job(session, each, no_room)
        if placed:
            return True, None
        first = first or reason
    return False, first


def _requeue(jobs: list[Job], position: int, job: Job) -> None:
    """Move the job at `position` (now `job`) among those after it, by job order."""
    del jobs[position]
    jobs.insert(bisect.bisect(jobs, job_order(job), lo=position, key=job_order), job)


def _suffix_minima(values: list[float]) -> list[float]:
    minima = list(values)
    for i in range(len(minima) - 2, -1, -1):
        minima[i] = min(minima[i], minima[i + 1])
    return minima


def gang_reason(job: Job, reason: str) -> str:
    """The reason, saying how much of a partly running gang waits for it."""
    if job.short:
        return f"waiting for gang {len(job.placement)}/{job.min_available}: {reason}"
    return reason


def no_room_reason(job: Job) -> str:
    count = job.next_pods
    pods = f"{count} pods" if count > 1 else "1 pod"
    return f"no room for {pods} of {describe_request(job)} on the allowed nodes"


def describe_request(job: Job) -> str:
    request = job.request
    return {
        "whole": f"{request.count} GPU(s)",
        "fraction": f"{request.fraction:g} of a GPU",
        "memory": f"{request.memory_mib} MiB of GPU memory",
        "mig": f"a MIG {request.mig_profile} instance",
        "none": "no GPU",
    }[request.kind.value]
