"""Live pods and nodes (plain dicts, as the API lists them) -> the engine's snapshot."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.agent.gpus import DeviceGpu as AgentGpu
from gitops_sched.agent.gpus import GpuInstance
from gitops_sched.agent.inventory import node_inventory
from gitops_sched.bridge.build import job_from_workload
from gitops_sched.bridge.policy import ClusterPolicy, policy_from_configmap
from gitops_sched.compiler import render_repo
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.loader import load_repo
from gitops_sched.config.model import Repo, build_repo
from gitops_sched.contract.inventory import encode_inventory
from gitops_sched.contract.labels import PROJECT_LABEL, TYPE_LABEL, WORKLOAD_LABEL
from gitops_sched.contract.pods import (
    GPU_FRACTION,
    GPU_MEMORY,
    GPU_UUID,
    IDLE_SINCE,
    NODE_GPUS,
    NODE_MIG_STATUS,
    PLACEMENT,
    REPLICAS,
    RESERVATION_LABEL,
    RESERVATION_NODE_LABEL,
)
from gitops_sched.engine.codec import pod_to_dict
from gitops_sched.engine.cycle import schedule
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import (
    GpuRequest,
    Node,
    PodPlacement,
    ReleasingPod,
    RequestKind,
)
from gitops_sched.hardware.gpus import MIB
from gitops_sched.hardware.mig import MigInstance, is_valid_layout
from gitops_sched.scheduler.snapshot import CycleMemory, build_view
from gitops_sched.scheduler.view import ClusterView
from tests.conftest import examples

EXAMPLES = Path(__file__).parent.parent / "examples" / "clusters"
NOW = 1_700_000_000.0
# how the dgx1 group finds nodes: GPU Feature Discovery's product label, all a node needs
V100 = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}


@cache
def repo(name: str) -> Repo:
    diagnostics = Diagnostics()
    built = build_repo(load_repo(EXAMPLES / name, diagnostics))
    assert not diagnostics.has_errors
    return built


@cache
def rendered(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(render_repo(repo(name)))


def policy(name: str = "netapp-dgx") -> ClusterPolicy:
    (config_map,) = [o for o in rendered(name) if o["kind"] == "ConfigMap"]
    return policy_from_configmap(config_map)


def time(offset: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(NOW + offset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload_pods(example: str, workload: str, created: float = -100.0) -> list[dict[str, Any]]:
    """The pods the Job (or Deployment) controller makes from a rendered workload."""
    (controller,) = [
        o
        for o in rendered(example)
        if o["kind"] in ("Job", "Deployment") and o["metadata"]["name"] == workload
    ]
    template = controller["spec"]["template"]
    count = controller["spec"].get("parallelism") or controller["spec"]["replicas"]
    pods = []
    for i in range(count):
        metadata = copy.deepcopy(template["metadata"])
        metadata |= {
            "name": f"{workload}-{i}",
            "namespace": controller["metadata"]["namespace"],
            "uid": f"uid-{workload}-{i}",
            "creationTimestamp": time(created + i),
            "ownerReferences": [{"kind": "Job", "uid": f"uid-{workload}", "controller": True}],
        }
        if controller["kind"] == "Job":
            metadata.setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = (
                str(i)
            )
        pods.append(
            {
                "metadata": metadata,
                "spec": copy.deepcopy(template["spec"]),
                "status": {"phase": "Pending"},
            }
        )
    return pods


def all_pods(example: str = "netapp-dgx") -> list[dict[str, Any]]:
    names = [o["metadata"]["name"] for o in rendered(example) if o["kind"] in ("Job", "Deployment")]
    return [pod for name in names for pod in workload_pods(example, name)]


def bind(pod: dict[str, Any], placement: PodPlacement, started: float = -50.0) -> dict[str, Any]:
    pod["spec"]["nodeName"] = placement.node
    pod["metadata"].setdefault("annotations", {})[PLACEMENT] = json.dumps(pod_to_dict(placement))
    pod["status"] = {"phase": "Running", "startTime": time(started)}
    return pod


def node(
    name: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    ready: bool = True,
    cordoned: bool = False,
    allocatable: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": labels or dict(V100),
            "annotations": annotations or {},
        },
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "allocatable": allocatable or {},
        },
    }


def bare_pod(
    name: str,
    namespace: str = "project-team-a",
    scheduler: str = "gitops-sched",
    gpus: int = 0,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    node_name: str = "",
    **spec: Any,
) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": time(-10),
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "resources": resources}],
            **({"nodeName": node_name} if node_name else {}),
            **spec,
        },
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def view_of(
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]] | None = None,
    cluster: ClusterPolicy | None = None,
    memory: CycleMemory | None = None,
    now: float = NOW,
) -> ClusterView:
    nodes = [node("dgx-0"), node("dgx-1")] if nodes is None else nodes
    return build_view(pods, nodes, cluster or policy(), now, memory or CycleMemory())


def job(view: ClusterView, key: str):
    (found,) = [j for j in view.snapshot.jobs if j.key == key]
    return found


def held(node: Node) -> list[int]:
    """The indexes of the node's GPUs held by others."""
    return [g.index for g in node.gpus if g.held]


