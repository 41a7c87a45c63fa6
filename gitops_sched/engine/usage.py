"""Who uses which GPU, with the indexes placement needs to answer in less than a scan.

A cycle asks thousands of times for "the fullest node with k free GPUs", "the partly
used GPU a fraction fits best" and "an idle MIG instance of this profile"; scanning
8,000 GPUs each time is what makes a large cycle slow. Every change goes through
`take`/`give_back`/`add_instance`/`remove_instance`, which keep the indexes right.
Only schedulable nodes and GPUs not held by others are indexed: nothing new is placed on a
cordoned node or a held GPU.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gitops_sched.engine.fairshare import gpus_shared
from gitops_sched.engine.requests import mig_share
from gitops_sched.engine.types import GPU_EPSILON, Gpu, Node, PodPlacement
from gitops_sched.hardware.mig import MigInstance, find_placement, mig_profiles

GpuKey = tuple[str, int]  # (node name, GPU index)
# (-busy MIG instances, node name, GPU index): sorted, the GPU with the most busy instances
# first, then by node and index -- the order MIG placement packs GPUs in
PackEntry = tuple[int, str, int]


@dataclass(slots=True)
class GpuUse:
    index: int
    memory_mib: int
    mig_enabled: bool
    mig_static: bool = False  # its instances are fixed: none is created or destroyed
    held: bool = False  # not the engine's: never free, never indexed (see Gpu.held)
    whole: str = ""  # job holding the whole GPU
    shares: dict[str, float] = field(default_factory=dict)  # job -> fraction of this GPU
    used: float = 0.0  # sum of shares
    mig: dict[MigInstance, str] = field(default_factory=dict)  # instance -> job ("" = idle)
    busy_instances: int = 0
    fits: dict[str, int | None] = field(default_factory=dict)  # MIG profile -> start; per layout
    creatable: tuple[str, ...] | None = None  # MIG profiles that fit beside the layout, once
    # nothing holds it and it is neither MIG nor held: a field kept by _set_free, as it is
    # asked far more often than it changes
    is_free: bool = False

    def idle_instances(self) -> list[MigInstance]:
        return sorted((i for i, job in self.mig.items() if not job), key=lambda i: i.start)


@dataclass(slots=True)
class NodeUse:
    node: Node
    # the use of each GPU: for a node nothing runs on and with no MIG GPU, its shape's list
    # of idle GPUs, shared with the nodes of that shape until Usage gives it its own (see
    # _Shape): a GpuUse for every GPU of 100,000 nodes was most of the memory and time
    # `simulate` took, where a cycle looks into few of a large cluster's nodes
    gpus: list[GpuUse]
    free_whole: int = 0
    own: bool = True  # `gpus` is the node's own (else nothing may change it)
    # the node's name, a field (not a property): the indexes ask for it on every change
    name: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.name = self.node.name

    def mig_start(self, gpu: GpuUse, profile: str) -> int | None:
        """Where `profile` would be created on the GPU, cached until its layout changes."""
        if profile not in gpu.fits:
            gpu.fits[profile] = find_placement(self.node.gpu_model, tuple(gpu.mig), profile)
        return gpu.fits[profile]


@dataclass(slots=True)
class _Shape:
    """What Usage needs of a node's GPUs while nothing runs on them, worked out once per
    tuple of GPUs (the nodes of a node group share theirs)."""

    reserved: tuple[int, ...]  # indexes of GPUs a reservation pod holds (Gpu.reserved)
    free: int  # whole GPUs free: neither MIG nor held
    shared: int  # GPUs fair share splits (fairshare.gpus_shared)
    memory: int | None  # every GPU's memory, if the same (None: they differ)
    plain: bool  # no MIG GPU (a MIG GPU's use changes with its layout, which is per node)
    # the GPUs' use while idle, for the plain nodes nothing runs on to share (see NodeUse),
    # made for the first of them
    idle: list[GpuUse] | None = None

    @classmethod
    def of(cls, gpus: tuple[Gpu, ...]) -> _Shape:
        # lists, not generators: a generator's every step is a call (nodes that do not
        # share their tuple of GPUs, as those a cluster's JSON gives, each have a shape)
        memories = {gpu.memory_mib for gpu in gpus}
        mig = [gpu.mig_enabled for gpu in gpus]
        return cls(
            reserved=tuple([gpu.index for gpu in gpus if gpu.reserved]),
            free=sum([not (gpu.mig_enabled or gpu.held) for gpu in gpus]),
            shared=gpus_shared(gpus),
            memory=memories.pop() if len(memories) == 1 else None,
            plain=not any(mig),
        )


class Usage:
    """GPU usage of every node, plus indexes by node group."""

    def __init__(
        self, nodes: tuple[Node, ...], running: Sequence[tuple[str, str, PodPlacement]] = ()
    ) -> None:
        """Usage of `nodes` with `running` (job, project, pod) already on them.

        The indexes are built once at the end, not updated pod by pod.
        """
        self.nodes: dict[str, NodeUse] = {}
        # node group -> free whole GPUs -> sorted node names
        self.free_index: dict[str, dict[int, list[str]]] = {}
        self.free_total: dict[str, int] = {}  # node group -> free whole GPUs
        # (node group, topology domain) -> free whole GPUs -> sorted node names, and
        # node group -> topology domain -> free whole GPUs (every domain with a node, even
        # at 0): a gang kept in one domain neither scans nor sums every node
        self.free_in_domain: dict[tuple[str, str], dict[int, list[str]]] = {}
        self.domain_free: dict[str, dict[str, int]] = {}
        self.group_models: dict[str, set[str]] = {}  # node group -> GPU models of its nodes
        # node group -> shared GPUs as (-used, node, index), fullest first: best fit by bisect
        self.shared: dict[str, list[tuple[float, str, int]]] = {}
        self._shared_entry: dict[GpuKey, tuple[float, str, int]] = {}
        # (node group, project) -> shared GPUs holding only that project's work
        self.solo: dict[tuple[str, str], set[GpuKey]] = {}
        self.project_of: dict[str, str] = {}  # job -> project, for `solo`
        self.group_memory: dict[str, int | None] = {}  # GPU memory if uniform in the group
        # MIG placement takes the first GPU in packing order (see PackEntry) that has an idle
        # instance of the profile, else the first where one can be created, else the first
        # where destroying idle instances makes room: sorted lists answer each by bisect
        # instead of a scan of every MIG GPU per pod. Keys are (node group, profile), and
        # (node group, profile, topology domain) for gangs kept inside one domain.
        # GPUs with an idle instance of the profile
        self.idle_mig: dict[tuple[str, ...], list[PackEntry]] = {}
        # dynamic MIG GPUs with compute slices left where the profile can be created
        self.mig_room: dict[tuple[str, ...], list[PackEntry]] = {}
        # node group -> dynamic MIG GPUs with an idle instance of any profile
        self.mig_idle_any: dict[str, list[PackEntry]] = {}
        self._mig_entries: dict[GpuKey, list[tuple[list[PackEntry], PackEntry]]] = {}
        self._mig_profiles: dict[str, tuple[str, ...]] = {}  # GPU model -> its MIG profiles
        # (GPU model, MIG layout) -> the profiles creatable beside it: most GPUs share a
        # few layouts, so each is worked out once per session, not once per GPU
        self._creatable_in: dict[tuple[str, tuple[MigInstance, ...]], tuple[str, ...]] = {}
        # free GPUs a reservation pod holds for fractions, by node and index: fractions first
        self.reserved: list[GpuKey] = []
        # node group -> the GPUs fair share splits there (fairshare.gpus_shared), fixed
        self.capacity: dict[str, int] = {}
        # GPUs whose use changed since the usage was built or carried (see `carry`)
        self.touched: set[GpuKey] = set()
        shapes: dict[int, _Shape] = {}  # id(node.gpus) -> its shape, while `nodes` hold them
        occupied = {pod.node for _, _, pod in running}
        for node in sorted(nodes, key=lambda n: n.name):
            shape = shapes.get(id(node.gpus))
            if shape is None:
                shape = shapes[id(node.gpus)] = _Shape.of(node.gpus)
            self.reserved += [(node.name, index) for index in shape.reserved]
            if shape.plain and node.name not in occupied:
                if shape.idle is None:
                    shape.idle = [_unused(g) for g in node.gpus]
                use = NodeUse(node, shape.idle, shape.free, own=False)
            else:
                use = NodeUse(node, [_unused(g) for g in node.gpus], shape.free)
            self.nodes[node.name] = use
            self.group_models.setdefault(node.node_group, set()).add(node.gpu_model)
            if node.schedulable:
                group = node.node_group
                self.capacity[group] = self.capacity.get(group, 0) + shape.shared
            if node.gpus:
                known = self.group_memory.setdefault(node.node_group, shape.memory)
                if shape.memory != known:
                    self.group_memory[node.node_group] = None
        for job, project, pod in running:
            self.project_of[job] = project
            if (on := self.nodes.get(pod.node)) is not None:
                for index in pod.gpus:
                    _apply(on.gpus[index], job, pod, +1)
        for use in self.nodes.values():
            if use.own:  # each free unless a running pod's _apply said otherwise
                use.free_whole = sum([gpu.is_free for gpu in use.gpus])
            if use.node.schedulable:
                self._index_node(use)
                # a shared list's GPUs are idle plain GPUs, in no GPU index
                for gpu in use.gpus if use.own else ():
                    if gpu.shares or gpu.mig or gpu.mig_enabled:  # else in none (see _change)
                        self._index_gpu(use, gpu, +1)

    def gpu(self, key: GpuKey) -> tuple[NodeUse, GpuUse]:
        use = self.nodes[key[0]]
        return use, use.gpus[key[1]]

    def carry(
        self, nodes: tuple[Node, ...], running: Iterable[tuple[str, str, PodPlacement]]
    ) -> Usage:
        """This usage made what `Usage(nodes, running)` would build, for the next cycle of a
        settle, where `nodes` are the same nodes and GPUs, changed only where this usage
        changed (MIG instances). Building 8,000 GPUs again was a third of a settled cycle's
        session; only the GPUs `touched` since are built again, from their pods in
        `running`'s order as __init__ builds them, so every share and sum is the same to
        the last bit (a GPU is free or not as before: nodes keep their counts). The indexes
        are updated, not rebuilt: their lists come out the same (sorted), their dicts may
        hold keys in another order or an empty bucket, which no reader depends on (each
        looks a key up, sums, or takes the largest key)."""
        fresh = {node.name: node for node in nodes}
        for use in self.nodes.values():
            use.node = fresh[use.name]
        touched, self.touched = self.touched, set()
        pods: dict[GpuKey, list[tuple[str, str, PodPlacement]]] = {key: [] for key in touched}
        changed = {name for name, _ in touched}
        for entry in running:
            pod = entry[2]
            if pod.node in changed:  # most pods run on nodes nothing changed on
                for index in pod.gpus:
                    on = pods.get((pod.node, index))
                    if on is not None:
                        on.append(entry)
        for key in sorted(touched):
            use, old = self.gpu(key)
            if old.shares or old.mig or old.mig_enabled:
                self._index_gpu(use, old, -1)
            gpu = use.gpus[key[1]] = _unused(use.node.gpus[key[1]])
            for job, project, pod in pods[key]:
                self.project_of[job] = project
                _apply(gpu, job, pod, +1)
            if gpu.shares or gpu.mig or gpu.mig_enabled:
                self._index_gpu(use, gpu, +1)
        return self

    def take(self, job: str, project: str, pod: PodPlacement) -> None:
        self.project_of[job] = project
        self._change(job, pod, +1)

    def give_back(self, job: str, pod: PodPlacement) -> None:
        self._change(job, pod, -1)

    def add_instance(self, node: str, index: int, instance: MigInstance) -> None:
        use = self.nodes[node]
        gpu = use.gpus[index]
        self.touched.add((node, index))
        self._index_gpu(use, gpu, -1)
        gpu.mig[instance] = ""
        gpu.fits.clear()
        gpu.creatable = None
        self._index_gpu(use, gpu, +1)

    def remove_instance(self, node: str, index: int, instance: MigInstance) -> None:
        use = self.nodes[node]
        gpu = use.gpus[index]
        self.touched.add((node, index))
        self._index_gpu(use, gpu, -1)
        del gpu.mig[instance]
        gpu.fits.clear()
        gpu.creatable = None
        self._index_gpu(use, gpu, +1)

    def _change(self, job: str, pod: PodPlacement, sign: int) -> None:
        use = self.nodes.get(pod.node)
        if use is None:
            return
        # a whole GPU outside MIG, not shared, is in no GPU index: only its node's free
        # count moves
        shares = pod.mig is not None or pod.fraction  # else the pod takes whole GPUs
        if not use.own:
            _own(use)
        free = use.free_whole  # moves only with the pod's own GPUs
        touched = self.touched
        for index in pod.gpus:
            touched.add((pod.node, index))
            gpu = use.gpus[index]
            indexed = shares or gpu.shares or gpu.mig or gpu.mig_enabled
            if indexed:
                self._index_gpu(use, gpu, -1)
            free -= gpu.is_free
            _apply(gpu, job, pod, sign)
            free += gpu.is_free
            if indexed:
                self._index_gpu(use, gpu, +1)
        if free != use.free_whole:  # else the node stays where it is in the indexes
            self._move_node(use, free)

    def _move_node(self, use: NodeUse, free: int) -> None:
        """Set the node's free whole GPUs, moving it between the buckets of the indexes
        (_index_node puts it in them first)."""
        old, use.free_whole = use.free_whole, free
        if not use.node.schedulable:
            return
        group, domain, name = use.node.node_group, use.node.topology, use.name
        self.free_total[group] += free - old
        indexes: tuple[dict[int, list[str]], ...] = (self.free_index[group],)
        if domain:
            indexes += (self.free_in_domain[(group, domain)],)
            self.domain_free[group][domain] += free - old
        for index in indexes:
            bucket = index[old]
            del bucket[bisect.bisect_left(bucket, name)]
            bisect.insort(index.setdefault(free, []), name)

    def _index_node(self, use: NodeUse) -> None:
        """Put a schedulable node in the buckets of its free count (_move_node moves it)."""
        group, domain, name = use.node.node_group, use.node.topology, use.name
        bisect.insort(self.free_index.setdefault(group, {}).setdefault(use.free_whole, []), name)
        self.free_total[group] = self.free_total.get(group, 0) + use.free_whole
        if domain:
            index = self.free_in_domain.setdefault((group, domain), {})
            bisect.insort(index.setdefault(use.free_whole, []), name)
            free = self.domain_free.setdefault(group, {})
            free[domain] = free.get(domain, 0) + use.free_whole

    def _index_gpu(self, use: NodeUse, gpu: GpuUse, sign: int) -> None:
        if not use.node.schedulable or gpu.held:
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
        if sign > 0:
            if gpu.mig or gpu.mig_enabled:
                self._index_mig(use, gpu, key)
        else:
            for entries, entry in self._mig_entries.pop(key, ()):
                del entries[bisect.bisect_left(entries, entry)]

    def _index_mig(self, use: NodeUse, gpu: GpuUse, key: GpuKey) -> None:
        group, domain = use.node.node_group, use.node.topology
        entry = (-gpu.busy_instances, key[0], key[1])
        lists: list[tuple[list[PackEntry], PackEntry]] = []
        self._mig_entries[key] = lists

        idle = {i.profile for i, job in gpu.mig.items() if not job}
        by_profile = [(self.idle_mig, profile) for profile in idle]  # (index, profile)
        if not gpu.mig_static:
            if idle:
                entries = self.mig_idle_any.setdefault(group, [])
                bisect.insort(entries, entry)
                lists.append((entries, entry))
            if gpu.mig_enabled:
                by_profile += [(self.mig_room, profile) for profile in self._creatable(use, gpu)]
        for index, profile in by_profile:
            for name in (
                ((group, profile), (group, profile, domain)) if domain else ((group, profile),)
            ):
                entries = index.setdefault(name, [])
                bisect.insort(entries, entry)
                lists.append((entries, entry))

    def _creatable(self, use: NodeUse, gpu: GpuUse) -> tuple[str, ...]:
        """The profiles that could be created on a dynamic MIG GPU with compute slices
        left, worked out once per layout."""
        if gpu.creatable is None:
            model = use.node.gpu_model
            layout = (model, tuple(gpu.mig))
            found = self._creatable_in.get(layout)
            if found is None:
                if model not in self._mig_profiles:
                    self._mig_profiles[model] = tuple(mig_profiles(model))
                used = sum(mig_share(model, i.profile) for i in gpu.mig)
                found = self._creatable_in[layout] = tuple(
                    profile
                    for profile in self._mig_profiles[model]
                    if used < 1 - GPU_EPSILON and use.mig_start(gpu, profile) is not None
                )
            gpu.creatable = found
        return gpu.creatable


def _own(use: NodeUse) -> None:
    """Give the node GPUs of its own, to change (it shared its shape's idle ones)."""
    use.gpus = [_unused(g) for g in use.node.gpus]
    use.own = True


def _unused(gpu: Gpu) -> GpuUse:
    """The use of a GPU nothing holds (its MIG instances idle)."""
    return GpuUse(
        gpu.index,
        gpu.memory_mib,
        gpu.mig_enabled,
        gpu.mig_static,
        gpu.held,
        mig=dict.fromkeys(gpu.mig_instances, "") if gpu.mig_instances else {},
        is_free=not (gpu.mig_enabled or gpu.held),  # _set_free's, as nothing holds it
    )


def _toggle(index: set[GpuKey], key: GpuKey, sign: int) -> None:
    if sign > 0:
        index.add(key)
    else:
        index.discard(key)


def _set_free(gpu: GpuUse) -> None:
    """Work out GpuUse.is_free again whenever a pod changes its use (Usage.__init__ starts
    each GPU free unless MIG or held, as this finds a GPU nothing holds)."""
    gpu.is_free = not (gpu.whole or gpu.mig_enabled or gpu.held) and gpu.used <= GPU_EPSILON


def _apply(gpu: GpuUse, job: str, pod: PodPlacement, sign: int) -> None:
    """Add (sign +1) or remove (-1) one pod's use of one GPU."""
    if pod.mig is not None:
        if pod.mig in gpu.mig:
            gpu.mig[pod.mig] = job if sign > 0 else ""
            gpu.busy_instances += sign
        return  # whether the GPU is free does not depend on its instances
    if pod.fraction:
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
    _set_free(gpu)
