"""One versioned encoding of the engine's input: a `Snapshot` as plain JSON-able data.

Whatever writes or reads engine state as data goes through here, so there is one shape
for each part: the Simulation file's `running:` pods and `simulate --format json` share
`pod_to_dict` / `pod_from_dict`; a whole snapshot (what a benchmark or the in-cluster
scheduler saves and loads) is `snapshot_to_dict` / `snapshot_from_dict`:

    {"version": 1, "now": 120.0,
     "policy": {"reclaimThreshold": 0.0, "consolidation": true, "staleGangGraceSeconds": 60.0,
                "departments": [QUEUE], "projects": [QUEUE]},
     "nodes": [{"name": "dgx-0", "nodeGroup": "dgx", "model": "H100-SXM5-80GB",
                "topology": null, "schedulable": true, "labels": {},
                "gpus": [{"index": 0, "memoryMiB": 81920, "migEnabled": false,
                          "migStatic": false, "held": false,
                          "mig": [{"profile": "3g.40gb", "start": 0}]}]}],
     "jobs": [{"name": "train", "namespace": "team-a", "project": "team-a", "type": "train",
               "priority": 50, "preemptible": true, "request": {"kind": "whole", "count": 2},
               "pods": 2, "minAvailable": 2, "submitted": 0, "placement": [POD],
               "startedAt": 0.0}],
     "releasing": [{"job": "team-a/old", "project": "team-a", "pod": POD}]}

    POD   = {"node": "dgx-0", "gpus": [0, 1], "fraction": null, "mig": null, "index": 0}
    QUEUE = {"name": "team-a", "deserved": 4.0, "overQuotaWeight": 4.0,
             "overQuotaAllowed": true, "overQuotaRank": 0, "limit": null, "parent": "research",
             "interactiveTimeLimitSeconds": null, "idleTimeoutSeconds": null,
             "preemptMinRuntimeSeconds": 0.0, "reclaimMinRuntimeSeconds": 0.0, "age": 0.0,
             "nodeGroupQuotas": {}}   # GPUs per node group, where the project gives them

Keys are camelCase, as in the config repo and the JSON report. Pods, nodes and queues
have the same keys whatever their values (null where a value is unset), so outputs diff
cleanly; jobs, the bulk of a live cluster's snapshot, leave out what is unset (namespace,
uid, nodeGroups, placement, startedAt, idleSince, shortSince, and a request's fields other
than those its kind sets), as Kubernetes objects do, which keeps a 40,000-job snapshot
quick to load. Floats are written exactly (JSON keeps Python's shortest repr), so a
snapshot survives `json.dumps`/`json.loads` unchanged:
`snapshot_from_dict(snapshot_to_dict(s)) == s`.

The readers take the engine's defaults for keys that are left out (a hand-written pod
may give only its node and GPUs). `snapshot_from_dict` refuses any other `version` than
the one it reads, and says where a malformed snapshot went wrong (`jobs[3].request: ...`).
Pure and standard-library only: no I/O, no third-party imports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, TypeVar

from gitops_sched.engine.types import (
    STALE_GANG_GRACE_S,
    Fairness,
    Gpu,
    GpuRequest,
    Job,
    Node,
    PodPlacement,
    Policy,
    QueueSpec,
    ReleasingPod,
    RequestKind,
    Snapshot,
    UsageHistory,
)
from gitops_sched.hardware.mig import MigInstance

VERSION = 1  # bump on any change a version-1 reader could misread; add readers, keep old ones

T = TypeVar("T")


class SnapshotFormatError(ValueError):
    """The data is not a snapshot this version of gitops-sched can read."""


def _or_none(value: Any) -> Any:
    """Unset values (0, 0.0, "") as null."""
    return value or None


# --- pods ----------------------------------------------------------------------------------


def mig_instance_to_dict(instance: MigInstance) -> dict[str, Any]:
    return {"profile": instance.profile, "start": instance.start}


def mig_instance_from_dict(data: dict[str, Any]) -> MigInstance:
    return MigInstance(data["profile"], data["start"])


def pod_to_dict(pod: PodPlacement) -> dict[str, Any]:
    """Where one pod runs: the shape of a Simulation file's `running:` pods and of the
    pods `simulate --format json` prints."""
    return {
        "node": pod.node,
        "gpus": list(pod.gpus),
        "fraction": _or_none(pod.fraction),  # exact, not rounded: placements round-trip
        "mig": mig_instance_to_dict(pod.mig) if pod.mig else None,
        "index": pod.index,
    }


def pod_from_dict(data: dict[str, Any], index: int = 0) -> PodPlacement:
    """A pod placement; `index` is used where the data gives none (a hand-written pod)."""
    mig = data.get("mig")
    at = data.get("index")
    return PodPlacement(
        node=data["node"],
        gpus=tuple(data.get("gpus") or ()),
        fraction=data.get("fraction") or 0.0,
        mig=mig_instance_from_dict(mig) if mig else None,
        index=index if at is None else at,
    )


def releasing_to_dict(releasing: ReleasingPod) -> dict[str, Any]:
    return {"job": releasing.job, "project": releasing.project, "pod": pod_to_dict(releasing.pod)}


def releasing_from_dict(data: dict[str, Any]) -> ReleasingPod:
    return ReleasingPod(data["job"], data["project"], pod_from_dict(data["pod"]))


# --- jobs ----------------------------------------------------------------------------------


def request_to_dict(request: GpuRequest) -> dict[str, Any]:
    """The kind and the fields it sets: `{"kind": "whole", "count": 2}`."""
    data = {
        "kind": request.kind.value,
        "count": request.count,
        "fraction": request.fraction,
        "memoryMiB": request.memory_mib,
        "migProfile": request.mig_profile,
    }
    return {key: value for key, value in data.items() if value}


def request_from_dict(data: dict[str, Any]) -> GpuRequest:
    return _request(
        data["kind"],
        data.get("count") or 0,
        data.get("fraction") or 0.0,
        data.get("memoryMiB") or 0,
        data.get("migProfile") or "",
    )


@lru_cache(maxsize=4096)
def _request(kind: str, count: int, fraction: float, memory_mib: int, mig: str) -> GpuRequest:
    """Jobs share a few request shapes: one frozen object each (and a faster load)."""
    return GpuRequest(RequestKind(kind), count, fraction, memory_mib, mig)


def job_to_dict(job: Job) -> dict[str, Any]:
    """A job; what is unset is left out (no namespace or UID, not running, no times)."""
    data = {
        "name": job.name,
        "namespace": job.namespace,
        "uid": job.uid,
        "project": job.project,
        "type": job.type,
        "priority": job.priority,
        "preemptible": job.preemptible,
        "request": request_to_dict(job.request),
        "pods": job.pods,
        "minAvailable": job.min_available,
        "nodeGroups": list(job.node_groups),
        "submitted": job.submitted,
        "placement": [pod_to_dict(pod) for pod in job.placement],
        "startedAt": job.started_at,
        "idleSince": job.idle_since,
        "shortSince": job.short_since,
    }
    return {
        key: value
        for key, value in data.items()
        if key not in _JOB_OPTIONAL or value not in (None, "", [])  # a time of 0.0 is set
    }


# what a job's data leaves out when unset; a reader takes the engine's defaults for them
_JOB_OPTIONAL = frozenset(
    ("namespace", "uid", "nodeGroups", "placement", "startedAt", "idleSince", "shortSince")
)


def job_from_dict(data: dict[str, Any]) -> Job:
    return Job(
        name=data["name"],
        namespace=data.get("namespace") or "",
        uid=data.get("uid") or "",
        project=data["project"],
        type=data["type"],
        priority=data["priority"],
        preemptible=data["preemptible"],
        request=request_from_dict(data["request"]),
        pods=data.get("pods", 1),
        min_available=data.get("minAvailable", 1),
        node_groups=tuple(data.get("nodeGroups") or ()),
        submitted=data.get("submitted", 0),
        placement=tuple(pod_from_dict(pod, i) for i, pod in enumerate(data.get("placement") or ())),
        started_at=data.get("startedAt"),
        idle_since=data.get("idleSince"),
        short_since=data.get("shortSince"),
    )


# --- nodes ---------------------------------------------------------------------------------


def gpu_to_dict(gpu: Gpu) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "memoryMiB": gpu.memory_mib,
        "migEnabled": gpu.mig_enabled,
        "migStatic": gpu.mig_static,
        "held": gpu.held,
        "reserved": gpu.reserved,
        "mig": [mig_instance_to_dict(instance) for instance in gpu.mig_instances],
    }


def gpu_from_dict(data: dict[str, Any]) -> Gpu:
    return Gpu(
        index=data["index"],
        memory_mib=data["memoryMiB"],
        mig_enabled=data.get("migEnabled", False),
        mig_instances=tuple(mig_instance_from_dict(i) for i in data.get("mig") or ()),
        mig_static=data.get("migStatic", False),
        held=data.get("held", False),
        reserved=data.get("reserved", False),
    )


def node_to_dict(node: Node) -> dict[str, Any]:
    return {
        "name": node.name,
        "nodeGroup": node.node_group,
        "model": node.gpu_model,
        "topology": _or_none(node.topology),
        "schedulable": node.schedulable,
        "labels": dict(node.labels),
        "gpus": [gpu_to_dict(gpu) for gpu in node.gpus],
    }


def node_from_dict(data: dict[str, Any]) -> Node:
    return Node(
        name=data["name"],
        node_group=data.get("nodeGroup") or "",
        gpu_model=data["model"],
        gpus=tuple(gpu_from_dict(gpu) for gpu in data["gpus"]),
        topology=data.get("topology") or "",
        schedulable=data.get("schedulable", True),
        labels=tuple((data.get("labels") or {}).items()),
    )


# --- policy --------------------------------------------------------------------------------


def queue_to_dict(queue: QueueSpec) -> dict[str, Any]:
    return {
        "name": queue.name,
        "deserved": queue.deserved,
        "overQuotaWeight": queue.over_quota_weight,
        "overQuotaAllowed": queue.over_quota_allowed,
        "overQuotaRank": queue.over_quota_rank,
        "limit": queue.limit,
        "parent": _or_none(queue.parent),
        "interactiveTimeLimitSeconds": queue.interactive_time_limit_s,
        "idleTimeoutSeconds": queue.idle_timeout_s,
        "preemptMinRuntimeSeconds": queue.preempt_min_runtime_s,
        "reclaimMinRuntimeSeconds": queue.reclaim_min_runtime_s,
        "age": queue.age,
        "nodeGroupQuotas": dict(queue.pool_quotas),
    }


def queue_from_dict(data: dict[str, Any]) -> QueueSpec:
    return QueueSpec(
        name=data["name"],
        deserved=data["deserved"],
        over_quota_weight=data["overQuotaWeight"],
        over_quota_allowed=data.get("overQuotaAllowed", True),
        over_quota_rank=data.get("overQuotaRank", 0),
        limit=data.get("limit"),
        parent=data.get("parent") or "",
        interactive_time_limit_s=data.get("interactiveTimeLimitSeconds"),
        idle_timeout_s=data.get("idleTimeoutSeconds"),
        preempt_min_runtime_s=data.get("preemptMinRuntimeSeconds", 0.0),
        reclaim_min_runtime_s=data.get("reclaimMinRuntimeSeconds", 0.0),
        age=data.get("age", 0.0),
        pool_quotas=tuple(sorted((data.get("nodeGroupQuotas") or {}).items())),
    )


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    data = {
        "reclaimThreshold": policy.reclaim_threshold,
        "consolidation": policy.consolidation,
        "staleGangGraceSeconds": policy.stale_gang_grace_s,
        "departments": [queue_to_dict(queue) for queue in policy.departments],
        "projects": [queue_to_dict(queue) for queue in policy.projects],
    }
    if policy.fairness is not None:  # left out unset: older snapshots read the same
        data["fairness"] = fairness_to_dict(policy.fairness)
    return data


def fairness_to_dict(fairness: Fairness) -> dict[str, Any]:
    return {
        "historyWeight": fairness.history_weight,
        "windowSeconds": fairness.window_s,
        "halfLifeSeconds": fairness.half_life_s,
    }


def fairness_from_dict(data: dict[str, Any]) -> Fairness:
    default = Fairness()
    return Fairness(
        history_weight=data.get("historyWeight", default.history_weight),
        window_s=data.get("windowSeconds", default.window_s),
        half_life_s=data.get("halfLifeSeconds", default.half_life_s),
    )


def history_to_dict(history: UsageHistory) -> dict[str, Any]:
    """Past usage by project: [[bucket start, GPU-seconds], ...] oldest first; a project's
    usage in one node group (per-group quotas) under `project/group` (names hold no '/')."""
    return {
        **{name: [[start, used] for start, used in buckets] for name, buckets in history.projects},
        **{
            f"{project}/{group}": [[start, used] for start, used in buckets]
            for (project, group), buckets in history.node_groups
        },
    }


def history_from_dict(data: dict[str, Any]) -> UsageHistory:
    def buckets(pairs: Any) -> tuple[tuple[float, float], ...]:
        return tuple((float(start), float(used)) for start, used in pairs)

    projects, groups = [], []
    for name, pairs in sorted(data.items()):
        project, _, group = str(name).partition("/")
        if group:
            groups.append(((project, group), buckets(pairs)))
        else:
            projects.append((project, buckets(pairs)))
    return UsageHistory(tuple(projects), tuple(groups))


def policy_from_dict(data: dict[str, Any]) -> Policy:
    return Policy(
        departments=_each(data.get("departments") or (), queue_from_dict, "departments"),
        projects=_each(data.get("projects") or (), queue_from_dict, "projects"),
        reclaim_threshold=data.get("reclaimThreshold", 0.0),
        consolidation=data.get("consolidation", True),
        stale_gang_grace_s=data.get("staleGangGraceSeconds", STALE_GANG_GRACE_S),
        fairness=_part(data["fairness"], fairness_from_dict, "fairness")
        if data.get("fairness") is not None
        else None,
    )


# --- the snapshot --------------------------------------------------------------------------


def snapshot_to_dict(snapshot: Snapshot) -> dict[str, Any]:
    """The snapshot as JSON-able data, with this codec's `version`."""
    return {
        "version": VERSION,
        "now": snapshot.now,
        "policy": policy_to_dict(snapshot.policy),
        "nodes": [node_to_dict(node) for node in snapshot.nodes],
        "jobs": [job_to_dict(job) for job in snapshot.jobs],
        "releasing": [releasing_to_dict(pod) for pod in snapshot.releasing],
        **(
            {"history": history_to_dict(snapshot.history)}
            if history_to_dict(snapshot.history)
            else {}
        ),
    }