def why(view: ClusterView, name: str) -> str:
    (found,) = [i.why for i in view.ignored if i.name == name]
    return found


# --- jobs from rendered workloads ------------------------------------------------------------


def test_rendered_workloads_become_the_jobs_simulate_builds() -> None:
    view = view_of(all_pods())
    example = repo("netapp-dgx")
    assert not view.ignored
    assert len(view.snapshot.jobs) == len(example.workloads)
    for workload in example.workloads:
        expected = job_from_workload(example, workload, 0)
        got = job(view, expected.key)
        fields = ("name", "namespace", "project", "type", "priority", "preemptible", "request")
        assert [getattr(got, f) for f in fields] == [getattr(expected, f) for f in fields]
        assert (got.pods, got.min_available, got.node_groups) == (
            expected.pods,
            expected.min_available,
            expected.node_groups,
        )
        assert got.placement == () and got.started_at is None
        assert got.uid == f"uid-{workload.name}"  # the controller's, the same for every pod
    assert view.snapshot.policy == policy().policy


def test_a_gang_with_one_of_two_pods_bound_asks_for_the_other_and_is_short() -> None:
    first, second = workload_pods("netapp-dgx", "resnet50-ddp")
    bind(first, PodPlacement("dgx-0", (0, 1)))
    memory = CycleMemory()
    view = view_of([second, first], memory=memory)
    gang = job(view, "project-team-a/resnet50-ddp")
    assert gang.placement == (PodPlacement("dgx-0", (0, 1), index=0),)
    assert (gang.pods, gang.min_available, gang.missing) == (2, 2, 1)
    assert gang.submitted == NOW - 100 and gang.started_at == NOW - 50
    assert gang.short_since == NOW
    assert [(p.name, p.index, p.node) for p in view.pods[gang.key]] == [
        ("resnet50-ddp-0", 0, "dgx-0"),
        ("resnet50-ddp-1", 1, ""),
    ]
    memory.update(view.snapshot)
    later = view_of([first, second], memory=memory, now=NOW + 30)
    assert job(later, gang.key).short_since == NOW  # kept from the cycle it became short
    bind(second, PodPlacement("dgx-1", (0, 1), index=1))
    memory.update(later.snapshot)
    whole = view_of([first, second], memory=memory, now=NOW + 40)
    assert job(whole, gang.key).short_since is None
    memory.update(whole.snapshot)
    assert memory.short_since == {}


def test_pods_of_one_workload_label_make_one_job_and_a_bare_pod_its_own() -> None:
    labels = {WORKLOAD_LABEL: "sweep", TYPE_LABEL: "train"}
    pods = [
        bare_pod("sweep-b", gpus=1, labels=labels),
        bare_pod("sweep-a", gpus=1, labels=labels),
        bare_pod("alone", gpus=1),
        bare_pod("sweep-c", namespace="project-team-b", gpus=1, labels=labels),
    ]
    view = view_of(pods)
    assert [j.key for j in view.snapshot.jobs] == [
        "project-team-a/alone",
        "project-team-a/sweep",
        "project-team-b/sweep",
    ]
    sweep = job(view, "project-team-a/sweep")
    assert (sweep.pods, sweep.min_available, sweep.project) == (2, 1, "team-a")
    # no completion index: by creation time, then name
    assert [(p.name, p.index) for p in view.pods[sweep.key]] == [("sweep-a", 0), ("sweep-b", 1)]
    alone = job(view, "project-team-a/alone")
    assert (alone.name, alone.pods, alone.type, alone.priority, alone.preemptible) == (
        "alone",
        1,
        "train",
        50,
        True,
    )


def test_replicas_say_how_many_pods_a_job_runs_and_cap_its_gang() -> None:
    annotations = {REPLICAS: "4", "gitops-sched.io/min-available": "8"}
    pods = [bare_pod("p", gpus=1, annotations=annotations, labels={WORKLOAD_LABEL: "w"})]
    one = job(view_of(pods), "project-team-a/w")
    assert (one.pods, one.min_available, one.missing) == (4, 4, 4)


