"""A cycle's working state: who uses which GPU, what each queue holds, what was decided.

Actions try changes inside a `statement()`: every change logs how to undo itself, so a
rejected "what if" (evict these two, place that gang) leaves no trace. Only the
session mutates; the snapshot it starts from stays frozen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from gitops_sched.engine.fairshare import fair_shares
from gitops_sched.engine.requests import pod_gpus
from gitops_sched.engine.types import (
    GPU_EPSILON,
    Bind,
    Evict,
    EvictReason,
    Job,
    MigChange,
    PodPlacement,
    QueueSpec,
    RequestKind,
    Snapshot,
)
from gitops_sched.engine.usage import NodeUse, Usage
from gitops_sched.hardware.mig import MigInstance


def _name(job: Job) -> str:
    return job.name


def job_order(job: Job) -> tuple:
    """Within a project: higher priority first, then earlier submission, then name."""
    return (-job.priority, job.submitted, job.name)


def victim_order(job: Job) -> tuple:
    """Cheapest to lose first: lowest priority, then the most recently submitted."""
    return (job.priority, -job.submitted, job.name)


class Session:
    """Mutable state of one scheduling cycle over an immutable `Snapshot`."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.now = snapshot.now
        policy = snapshot.policy
        self.projects: dict[str, QueueSpec] = {p.name: p for p in policy.projects}
        self.departments: dict[str, QueueSpec] = {d.name: d for d in policy.departments}
        self.jobs: dict[str, Job] = {job.name: job for job in sorted(snapshot.jobs, key=_name)}
        running = [(j.name, j.project, pod) for j in self.jobs.values() for pod in j.placement]
        self.usage = Usage(snapshot.nodes, running)
        self.nodes = self.usage.nodes
        self._candidates: dict[tuple[str, ...], list[NodeUse]] = {}
        self.allocated: dict[str, float] = dict.fromkeys([*self.projects, *self.departments], 0.0)
        self.fixed: dict[str, float] = dict(self.allocated)  # non-preemptible part
        self.evictions: list[Evict] = []
        self.binds: list[Bind] = []
        self.mig_changes: list[MigChange] = []
        self.pending_reasons: dict[str, str] = {}
        self._undo: list[Callable[[], None]] | None = None
        self._nominal: dict[tuple, tuple[str, int]] = {}
        for job in self.jobs.values():
            if job.running:
                self._account(job, job.placement, +1)
        self.capacity = float(sum(len(n.gpus) for n in self.nodes.values() if n.node.schedulable))
        demand = {name: self.allocated[name] for name in self.projects}
        for job in self.pending():
            if job.project in demand:
                demand[job.project] += self.job_gpus(job)
        self.fair_share = fair_shares(self.capacity, policy.departments, policy.projects, demand)

    # -- queries ---------------------------------------------------------------------------

    def pending(self) -> list[Job]:
        return [j for j in self.jobs.values() if not j.running]

    def running(self) -> list[Job]:
        return [j for j in self.jobs.values() if j.running]

    def pending_by_project(self) -> dict[str, list[Job]]:
        """Pending jobs per project in queue order: priority, then submission, then name."""
        queues: dict[str, list[Job]] = {}
        for job in sorted(self.pending(), key=job_order):
            queues.setdefault(job.project, []).append(job)
        return queues

    def preemptible_by_project(self) -> dict[str, list[Job]]:
        """Running preemptible jobs per project, cheapest to lose first (see victim_order)."""
        victims: dict[str, list[Job]] = {}
        for job in sorted(self.running(), key=victim_order):
            if job.preemptible:
                victims.setdefault(job.project, []).append(job)
        return victims

    def projects_by_ratio(self, names: Iterable[str]) -> list[str]:
        return sorted(names, key=lambda name: (self.ratio(name), name))

    def department_of(self, project: str) -> str:
        spec = self.projects.get(project)
        return spec.parent if spec else ""

    def ratio(self, queue: str) -> float:
        """Allocated over fair share: the queue order (lowest first) and reclaim order."""
        share = self.fair_share.get(queue, 0.0)
        allocated = self.allocated.get(queue, 0.0)
        if share <= GPU_EPSILON:
            return float("inf") if allocated > GPU_EPSILON else 0.0
        return allocated / share

    def nominal_gpu(self, job: Job) -> tuple[str, int]:
        """(model, memory MiB) of the largest GPU the job may use, for pending accounting."""
        key = (job.node_groups, job.request.kind is RequestKind.MIG)
        if key not in self._nominal:
            best = ("", 0)
            allowed = set(job.node_groups)
            for use in self.nodes.values():
                if allowed and use.node.node_group not in allowed:
                    continue
                for gpu in use.gpus:
                    if gpu.mig_enabled == key[1] and gpu.memory_mib > best[1]:
                        best = (use.node.gpu_model, gpu.memory_mib)
            self._nominal[key] = best
        return self._nominal[key]

    def job_gpus(self, job: Job, placement: tuple[PodPlacement, ...] | None = None) -> float:
        """GPUs the job counts for: as placed, or (pending) on its nominal GPU."""
        placement = job.placement if placement is None else placement
        if placement:
            return sum(self._pod_gpus(job, pod) for pod in placement)
        model, memory = self.nominal_gpu(job)
        return pod_gpus(job, None, model, memory) * job.pods

    def _pod_gpus(self, job: Job, pod: PodPlacement) -> float:
        use = self.nodes.get(pod.node)
        if use is None:
            return pod_gpus(job, pod, "", 0)
        gpu = use.gpus[pod.gpus[0]] if pod.gpus else None
        return pod_gpus(job, pod, use.node.gpu_model, gpu.memory_mib if gpu else 0)

    def candidate_nodes(self, job: Job) -> list[NodeUse]:
        """Schedulable nodes of the job's allowed node groups, by name (cached per groups)."""
        groups = job.node_groups
        if groups not in self._candidates:
            allowed = set(groups)
            self._candidates[groups] = [
                n
                for n in self.nodes.values()
                if n.node.schedulable and (not allowed or n.node.node_group in allowed)
            ]
        return self._candidates[groups]

    def groups_of(self, job: Job) -> list[str]:
        """The node groups a job may use that have schedulable nodes."""
        index = self.usage.free_index
        return sorted(index) if not job.node_groups else sorted(set(job.node_groups) & set(index))

    def free_whole(self, job: Job) -> int:
        return sum(self.usage.free_total.get(g, 0) for g in self.groups_of(job))

    def nodes_with_free(self, job: Job, count: int) -> Iterator[NodeUse]:
        """Schedulable allowed nodes with at least `count` free whole GPUs, fullest first."""
        index = self.usage.free_index
        names = self.groups_of(job)
        top = max((max(index[g], default=0) for g in names), default=0)
        for free in range(count, top + 1):
            for name in sorted(n for g in names for n in index[g].get(free, ())):
                yield self.nodes[name]

    # -- changes (undoable) ----------------------------------------------------------------

    @contextmanager
    def statement(self) -> Iterator[Callable[[], None]]:
        """Changes inside are undone on exit unless the yielded `commit` was called."""
        outer = self._undo
        self._undo = []
        committed = False

        def commit() -> None:
            nonlocal committed
            committed = True

        marks = (len(self.evictions), len(self.binds), len(self.mig_changes))
        try:
            yield commit
        finally:
            undo, self._undo = self._undo, outer
            if committed:
                if outer is not None:
                    outer.extend(undo)
            else:
                for action in reversed(undo):
                    action()
                del self.evictions[marks[0] :]
                del self.binds[marks[1] :]
                del self.mig_changes[marks[2] :]

    def _log(self, action: Callable[[], None]) -> None:
        if self._undo is not None:
            self._undo.append(action)

    def bind(self, job: Job, pods: tuple[PodPlacement, ...]) -> None:
        placed = replace(job, placement=pods, started_at=self.now)
        self._set_job(placed)
        self._occupy(placed, pods)
        self._log(lambda: self._release(placed, pods))
        self.binds.append(Bind(job.name, pods))

    def hold(self, job: Job, pod: PodPlacement) -> None:
        """Reserve one pod's GPUs while the rest of its gang is being placed."""
        self._occupy(job, (pod,))
        self._log(lambda: self._release(job, (pod,)))

    def unhold(self, job: Job, pods: tuple[PodPlacement, ...]) -> None:
        self._release(job, pods)
        self._log(lambda: self._occupy(job, pods))

    def evict(self, job: Job, reason: EvictReason, by: str = "") -> Job:
        """Free the job's GPUs; it stays known to the session as pending."""
        pods = job.placement
        self._release(job, pods)
        self._log(lambda: self._occupy(job, pods))
        pending = replace(job, placement=(), started_at=None)
        self._set_job(pending)
        self.evictions.append(Evict(job.name, reason, by))
        return pending

    def stop(self, job: Job, reason: EvictReason) -> None:
        """Evict for good (time limit, idle): the job leaves the session, not re-queued."""
        self.evict(job, reason)
        removed = self.jobs.pop(job.name)
        self._log(lambda: self.jobs.__setitem__(job.name, removed))

    def create_mig(self, node: str, gpu: int, instance: MigInstance) -> None:
        self.usage.add_instance(node, gpu, instance)
        self._log(lambda: self.usage.remove_instance(node, gpu, instance))
        self.mig_changes.append(MigChange(node, gpu, instance, create=True))

    def destroy_mig(self, node: str, gpu: int, instance: MigInstance) -> None:
        self.usage.remove_instance(node, gpu, instance)
        self._log(lambda: self.usage.add_instance(node, gpu, instance))
        self.mig_changes.append(MigChange(node, gpu, instance, create=False))

    def _set_job(self, job: Job) -> None:
        previous = self.jobs[job.name]
        self.jobs[job.name] = job
        self._log(lambda: self.jobs.__setitem__(job.name, previous))

    def _occupy(self, job: Job, pods: tuple[PodPlacement, ...]) -> None:
        self._account(job, pods, +1)
        for pod in pods:
            self.usage.take(job.name, job.project, pod)

    def _release(self, job: Job, pods: tuple[PodPlacement, ...]) -> None:
        self._account(job, pods, -1)
        for pod in pods:
            self.usage.give_back(job.name, pod)

    def _account(self, job: Job, pods: tuple[PodPlacement, ...], sign: int) -> None:
        amount = sign * self.job_gpus(job, pods)
        for queue in (job.project, self.department_of(job.project)):
            if queue in self.allocated:
                self.allocated[queue] += amount
                if not job.preemptible:
                    self.fixed[queue] += amount
