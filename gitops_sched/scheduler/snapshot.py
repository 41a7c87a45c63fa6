"""Live pods and nodes -> the engine's Snapshot and the cycle's ClusterView, in one pass.

Pure: the objects as the API lists them (plain dicts) in, no I/O. The same objects in any
order give the same view: nodes, jobs, releasing pods and the rest are sorted.

Nodes: a node belongs to the first node group (by name) that finds it (`nodes.node_group_of`);
nodes of no group, or of a `system` group, are left out. Its GPUs come from the agent's
inventory, else GPU Feature Discovery's labels, else the group's declaration. A node whose
annotations cannot be read (`nodes.NodeError`) is left out too, and listed with why
(`ClusterView.skipped`): one node's garbage never stops the cycle.

Pods (Succeeded and Failed ones hold nothing and are skipped):
- Ours (our schedulerName) in a project's namespace are read against the pod contract
  (`pods.read_pod`). Those of one workload (the workload label, in one namespace) make one
  job `namespace/workload`; a pod without the label is a job of its own. A bound pod with
  our placement annotation runs in its job; a pending one is missing from it; a terminating
  bound one is releasing its GPUs (not part of its job).
- Pod indexes: the completion index, else (bound pods) the placement's, else the lowest
  indexes no other pod of the job has, in (creationTimestamp, name) order: a bound pod keeps
  its index however the job's other pods come and go.
- A job's settings (type, priority, request, gang size...) are its lowest-index pod's;
  `pods` is REPLICAS, else how many pods are live; `min_available` at most `pods`.
- `Ignored`, with why: a pod of ours in a namespace of no project, one whose labels or
  annotations cannot be read, one whose index another pod of its job has, one whose
  placement names GPUs its node does not have, a job no node group it may use admits, a job
  every node it may use has a taint it does not tolerate.
- Taints (`taints`): a job's node groups are those with a schedulable node whose NoSchedule
  and NoExecute taints its first pod tolerates (a running job left with none keeps its
  groups, and their nodes take no new work); a node that one job of its group tolerates and
  another does not takes no new work.
- GPUs held by others are marked held on their node (`Gpu.held`: the engine neither uses
  them nor counts them in the capacity fair share splits): pods of other schedulers, our
  pods bound by someone else (no placement annotation) or ignored while bound, terminating
  or not (their `nvidia.com/gpu`, the highest GPUs our pods do not use); and the GPU of a
  terminating reservation pod that no fraction pod of ours uses (it holds the GPU until it
  has gone). Their `nvidia.com/mig-<profile>` instances (of the profile, ones our pods do not
  use) are taken off the GPU's layout, which then stays fixed.
- A live reservation pod's GPU stays in the engine's hands even with no fraction pod on
  it, marked `Gpu.reserved`: it is either being set up for a fraction pod the engine placed
  there (which waits to be bound until the pod reports its GPU's UUID, and must be placed
  there again meanwhile: a fraction goes to a reserved GPU before a GPU nobody holds), or,
  left by a restart or a failed bind, taken by the next fraction, else deleted by
  `actuate`, which binds no whole-GPU pod on a reserved GPU.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from gitops_sched.bridge.policy import ClusterPolicy
from gitops_sched.contract.pods import (
    GPU_RESOURCE,
    GPU_UUID,
    MIG_RESOURCE_PREFIX,
    RESERVATION_LABEL,
    RESERVATION_NODE_LABEL,
)
from gitops_sched.engine.types import Job, Node, ReleasingPod, RequestKind, Snapshot
from gitops_sched.gcpause import paused_gc
from gitops_sched.hardware.mig import MigInstance
from gitops_sched.scheduler.nodes import (
    NodeError,
    allowed_groups,
    node_group_of,
    read_node,
    with_held,
)
from gitops_sched.scheduler.pods import (
    FINISHED,
    OurPod,
    PodError,
    extended_resources,
    meta,
    node_constraints,
    read_pod,
    spec,
)
from gitops_sched.scheduler.taints import TaintRule, Toleration, node_taints, pod_tolerations
from gitops_sched.scheduler.view import ClusterView, Ignored, PodRef, Reservation, SkippedNode


@dataclass
class CycleMemory:
    """What the loop keeps from one cycle to the next: since when each gang has been short
    of pods (the engine evicts a gang short for longer than the grace period)."""

    short_since: dict[str, float] = field(default_factory=dict)  # job key -> time

    def update(self, snapshot: Snapshot) -> None:
        """Remember the cycle's jobs' `short_since` (build_view keeps it up to date)."""
        self.short_since = {
            job.key: job.short_since for job in snapshot.jobs if job.short_since is not None
        }


@paused_gc()
def build_view(
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    policy: ClusterPolicy,
    now: float,
    memory: CycleMemory,
) -> ClusterView:
    """The cycle's view of the cluster (see the module's rules)."""
    build = _Build(policy, now, memory)
    for obj in nodes:
        build.add_node(obj)
    for pod in pods:
        build.add_pod(pod)
    return build.view()


class _Build:
    """One view in the making: nodes first, then pods, then jobs and the GPUs others hold."""

    def __init__(self, policy: ClusterPolicy, now: float, memory: CycleMemory) -> None:
        self.policy = policy
        self.now = now
        self.memory = memory
        self.nodes: dict[str, Node] = {}
        self.node_objects: dict[str, dict[str, Any]] = {}
        self.members: dict[str, list[dict[str, str]]] = {}  # group -> its nodes' labels
        self.jobs: dict[str, list[OurPod]] = {}
        self.releasing: list[OurPod] = []
        self.reservations: list[Reservation] = []
        self.ignored: list[Ignored] = []
        self.skipped: list[SkippedNode] = []
        self.held: dict[str, int] = {}  # node -> whole GPUs held by pods not ours
        self.held_mig: dict[tuple[str, str], int] = {}  # (node, profile) -> their instances
        self.allowed: dict[tuple[str, str, str], tuple[str, ...]] = {}
        self.taints = TaintRule()
        # job key -> its first pod's tolerations and its pods, for the taints' verdict
        self.built: dict[str, tuple[tuple[Toleration, ...], list[OurPod]]] = {}

    # --- objects in ------------------------------------------------------------------------

    def add_node(self, obj: dict[str, Any]) -> None:
        labels = meta(obj).get("labels") or {}
        group = node_group_of(labels, self.policy.node_groups)
        if group is None or not group.runs_workloads:
            return
        try:
            node = read_node(obj, group)
        except NodeError as error:
            metadata = meta(obj)
            name, uid = metadata.get("name") or "", metadata.get("uid") or ""
            self.skipped.append(SkippedNode(name, uid, str(error)))
            return
        self.nodes[node.name] = node
        if node.schedulable:
            self.taints.add_node(group.name, node.name, node_taints(obj))
        self.node_objects[node.name] = obj
        self.members.setdefault(group.name, []).append(labels)

    def add_pod(self, pod: dict[str, Any]) -> None:
        if (pod.get("status") or {}).get("phase") in FINISHED:
            return
        metadata = meta(pod)
        namespace = metadata.get("namespace") or ""
        labels = metadata.get("labels") or {}
        if namespace == self.policy.system_namespace and RESERVATION_LABEL in labels:
            self._reservation(pod)
        elif spec(pod).get("schedulerName") != self.policy.scheduler_name:
            self._hold(pod)
        elif namespace not in self.policy.namespaces:
            self._ignore(pod, f"namespace {namespace!r} belongs to no project")
        else:
            try:
                ours = read_pod(pod, self.policy.namespaces[namespace])
            except PodError as error:
                self._ignore(pod, str(error))
                return
            if ours.node and ours.placement is None:
                self._hold(pod)  # bound by someone else: its GPUs are not ours to give
            elif ours.terminating:
                if ours.node:
                    self.releasing.append(ours)
            else:
                self.jobs.setdefault(ours.key, []).append(ours)

    def _reservation(self, pod: dict[str, Any]) -> None:
        metadata, node = meta(pod), spec(pod).get("nodeName") or ""
        labels = metadata.get("labels") or {}
        try:
            gpu = int(labels[RESERVATION_LABEL])
        except ValueError:
            self._hold(pod)  # which GPU it holds is unknown: one of the node's
            return
        self.reservations.append(
            Reservation(
                namespace=metadata.get("namespace") or "",
                name=metadata.get("name") or "",
                node=node or labels.get(RESERVATION_NODE_LABEL, ""),  # the label may be cut
                gpu=gpu,
                uid=metadata.get("uid") or "",
                uuid=(metadata.get("annotations") or {}).get(GPU_UUID, ""),
                bound=bool(node),
                terminating=bool(metadata.get("deletionTimestamp")),
            )
        )

    def _hold(self, pod: dict[str, Any]) -> None:
        """A bound pod that is not ours to place holds its whole GPUs on its node."""
        node = spec(pod).get("nodeName") or ""
        try:
            resources = extended_resources(spec(pod)) if node else {}
        except PodError:
            resources = {}  # amounts the device plugin could not have granted either
        for resource, count in resources.items():
            if resource == GPU_RESOURCE:
                self._take(node, count)
            else:
                self._take(node, count, resource.removeprefix(MIG_RESOURCE_PREFIX))

    def _take(self, node: str, count: int, mig_profile: str = "") -> None:
        """`count` whole GPUs, or MIG instances of `mig_profile`, held on `node`."""
        if not node or not count:
            return
        if mig_profile:
            key = (node, mig_profile)
            self.held_mig[key] = self.held_mig.get(key, 0) + count
        else:
            self.held[node] = self.held.get(node, 0) + count

    def _ignore(self, pod: dict[str, Any], why: str) -> None:
        metadata = meta(pod)
        self.ignored.append(
            Ignored(
                namespace=metadata.get("namespace") or "",
                name=metadata.get("name") or "",
                uid=metadata.get("uid") or "",
                why=why,
                bound=bool(spec(pod).get("nodeName")),
            )
        )
        self._hold(pod)  # bound and unreadable: it still holds its GPUs

    def _ignore_ours(self, pod: OurPod, why: str) -> None:
        self.ignored.append(Ignored(pod.namespace, pod.name, pod.uid, why, bound=bool(pod.node)))
        if pod.request.kind is RequestKind.MIG:
            self._take(pod.node, 1, pod.request.mig_profile)
        else:
            self._take(pod.node, pod.request.count)

    # --- the view out ----------------------------------------------------------------------

    def view(self) -> ClusterView:
        jobs: list[Job] = []
        refs: dict[str, tuple[PodRef, ...]] = {}
        for key in sorted(self.jobs):
            built = self._job(self.jobs[key])
            if built is not None:
                job, pods = built
                jobs.append(job)
                refs[key] = pods
        jobs = self._within_taints(jobs, refs)
        releasing = []
        for pod in sorted(self.releasing, key=lambda p: (p.key, p.namespace, p.name)):
            if pod.placement is not None and self._fits_node(pod):
                index = pod.placement.index if pod.index is None else pod.index
                placed = replace(pod.placement, index=index)
                releasing.append(ReleasingPod(pod.key, pod.project, placed))
                ref = _ref(pod, index)
                refs[pod.key] = tuple(sorted((*refs.get(pod.key, ()), ref), key=_ref_order))
            else:
                self._ignore_ours(pod, "its placement names GPUs its node does not have")
        nodes = self._nodes_with_held(jobs, releasing)
        snapshot = Snapshot(
            policy=self.policy.policy,
            nodes=nodes,
            jobs=tuple(jobs),
            now=self.now,
            releasing=tuple(releasing),
        )
        return ClusterView(
            snapshot=snapshot,
            pods=refs,
            nodes={node.name: self.node_objects[node.name] for node in nodes},
            reservations=tuple(sorted(self.reservations, key=lambda r: (r.node, r.gpu, r.name))),
            ignored=tuple(sorted(self.ignored, key=lambda i: (i.namespace, i.name, i.uid))),
            skipped=tuple(sorted(self.skipped)),
        )

    def _job(self, pods: list[OurPod]) -> tuple[Job, tuple[PodRef, ...]] | None:
        """The job of a workload's live pods, and its pod references by index."""
        pods.sort(key=lambda p: (p.created, p.name))
        given = {p.index for p in pods if p.index is not None}
        free = (i for i in itertools.count() if i not in given)
        indexed: dict[int, OurPod] = {}
        for pod in pods:
            index = next(free) if pod.index is None else pod.index
            if index in indexed:
                self._ignore_ours(pod, f"another pod of its job has index {index}")
            elif pod.placement is not None and not self._fits_node(pod):
                self._ignore_ours(pod, "its placement names GPUs its node does not have")
            else:
                indexed[index] = pod
        if not indexed:
            return None
        first = indexed[min(indexed)]
        groups = self._groups(first)
        if not groups:
            why = "no node group it may use admits its nodeSelector and node affinity"
            for pod in indexed.values():
                self._ignore_ours(pod, why)
            return None
        running = {i: p for i, p in indexed.items() if p.placement is not None}
        placed = {i: p.placement for i, p in running.items() if p.placement is not None}
        placement = tuple(replace(placed[i], index=i) for i in sorted(placed))
        size = first.replicas or len(indexed)
        job = Job(
            name=first.job,
            namespace=first.namespace,
            project=first.project,
            type=first.type,
            priority=first.priority,
            preemptible=first.preemptible,
            request=first.request,
            pods=size,
            min_available=min(first.min_available, size),
            node_groups=groups,
            submitted=min(p.created for p in indexed.values()),
            placement=placement,
            started_at=min((p.started or p.created for p in running.values()), default=None),
            idle_since=_idle_since(running.values()),
            uid=first.owner_uid or first.uid,
            short_since=self.memory.short_since.get(first.key),
        ).tracking_short(self.now)
        asks_gpu = first.request.kind is not RequestKind.NONE
        self.built[job.key] = (pod_tolerations(first.spec, asks_gpu), list(indexed.values()))
        return job, tuple(_ref(indexed[i], i) for i in sorted(indexed))

    def _groups(self, pod: OurPod) -> tuple[str, ...]:
        """The node groups the job may use: its project's for its type (all when it names
        none) that its nodeSelector and required affinity admit."""
        constraints = node_constraints(pod.spec)
        cache = (pod.project, pod.type, constraints)
        if cache not in self.allowed:
            project = self.policy.projects[pod.project]
            allowed = set(project.allowed_node_groups(pod.type))
            admitted = allowed_groups(constraints, self.policy.node_groups, self.members)
            self.allowed[cache] = tuple(g for g in admitted if not allowed or g in allowed)
        return self.allowed[cache]

    def _within_taints(self, jobs: list[Job], refs: dict[str, tuple[PodRef, ...]]) -> list[Job]:
        """The jobs kept to the node groups whose nodes' taints they tolerate; one with none
        left is ignored, or kept as it is if it runs and its nodes take no new work; the
        nodes some job of their group does not tolerate take no new work."""
        if not self.taints.tainted:
            return jobs
        kept = []
        withheld: set[str] = set()
        for job in jobs:
            tolerations, pods = self.built[job.key]
            verdict = self.taints.verdict(job.node_groups, tolerations)
            withheld.update(verdict.withheld)
            if verdict.groups:
                narrowed = verdict.groups != job.node_groups
                kept.append(replace(job, node_groups=verdict.groups) if narrowed else job)
                continue
            if job.running:  # its pods stay counted; nothing new goes where it may not go
                withheld.update(verdict.refusing)
                kept.append(job)
                continue
            why = (
                f"every node it may use (node groups {', '.join(job.node_groups)}) has a taint "
                f"it does not tolerate: {', '.join(map(str, verdict.refused))}"
            )
            for pod in pods:
                self._ignore_ours(pod, why)
            del refs[job.key]
        for name in withheld:
            self.nodes[name] = replace(self.nodes[name], schedulable=False)
        return kept

    def _fits_node(self, pod: OurPod) -> bool:
        """Whether the pod's placement names only GPUs its node has (a node not in the
        snapshot: the engine leaves its pods' GPUs alone)."""
        node = self.nodes.get(pod.node)
        assert pod.placement is not None
        return node is None or all(g < len(node.gpus) for g in pod.placement.gpus)

    def _nodes_with_held(self, jobs: list[Job], releasing: list[ReleasingPod]) -> tuple[Node, ...]:
        """The nodes with the GPUs that pods not ours hold, or that a terminating reservation
        pod holds with no fraction pod on it (nothing may use that GPU until the pod has
        gone), marked held, and without the MIG instances pods not ours hold."""
        used: dict[str, set[int]] = {}
        used_mig: set[tuple[str, int, MigInstance]] = set()
        for pod in [p for job in jobs for p in job.placement] + [r.pod for r in releasing]:
            used.setdefault(pod.node, set()).update(pod.gpus)
            if pod.mig is not None:
                used_mig.add((pod.node, pod.gpus[0], pod.mig))
        taken: dict[str, set[int]] = {}
        reserved: dict[str, set[int]] = {}  # live reservations no pod of ours uses yet
        for reservation in self.reservations:
            node = self.nodes.get(reservation.node)
            gpu = reservation.gpu
            if node is not None and gpu < len(node.gpus) and gpu not in used.get(node.name, ()):
                unused = taken if reservation.terminating else reserved
                unused.setdefault(node.name, set()).add(gpu)
        for name, gpus in self.held.items():
            node = self.nodes.get(name)
            if node is None:
                continue
            busy = used.get(name, set()) | taken.get(name, set())
            spare = [g.index for g in reversed(node.gpus) if g.index not in busy]
            taken.setdefault(name, set()).update(spare[:gpus])
        foreign: dict[str, dict[int, set[MigInstance]]] = {}
        for (name, profile), count in self.held_mig.items():
            node = self.nodes.get(name)
            if node is None:
                continue
            idle = [
                (gpu.index, instance)
                for gpu in reversed(node.gpus)
                for instance in reversed(gpu.mig_instances)
                if instance.profile == profile and (name, gpu.index, instance) not in used_mig
            ]
            for index, instance in idle[:count]:
                foreign.setdefault(name, {}).setdefault(index, set()).add(instance)
        return tuple(
            with_held(
                self.nodes[name],
                taken.get(name, set()),
                foreign.get(name, {}),
                reserved.get(name, set()),
            )
            for name in sorted(self.nodes)
        )


def _idle_since(pods: Iterable[OurPod]) -> float | None:
    """Idle since the last of its running pods went idle; None unless all of them are."""
    times = [p.idle_since for p in pods]
    known = [t for t in times if t is not None]
    return max(known) if known and len(known) == len(times) else None


def _ref(pod: OurPod, index: int) -> PodRef:
    return PodRef(
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        index=index,
        node=pod.node,
        terminating=pod.terminating,
        annotations=tuple(sorted(pod.annotations.items())),
        owner=pod.owner,
    )


def _ref_order(ref: PodRef) -> tuple[int, bool, str]:
    """By index, the live pod before a terminating one of the same index."""
    return ref.index, ref.terminating, ref.name