def test_a_bound_pod_keeps_its_index_when_an_earlier_pod_goes() -> None:
    labels = {WORKLOAD_LABEL: "svc", TYPE_LABEL: "inference"}
    late = bind(bare_pod("svc-late", gpus=1, labels=labels), PodPlacement("dgx-0", (3,), index=1))
    early = bare_pod("svc-early", gpus=1, labels=labels)  # pending, created first
    view = view_of([late, early])
    assert [(p.name, p.index) for p in view.pods["project-team-a/svc"]] == [
        ("svc-early", 0),
        ("svc-late", 1),
    ]
    svc = job(view, "project-team-a/svc")
    assert svc.placement == (PodPlacement("dgx-0", (3,), index=1),)
    assert (svc.type, svc.priority, svc.preemptible) == ("inference", 125, False)


def test_priority_and_preemptible_come_from_annotations_then_pod_priority_then_type() -> None:
    pods = [
        bare_pod("annotated", annotations={"gitops-sched.io/priority": "7"}, priority=1000),
        bare_pod("classed", priority=1000, labels={TYPE_LABEL: "interactive"}),
        bare_pod("typed", labels={TYPE_LABEL: "interactive"}),
        bare_pod("opted", annotations={"gitops-sched.io/preemptible": "true"}),
    ]
    view = view_of(pods)
    assert job(view, "project-team-a/annotated").priority == 7
    assert job(view, "project-team-a/classed").priority == 1000
    typed = job(view, "project-team-a/typed")
    assert (typed.priority, typed.preemptible) == (100, False)
    assert job(view, "project-team-a/opted").preemptible


# --- requests --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "resources", "expected"),
    [
        ({GPU_FRACTION: "0.5"}, {}, GpuRequest(RequestKind.FRACTION, fraction=0.5)),
        ({GPU_MEMORY: "10Gi"}, {}, GpuRequest(RequestKind.MEMORY, memory_mib=10240)),
        ({}, {"nvidia.com/gpu": "2"}, GpuRequest(RequestKind.WHOLE, count=2)),
        ({}, {"nvidia.com/mig-1g.10gb": 1}, GpuRequest(RequestKind.MIG, mig_profile="1g.10gb")),
        ({}, {"cpu": "2"}, GpuRequest(RequestKind.NONE)),
    ],
)
def test_each_form_of_gpu_request_is_read(
    annotations: dict[str, str], resources: dict[str, Any], expected: GpuRequest
) -> None:
    pod = bare_pod("p", annotations=annotations)
    pod["spec"]["containers"][0]["resources"] = {"limits": resources}
    assert job(view_of([pod]), "project-team-a/p").request == expected


def test_rendered_fraction_pods_ask_for_their_share() -> None:
    view = view_of(workload_pods("netapp-dgx", "notebook-1"))
    notebook = job(view, "project-team-b/notebook-1")
    assert notebook.request == GpuRequest(RequestKind.FRACTION, fraction=0.6)
    assert notebook.type == "interactive" and not notebook.preemptible


# --- ignored pods ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        (bare_pod("lost", namespace="default"), "namespace 'default' belongs to no project"),
        (bare_pod("half", annotations={GPU_FRACTION: "half"}), "is not a number"),
        (bare_pod("big", annotations={GPU_FRACTION: "1.5"}), "is not in (0, 1]"),
        (bare_pod("mem", annotations={GPU_MEMORY: "lots"}), "is not an amount of memory"),
        (
            bare_pod("both", gpus=1, annotations={GPU_FRACTION: "0.5"}),
            "more than one way: gitops-sched.io/gpu-fraction, nvidia.com/gpu",
        ),
        (bare_pod("other", labels={PROJECT_LABEL: "team-b"}), "labelled for project 'team-b'"),
        (bare_pod("kind", labels={TYPE_LABEL: "batch"}), "unknown workload type 'batch'"),
        (
            bare_pod("placed", gpus=1, node_name="dgx-0", annotations={PLACEMENT: "{not json"}),
            "placement: not JSON",
        ),
        (
            bare_pod(
                "nowhere", gpus=1, node_name="dgx-0", annotations={PLACEMENT: '{"gpus": [9]}'}
            ),
            "placement names GPUs its node does not have",
        ),
        (
            bare_pod("pinned", nodeSelector={"nvidia.com/gpu.product": "H100"}),
            "no node group it may use admits",
        ),
    ],
)
def test_pods_that_cannot_be_read_are_ignored_with_a_reason(
    pod: dict[str, Any], reason: str
) -> None:
    view = view_of([pod])
    assert reason in why(view, pod["metadata"]["name"])
    assert view.ignored[0].bound == bool(pod["spec"].get("nodeName"))
    assert view.snapshot.jobs == ()


