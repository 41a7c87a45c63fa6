"""kwok GPU nodes as a real cluster shows them: GPU Feature Discovery's labels
(`nvidia.com/gpu.product`, `.count`, `.memory`, MIG capability), the NVIDIA device plugin's
allocatable (`nvidia.com/gpu`, or `nvidia.com/mig-<profile>` under the mixed strategy), and
the labels an admin or a cloud's node pool puts on them (a NodeGroup's `nodeSelector`, a
topology label). Nothing only our test builders would add.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.config.model import NodeGroup, Repo
from gitops_sched.hardware.gfd import gfd_product
from gitops_sched.hardware.gpus import lookup_gpu_model
from testkit.control_plane.waiting import wait


def gpu_node(
    name: str,
    model: str,
    gpus: int,
    *,
    labels: Mapping[str, str] | None = None,
    mig_instances: Mapping[str, int] | None = None,
    cpu: str = "96",
    memory: str = "1Ti",
) -> dict[str, Any]:
    """A Node object as kubelet, GFD and the device plugin leave it; `mig_instances` are the
    MIG devices the device plugin advertises (profile -> count) on MIG-enabled GPUs."""
    known = lookup_gpu_model(model)
    gfd = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": gfd_product(model),
        "nvidia.com/gpu.count": str(gpus),
    }
    if known:
        gfd["nvidia.com/gpu.memory"] = str(known.memory_mib)
        gfd["nvidia.com/mig.capable"] = str(known.mig_capable).lower()
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if mig_instances is None:
        allocatable["nvidia.com/gpu"] = str(gpus)
    else:
        gfd["nvidia.com/mig.strategy"] = "mixed"
        for profile, count in sorted(mig_instances.items()):
            gfd[f"nvidia.com/mig-{profile}.count"] = str(count)
            allocatable[f"nvidia.com/mig-{profile}"] = str(count)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
            | gfd
            | dict(labels or {}),
        },
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


def group_nodes(group: NodeGroup) -> list[dict[str, Any]]:
    """The nodes a NodeGroup expects, `<group>-0` .. `<group>-<count-1>`, carrying the
    labels its selector asks for (an admin's), and a topology domain per `nodesPerDomain`."""
    per_domain = group.nodes_per_topology_domain or group.node_count
    nodes = []
    for i in range(group.node_count):
        labels = dict(group.node_selector)
        if group.topology_label:
            labels[group.topology_label] = f"{group.name}-d{i // per_domain}"
        mig = {} if group.mig_enabled else None
        nodes.append(
            gpu_node(
                f"{group.name}-{i}",
                group.gpu_model,
                group.gpus_per_node,
                labels=labels,
                mig_instances=mig,
            )
            if group.gpus_per_node and group.gpu_model
            else cpu_node(f"{group.name}-{i}", labels)
        )
    return nodes


def cpu_node(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    allocatable = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name} | dict(labels)},
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


def repo_nodes(repo: Repo) -> list[dict[str, Any]]:
    """Every node of every NodeGroup that runs workloads."""
    return [n for g in repo.node_groups if g.runs_workloads for n in group_nodes(g)]


def names(nodes: Iterable[dict[str, Any]]) -> list[str]:
    return [n["metadata"]["name"] for n in nodes]


def settled(node: dict[str, Any]) -> bool:
    """kwok made it Ready, kube-controller-manager's node lifecycle controller took the
    not-ready taint off and its TTL controller annotated it: nobody but the test and the
    product writes it after that."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    return (
        any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        and not node["spec"].get("taints")
        and "node.alpha.kubernetes.io/ttl" in (node["metadata"].get("annotations") or {})
    )


def add_settled(client: ClusterClient, node: dict[str, Any]) -> dict[str, Any]:
    """Create the node and wait until it is `settled`; the node as it then is."""
    client.create(node)
    ref = ObjectRef.of(node)
    return wait(f"{ref} settled", lambda: (live := client.get(ref)) and settled(live) and live)
