"""Where a job's pods go: bin packing, fractions on shared GPUs, MIG instances, topology.

Whole GPUs go to the fullest node that still fits them (keeping empty nodes empty for
large jobs); fractions go to the partly used GPU they fill best; MIG requests reuse an
idle instance, then create one where NVIDIA's placements allow, then destroy idle
instances of other profiles. A gang is placed pod by pod inside a statement and kept
only if every pod fits, preferring a single topology domain.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator
from functools import lru_cache

from gitops_sched.engine.admission import headroom
from gitops_sched.engine.requests import mig_share
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import GPU_EPSILON, Job, PodPlacement, RequestKind
from gitops_sched.engine.usage import GpuKey, NodeUse, PackEntry
from gitops_sched.hardware.mig import MigInstance, layout_with


def place(session: Session, job: Job, count: int | None = None) -> bool:
    """Start `count` more pods of the job (default: `job.next_pods`, the rest of its gang
    or one elastic pod) together if they fit; else change nothing. Never so few that the
    job would run short of its gang (an elastic pod re-placed after its gang was evicted).

    GPU-memory and MIG pods only go to GPUs where their share keeps the project inside
    its quota rules (see admission.headroom).
    """
    job = session.jobs[job.key]
    count = job.next_pods if count is None else count
    if count <= 0 or job.starts_short(count):
        return False
    taken = {pod.index for pod in job.placement}
    indexes = [i for i in range(job.pods) if i not in taken][:count]
    budget = headroom(session, job)
    for domain in _domains(session, job, count):
        with session.statement() as commit:
            pods = _place_pods(session, job, count, domain, budget / count)
            if pods is not None:
                numbered = [  # most pods are a job's first: index 0, as placed
                    p if p.index == i else PodPlacement(p.node, p.gpus, p.fraction, p.mig, i)
                    for p, i in zip(pods, indexes)
                ]
                session.bind(job, tuple(numbered))
                commit()
                return True
    return False


def surely_no_room(session: Session, job: Job, count: int | None = None) -> bool:
    """Whether `place` would surely fail for want of free GPUs: pods of whole GPUs and
    fewer allowed nodes' worth of room for them than `count` pods (default: the job's
    next pods, as `place` starts). Each pod takes its `need` GPUs on one node, so a node
    with `free` GPUs holds `free // need` of them: a cheap test, to skip a try that
    cannot succeed; False says nothing. Pods of no GPU still need one allowed node with
    a free GPU, as one pod does. Shares (fractions, `gpuMemory`) surely have no room when
    no GPU of their node groups has room for one (_room_for_a_share)."""
    request = job.request
    if request.kind in (RequestKind.FRACTION, RequestKind.MEMORY):
        return not _room_for_a_share(session, job)
    if request.kind is not RequestKind.WHOLE:
        return False
    need = max(request.count, 1)
    wanted = (job.next_pods if count is None else count) if request.count > 0 else 1
    free_index = session.usage.free_index
    room = sum(  # a list, not a generator: a generator's every step is a call
        [
            free // need * len(bucket)
            for group in session.groups_of(job)
            for free, bucket in free_index[group].items()
            if free >= need
        ]
    )
    return room < wanted


def _room_for_a_share(session: Session, job: Job) -> bool:
    """Whether a GPU of the job's node groups has room for one of its shares: a free one,
    or a shared one with room for its share on the largest GPU it may use (none gives it
    less). Shared GPUs are indexed fullest first, so the last has the most room."""
    need = session.wanted_gpus(job, 1) - GPU_EPSILON
    usage = session.usage
    for group in session.groups_of(job):
        shared = usage.shared.get(group)
        if usage.free_total.get(group, 0) > 0 or (shared and 1.0 + shared[-1][0] >= need):
            return True
    return False


def pods_that_fit(session: Session, job: Job, count: int) -> int:
    """How many of `count` more pods of the job would fit now, one after another (up to the
    first that does not); changes nothing. What a pending gang is waiting for."""
    budget = headroom(session, job) / max(count, 1)
    fitted = 0
    with session.statement():  # never committed: the holds and MIG changes are undone
        for _ in range(count):
            pod = _place_pod(session, job, None, budget)
            if pod is None:
                break
            session.hold(job, pod)
            fitted += 1
    return fitted


def _domains(session: Session, job: Job, count: int) -> list[str | None]:
    """Topology domains to try for a gang, emptiest-fitting first; None means anywhere."""
    if count <= 1 or job.request.kind is RequestKind.NONE:
        return [None]
    free: dict[str, int] = {}
    for group in session.groups_of(job):
        for domain, whole in session.usage.domain_free.get(group, {}).items():
            free[domain] = free.get(domain, 0) + whole
    need = job.request.count * count if job.request.kind is RequestKind.WHOLE else 0
    fitting = sorted((f, d) for d, f in free.items() if f >= need)
    return [d for _, d in fitting] + [None]


def _place_pods(
    session: Session, job: Job, count: int, domain: str | None, limit: float
) -> tuple[PodPlacement, ...] | None:
    """Place `count` pods, each holding at most `limit` GPUs of quota. In a gang each pod
    holds its GPUs and quota while the next are placed, the last its quota only (nothing
    is placed after it; the gang's quota is counted in whole sums, in one order, whatever
    its size). A lone pod, most placements, holds nothing: nothing is placed after it."""
    if count == 1:
        pod = _place_pod(session, job, domain, limit)
        return None if pod is None else (pod,)
    pods: list[PodPlacement] = []
    for number in range(1, count + 1):
        pod = _place_pod(session, job, domain, limit)
        if pod is None:
            return None
        session.hold(job, pod, gpus=number < count)
        pods.append(pod)
    session.unhold(job, tuple(pods), gpus=tuple(pods[:-1]))
    return tuple(pods)


def _place_pod(session: Session, job: Job, domain: str | None, limit: float) -> PodPlacement | None:
    kind = job.request.kind
    if kind is RequestKind.WHOLE:
        return _whole(session, job, job.request.count, domain)
    if kind in (RequestKind.FRACTION, RequestKind.MEMORY):
        return _shared(session, job, domain, limit)
    if kind is RequestKind.MIG:
        return _mig(session, job, domain, limit)
    return _no_gpu(session, job, domain)


def _in_domain(nodes: Iterable[NodeUse], domain: str | None) -> Iterable[NodeUse]:
    return nodes if domain is None else (n for n in nodes if n.node.topology == domain)


def _whole(session: Session, job: Job, count: int, domain: str | None) -> PodPlacement | None:
    for use in session.nodes_with_free(job, max(count, 1), domain):
        free = [g.index for g in use.gpus if g.is_free][:count]
        return PodPlacement(use.name, tuple(free))
    return None


def _share_of(job: Job, memory_mib: int) -> float:
    if job.request.kind is RequestKind.FRACTION:
        return job.request.fraction
    return job.request.memory_mib / memory_mib if memory_mib else 2.0


def _shared(session: Session, job: Job, domain: str | None, limit: float) -> PodPlacement | None:
    """Best fit on a partly used GPU, else a free GPU.

    GPUs shared only with the job's own project come first, so one team's notebooks
    pack together instead of spreading a noisy neighbour across teams; then the GPU
    left with the least room, by node and index. A partly used GPU that has room once
    its shares being released are gone comes before a GPU nobody holds: while they are
    still held (allocate's first pass) the pod is not placed, and allocate's second pass
    pipelines it there (KAI pipelines a fraction onto a releasing share rather than open
    a new GPU).
    """
    usage = session.usage
    groups = session.groups_of(job)
    best = _NO_FIT
    for group in groups:
        for key in usage.solo.get((group, job.project), ()):
            best = min(best, _shared_fit(session, job, key, domain, limit, foreign=False))
    if best is _NO_FIT:
        for group in groups:
            entries = usage.shared.get(group, [])
            memory = usage.group_memory.get(group)
            if domain is None and memory is not None:
                # fullest first: the first entry with room is the best fit of the group
                position = bisect.bisect_left(entries, (_share_of(job, memory) - 1 - GPU_EPSILON,))
                entries = entries[position : position + 1]
            for _, node, index in entries:
                fit = _shared_fit(session, job, (node, index), domain, limit, foreign=True)
                best = min(best, fit)
    if best is not _NO_FIT:
        return PodPlacement(best[2], (best[3],), fraction=best[4])
    if session.releasing and _fits_once_released(session, job, groups, domain, limit):
        return None
    cap = min(1.0, limit) + GPU_EPSILON
    for key in usage.reserved:  # set up for sharing already: before a GPU nobody holds
        use, gpu = usage.gpu(key)
        share = _share_of(job, gpu.memory_mib)
        if (
            gpu.is_free
            and use.node.schedulable
            and use.node.node_group in groups
            and (domain is None or use.node.topology == domain)
            and share <= cap
        ):
            return PodPlacement(use.node.name, (gpu.index,), fraction=min(share, 1.0))
    # a group whose GPUs all have one memory size fits the share on every node or on none
    fitting = [
        g
        for g in groups
        if (memory := usage.group_memory.get(g)) is None or _share_of(job, memory) <= cap
    ]
    for use in session.nodes_with_free(job, 1, domain, fitting):
        gpu = next(g for g in use.gpus if g.is_free)
        share = _share_of(job, gpu.memory_mib)
        if share <= cap:
            return PodPlacement(use.name, (gpu.index,), fraction=min(share, 1.0))
    return None


_NO_FIT = (True, float("inf"), "", 0, 0.0)


def _fits_once_released(
    session: Session, job: Job, groups: list[str], domain: str | None, limit: float
) -> bool:
    """Whether a pod of the job fits on a GPU that running work still shares once its
    shares being released (Session.releasing) are gone."""
    released: dict[GpuKey, float] = {}  # shared GPU -> its shares being released
    for holder, releasing in session.releasing.items():
        pod = releasing.pod
        if pod.fraction and pod.mig is None and pod.node in session.nodes:
            gpu = session.nodes[pod.node].gpus[pod.gpus[0]]
            key = (pod.node, gpu.index)
            released[key] = released.get(key, 0.0) + gpu.shares.get(holder, 0.0)
    for key, gone in sorted(released.items()):
        use, gpu = session.usage.gpu(key)
        left = gpu.used - gone  # what running work keeps using
        share = _share_of(job, gpu.memory_mib)
        if (
            left > GPU_EPSILON
            and left + share <= 1 + GPU_EPSILON
            and share <= limit + GPU_EPSILON
            and use.node.schedulable
            and use.node.node_group in groups
            and (domain is None or use.node.topology == domain)
        ):
            return True
    return False


def _shared_fit(
    session: Session, job: Job, key: GpuKey, domain: str | None, limit: float, foreign: bool
) -> tuple[bool, float, str, int, float]:
    """The ranking of one shared GPU for the job (or _NO_FIT)."""
    use, gpu = session.usage.gpu(key)
    if gpu.mig_enabled or (domain is not None and use.node.topology != domain):
        return _NO_FIT
    share = _share_of(job, gpu.memory_mib)
    room = 1.0 - gpu.used - share
    if room < -GPU_EPSILON or share > limit + GPU_EPSILON:
        return _NO_FIT
    return (foreign, room, use.name, gpu.index, share)


def _mig(session: Session, job: Job, domain: str | None, limit: float) -> PodPlacement | None:
    """An idle instance of the profile; else create one; else make room among idle ones.

    GPUs with the most busy instances come first (packing), then by node and index: the
    usage indexes keep them in that order, so each step takes the first GPU allowed.
    """
    profile = job.request.mig_profile
    usage = session.usage
    groups = session.groups_of(job)
    share_fits = {
        model: mig_share(model, profile) <= limit + GPU_EPSILON
        for group in groups
        for model in usage.group_models.get(group, ())
    }
    # lists, not generators, below: a generator's every step is a call
    within = [g for g in groups if any([share_fits[m] for m in usage.group_models.get(g, ())])]
    name = (profile,) if domain is None else (profile, domain)

    def allowed(entries: Iterable[PackEntry], group: str) -> Iterator[PackEntry]:
        """The entries of the group's GPUs whose model's share fits the limit."""
        if all([share_fits[m] for m in usage.group_models[group]]):
            return iter(entries)
        return (e for e in entries if share_fits[usage.nodes[e[1]].node.gpu_model])

    def first(index: dict[tuple[str, ...], list[PackEntry]]) -> PackEntry | None:
        heads = [next(allowed(index.get((g, *name), ()), g), None) for g in within]
        return min([h for h in heads if h is not None], default=None)

    idle = first(usage.idle_mig)
    if idle is not None:
        use, gpu = usage.gpu((idle[1], idle[2]))
        instance = next(i for i in gpu.idle_instances() if i.profile == profile)
        return PodPlacement(use.name, (gpu.index,), mig=instance)
    room = first(usage.mig_room)
    if room is not None:
        use, gpu = usage.gpu((room[1], room[2]))
        start = use.mig_start(gpu, profile)
        assert start is not None  # indexed in mig_room only where the profile fits
        return _create(session, use, gpu.index, profile, start, ())
    candidates = heapq.merge(*(allowed(usage.mig_idle_any.get(g, ()), g) for g in within))
    for _, node, index in candidates:
        use, gpu = usage.gpu((node, index))
        if domain is not None and use.node.topology != domain:
            continue
        idle_instances = tuple(gpu.idle_instances())
        plan = _layout_with(use.node.gpu_model, tuple(gpu.mig), profile, idle_instances)
        if plan:
            return _create(session, use, gpu.index, profile, plan[0], plan[1])
    return None


@lru_cache(maxsize=65536)
def _layout_with(
    model: str, layout: tuple[MigInstance, ...], profile: str, idle: tuple[MigInstance, ...]
) -> tuple[int, tuple[MigInstance, ...]] | None:
    """`layout_with` of one GPU, answered once per layout, idle instances and profile."""
    return layout_with(model, layout, profile, idle)


def _create(
    session: Session,
    use: NodeUse,
    gpu: int,
    profile: str,
    start: int,
    victims: tuple[MigInstance, ...],
) -> PodPlacement:
    for victim in victims:
        session.destroy_mig(use.name, gpu, victim)
    instance = MigInstance(profile, start)
    session.create_mig(use.name, gpu, instance)
    return PodPlacement(use.name, (gpu,), mig=instance)


def _no_gpu(session: Session, job: Job, domain: str | None) -> PodPlacement | None:
    for use in _in_domain(session.candidate_nodes(job), domain):
        return PodPlacement(use.name)
    return None
