"""Workloads as the Kubernetes objects that run them.

train -> a Job of `replicas` parallel pods; interactive -> the same with the project's time
limit as `activeDeadlineSeconds`, plus a Service for its ports; inference -> a Deployment
plus a Service. Pods name the gitops-sched scheduler, which places them by quota and fair
share, and carry what it needs as labels and annotations: project, workload, type, gang size,
priority, preemptible, and GPU shares that are not an extended resource.

A train workload of several pods (a gang) also gets a headless Service and `subdomain`, so
its pods resolve each other as `<job>-<rank>.<workload>`, and the rendezvous variables
torchrun reads (MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK and their PET_ forms).

GPU requests: whole GPUs are the device plugin's `nvidia.com/gpu`; a MIG profile is
`nvidia.com/mig-<profile>` (the mixed strategy's resource); a fraction or an amount of GPU
memory is only an annotation, because several pods share one GPU: the scheduler picks the
GPU and the node agent enforces the share.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from gitops_sched.compiler.meta import object_meta, template_meta
from gitops_sched.compiler.priorities import priority_class_name
from gitops_sched.config.model import (
    SHM_MOUNT_PATH,
    SHM_VOLUME,
    Cluster,
    NodeGroup,
    Project,
    Repo,
    Workload,
    port_name,
    port_protocol,
)
from gitops_sched.config.templating import context_for, render_value, time_budget
from gitops_sched.contract.labels import PROJECT_LABEL, TYPE_LABEL, WORKLOAD_LABEL
from gitops_sched.contract.pods import (
    COMPLETION_INDEX,
    FRACTION_POLICY,
    GPU_FRACTION,
    GPU_MEMORY,
    GPU_MEMORY_LIMIT,
    GPU_MEMORY_LIMIT_ENV,
    GPU_RESOURCE,
    GPU_UUID,
    MIG_RESOURCE_PREFIX,
    MIN_AVAILABLE,
    PREEMPTIBLE,
    PRIORITY,
    REPLICAS,
    VISIBLE_DEVICES_ENV,
)

SERVICE_TYPES = ("interactive", "inference")
RENDEZVOUS_PORT = 29500  # torchrun's default
# Retries of a failing job; an eviction (preemption, reclaim) is no failure: see _job.
BACKOFF_LIMIT = 3


# what render_workload is given: cluster, workload, project, node groups, merged pod fields
RenderInputs = tuple[Cluster, Workload, Project, tuple[NodeGroup, ...], dict[str, Any]]


def render_workloads(repo: Repo, skip: Collection[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """Every workload's objects but those of the workloads in `skip` (project, name)."""
    objects: list[dict[str, Any]] = []
    with time_budget():  # the expressions of every workload within one time limit
        for inputs in render_inputs(repo, skip):
            objects += render_workload(*inputs)
    return objects


def render_inputs(repo: Repo, skip: Collection[tuple[str, str]] = ()) -> Iterator[RenderInputs]:
    """What `render_workload` is given for each workload but those in `skip`, in order."""
    projects = {p.name: p for p in repo.projects}
    for workload in repo.workloads:
        if (workload.project, workload.name) in skip:
            continue
        project = projects[workload.project]
        node_groups = tuple(repo.workload_node_groups(workload))
        yield repo.required_cluster, workload, project, node_groups, repo.pod_spec(workload)