def test_an_ignored_bound_pod_still_holds_its_gpus() -> None:
    pod = bare_pod("placed", gpus=3, node_name="dgx-1", annotations={PLACEMENT: "[]"})
    view = view_of([pod])
    assert "expected a JSON object" in why(view, "placed")
    assert view.ignored[0].bound
    dgx1 = view.snapshot.nodes[1]
    assert held(dgx1) == [5, 6, 7]


# --- nodes -----------------------------------------------------------------------------------


def test_gpu_feature_discovery_labels_give_a_node_its_gpus() -> None:
    labels = {**V100, "nvidia.com/gpu.count": "4", "nvidia.com/gpu.memory": "32768"}
    view = view_of(
        [],
        [
            node("gfd", labels),
            node("declared"),
            node("counted", allocatable={"nvidia.com/gpu": "2"}),
        ],
    )
    counted, declared, gfd = view.snapshot.nodes
    assert (gfd.name, gfd.node_group, gfd.gpu_model) == ("gfd", "dgx1", "V100-SXM2-32GB")
    assert [(g.index, g.memory_mib) for g in gfd.gpus] == [(i, 32768) for i in range(4)]
    assert len(counted.gpus) == 2
    assert len(declared.gpus) == 8  # the group's gpusPerNode, its memory as declared
    assert declared.gpus[0].memory_mib == 32 * 1024


def test_the_agents_inventory_wins_over_labels() -> None:
    gpus = [
        AgentGpu(
            i, f"GPU-{i}", "NVIDIA V100-SXM2-32GB", "V100-SXM2-32GB", 16 * 1024 * MIB, 0, "disabled"
        )
        for i in range(2)
    ]
    annotations = {NODE_GPUS: encode_inventory(node_inventory(gpus))}
    labels = {**V100, "nvidia.com/gpu.count": "8"}
    (agent,) = view_of([], [node("agent", labels, annotations)]).snapshot.nodes
    assert [(g.index, g.memory_mib) for g in agent.gpus] == [(0, 16384), (1, 16384)]


GARBAGE = "[" * 5000  # what a neighbour's bug may leave in an annotation


@pytest.mark.parametrize(
    "annotation, value, why",
    [
        (NODE_GPUS, "{not json", f"annotation {NODE_GPUS}: not JSON: "),
        (NODE_GPUS, GARBAGE, f"annotation {NODE_GPUS}: nested 5000 levels deep, more than 16"),
        (NODE_GPUS, '{"gpus": 7}', f"annotation {NODE_GPUS}: not an inventory "),
        (NODE_GPUS, "[" + "0," * 200_000 + "0]", f"annotation {NODE_GPUS}: 400003 bytes, more "),
        (NODE_MIG_STATUS, GARBAGE, f"annotation {NODE_MIG_STATUS}: nested 5000 levels deep"),
    ],
)
def test_a_node_whose_annotations_cannot_be_read_is_skipped_and_the_rest_scheduled(
    annotation: str, value: str, why: str
) -> None:
    """Not the labels' GPUs instead (they may say more than the node has), and no
    RecursionError stopping every node's scheduling: the node is left out, with why."""
    labels = {**V100, "nvidia.com/gpu.count": "8"}
    broken = node("broken", labels, {annotation: value})
    pods = [bare_pod("train", gpus=1)]
    view = view_of(pods, [broken, node("dgx-0")])
    assert [n.name for n in view.snapshot.nodes] == ["dgx-0"]
    (skipped,) = view.skipped
    assert skipped.name == "broken" and skipped.why.startswith(why)
    (bind,) = schedule(view.snapshot).binds
    assert {p.node for p in bind.pods} == {"dgx-0"}


def selector(group: str, example: str = "oci-a100") -> dict[str, str]:
    """The labels a node of the group carries for it (its node pool's, an admin's)."""
    (found,) = [g for g in policy(example).node_groups if g.name == group]
    return dict(found.node_selector)


def oci_node(name: str, group: str, **extra: Any) -> dict[str, Any]:
    return node(name, selector(group), **extra)


