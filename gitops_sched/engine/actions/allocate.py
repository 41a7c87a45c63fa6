"""Allocate: place pending work on free GPUs, the queue furthest below its fair share first.

Projects are served by allocated/fair-share (lowest first), one job at a time, so free
GPUs spread in proportion to fair shares; within a project by priority, then
submission time. A job shape that found no room is not tried again this cycle, since
allocation only ever takes GPUs away.
"""

from __future__ import annotations

import heapq

from gitops_sched.engine.admission import quota_blocker
from gitops_sched.engine.placement import place
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import Job


def allocate(session: Session) -> None:
    queues = session.pending_by_project()
    heap = [(session.ratio(name), name, 0) for name in queues]
    heapq.heapify(heap)
    no_room: set[tuple] = set()
    while heap:
        _, name, position = heapq.heappop(heap)
        job = queues[name][position]
        reason = quota_blocker(session, job)
        if reason is None:
            shape = (job.request, job.pods, job.min_available, job.node_groups)
            if shape in no_room or not place(session, job):
                no_room.add(shape)
                reason = no_room_reason(job)
        if reason is not None:
            session.pending_reasons[job.name] = reason
        if position + 1 < len(queues[name]):
            heapq.heappush(heap, (session.ratio(name), name, position + 1))


def no_room_reason(job: Job) -> str:
    pods = f"{job.min_available} pods" if job.min_available > 1 else "1 pod"
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