def render_workload(
    cluster: Cluster,
    workload: Workload,
    project: Project,
    node_groups: tuple[NodeGroup, ...],
    pod_fields: dict[str, Any],
) -> list[dict[str, Any]]:
    """The Job or Deployment of one workload, and its Service when it has ports to serve:
    a function of its arguments only (see `unchanged`)."""
    spec = render_value(pod_fields, context_for(cluster, project, workload))
    labels = {
        PROJECT_LABEL: project.name,
        WORKLOAD_LABEL: workload.name,
        TYPE_LABEL: workload.type,
    }
    annotations = _pod_annotations(workload, project, spec)
    pod_meta = template_meta(labels, annotations, workload.doc)
    pod_spec = {
        "schedulerName": cluster.scheduler_name,
        "priorityClassName": priority_class_name(workload.type),
        **({"restartPolicy": "Never"} if workload.type != "inference" else {}),
        **_affinity(node_groups),
        **_containers(workload, spec),
    }
    gang = workload.type == "train" and workload.replicas > 1
    if gang:  # pods find each other as <job>-<rank>.<workload>: a headless Service names them
        pod_spec["subdomain"] = workload.name
        _add_rendezvous_env(pod_spec["containers"][0], workload)
    pod = {"metadata": pod_meta, "spec": pod_spec}
    meta = object_meta(
        workload.name, cluster.project_namespace(project.name), labels, source=workload.doc
    )
    if workload.type == "inference":
        objects = [_deployment(workload, meta, pod)]
    else:
        deadline = project.interactive_time_limit_s if workload.type == "interactive" else None
        objects = [_job(workload, meta, pod, deadline)]
    if workload.type in SERVICE_TYPES and spec.get("ports"):
        objects.append(_service(workload, meta, spec["ports"]))
    if gang:
        objects.append(_headless_service(workload, meta))
    return objects


def _add_rendezvous_env(container: dict[str, Any], workload: Workload) -> None:
    """What torchrun (and launchers reading the same names) needs to form the gang: rank 0's
    address and port, the number of pods and this pod's rank (its completion index). The
    user's own variables of the same names win."""
    rank = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}
    ours: dict[str, dict[str, Any]] = {
        "MASTER_ADDR": {"value": f"{workload.name}-0.{workload.name}"},
        "MASTER_PORT": {"value": str(RENDEZVOUS_PORT)},
        "NNODES": {"value": str(workload.replicas)},
        "NODE_RANK": {"valueFrom": rank},
    }
    ours |= {f"PET_{name}": value for name, value in ours.items()}  # torchrun's own names
    env = container.setdefault("env", [])
    taken = {e["name"] for e in env}
    env += [{"name": name, **value} for name, value in sorted(ours.items()) if name not in taken]