def test_mig_nodes_static_layout_declared_dynamic_as_reported() -> None:
    instance = GpuInstance("3g.40gb", 4, 1)
    gpus = [
        AgentGpu(
            0,
            "GPU-0",
            "NVIDIA A100-SXM4-80GB",
            "A100-SXM4-80GB",
            80 * 1024 * MIB,
            0,
            "enabled",
            instances=(instance,),
        )
    ]
    inventory = {NODE_GPUS: encode_inventory(node_inventory(gpus))}
    mig_counts = {
        **selector("a100-mig"),
        "nvidia.com/mig-1g.10gb.count": "3",
        "nvidia.com/mig-3g.40gb.count": "2",
    }
    nodes = [
        oci_node("dyn", "a100-mig", annotations=inventory),
        node("gfd", mig_counts),
        oci_node("serve", "a100-serve", annotations=inventory),
    ]
    dyn, gfd, serve = view_of([], nodes, policy("oci-a100")).snapshot.nodes
    assert dyn.gpus[0].mig_instances == (MigInstance("3g.40gb", 4),)
    assert dyn.gpus[0].mig_enabled and not dyn.gpus[0].mig_static
    assert serve.gpus[0].mig_static
    assert serve.gpus[0].mig_instances == (MigInstance("3g.40gb", 0), MigInstance("3g.40gb", 4))
    laid_out = [i for g in gfd.gpus for i in g.mig_instances]
    assert sorted(i.profile for i in laid_out) == ["1g.10gb"] * 3 + ["3g.40gb"] * 2
    assert all(is_valid_layout(gfd.gpu_model, g.mig_instances) for g in gfd.gpus)


def test_cordoned_and_not_ready_nodes_take_no_new_work() -> None:
    nodes = [node("ok"), node("cordoned", cordoned=True), node("down", ready=False)]
    schedulable = {n.name: n.schedulable for n in view_of([], nodes).snapshot.nodes}
    assert schedulable == {"cordoned": False, "down": False, "ok": True}


def test_nodes_of_no_group_or_a_system_group_are_left_out() -> None:
    nodes = [
        node("sys", {"node-role.kubernetes.io/control-plane": ""}),
        node("stray", {"kubernetes.io/os": "linux"}),
        oci_node("a10-0", "a10"),
    ]
    view = view_of([], nodes, policy("oci-a100"))
    assert [n.name for n in view.snapshot.nodes] == ["a10-0"]
    assert list(view.nodes) == ["a10-0"]


# --- node groups from node selectors and affinity ----------------------------------------------


def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": [{"matchExpressions": term} for term in terms]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


TYPE = "node.kubernetes.io/instance-type"  # how the oci-a100 groups find their nodes
A10, CPU = "BM.GPU.A10.4", "VM.Standard.E5.Flex"


