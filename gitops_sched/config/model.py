"""The typed config model: one frozen dataclass per kind, defaults applied.

Built from documents that already passed the JSON Schema, so builders may trust
types and required fields; semantic checks (config/checks/) and the compiler and engine
work on these objects, and each keeps its `Document` to point back at a line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Any

from gitops_sched.config.document import SIMULATION, Document, Path_
from gitops_sched.hardware.mig import MigInstance
from gitops_sched.quantity import parse_quantity

# Default priorities per workload type, as KAI's priority classes order them:
# inference outranks interactive (build), which outranks train.
DEFAULT_PRIORITY = {"train": 50, "interactive": 100, "inference": 125}
# Types whose workloads are preemptible unless they opt out.
PREEMPTIBLE_TYPES = ("train",)
DEFAULT_NAMESPACE_PREFIX = "project-"


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity ("12000m", "1Gi", 4) as a Decimal; schema checked the form."""
    return parse_quantity(value)


def duration_seconds(value: str | int | None) -> int | None:
    """`90s`, `30m`, `8h`, `2d`, `1h30m` or plain seconds."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    total, number = 0, ""
    for char in value.strip():
        if char.isdigit():
            number += char
        elif char in units and number:
            total += int(number) * units[char]
            number = ""
        else:
            raise ValueError(f"invalid duration {value!r}")
    if number:
        total += int(number)
    return total


@dataclass(frozen=True)
class Resources:
    """GPU (in GPUs, may be fractional), CPU (cores) and memory (bytes); None = unset."""

    gpu: float | None = None
    cpu: Decimal | None = None
    memory: Decimal | None = None

    @staticmethod
    def of(spec: dict | None) -> Resources:
        spec = spec or {}
        return Resources(
            gpu=float(spec["gpu"]) if "gpu" in spec else None,
            cpu=quantity(spec["cpu"]) if "cpu" in spec else None,
            memory=quantity(spec["memory"]) if "memory" in spec else None,
        )


@dataclass(frozen=True)
class MinRuntime:
    """A `minRuntime:` (KAI's preemptMinRuntime / reclaimMinRuntime), seconds; None where
    this level sets none and the one above decides."""

    preempt_s: int | None = None
    reclaim_s: int | None = None

    def over(self, outer: MinRuntime) -> MinRuntime:
        """This level's values, the outer level's where it sets none."""
        return MinRuntime(
            self.preempt_s if self.preempt_s is not None else outer.preempt_s,
            self.reclaim_s if self.reclaim_s is not None else outer.reclaim_s,
        )

    @staticmethod
    def of(spec: dict[str, Any] | None) -> MinRuntime:
        spec = spec or {}
        return MinRuntime(
            duration_seconds(spec.get("preempt")), duration_seconds(spec.get("reclaim"))
        )


@dataclass(frozen=True)
class FairnessSettings:
    """The Cluster's `fairness:` (fairness over time), in seconds; see engine.history."""

    history_weight: float = 1.0
    window_s: int = 86400
    half_life_s: int = 0

    @staticmethod
    def of(spec: dict[str, Any] | None) -> FairnessSettings | None:
        if spec is None:
            return None
        return FairnessSettings(
            history_weight=float(spec.get("historyWeight", 1)),
            window_s=duration_seconds(spec.get("window", "24h")) or 0,
            half_life_s=duration_seconds(spec.get("halfLife")) or 0,
        )


@dataclass(frozen=True)
class SchedulerPolicy:
    cycle_period_s: int = 10
    # A project reclaims only when it is below its fair share by more than this many GPUs.
    reclaim_threshold: float = 0.0
    consolidation: bool = True
    # A gang running fewer than minAvailable pods this long is evicted whole (KAI's default).
    stale_gang_grace_s: int = 60
    # "quota": spare GPUs split by quota (Run:ai default); "equal": equal weights.
    over_quota_weight: str = "quota"
    # Department quotas may add up to more than the cluster has (a warning, not an error).
    allow_oversubscription: bool = False
    min_runtime: MinRuntime = MinRuntime()  # the default of every project
    fairness: FairnessSettings | None = None  # fairness over time; None: not configured


@dataclass(frozen=True)
class Cluster:
    name: str
    kubernetes_version: str
    system_namespace: str
    namespace_prefix: str
    scheduler_name: str
    policy: SchedulerPolicy
    # namespaces (by name) whose pods may reach every project's pods, e.g. the ingress's
    allowed_namespaces: tuple[str, ...]
    doc: Document = field(repr=False, compare=False)

    def project_namespace(self, project: str) -> str:
        """The namespace a project's workloads run in: the cluster's prefix + its name."""
        return self.namespace_prefix + project


@dataclass(frozen=True)
class MigLayout:
    """MIG instances a static node group declares for some GPUs of each of its nodes."""

    gpus: tuple[int, ...] | None  # GPU indexes (`byGpu`); None: every other GPU (`layout`)
    instances: tuple[MigInstance, ...]
    path: Path_  # where the list is written in the NodeGroup, for diagnostics


@dataclass(frozen=True)
class NodeGroup:
    name: str
    role: str  # gpu-worker | cpu-worker | system
    # matchLabels: the group's nodes are the nodes with every one of these labels, and its
    # workloads' pods require them (`nodeLabel`, once a label of ours, is ignored)
    node_selector: dict[str, str]
    node_count: int
    gpus_per_node: int
    gpu_model: str | None
    gpu_memory: Decimal | None  # bytes per GPU
    mig_enabled: bool
    mig_strategy: str  # dynamic | static; what it says matters only when MIG is enabled
    mig_layouts: tuple[MigLayout, ...]  # as written: `layout`, then each `byGpu` entry
    topology_label: str | None
    nodes_per_topology_domain: int | None  # for simulated clusters
    cpu_per_node: Decimal | None
    memory_per_node: Decimal | None
    doc: Document = field(repr=False, compare=False)

    @property
    def gpu_capacity(self) -> int:
        return self.node_count * self.gpus_per_node

    @property
    def mig_static(self) -> bool:
        """A fixed MIG layout the admin declares: the scheduler never creates or destroys
        instances (strategy `dynamic`, the default, leaves that to the scheduler)."""
        return self.mig_enabled and self.mig_strategy == "static"

    def mig_layout(self, gpu: int) -> tuple[MigInstance, ...] | None:
        """The declared instances of GPU `gpu` of each node: its `byGpu` entry (the first
        that names it), else `layout`; None where neither does."""
        own = next((m for m in self.mig_layouts if m.gpus is not None and gpu in m.gpus), None)
        every = next((m for m in self.mig_layouts if m.gpus is None), None)
        chosen = own or every
        return chosen.instances if chosen else None

    @property
    def runs_workloads(self) -> bool:
        """GPU workers, and CPU workers for the workloads that ask no GPU; not system nodes."""
        return self.role != "system"


@dataclass(frozen=True)
class Department:
    name: str
    quota: Resources
    over_quota_weight: float | None  # None: the cluster's default rule
    limit: Resources
    admins: tuple[str, ...]
    min_runtime: MinRuntime  # its projects' default, over the cluster's
    doc: Document = field(repr=False, compare=False)


@dataclass(frozen=True)
class Members:
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Project:
    name: str
    department: str
    quota: Resources  # overall; with node_group_quotas, their sum
    node_group_quotas: dict[str, Resources]
    over_quota_allowed: bool
    over_quota_weight: float | None  # None: the cluster's default rule (its GPU quota)
    over_quota_rank: int  # spare GPUs go to higher ranks first
    limit: Resources
    node_groups: tuple[str, ...]  # allowed node groups; empty = all GPU node groups
    node_groups_by_type: dict[str, tuple[str, ...]]
    interactive_time_limit_s: int | None
    idle_gpu_timeout_s: int | None
    fraction_policy: str | None  # warn | evict; None: the node agent's own setting
    members: Members
    allowed_namespaces: tuple[str, ...]  # may reach its pods, besides the Cluster's list
    min_runtime: MinRuntime  # as written: see Repo.min_runtime for what applies
    doc: Document = field(repr=False, compare=False)

    def allowed_node_groups(self, workload_type: str) -> tuple[str, ...]:
        return self.node_groups_by_type.get(workload_type, self.node_groups)


@dataclass(frozen=True)
class WrittenGpuRequest:
    """A pod's GPU request as the config writes it: whole GPUs, a fraction of one GPU, GPU
    memory, or a MIG profile (the engine's `GpuRequest` is what the bridge makes of it)."""

    gpu: float | None = None  # whole (integer) or fraction in (0, 1)
    gpu_memory: Decimal | None = None  # bytes
    mig: str | None = None


DEFAULT_ACCESS_MODES = ("ReadWriteOnce",)
SHM_VOLUME = "dshm"  # the volume `sharedMemory` adds to a pod for /dev/shm
SHM_MOUNT_PATH = "/dev/shm"


def port_name(port: dict[str, Any]) -> str:
    """A container port's name, or one made from its number and, unless TCP, its protocol
    (a Service of several ports needs names; `port-53` and `port-53-udp` serve DNS on both):
    what the pod and its Service carry, so what must be unique. At most 15 characters
    (`port-65535-sctp`), as Kubernetes allows a port name."""
    if "name" in port:
        return str(port["name"])
    protocol = port_protocol(port)
    suffix = "" if protocol == "TCP" else f"-{protocol.lower()}"
    return f"port-{port['containerPort']}{suffix}"


def port_protocol(port: dict[str, Any]) -> str:
    return port.get("protocol", "TCP")


@dataclass(frozen=True)
class VolumeClaim:
    """A PersistentVolumeClaim that a pod's `volumes` entry asks the repo to render (`claim:`).

    It is named after its volume and lives in the project's namespace, so the workloads of a
    project that declare a volume of one name share one claim (and must agree on its spec).
    """

    name: str
    size: str  # as written ("500Gi"); `same_spec` compares it by value
    storage_class: str | None  # None: the cluster's default StorageClass
    access_modes: tuple[str, ...]

    def same_spec(self, other: VolumeClaim) -> bool:
        return (
            quantity(self.size) == quantity(other.size)
            and self.storage_class == other.storage_class
            and set(self.access_modes) == set(other.access_modes)
        )


def volume_claim(volume: dict[str, Any]) -> VolumeClaim | None:
    """The claim a `volumes` entry declares, or None when it mounts an existing one."""
    claim = volume.get("claim")
    if claim is None:
        return None
    return VolumeClaim(
        name=volume["name"],
        size=str(claim["size"]),
        storage_class=claim.get("storageClass"),
        access_modes=tuple(claim.get("accessModes", DEFAULT_ACCESS_MODES)),
    )


POD_FIELDS = (
    "image",
    "command",
    "args",
    "env",
    "ports",
    "volumes",
    "sharedMemory",
    "resources",
    "workingDir",
    "gpu",
    "gpuMemory",
    "mig",
)
GPU_FIELDS = ("gpu", "gpuMemory", "mig")  # the forms of a GPU request; one replaces another


@dataclass(frozen=True)
class Template:
    name: str
    default: bool
    spec: dict[str, Any]  # the pod fields of POD_FIELDS, raw (Jinja2 expressions unrendered)
    doc: Document = field(repr=False, compare=False)


@dataclass(frozen=True)
class Workload:
    name: str
    project: str
    type: str
    template: str | None
    overrides: dict[str, Any]  # pod fields given on the workload itself
    replicas: int
    min_available: int
    priority: int
    preemptible: bool
    node_group: str | None
    doc: Document = field(repr=False, compare=False)


@dataclass(frozen=True)
class Repo:
    """A whole config repo; lists keep file order, which is also submission order.

    Lookups by name and merged pod fields are indexed on first use: checks and the compiler
    ask for them once or more per workload. The lists are not changed after construction
    (derive a new Repo with `dataclasses.replace` instead); on duplicate names, the first
    object wins, as a scan in file order would find it.
    """

    cluster: Cluster | None
    node_groups: list[NodeGroup]
    departments: list[Department]
    projects: list[Project]
    templates: list[Template]
    workloads: list[Workload]
    # schema-valid Simulation documents: the repo's own tests, run by `gitops-sched test`
    # (their model needs the engine's types: gitops_sched.sim.events reads them)
    simulations: list[Document] = field(default_factory=list)

    def documents(self) -> list[Document]:
        """The documents of the model's objects (its Simulations aside), kind by kind."""
        objects = [self.cluster, *self.node_groups, *self.departments, *self.projects]
        return [o.doc for o in [*objects, *self.templates, *self.workloads] if o is not None]

    def project(self, name: str) -> Project | None:
        return self._projects.get(name)

    def min_runtime(self, project: Project) -> MinRuntime:
        """The minimum runtime that applies to the project's workloads: the project's
        own, else its department's, else the cluster's (one level's preempt and reclaim
        each fall back on their own)."""
        department = _first_by_name(self.departments).get(project.department)
        outer = self.cluster.policy.min_runtime if self.cluster else MinRuntime()
        if department is not None:
            outer = department.min_runtime.over(outer)
        return project.min_runtime.over(outer)

    @property
    def required_cluster(self) -> Cluster:
        """The Cluster of a repo that passed its checks (they require exactly one): what the
        compiler reads."""
        if self.cluster is None:
            raise ValueError("a repo without a Cluster cannot be compiled (validate it first)")
        return self.cluster

    def default_template(self) -> Template | None:
        return self._default_template

    def template(self, name: str | None) -> Template | None:
        return self._templates.get(name) if name else None

    @property
    def gpu_capacity(self) -> int:
        return sum(g.gpu_capacity for g in self.node_groups)

    def project_namespace(self, project: str) -> str:
        """The project's namespace (see Cluster.project_namespace; the default prefix while
        the repo has no Cluster, so checks can still name it)."""
        prefix = self.cluster.namespace_prefix if self.cluster else DEFAULT_NAMESPACE_PREFIX
        return prefix + project

    def workload_node_group_names(self, workload: Workload) -> tuple[str, ...]:
        """The node groups a workload may run on: the one rule the checks, the compiler and
        the engine's input all follow (`node_group_setting` says which setting decided).
        Sorted; a name that matches no group stays (the reference checks report it, and
        nothing runs there). Worked out once per workload: checks, the compiler, the
        bridge and plan's two runs each ask for every workload."""
        entry = self._node_group_names.get(id(workload))
        if entry is None or entry[0] is not workload:  # the id of an object no longer here
            names = tuple(sorted(set(self.node_group_setting(workload)[1])))
            entry = self._node_group_names[id(workload)] = (workload, names)
        return entry[1]

    def node_group_setting(self, workload: Workload) -> tuple[str, tuple[str, ...]]:
        """Which setting decides the workload's node groups, and the names it gives: its own
        `nodeGroup` pin ("nodeGroup"), else its project's non-empty list for its type
        ("byType"), else the project's non-empty list ("allowed"), else every group that
        runs workloads, all but `system` ones ("every")."""
        if workload.node_group:
            return "nodeGroup", (workload.node_group,)
        project = self.project(workload.project)
        if project is not None and (names := project.allowed_node_groups(workload.type)):
            return ("byType" if workload.type in project.node_groups_by_type else "allowed"), names
        return "every", tuple(g.name for g in self.node_groups if g.runs_workloads)

    def workload_node_groups(self, workload: Workload) -> list[NodeGroup]:
        """The defined node groups of `workload_node_group_names`, in file order (a new
        list; the workloads that share names share the lookup)."""
        names = self.workload_node_group_names(workload)
        groups = self._groups_named.get(names)
        if groups is None:
            wanted = set(names)
            groups = self._groups_named[names] = [g for g in self.node_groups if g.name in wanted]
        return list(groups)

    def volume_claims(self, workload: Workload) -> list[tuple[int, VolumeClaim]]:
        """The claims the workload's volumes ask the repo to render, with their index in
        its merged `volumes` (volume names and claims are never Jinja2 expressions)."""
        volumes = self.pod_spec(workload).get("volumes", ())
        claims = [(i, volume_claim(volume)) for i, volume in enumerate(volumes)]
        return [(i, claim) for i, claim in claims if claim is not None]

    def pod_spec(self, workload: Workload) -> dict[str, Any]:
        """The workload's pod fields: default template, then its template, then its own.

        Later layers replace earlier ones field by field; `env` merges by variable name;
        a layer's GPU request replaces the whole earlier one, whatever its form.
        Jinja2 expressions are left as written (the compiler renders them).
        The result is shared between callers: read it, do not change it.
        """
        entry = self._pod_specs.get(id(workload))
        if entry is None or entry[0] is not workload:  # the id of an object no longer here
            entry = self._pod_specs[id(workload)] = (workload, self._merge_pod_spec(workload))
        return entry[1]

    def _merge_pod_spec(self, workload: Workload) -> dict[str, Any]:
        merged = dict(self._template_layers(workload.template))
        _merge_layer(merged, workload.overrides)
        return merged

    def _template_layers(self, name: str | None) -> dict[str, Any]:
        """The default template merged with template `name`: the same for many workloads."""
        if name not in self._template_merges:
            merged: dict[str, Any] = {}
            for template in (self.default_template(), self.template(name)):
                if template is not None:
                    _merge_layer(merged, template.spec)
            self._template_merges[name] = merged
        return self._template_merges[name]

    @cached_property
    def _projects(self) -> dict[str, Project]:
        return _first_by_name(self.projects)

    @cached_property
    def _templates(self) -> dict[str, Template]:
        return _first_by_name(self.templates)

    @cached_property
    def _default_template(self) -> Template | None:
        return next((t for t in self.templates if t.default), None)

    @cached_property
    def _template_merges(self) -> dict[str | None, dict[str, Any]]:
        return {}

    @cached_property
    def _pod_specs(self) -> dict[int, tuple[Workload, dict[str, Any]]]:
        return {}

    @cached_property
    def _node_group_names(self) -> dict[int, tuple[Workload, tuple[str, ...]]]:
        return {}

    @cached_property
    def _groups_named(self) -> dict[tuple[str, ...], list[NodeGroup]]:
        return {}


def _first_by_name(items: list[Any]) -> dict[str, Any]:
    by_name: dict[str, Any] = {}
    for item in items:
        by_name.setdefault(item.name, item)
    return by_name


def _merge_layer(merged: dict[str, Any], layer: dict[str, Any]) -> None:
    """One layer of `Repo.pod_spec` over the ones before it, in place."""
    if any(key in layer for key in GPU_FIELDS):
        for key in GPU_FIELDS:
            merged.pop(key, None)
    for key, value in layer.items():
        if key == "env":
            merged["env"] = {**merged.get("env", {}), **value}
        else:
            merged[key] = value


def gpu_request_of(spec: dict[str, Any]) -> WrittenGpuRequest:
    return WrittenGpuRequest(
        gpu=float(spec["gpu"]) if "gpu" in spec else None,
        gpu_memory=quantity(spec["gpuMemory"]) if "gpuMemory" in spec else None,
        mig=spec.get("mig"),
    )


def build_cluster(doc: Document) -> Cluster:
    spec = doc.data.get("spec", {})
    policy = spec.get("policy", {})
    return Cluster(
        name=doc.name,
        kubernetes_version=str(spec.get("kubernetesVersion", "1.32")),
        system_namespace=spec.get("systemNamespace", "gitops-sched-system"),
        namespace_prefix=spec.get("namespacePrefix", DEFAULT_NAMESPACE_PREFIX),
        scheduler_name=spec.get("schedulerName", "gitops-sched"),
        policy=SchedulerPolicy(
            cycle_period_s=duration_seconds(policy.get("cyclePeriod", "10s")) or 10,
            reclaim_threshold=float(policy.get("reclaimThreshold", 0)),
            consolidation=bool(policy.get("consolidation", True)),
            stale_gang_grace_s=duration_seconds(policy.get("staleGangGrace", "60s")) or 0,
            over_quota_weight=policy.get("defaultOverQuotaWeight", "quota"),
            allow_oversubscription=bool(policy.get("allowOversubscription", False)),
            min_runtime=MinRuntime.of(policy.get("minRuntime")),
            fairness=FairnessSettings.of(policy.get("fairness")),
        ),
        allowed_namespaces=tuple(spec.get("network", {}).get("allowedNamespaces", ())),
        doc=doc,
    )


def build_node_group(doc: Document) -> NodeGroup:
    spec = doc.data.get("spec", {})
    gpu = spec.get("gpu", {})
    mig = spec.get("mig", {})
    topology = spec.get("topology", {})
    return NodeGroup(
        name=doc.name,
        role=spec.get("role", "gpu-worker"),
        node_selector=dict(spec.get("nodeSelector", {}).get("matchLabels", {})),
        node_count=int(spec.get("nodeCount", 0)),
        gpus_per_node=int(spec.get("gpusPerNode", 0)),
        gpu_model=gpu.get("model"),
        gpu_memory=quantity(gpu["memory"]) if "memory" in gpu else None,
        mig_enabled=bool(mig.get("enabled", False)),
        mig_strategy=mig.get("strategy", "dynamic"),
        mig_layouts=_mig_layouts(mig),
        topology_label=topology.get("label"),
        nodes_per_topology_domain=topology.get("nodesPerDomain"),
        cpu_per_node=quantity(spec["cpuPerNode"]) if "cpuPerNode" in spec else None,
        memory_per_node=quantity(spec["memoryPerNode"]) if "memoryPerNode" in spec else None,
        doc=doc,
    )


def _instances(entries: list[dict[str, Any]]) -> tuple[MigInstance, ...]:
    return tuple(MigInstance(entry["profile"], entry["start"]) for entry in entries)


def _mig_layouts(mig: dict[str, Any]) -> tuple[MigLayout, ...]:
    """`mig.layout` (every GPU) and `mig.byGpu` (listed GPUs), in the order written."""
    layouts = []
    if "layout" in mig:
        layouts.append(MigLayout(None, _instances(mig["layout"]), ("spec", "mig", "layout")))
    for i, entry in enumerate(mig.get("byGpu", ())):
        path = ("spec", "mig", "byGpu", i, "layout")
        layouts.append(MigLayout(tuple(entry["gpus"]), _instances(entry["layout"]), path))
    return tuple(layouts)


def build_department(doc: Document) -> Department:
    spec = doc.data.get("spec", {})
    weight = spec.get("overQuotaWeight")
    return Department(
        name=doc.name,
        quota=Resources.of(spec.get("quota")),
        over_quota_weight=float(weight) if weight is not None else None,
        limit=Resources.of(spec.get("limit")),
        admins=tuple(spec.get("admins", ())),
        min_runtime=MinRuntime.of(spec.get("minRuntime")),
        doc=doc,
    )


def build_project(doc: Document) -> Project:
    spec = doc.data.get("spec", {})
    by_group = {g: Resources.of(q) for g, q in spec.get("nodeGroupQuotas", {}).items()}
    quota = Resources.of(spec.get("quota"))
    if by_group and quota.gpu is None:
        quota = Resources(
            gpu=sum(q.gpu or 0 for q in by_group.values()), cpu=quota.cpu, memory=quota.memory
        )
    weight = spec.get("overQuotaWeight")
    members = spec.get("members", {})
    groups = spec.get("nodeGroups", {})
    return Project(
        name=doc.name,
        department=spec.get("department", ""),
        quota=quota,
        node_group_quotas=by_group,
        over_quota_allowed=spec.get("overQuota", "allowed") == "allowed",
        over_quota_weight=float(weight) if weight is not None else None,
        over_quota_rank=int(spec.get("overQuotaRank", 0)),
        limit=Resources.of(spec.get("limit")),
        node_groups=tuple(groups.get("allowed", ())),
        node_groups_by_type={t: tuple(v) for t, v in groups.get("byType", {}).items()},
        interactive_time_limit_s=duration_seconds(spec.get("interactiveTimeLimit")),
        idle_gpu_timeout_s=duration_seconds(spec.get("idleGpuTimeout")),
        fraction_policy=spec.get("fractionPolicy"),
        members=Members(
            users=tuple(members.get("users", ())), groups=tuple(members.get("groups", ()))
        ),
        allowed_namespaces=tuple(spec.get("network", {}).get("allowedNamespaces", ())),
        min_runtime=MinRuntime.of(spec.get("minRuntime")),
        doc=doc,
    )


def build_template(doc: Document) -> Template:
    spec = doc.data.get("spec", {})
    return Template(
        name=doc.name,
        default=bool(spec.get("default", False)),
        spec={k: v for k, v in spec.items() if k in POD_FIELDS},
        doc=doc,
    )


def build_workload(doc: Document) -> Workload:
    spec = doc.data.get("spec", {})
    wtype = spec.get("type", "train")
    replicas = int(spec.get("replicas", 1))
    return Workload(
        name=doc.name,
        project=spec.get("project", ""),
        type=wtype,
        template=spec.get("template"),
        overrides={k: v for k, v in spec.items() if k in POD_FIELDS},
        replicas=replicas,
        min_available=int(spec.get("minAvailable", replicas)),
        priority=int(spec.get("priority", DEFAULT_PRIORITY.get(wtype, 50))),
        preemptible=bool(spec.get("preemptible", wtype in PREEMPTIBLE_TYPES)),
        node_group=spec.get("nodeGroup"),
        doc=doc,
    )


BUILDERS = {
    "Cluster": build_cluster,
    "NodeGroup": build_node_group,
    "Department": build_department,
    "Project": build_project,
    "Template": build_template,
    "Workload": build_workload,
}


def build_repo(documents: list[Document]) -> Repo:
    """The model of schema-valid documents (documents of unknown kinds are skipped)."""
    by_kind: dict[str, list] = {kind: [] for kind in BUILDERS}
    for doc in documents:
        if doc.kind in BUILDERS:
            by_kind[doc.kind].append(BUILDERS[doc.kind](doc))
    clusters = by_kind["Cluster"]
    return Repo(
        cluster=clusters[0] if clusters else None,
        node_groups=by_kind["NodeGroup"],
        departments=by_kind["Department"],
        projects=by_kind["Project"],
        templates=by_kind["Template"],
        workloads=by_kind["Workload"],
        simulations=[doc for doc in documents if doc.kind == SIMULATION],
    )


def over_quota_weight(explicit: float | None, quota: Resources, rule: str) -> float:
    """The explicit weight, else the cluster's rule: "quota" (Run:ai's default) or "equal"."""
    if explicit is not None:
        return explicit
    return 1.0 if rule == "equal" else quota.gpu or 0.0


def queue_ages(queues: Sequence[Department | Project]) -> dict[str, int]:
    """Each queue's age in the repo, the stand-in for the creation time KAI breaks ties
    with: its place among its kind in the order the repo is read (file path, then place
    in the file; the first of a name counts), never its name."""
    ages: dict[str, int] = {}
    for queue in queues:
        ages.setdefault(queue.name, len(ages))
    return ages
