"""Where a job's pods go: bin packing, fractions on shared GPUs, MIG instances, topology.

Whole GPUs go to the fullest node that still fits them (keeping empty nodes empty for
large jobs); fractions go to the partly used GPU they fill best; MIG requests reuse an
idle instance, then create one where NVIDIA's placements allow, then destroy idle
instances of other profiles. A gang is placed pod by pod inside a statement and kept
only if every pod fits, preferring a single topology domain.
"""

from __future__ import annotations

from collections.abc import Iterable

from gitops_sched.engine.mig import MigInstance, find_placement, layout_with
from gitops_sched.engine.session import NodeUse, Session
from gitops_sched.engine.types import GPU_EPSILON, Job, PodPlacement, RequestKind


def place(session: Session, job: Job) -> bool:
    """Bind the job (all its pods, or at least `min_available`) if it fits; else change nothing."""
    counts = [job.pods] if job.min_available >= job.pods else [job.pods, job.min_available]
    for count in counts:
        for domain in _domains(session, job, count):
            with session.statement() as commit:
                pods = _place_pods(session, job, count, domain)
                if pods is not None:
                    session.bind(job, pods)
                    commit()
                    return True
    return False


def _domains(session: Session, job: Job, count: int) -> list[str | None]:
    """Topology domains to try for a gang, emptiest-fitting first; None means anywhere."""
    if count <= 1 or job.request.kind is RequestKind.NONE:
        return [None]
    free: dict[str, int] = {}
    for use in session.candidate_nodes(job):
        if use.node.topology:
            free[use.node.topology] = free.get(use.node.topology, 0) + use.free_whole
    need = job.request.count * count if job.request.kind is RequestKind.WHOLE else 0
    fitting = sorted((f, d) for d, f in free.items() if f >= need)
    return [d for _, d in fitting] + [None]


def _place_pods(
    session: Session, job: Job, count: int, domain: str | None
) -> tuple[PodPlacement, ...] | None:
    pods: list[PodPlacement] = []
    for _ in range(count):
        pod = _place_pod(session, job, domain)
        if pod is None:
            return None
        session.hold(job, pod)
        pods.append(pod)
    session.unhold(job, tuple(pods))
    return tuple(pods)


def _place_pod(session: Session, job: Job, domain: str | None) -> PodPlacement | None:
    kind = job.request.kind
    if kind is RequestKind.WHOLE:
        return _whole(session, job, job.request.count, domain)
    if kind in (RequestKind.FRACTION, RequestKind.MEMORY):
        return _shared(session, job, domain)
    if kind is RequestKind.MIG:
        return _mig(session, job, domain)
    return _no_gpu(session, job, domain)


def _in_domain(nodes: Iterable[NodeUse], domain: str | None) -> Iterable[NodeUse]:
    return nodes if domain is None else (n for n in nodes if n.node.topology == domain)


def _whole(session: Session, job: Job, count: int, domain: str | None) -> PodPlacement | None:
    for use in _in_domain(session.nodes_with_free(job.node_groups, max(count, 1)), domain):
        free = [g.index for g in use.gpus if g.is_free][:count]
        return PodPlacement(use.name, tuple(free))
    return None


def _share_of(job: Job, memory_mib: int) -> float:
    if job.request.kind is RequestKind.FRACTION:
        return job.request.fraction
    return job.request.memory_mib / memory_mib if memory_mib else 2.0


def _shared(session: Session, job: Job, domain: str | None) -> PodPlacement | None:
    """Best fit on a partly used GPU, else a free GPU.

    GPUs shared only with the job's own project come first, so one team's notebooks
    pack together instead of spreading a noisy neighbour across teams; then the GPU
    left with the least room.
    """
    best: tuple[bool, float, str, int, float] | None = None
    for use in _in_domain(session.candidate_nodes(job), domain):
        for gpu in use.gpus:
            if gpu.whole or gpu.mig_enabled or gpu.used <= GPU_EPSILON:
                continue
            share = _share_of(job, gpu.memory_mib)
            room = 1.0 - gpu.used - share
            if room < -GPU_EPSILON:
                continue
            foreign = any(session.jobs[j].project != job.project for j in gpu.shares)
            key = (foreign, room, use.name, gpu.index, share)
            if best is None or key < best:
                best = key
    if best is not None:
        return PodPlacement(best[2], (best[3],), fraction=best[4])
    for use in _in_domain(session.nodes_with_free(job.node_groups, 1), domain):
        gpu = next(g for g in use.gpus if g.is_free)
        share = _share_of(job, gpu.memory_mib)
        if share <= 1.0 + GPU_EPSILON:
            return PodPlacement(use.name, (gpu.index,), fraction=min(share, 1.0))
    return None


def _mig(session: Session, job: Job, domain: str | None) -> PodPlacement | None:
    """An idle instance of the profile; else create one; else make room among idle ones."""
    profile = job.request.mig_profile
    gpus = [
        (use, gpu)
        for use in _in_domain(session.candidate_nodes(job), domain)
        for gpu in use.gpus
        if gpu.mig_enabled
    ]
    # pack: GPUs with the most busy instances first, then by node and index
    gpus.sort(key=lambda ug: (-sum(1 for j in ug[1].mig.values() if j), ug[0].name, ug[1].index))
    for use, gpu in gpus:
        for instance, user in sorted(gpu.mig.items(), key=lambda iu: iu[0].start):
            if not user and instance.profile == profile:
                return PodPlacement(use.name, (gpu.index,), mig=instance)
    for use, gpu in gpus:
        start = find_placement(use.node.gpu_model, tuple(gpu.mig), profile)
        if start is not None:
            return _create(session, use, gpu.index, profile, start, ())
    for use, gpu in gpus:
        idle = tuple(i for i, user in gpu.mig.items() if not user)
        plan = layout_with(use.node.gpu_model, tuple(gpu.mig), profile, idle) if idle else None
        if plan is not None:
            return _create(session, use, gpu.index, profile, plan[0], plan[1])
    return None


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