@pytest.mark.parametrize(
    ("spec", "groups"),
    [
        ({}, ("a10", "a100", "a100-mig", "cpu")),  # the project's allowed groups
        (
            {
                "affinity": affinity(  # a100-serve (static MIG) is not the project's
                    [{"key": TYPE, "operator": "In", "values": [A10]}],
                    [{"key": "gpu.example.com/mig", "operator": "In", "values": ["static"]}],
                )
            },
            ("a10",),
        ),
        (
            {"affinity": affinity([{"key": TYPE, "operator": "NotIn", "values": [A10, CPU]}])},
            ("a100", "a100-mig"),
        ),
        (
            {"affinity": affinity([{"key": "gpu.example.com/mig", "operator": "Exists"}])},
            ("a100", "a100-mig"),
        ),
        (
            {"affinity": affinity([{"key": "gpu.example.com/mig", "operator": "DoesNotExist"}])},
            ("a10", "cpu"),
        ),
        (
            {
                "affinity": affinity(
                    [{"key": TYPE, "operator": "In", "values": [CPU]}],
                    [{"key": "gpu.example.com/mig", "operator": "In", "values": ["enabled"]}],
                )
            },
            ("a100-mig", "cpu"),
        ),
        ({"nodeSelector": {"gpu.example.com/mig": "disabled"}}, ("a100",)),
        # no node yet: a group's nodes would carry GPU Feature Discovery's labels too
        ({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A10"}}, ("a10",)),
        ({"nodeSelector": {"nvidia.com/gpu.count": "8"}}, ("a100", "a100-mig")),
    ],
)
def test_node_selector_and_affinity_narrow_the_projects_node_groups(
    spec: dict[str, Any], groups: tuple[str, ...]
) -> None:
    pod = bare_pod("p", namespace="gpu-assistant", **spec)  # assistant: a100, a100-mig, a10, cpu
    assert job(view_of([pod], [], policy("oci-a100")), "gpu-assistant/p").node_groups == groups


def test_a_types_own_node_groups_apply() -> None:
    pod = bare_pod("nb", namespace="gpu-assistant", labels={TYPE_LABEL: "interactive"})
    assert job(view_of([pod], [], policy("oci-a100")), "gpu-assistant/nb").node_groups == ("a10",)


def test_live_nodes_decide_what_a_selector_admits() -> None:
    zoned = oci_node("a10-0", "a10")
    zoned["metadata"]["labels"]["zone"] = "west"
    pod = bare_pod("p", namespace="gpu-assistant", nodeSelector={"zone": "west"})
    assert job(view_of([pod], [zoned], policy("oci-a100")), "gpu-assistant/p").node_groups == (
        "a10",
    )


# --- taints -----------------------------------------------------------------------------------


def tainted(obj: dict[str, Any], *taints: str) -> dict[str, Any]:
    """The node with taints written `key[=value]:Effect`."""
    entries = []
    for text in taints:
        pair, effect = text.rsplit(":", 1)
        key, _, value = pair.partition("=")
        entries.append({"key": key, "effect": effect, **({"value": value} if value else {})})
    obj["spec"]["taints"] = entries
    return obj


def tolerating(pod: dict[str, Any], *tolerations: dict[str, str]) -> dict[str, Any]:
    pod["spec"]["tolerations"] = list(tolerations)
    return pod


def schedulable(view: ClusterView) -> dict[str, bool]:
    return {n.name: n.schedulable for n in view.snapshot.nodes}


def test_a_node_tainted_against_some_pods_of_its_group_takes_no_new_work() -> None:
    nodes = [tainted(node("dgx-0"), "maintenance=true:NoSchedule"), node("dgx-1")]
    wide = bare_pod("wide", gpus=8)
    view = view_of([wide], nodes)
    assert schedulable(view) == {"dgx-0": False, "dgx-1": True}
    assert job(view, "project-team-a/wide").node_groups == ("dgx1",)
    (bind_,) = schedule(view.snapshot).binds
    assert bind_.pods[0].node == "dgx-1"
    # one that tolerates it cannot be told apart from the others: the node stays idle
    allowed = tolerating(bare_pod("ok", gpus=8), {"key": "maintenance", "value": "true"})
    assert schedulable(view_of([wide, allowed], nodes))["dgx-0"] is False


def test_pods_that_tolerate_every_node_of_a_group_use_it_and_the_others_are_told_why() -> None:
    nodes = [tainted(node(f"dgx-{i}"), "dedicated=team-a:NoExecute") for i in range(2)]
    ours = tolerating(bare_pod("ours", gpus=8), {"key": "dedicated", "operator": "Exists"})
    theirs = bare_pod("theirs", namespace="project-team-b", gpus=1)
    view = view_of([ours, theirs], nodes)
    assert schedulable(view) == {"dgx-0": True, "dgx-1": True}
    assert [j.key for j in view.snapshot.jobs] == ["project-team-a/ours"]
    assert why(view, "theirs") == (
        "every node it may use (node groups dgx1) has a taint it does not tolerate: "
        "dedicated=team-a:NoExecute"
    )
    (bind_,) = schedule(view.snapshot).binds
    assert bind_.job == "project-team-a/ours"


def test_gpu_pods_tolerate_the_gpu_taint_and_pods_without_a_gpu_keep_off() -> None:
    gpu_nodes = [
        tainted(
            oci_node("a10-0", "a10"), "nvidia.com/gpu=present:NoSchedule", "soft:PreferNoSchedule"
        ),
        oci_node("cpu-0", "cpu"),
    ]
    fraction = bare_pod("nb", namespace="gpu-assistant", annotations={GPU_FRACTION: "0.5"})
    whole = bare_pod("train", namespace="gpu-assistant", gpus=1)
    cpu = bare_pod("etl", namespace="gpu-assistant")
    view = view_of([fraction, whole, cpu], gpu_nodes, policy("oci-a100"))
    assert schedulable(view) == {"a10-0": True, "cpu-0": True}
    assert "a10" in job(view, "gpu-assistant/nb").node_groups
    assert "a10" in job(view, "gpu-assistant/train").node_groups
    assert "a10" not in job(view, "gpu-assistant/etl").node_groups
    assert "cpu" in job(view, "gpu-assistant/etl").node_groups
    # a NoExecute GPU taint must be tolerated by the pod itself
    strict = [tainted(oci_node("a10-0", "a10"), "nvidia.com/gpu:NoExecute")]
    view = view_of([whole], strict, policy("oci-a100"))
    assert "a10" not in job(view, "gpu-assistant/train").node_groups


def test_a_running_job_on_nodes_tainted_against_it_stays_counted_and_gets_no_more() -> None:
    nodes = [tainted(node(f"dgx-{i}"), "upgrade:NoSchedule") for i in range(2)]
    labels = {WORKLOAD_LABEL: "svc", REPLICAS: "2"}
    running = bind(bare_pod("svc-0", gpus=1, labels=labels), PodPlacement("dgx-0", (0,)))
    view = view_of([running, bare_pod("svc-1", gpus=1, labels=labels)], nodes)
    svc = job(view, "project-team-a/svc")
    assert svc.placement == (PodPlacement("dgx-0", (0,)),) and svc.missing == 1
    assert not view.ignored
    assert schedulable(view) == {"dgx-0": False, "dgx-1": False}
    assert schedule(view.snapshot).binds == ()


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"operator": "Exists"}, True),  # every taint
        ({"key": "k", "operator": "Exists"}, True),
        ({"key": "k", "value": "v"}, True),
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "value": "w"}, False),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_tolerations_match_taints_as_kubernetes_matches_them(
    toleration: dict[str, str], tolerated: bool
) -> None:
    nodes = [tainted(node("dgx-0"), "k=v:NoSchedule")]
    view = view_of([tolerating(bare_pod("p", gpus=1), toleration)], nodes)
    assert bool(view.snapshot.jobs) is tolerated


