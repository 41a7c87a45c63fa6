"""Who uses which GPU, with the indexes placement needs to answer in less than a scan.

A cycle asks thousands of times for "the fullest node with k free GPUs", "the partly
used GPU a fraction fits best" and "an idle MIG instance of this profile"; scanning
8,000 GPUs each time is what makes a large cycle slow. Every change goes through
`take`/`give_back`/`add_instance`/`remove_instance`, which keep the indexes right.
Only schedulable nodes are indexed: nothing new is placed on a cordoned node.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from gitops_sched.engine.requests import mig_share
from gitops_sched.engine.types import GPU_EPSILON, Node, PodPlacement
from gitops_sched.hardware.mig import MigInstance

GpuKey = tuple[str, int]  # (node name, GPU index)


@dataclass
class GpuUse:
    index: int
    memory_mib: int
    mig_enabled: bool
    mig_static: bool = False  # its instances are fixed: none is created or destroyed
    whole: str = ""  # job holding the whole GPU
    shares: dict[str, float] = field(default_factory=dict)  # job -> fraction of this GPU
    used: float = 0.0  # sum of shares
    mig: dict[MigInstance, str] = field(default_factory=dict)  # instance -> job ("" = idle)
    busy_instances: int = 0
    fits: dict[str, int | None] = field(default_factory=dict)  # MIG profile -> start; per layout

    @property
    def is_free(self) -> bool:
        return not self.whole and self.used <= GPU_EPSILON and not self.mig_enabled

    def idle_instances(self) -> list[MigInstance]:
        return sorted((i for i, job in self.mig.items() if not job), key=lambda i: i.start)


@dataclass
class NodeUse:
    node: Node
    gpus: list[GpuUse]
    free_whole: int = 0

    @property
    def name(self) -> str:
        return self.node.name


class Usage:
    """GPU usage of every node, plus indexes by node group."""

    def __init__(
        self, nodes: tuple[Node, ...], running: Iterable[tuple[str, str, PodPlacement]] = ()
    ) -> None:
        """Usage of `nodes` with `running` (job, project, pod) already on them.

        The indexes are built once at the end, not updated pod by pod.
        """
        self.nodes: dict[str, NodeUse] = {}
        # node group -> free whole GPUs -> sorted node names
        self.free_index: dict[str, dict[int, list[str]]] = {}
        self.free_total: dict[str, int] = {}  # node group -> free whole GPUs
        # node group -> shared GPUs as (-used, node, index), fullest first: best fit by bisect
        self.shared: dict[str, list[tuple[float, str, int]]] = {}
        self._shared_entry: dict[GpuKey, tuple[float, str, int]] = {}
        # (node group, project) -> shared GPUs holding only that project's work
        self.solo: dict[tuple[str, str], set[GpuKey]] = {}
        self.project_of: dict[str, str] = {}  # job -> project, for `solo`
        self.group_memory: dict[str, int | None] = {}  # GPU memory if uniform in the group
        # (node group, profile) -> GPUs with an idle instance of that profile
        self.idle_mig: dict[tuple[str, str], set[GpuKey]] = {}
        # node group -> dynamic MIG GPUs with compute slices left (where an instance may fit)
        self.mig_roomy: dict[str, set[GpuKey]] = {}
        for node in sorted(nodes, key=lambda n: n.name):
            gpus = [
                GpuUse(
                    g.index,
                    g.memory_mib,
                    g.mig_enabled,
                    g.mig_static,
                    mig=dict.fromkeys(g.mig_instances, ""),
                )
                for g in node.gpus
            ]
            use = NodeUse(node, gpus)
            self.nodes[node.name] = use
            for gpu in gpus:
                known = self.group_memory.setdefault(node.node_group, gpu.memory_mib)
                if known != gpu.memory_mib:
                    self.group_memory[node.node_group] = None
        for job, project, pod in running:
            self.project_of[job] = project
            if pod.node in self.nodes:
                for index in pod.gpus:
                    _apply(self.nodes[pod.node].gpus[index], job, pod, +1)
        for use in self.nodes.values():
            use.free_whole = sum(g.is_free for g in use.gpus)
            if use.node.schedulable:
                self._index_node(use, +1)
                for gpu in use.gpus:
                    self._index_gpu(use, gpu, +1)

    def gpu(self, key: GpuKey) -> tuple[NodeUse, GpuUse]:
        use = self.nodes[key[0]]
        return use, use.gpus[key[1]]

    def take(self, job: str, project: str, pod: PodPlacement) -> None:
        self.project_of[job] = project
        self._change(job, pod, +1)

    def give_back(self, job: str, pod: PodPlacement) -> None:
        self._change(job, pod, -1)

    def add_instance(self, node: str, index: int, instance: MigInstance) -> None:
        use = self.nodes[node]
        gpu = use.gpus[index]
        self._index_gpu(use, gpu, -1)
        gpu.mig[instance] = ""
        gpu.fits.clear()
        self._index_gpu(use, gpu, +1)

    def remove_instance(self, node: str, index: int, instance: MigInstance) -> None:
        use = self.nodes[node]
        gpu = use.gpus[index]
        self._index_gpu(use, gpu, -1)
        del gpu.mig[instance]
        gpu.fits.clear()
        self._index_gpu(use, gpu, +1)

    def _change(self, job: str, pod: PodPlacement, sign: int) -> None:
        use = self.nodes.get(pod.node)
        if use is None:
            return
        self._index_node(use, -1)
        for index in pod.gpus:
            gpu = use.gpus[index]
            self._index_gpu(use, gpu, -1)
            _apply(gpu, job, pod, sign)
            self._index_gpu(use, gpu, +1)
        use.free_whole = sum(g.is_free for g in use.gpus)
        self._index_node(use, +1)

    def _index_node(self, use: NodeUse, sign: int) -> None:
        if not use.node.schedulable:
            return
        group = use.node.node_group
        bucket = self.free_index.setdefault(group, {}).setdefault(use.free_whole, [])
        if sign > 0:
            bisect.insort(bucket, use.name)
        else:
            del bucket[bisect.bisect_left(bucket, use.name)]
        self.free_total[group] = self.free_total.get(group, 0) + sign * use.free_whole

    def _index_gpu(self, use: NodeUse, gpu: GpuUse, sign: int) -> None:
        if not use.node.schedulable:
            return
        key = (use.name, gpu.index)
        group = use.node.node_group
        if not gpu.whole and gpu.used > GPU_EPSILON:
            shared = self.shared.setdefault(group, [])
            if sign > 0:
                entry = (-gpu.used, use.name, gpu.index)
                self._shared_entry[key] = entry
                bisect.insort(shared, entry)
            else:
                del shared[bisect.bisect_left(shared, self._shared_entry.pop(key))]
            projects = {self.project_of[job] for job in gpu.shares}
            if len(projects) == 1:
                _toggle(self.solo.setdefault((group, projects.pop()), set()), key, sign)
        if gpu.mig_enabled and not gpu.mig_static:
            used = sum(mig_share(use.node.gpu_model, i.profile) for i in gpu.mig)
            if used < 1 - GPU_EPSILON:
                _toggle(self.mig_roomy.setdefault(group, set()), key, sign)
        for profile in {i.profile for i, job in gpu.mig.items() if not job}:
            _toggle(self.idle_mig.setdefault((group, profile), set()), key, sign)


def _toggle(index: set[GpuKey], key: GpuKey, sign: int) -> None:
    if sign > 0:
        index.add(key)
    else:
        index.discard(key)


def _apply(gpu: GpuUse, job: str, pod: PodPlacement, sign: int) -> None:
    """Add (sign +1) or remove (-1) one pod's use of one GPU."""
    if pod.mig is not None:
        if pod.mig in gpu.mig:
            gpu.mig[pod.mig] = job if sign > 0 else ""
            gpu.busy_instances += sign
    elif pod.fraction:
        left = gpu.shares.get(job, 0.0) + sign * pod.fraction
        if left > GPU_EPSILON:
            gpu.shares[job] = left
        else:
            gpu.shares.pop(job, None)
        gpu.used = sum(gpu.shares.values())
    elif sign > 0:
        gpu.whole = job
    elif gpu.whole == job:
        gpu.whole = ""