def _headless_service(workload: Workload, meta: dict[str, Any]) -> dict[str, Any]:
    """DNS names for a gang's pods (`<job>-<rank>.<workload>`), ready or not: ranks must
    resolve each other before any of them is ready."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {WORKLOAD_LABEL: workload.name},
            "ports": [
                {
                    "name": "rendezvous",
                    "port": RENDEZVOUS_PORT,
                    "targetPort": RENDEZVOUS_PORT,
                    "protocol": "TCP",
                }
            ],
        },
    }


def _pod_annotations(workload: Workload, project: Project, spec: dict[str, Any]) -> dict[str, str]:
    annotations = {
        MIN_AVAILABLE: str(workload.min_available),
        REPLICAS: str(workload.replicas),
        PREEMPTIBLE: "true" if workload.preemptible else "false",
        PRIORITY: str(workload.priority),
    }
    if "gpu" in spec and spec["gpu"] < 1:
        annotations[GPU_FRACTION] = str(float(spec["gpu"]))
    if "gpuMemory" in spec:
        annotations[GPU_MEMORY] = str(spec["gpuMemory"])
    if _shares_a_gpu(spec) and project.fraction_policy:
        annotations[FRACTION_POLICY] = project.fraction_policy
    return annotations


def _affinity(node_groups: tuple[NodeGroup, ...]) -> dict[str, Any]:
    """Required node affinity to the allowed node groups' nodes: one term per group, its
    `nodeSelector` (every label, `In` its one value); terms are ORed, so any allowed group
    will do, and a node of no allowed group (a system node) takes none of the pods."""
    selectors = {tuple(sorted(g.node_selector.items())) for g in node_groups if g.node_selector}
    if not selectors:
        return {}
    terms = [
        {"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in labels]}
        for labels in sorted(selectors)
    ]
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    return {"affinity": {"nodeAffinity": required}}


def _containers(workload: Workload, spec: dict[str, Any]) -> dict[str, Any]:
    """`containers` (one) and `volumes` of the pod spec."""
    container: dict[str, Any] = {"name": workload.name}
    for key in ("image", "command", "args", "workingDir"):
        if key in spec:
            container[key] = spec[key]
    if spec.get("env"):
        container["env"] = [{"name": k, "value": v} for k, v in sorted(spec["env"].items())]
    if _shares_a_gpu(spec):
        _add_shared_gpu_env(container)
    if spec.get("ports"):
        container["ports"] = [
            {
                "name": port_name(p),
                "containerPort": p["containerPort"],
                "protocol": port_protocol(p),
            }
            for p in spec["ports"]
        ]
    resources = _resources(spec)
    if resources:
        container["resources"] = resources
    volumes = [  # a claim the repo renders (`claim`) is named after its volume
        {"name": v["name"], "persistentVolumeClaim": {"claimName": v.get("claimName", v["name"])}}
        for v in spec.get("volumes", [])
    ]
    mounts = [
        {"name": v["name"], "mountPath": v["mountPath"], "readOnly": v.get("readOnly", False)}
        for v in spec.get("volumes", [])
    ]
    if "sharedMemory" in spec:
        shm = {"medium": "Memory", "sizeLimit": str(spec["sharedMemory"])}
        volumes.append({"name": SHM_VOLUME, "emptyDir": shm})
        mounts.append({"name": SHM_VOLUME, "mountPath": SHM_MOUNT_PATH})
    if mounts:
        container["volumeMounts"] = mounts
    return {"containers": [container], **({"volumes": volumes} if volumes else {})}


def _shares_a_gpu(spec: dict[str, Any]) -> bool:
    return "gpuMemory" in spec or 0 < spec.get("gpu", 0) < 1


def _add_shared_gpu_env(container: dict[str, Any]) -> None:
    """A fraction pod asks the device plugin for no GPU: the scheduler writes the UUID of the
    GPU it shares, and its memory share, on the pod before binding it, and the container
    reads them through the downward API. The user's own variables of these names win."""
    ours = {VISIBLE_DEVICES_ENV: GPU_UUID, GPU_MEMORY_LIMIT_ENV: GPU_MEMORY_LIMIT}
    env = container.setdefault("env", [])
    taken = {e["name"] for e in env}
    env += [
        {
            "name": name,
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{annotation}']"}},
        }
        for name, annotation in sorted(ours.items())
        if name not in taken
    ]


def _resources(spec: dict[str, Any]) -> dict[str, Any]:
    """CPU and memory with requests equal to limits; whole GPUs and MIG as extended resources."""
    amounts = {name: str(value) for name, value in spec.get("resources", {}).items()}
    limits = dict(amounts)
    if spec.get("gpu", 0) >= 1:
        limits[GPU_RESOURCE] = int(spec["gpu"])
    if "mig" in spec:
        limits[f"{MIG_RESOURCE_PREFIX}{spec['mig']}"] = 1
    return {**({"requests": amounts} if amounts else {}), **({"limits": limits} if limits else {})}


def _job(
    workload: Workload, meta: dict[str, Any], pod: dict[str, Any], deadline: int | None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "parallelism": workload.replicas,
        "completions": workload.replicas,
        "completionMode": "Indexed",  # each pod gets its rank as JOB_COMPLETION_INDEX
        "backoffLimit": BACKOFF_LIMIT,
    }
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    # an evicted pod goes back to the queue without using up the retries
    spec["podFailurePolicy"] = {
        "rules": [
            {
                "action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            }
        ]
    }
    spec["template"] = pod
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def _deployment(workload: Workload, meta: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": workload.replicas,
            "selector": {"matchLabels": {WORKLOAD_LABEL: workload.name}},
            # no surge: an inference service must stay inside its project's deserved quota
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "template": pod,
        },
    }


def _service(
    workload: Workload, meta: dict[str, Any], ports: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": {WORKLOAD_LABEL: workload.name},
            "ports": [
                {
                    "name": port_name(p),
                    "port": p["containerPort"],
                    "targetPort": p["containerPort"],
                    "protocol": port_protocol(p),
                }
                for p in ports
            ],
        },
    }