# --- GPUs held by others -----------------------------------------------------------------------


def test_another_schedulers_pod_takes_gpus_our_pods_do_not_use() -> None:
    ours = bind(bare_pod("ours", gpus=1), PodPlacement("dgx-0", (7,)))
    theirs = bare_pod(
        "theirs", namespace="default", scheduler="default-scheduler", gpus=2, node_name="dgx-0"
    )
    done = bare_pod(
        "done", namespace="default", scheduler="default-scheduler", gpus=8, node_name="dgx-1"
    )
    done["status"]["phase"] = "Succeeded"
    view = view_of([ours, theirs, done])
    dgx0, dgx1 = view.snapshot.nodes
    assert len(dgx0.gpus) == 8
    assert held(dgx0) == [5, 6]  # the highest ours do not use, below GPU 7
    assert held(dgx1) == []
    assert not view.ignored
    # the engine places nothing on them: 5 GPUs are left on dgx-0, 8 on dgx-1
    wide = bare_pod("wide", gpus=6, annotations={"gitops-sched.io/priority": "1"})
    decisions = schedule(view_of([ours, theirs, wide], [node("dgx-0")]).snapshot)
    assert decisions.binds == ()
    fits = bare_pod("fits", gpus=5)
    (bind_,) = schedule(view_of([ours, theirs, fits], [node("dgx-0")]).snapshot).binds
    assert set(bind_.pods[0].gpus) == {0, 1, 2, 3, 4}


def test_held_gpus_keep_their_indexes_and_are_not_split_by_fair_share() -> None:
    theirs = bare_pod("theirs", namespace="default", scheduler="other", gpus=3, node_name="dgx-0")
    view = view_of([theirs, bare_pod("ours", gpus=5)], [node("dgx-0")])
    (dgx0,) = view.snapshot.nodes
    assert [g.index for g in dgx0.gpus] == list(range(8))
    assert held(dgx0) == [5, 6, 7]
    assert Session(view.snapshot).capacity == 5  # what fair share splits, not the node's 8
    (bind_,) = schedule(view.snapshot).binds
    assert bind_.pods[0].gpus == (0, 1, 2, 3, 4)


def test_our_pod_bound_by_someone_else_holds_its_gpus() -> None:
    pod = bare_pod("bypass", gpus=2, node_name="dgx-1")  # ours, no placement annotation
    view = view_of([pod])
    assert view.snapshot.jobs == () and not view.ignored
    assert held(view.snapshot.nodes[1]) == [6, 7]


def test_terminating_pods_release_their_gpus() -> None:
    going, pending = workload_pods("netapp-dgx", "resnet50-ddp")
    bind(going, PodPlacement("dgx-0", (0, 1)))
    going["metadata"]["deletionTimestamp"] = time(0)
    gone = copy.deepcopy(pending)
    gone["metadata"] |= {"name": "old", "deletionTimestamp": time(0)}  # never bound
    view = view_of([going, pending, gone])
    assert view.snapshot.releasing == (
        ReleasingPod("project-team-a/resnet50-ddp", "team-a", PodPlacement("dgx-0", (0, 1))),
    )
    gang = job(view, "project-team-a/resnet50-ddp")
    assert gang.placement == () and gang.missing == 2
    refs = [(p.name, p.index, p.terminating) for p in view.pods[gang.key]]
    assert refs == [("resnet50-ddp-0", 0, True), ("resnet50-ddp-1", 1, False)]
    assert held(view.snapshot.nodes[0]) == []  # held by a releasing pod of ours, not others