def snapshot_from_dict(data: dict[str, Any]) -> Snapshot:
    """The snapshot `snapshot_to_dict` wrote; SnapshotFormatError (a ValueError) when the
    data is of another version or malformed, saying where."""
    if not isinstance(data, dict):
        raise SnapshotFormatError(f"a snapshot is a mapping, not {type(data).__name__}")
    version = data.get("version")
    if version != VERSION:
        found = "no `version`" if version is None else f"version {version!r}"
        raise SnapshotFormatError(
            f"snapshot has {found}; this gitops-sched reads snapshot version {VERSION}"
        )
    policy = _part(data.get("policy"), policy_from_dict, "policy")
    return Snapshot(
        policy=policy,
        nodes=_each(data.get("nodes") or (), node_from_dict, "nodes"),
        jobs=_each(data.get("jobs") or (), job_from_dict, "jobs"),
        now=data.get("now", 0.0),
        releasing=_each(data.get("releasing") or (), releasing_from_dict, "releasing"),
        history=_part(data.get("history") or {}, history_from_dict, "history"),
    )


def _each(items: Iterable[Any], read: Callable[[Any], T], where: str) -> tuple[T, ...]:
    return tuple(_part(item, read, f"{where}[{i}]") for i, item in enumerate(items))


def _part(data: Any, read: Callable[[Any], T], where: str) -> T:
    """One part read, a failure reported with the path to it."""
    if not isinstance(data, dict):
        raise SnapshotFormatError(f"{where}: expected a mapping, not {type(data).__name__}")
    try:
        return read(data)
    except SnapshotFormatError as error:
        raise SnapshotFormatError(f"{where}.{error}") from None
    except KeyError as error:
        raise SnapshotFormatError(f"{where}: missing key {error}") from None
    except (TypeError, ValueError, AttributeError) as error:
        raise SnapshotFormatError(f"{where}: {error}") from None
