"""A NodeGroup's nodes are the nodes carrying every label of its `nodeSelector`: the one rule
the rendered pods' required node affinity, the scheduler's node groups and the simulated
nodes follow. The nodes here carry only what a real cluster gives them (GPU Feature
Discovery's labels and the labels an admin or a cloud's node pool put on them, as
`testkit.control_plane.nodes` builds them for the real control plane), never a label of ours:
nothing in a cluster would put one there, and the kubelet refuses a pod whose required
affinity its node does not match.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gitops_sched.bridge.build import nodes_from_repo
from gitops_sched.bridge.policy import ClusterPolicy, policy_from_configmap
from gitops_sched.compiler import render_repo
from gitops_sched.config.model import Repo, Workload
from gitops_sched.hardware.gfd import GFD_MEMORY
from gitops_sched.scheduler.snapshot import CycleMemory, build_view
from gitops_sched.validate import check_repo
from testkit.control_plane.nodes import group_nodes

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "clusters"
NAMES = ["netapp-dgx", "oci-a100"]
NOW = 1_700_000_000.0


@cache
def example(name: str) -> tuple[Repo, tuple[dict[str, Any], ...]]:
    repo, diagnostics = check_repo(EXAMPLES / name)
    assert repo is not None and not diagnostics.has_errors, diagnostics
    return repo, tuple(render_repo(repo))


def real_nodes(repo: Repo) -> list[tuple[str, dict[str, Any]]]:
    """(group, Node object) for every node the repo's worker groups expect."""
    return [
        (group.name, obj)
        for group in repo.node_groups
        if group.runs_workloads
        for obj in group_nodes(group)
    ]


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("labels") or {}


def pod_spec(objects: tuple[dict[str, Any], ...], workload: Workload) -> dict[str, Any]:
    (controller,) = [
        o
        for o in objects
        if o["kind"] in ("Job", "Deployment") and o["metadata"]["name"] == workload.name
    ]
    return controller["spec"]["template"]["spec"]


# Kubernetes' rule for a pod's nodeSelector and required node affinity, written out here
# rather than taken from the scheduler, so the two are checked against each other
def kubelet_admits(labels: dict[str, str], spec: dict[str, Any]) -> bool:
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(
        term.get("matchExpressions") and all(matches(labels, e) for e in term["matchExpressions"])
        for term in required["nodeSelectorTerms"]
    )


def matches(labels: dict[str, str], expression: dict[str, Any]) -> bool:
    value, values = labels.get(expression["key"]), expression.get("values") or []
    return {
        "In": value in values,
        "NotIn": value not in values,
        "Exists": value is not None,
        "DoesNotExist": value is None,
    }[expression["operator"]]


@pytest.mark.parametrize("name", NAMES)
def test_a_rendered_pod_runs_on_exactly_the_nodes_of_its_allowed_groups(name: str) -> None:
    repo, objects = example(name)
    nodes = real_nodes(repo)
    assert nodes
    for workload in repo.workloads:
        spec = pod_spec(objects, workload)
        allowed = set(repo.workload_node_group_names(workload))
        admitted = {group for group, obj in nodes if kubelet_admits(labels_of(obj), spec)}
        assert admitted == allowed, workload.name
        for group, obj in nodes:  # every node of an allowed group, not just one
            assert kubelet_admits(labels_of(obj), spec) is (group in allowed)


@pytest.mark.parametrize("name", NAMES)
def test_the_scheduler_finds_each_nodes_group_and_each_jobs_groups_by_selector(
    name: str,
) -> None:
    repo, objects = example(name)
    nodes = real_nodes(repo)
    view = build_view(
        pods(repo, objects), [ready(obj) for _, obj in nodes], policy(objects), NOW, CycleMemory()
    )
    assert {n.name: n.node_group for n in view.snapshot.nodes} == {
        obj["metadata"]["name"]: group for group, obj in nodes
    }
    assert [i.why for i in view.ignored] == []
    by_key = {job.key: job for job in view.snapshot.jobs}
    for workload in repo.workloads:
        key = f"{repo.project_namespace(workload.project)}/{workload.name}"
        assert by_key[key].node_groups == repo.workload_node_group_names(workload), key


@pytest.mark.parametrize("name", NAMES)
def test_simulated_nodes_carry_nothing_a_real_node_lacks(name: str) -> None:
    repo, _ = example(name)
    real = {obj["metadata"]["name"]: labels_of(obj) for _, obj in real_nodes(repo)}
    simulated = {node.name: dict(node.labels) for node in nodes_from_repo(repo)}
    assert simulated.keys() == real.keys()
    for node, labels in simulated.items():
        assert labels.keys() <= real[node].keys(), node
        # the same values, but the memory: a simulated GPU has the memory its group
        # declares (A10: 24Gi), the stand-in NVML's (23028 MiB)
        same = {k: v for k, v in labels.items() if k != GFD_MEMORY}
        assert same.items() <= real[node].items(), node


# --- the cluster's other objects, as the API would list them ---------------------------------


def policy(objects: tuple[dict[str, Any], ...]) -> ClusterPolicy:
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    return policy_from_configmap(config_map)


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    node = copy.deepcopy(obj)
    node.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "True"}]
    return node


def pods(repo: Repo, objects: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """The first pod each workload's Job or Deployment makes, pending."""
    made = []
    for controller in (o for o in objects if o["kind"] in ("Job", "Deployment")):
        template = controller["spec"]["template"]
        name = controller["metadata"]["name"]
        metadata = copy.deepcopy(template["metadata"]) | {
            "name": f"{name}-0",
            "namespace": controller["metadata"]["namespace"],
            "uid": f"uid-{name}-0",
            "creationTimestamp": "2023-11-14T22:00:00Z",
            "ownerReferences": [{"kind": controller["kind"], "uid": f"uid-{name}"}],
        }
        if controller["kind"] == "Job":
            metadata.setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = "0"
        spec = copy.deepcopy(template["spec"])
        made.append({"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}})
    return made