def test_another_schedulers_mig_pod_takes_an_instance_ours_do_not_use() -> None:
    instances = (GpuInstance("3g.40gb", 0, 1), GpuInstance("3g.40gb", 4, 2))
    gpus = [
        AgentGpu(
            0,
            "GPU-0",
            "NVIDIA A100-SXM4-80GB",
            "A100-SXM4-80GB",
            80 * 1024 * MIB,
            0,
            "enabled",
            instances=instances,
        )
    ]
    inventory = {NODE_GPUS: encode_inventory(node_inventory(gpus))}
    ours = bare_pod("ours", namespace="gpu-sandbox")
    ours["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-3g.40gb": 1}}
    bind(ours, PodPlacement("mig-0", (0,), mig=MigInstance("3g.40gb", 0)))
    theirs = bare_pod("theirs", namespace="default", scheduler="other", node_name="mig-0")
    theirs["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-3g.40gb": "1"}}
    view = view_of(
        [ours, theirs], [oci_node("mig-0", "a100-mig", annotations=inventory)], policy("oci-a100")
    )
    (gpu,) = view.snapshot.nodes[0].gpus
    assert gpu.mig_instances == (MigInstance("3g.40gb", 0),)  # theirs at 4 is gone
    assert gpu.mig_static  # nothing is created over theirs
    assert job(view, "gpu-sandbox/ours").placement[0].mig == MigInstance("3g.40gb", 0)


def reservation(
    name: str, node_name: str, gpu: int, uuid: str = "", bound: bool = True
) -> dict[str, Any]:
    labels = {RESERVATION_LABEL: str(gpu), RESERVATION_NODE_LABEL: node_name}
    annotations = {GPU_UUID: uuid} if uuid else {}
    return bare_pod(
        name,
        namespace="gitops-sched-system",
        gpus=1,
        node_name=node_name if bound else "",
        labels=labels,
        annotations=annotations,
    )


def test_reservations_are_listed_and_a_deleted_one_holds_its_gpu_until_it_goes() -> None:
    notebook = workload_pods("netapp-dgx", "notebook-1")[0]
    bind(notebook, PodPlacement("dgx-0", (2,), fraction=0.6))
    going = reservation("r-c", "dgx-0", 6, "GPU-ccc")
    going["metadata"]["deletionTimestamp"] = time(0)
    shared = reservation("r-a", "dgx-0", 2, "GPU-aaa")
    shared["metadata"]["deletionTimestamp"] = time(0)  # its fraction pod still there
    pods = [notebook, shared, reservation("r-b", "dgx-0", 5), going]
    pods.append(reservation("r-d", "dgx-1", 1, bound=False))
    view = view_of(pods)
    assert [(r.name, r.node, r.gpu, r.uuid, r.bound, r.terminating) for r in view.reservations] == [
        ("r-a", "dgx-0", 2, "GPU-aaa", True, True),
        ("r-b", "dgx-0", 5, "", True, False),
        ("r-c", "dgx-0", 6, "GPU-ccc", True, True),
        ("r-d", "dgx-1", 1, "", False, False),
    ]
    dgx0, dgx1 = view.snapshot.nodes
    assert held(dgx0) == [6]  # only the one going, unused
    assert held(dgx1) == []
    assert not view.ignored  # reservation pods are no project's pods
    assert job(view, "project-team-b/notebook-1").placement[0].fraction == 0.6


# --- order -------------------------------------------------------------------------------------


def mixed_pods() -> list[dict[str, Any]]:
    pods = all_pods()
    by_name = {p["metadata"]["name"]: p for p in pods}
    bind(by_name["resnet50-ddp-0"], PodPlacement("dgx-0", (0, 1)))
    bind(by_name["notebook-1-0"], PodPlacement("dgx-1", (0,), fraction=0.6))
    by_name["b-train-2-0"]["metadata"]["annotations"][IDLE_SINCE] = time(-5)
    return [
        *pods,
        reservation("r", "dgx-1", 0),
        bare_pod("theirs", namespace="default", scheduler="other", gpus=1, node_name="dgx-1"),
        bare_pod("lost", namespace="default"),
        bare_pod("sweep-1", labels={WORKLOAD_LABEL: "sweep"}),
        bare_pod("sweep-2", labels={WORKLOAD_LABEL: "sweep"}),
    ]


NODES = [
    node("dgx-0"),
    tainted(node("dgx-1"), "maintenance:NoSchedule"),
    node("dgx-2", cordoned=True),
]


@cache
def in_order() -> ClusterView:
    return view_of(mixed_pods(), NODES)


@settings(max_examples=examples(25))
@given(st.permutations(mixed_pods()), st.permutations(NODES))
def test_the_same_objects_in_any_order_give_the_same_view(
    pods: list[dict[str, Any]], nodes: list[dict[str, Any]]
) -> None:
    view = view_of(pods, nodes)
    assert view == in_order()
    assert view.snapshot.releasing == () and len(view.ignored) == 1  # the pod of no project
