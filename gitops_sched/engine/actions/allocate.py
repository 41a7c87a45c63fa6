"""Allocate: place pending work on free GPUs, the queue furthest below its fair share first.

Projects are served one job at a time in KAI's queue order (Session.queue_key): those at
or below their fair share first, then those still within their deserved quota with the
job, higher over-quota rank first, then lowest allocated/fair-share with the job, the
larger deserved quota, the oldest pending work, the name -- so free GPUs spread in
proportion to fair shares; within a project by priority, then submission time. A job
places its gang (or the rest of a gang in flight) at once, then each elastic pod queues
again like a job of its own. A job shape that found no room is not tried again in a pass,
since allocation only ever takes GPUs away. Releasing pods' GPUs are used only by a
second pass, once the free ones are spent (pipelining).
"""

from __future__ import annotations

import heapq

from gitops_sched.engine.admission import quota_blocker
from gitops_sched.engine.placement import place
from gitops_sched.engine.session import Session
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

    def entry(name: str, position: int) -> tuple:
        job = session.jobs[queues[name][position].key]
        return (session.queue_key(name, job, ages[name][position]), position)

    heap = [entry(name, 0) for name in queues]
    heapq.heapify(heap)
    no_room: dict[tuple, str] = {}  # shape -> why it found none
    while heap:
        key, position = heapq.heappop(heap)
        name = key[-1]
        job = session.jobs[queues[name][position].key]
        reason = quota_blocker(session, job)
        placed = False
        if reason is None:
            shape = (job.request, job.next_pods, job.node_groups)
            placed = shape not in no_room and place(session, job)
            if not placed:
                if shape not in no_room:
                    no_room[shape] = no_room_reason(job)
                reason = no_room[shape]
        if reason is not None:
            session.pending_reasons[job.key] = gang_reason(job, reason)
        elif session.jobs[job.key].missing == 0:
            session.pending_reasons.pop(job.key, None)
        if placed and session.jobs[job.key].missing > 0:
            position -= 1  # its next elastic pod queues again, behind the project's ratio
        if position + 1 < len(queues[name]):
            heapq.heappush(heap, entry(name, position + 1))


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
