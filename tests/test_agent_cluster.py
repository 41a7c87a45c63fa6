"""The node agent against the API emulator over HTTP, with fake GPUs (and the recorded NVML
driver where an NVML error must come from NVML): inventory published on change, MIG
requests converged and answered, the device plugin restarted, fraction shares enforced,
idle interactive pods marked."""

from __future__ import annotations

import json
from typing import Any

import pynvml
import pytest

from gitops_sched.agent.cgroups import pod_uid_for_pid
from gitops_sched.agent.cluster import NodeApi
from gitops_sched.agent.fake import FakeBackend, FakeGpuSpec
from gitops_sched.agent.inventory import encode_inventory, node_inventory
from gitops_sched.agent.mig import encode_request, request_digest
from gitops_sched.agent.node import DEFAULT_POLICY, AgentPolicy, NodeAgent
from gitops_sched.agent.nvml import NvmlBackend
from gitops_sched.agent.pods import format_time
from gitops_sched.cluster import ObjectRef
from gitops_sched.compiler.contract import (
    FRACTION_POLICY,
    GPU_FRACTION,
    GPU_MEMORY_LIMIT,
    GPU_UUID,
    IDLE_SINCE,
    MIG_STATIC_LABEL,
    NODE_GPUS,
    NODE_MIG_REQUEST,
    NODE_MIG_STATUS,
)
from gitops_sched.compiler.meta import TYPE_LABEL
from gitops_sched.hardware.mig import MigInstance
from tests.kube_emulator import KubeEmulator
from tests.kube_emulator.fixtures import connect
from tests.nvml_driver import RecordedNvml, a100_80gb

GIB = 1024**3
NODE = "gpu-0"
MIG_GPU, PLAIN_GPU = 0, 1  # an A100-80GB in MIG mode, an L40S (48 GB)
T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def node_object(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}}


def pod_object(
    namespace: str,
    name: str,
    node: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox"}
    if limits:
        container["resources"] = {"limits": limits}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {"nodeName": node, "containers": [container]},
    }


class Node:
    """The emulator with this node, a device plugin pod on it and on another node, an agent
    with fake GPUs, and the PIDs of pods' processes."""

    def __init__(self, emulator, backend=None, policy=DEFAULT_POLICY, labels=None):
        self.kube, self.client = emulator
        client = self.client
        for namespace in ("gpu-operator", "team"):
            client.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        client.create(node_object(NODE, labels))
        client.create(node_object("gpu-1"))
        for node in (NODE, "gpu-1"):
            plugin = pod_object(
                "gpu-operator",
                f"nvidia-device-plugin-{node}",
                node,
                labels={"app": "nvidia-device-plugin-daemonset"},
            )
            client.create(plugin)
        self.backend = backend or FakeBackend(
            [FakeGpuSpec("A100-80GB", mig=True), FakeGpuSpec("L40S")], node=NODE
        )
        self.clock = Clock()
        self.lines: list[str] = []
        self.pids: dict[int, str] = {}
        self.api = NodeApi(client, NODE, dry_run=False, say=self.lines.append, clock=self.clock)
        self.agent = NodeAgent(
            self.backend, self.api, policy, pod_of=self.pids.get, clock=self.clock
        )

    def annotations(self, name: str = NODE) -> dict[str, str]:
        node = self.client.get(ObjectRef("v1", "Node", "", name))
        return node["metadata"].get("annotations") or {}

    def request(self, layouts: dict[int, list[MigInstance]]) -> str:
        text = encode_request(layouts)
        self.client.patch(
            ObjectRef("v1", "Node", "", NODE),
            {"metadata": {"annotations": {NODE_MIG_REQUEST: text}}},
        )
        return text

    def status(self) -> dict[str, Any]:
        return json.loads(self.annotations()[NODE_MIG_STATUS])

    def plugin_pods(self) -> list[str]:
        pods = self.client.list("v1", "Pod", namespace="gpu-operator") or []
        return sorted(p["spec"]["nodeName"] for p in pods)

    def layout(self, gpu: int = MIG_GPU) -> list[tuple[str, int]]:
        return [(i.profile, i.start) for i in self.backend.gpus()[gpu].instances]

    def writes(self) -> int:
        return self.kube.api.counts()["write"]

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.client.get(ObjectRef("v1", "Pod", namespace, name))

    def run_pod(self, pod: dict[str, Any], pid: int, gpu: int, used: int, sm_util=0.0) -> str:
        uid = self.client.create(pod)["metadata"]["uid"]
        self.pids[pid] = uid
        self.backend.run_process(gpu, pid, used, sm_util=sm_util)
        return uid

    def events(self) -> list[dict[str, Any]]:
        return self.client.list("v1", "Event", namespace="team") or []


@pytest.fixture
def emulator():
    """The API emulator and a client connected to it."""
    with KubeEmulator() as kube:
        client = connect(kube)
        yield kube, client
        client.close()


@pytest.fixture
def node(emulator):
    return Node(emulator)


# --- inventory -------------------------------------------------------------------------------


def test_the_inventory_is_published_once_and_not_rewritten_while_unchanged(node):
    node.agent.tick()
    published = node.annotations()[NODE_GPUS]
    assert published == encode_inventory(node_inventory(node.backend.gpus()))
    assert [gpu["model"] for gpu in json.loads(published)["gpus"]] == [
        "A100-SXM4-80GB",
        "L40S",
    ]
    before = node.writes()
    node.agent.tick()
    node.backend.run_process(PLAIN_GPU, 7, 3 * GIB)  # memory in use is not in the inventory
    node.agent.tick()
    assert node.writes() == before
    assert node.annotations()[NODE_GPUS] == published


def test_an_inventory_changed_behind_the_agents_back_is_repaired(node):
    node.agent.tick()
    ref = ObjectRef("v1", "Node", "", NODE)
    node.client.patch(ref, {"metadata": {"annotations": {NODE_GPUS: "garbage"}}})
    node.agent.tick()
    assert node.annotations()[NODE_GPUS] == encode_inventory(node_inventory(node.backend.gpus()))


# --- dynamic MIG -----------------------------------------------------------------------------


def test_a_mig_request_creates_the_instances_restarts_the_device_plugin_and_answers_done(node):
    text = node.request({MIG_GPU: [MigInstance("3g.40gb", 4), MigInstance("1g.10gb", 0)]})
    node.agent.tick()
    assert node.layout() == [("1g.10gb", 0), ("3g.40gb", 4)]
    assert node.plugin_pods() == ["gpu-1"]  # this node's plugin pod deleted, for its DaemonSet
    status = node.status()
    assert status["observed"] == request_digest(text)
    assert status["gpus"] == [
        {"index": 0, "state": "done", "message": "created 1g.10gb@0; created 3g.40gb@4"}
    ]
    published = json.loads(node.annotations()[NODE_GPUS])["gpus"][MIG_GPU]["instances"]
    assert [(i["profile"], i["start"], i["computeInstances"]) for i in published] == [
        ("1g.10gb", 0, 1),
        ("3g.40gb", 4, 1),
    ]
    before = node.writes()
    node.agent.tick()  # answered: nothing more to do or write
    assert node.writes() == before


def test_a_new_request_destroys_the_instances_no_longer_wanted(node):
    node.backend.create_instance(MIG_GPU, "7g.80gb", 0)
    node.request({MIG_GPU: [MigInstance("2g.20gb", 0), MigInstance("2g.20gb", 2)]})
    node.agent.tick()
    assert node.layout() == [("2g.20gb", 0), ("2g.20gb", 2)]
    assert node.status()["gpus"][0]["message"] == (
        "destroyed 7g.80gb@0; created 2g.20gb@0; created 2g.20gb@2"
    )


def test_an_instance_in_use_is_not_destroyed_until_its_process_ends(node):
    node.backend.create_instance(MIG_GPU, "1g.10gb", 6)
    node.backend.run_process(MIG_GPU, 4242, 2 * GIB, instance_start=6)
    node.request({MIG_GPU: [MigInstance("3g.40gb", 0)]})
    node.agent.tick()
    assert node.layout() == [("1g.10gb", 6)]  # nothing changed on the GPU, not even the create
    assert node.status()["gpus"] == [
        {"index": 0, "state": "pending", "message": "1g.10gb@6 still in use by a process"}
    ]
    assert node.plugin_pods() == ["gpu-0", "gpu-1"]
    node.agent.tick()
    assert node.status()["gpus"][0]["state"] == "pending"  # tried again, still busy
    node.backend.end_process(4242)
    node.agent.tick()
    assert node.layout() == [("3g.40gb", 0)]
    assert node.status()["gpus"][0]["state"] == "done"
    assert node.plugin_pods() == ["gpu-1"]


@pytest.mark.parametrize(
    "code, name, state",
    [
        (pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, "NVML_ERROR_INSUFFICIENT_RESOURCES", "error"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION", "error"),
        (pynvml.NVML_ERROR_IN_USE, "NVML_ERROR_IN_USE", "pending"),
    ],
)
def test_an_nvml_error_is_reported_by_its_name(emulator, monkeypatch, code, name, state):
    driver = RecordedNvml([a100_80gb("GPU-a100-0")])
    driver.install(monkeypatch)
    node = Node(emulator, backend=NvmlBackend())
    node.backend.create_instance(MIG_GPU, "1g.10gb", 6)
    driver.fail(
        "nvmlGpuInstanceDestroy"
        if state == "pending"
        else "nvmlDeviceCreateGpuInstanceWithPlacement",
        code,
    )
    node.request({MIG_GPU: [MigInstance("3g.40gb", 0)]})
    node.agent.tick()
    [answer] = node.status()["gpus"]
    assert answer["state"] == state and name in answer["message"]
    if state == "error":  # the free instance went first, as asked; the create failed
        assert answer["message"].startswith("destroyed 1g.10gb@6; ")
        assert node.plugin_pods() == ["gpu-1"]  # the layout did change
    else:
        assert node.layout() == [("1g.10gb", 6)]


@pytest.mark.parametrize("how", ["label", "flag"])
def test_a_static_nodes_gpus_are_never_changed(emulator, how):
    if how == "label":
        node = Node(emulator, labels={MIG_STATIC_LABEL: "true"})
    else:
        node = Node(emulator, policy=AgentPolicy(mig_static=True))
    node.backend.create_instance(MIG_GPU, "7g.80gb", 0)
    node.request({MIG_GPU: [MigInstance("1g.10gb", 0)]})
    node.agent.tick()
    assert node.layout() == [("7g.80gb", 0)]
    [answer] = node.status()["gpus"]
    assert answer["state"] == "error" and "static" in answer["message"]
    assert node.plugin_pods() == ["gpu-0", "gpu-1"]


def test_requests_the_agent_cannot_carry_out_are_refused_without_touching_the_gpu(node):
    node.backend.create_instance(MIG_GPU, "1g.10gb", 6)
    node.request(
        {
            MIG_GPU: [
                MigInstance("3g.40gb", 4),
                MigInstance("4g.40gb", 0),
                MigInstance("1g.10gb", 6),
            ],
            PLAIN_GPU: [MigInstance("1g.10gb", 0)],
            5: [],
        }
    )
    node.agent.tick()
    assert node.layout() == [("1g.10gb", 6)]
    messages = {gpu["index"]: (gpu["state"], gpu["message"]) for gpu in node.status()["gpus"]}
    assert messages == {
        0: ("error", "not a valid A100-SXM4-80GB MIG layout: 4g.40gb@0, 3g.40gb@4, 1g.10gb@6"),
        1: ("error", "MIG mode is unsupported on GPU 1"),
        5: ("error", "no GPU 5 on this node"),
    }


def test_an_unreadable_request_is_answered_with_an_error(node):
    ref = ObjectRef("v1", "Node", "", NODE)
    node.client.patch(ref, {"metadata": {"annotations": {NODE_MIG_REQUEST: '{"gpus": 3}'}}})
    node.agent.tick()
    status = node.status()
    assert status["gpus"] == [] and status["error"].startswith("unreadable: ")
    assert status["observed"] == request_digest('{"gpus": 3}')


def test_a_dry_run_prints_each_write_and_changes_nothing(node):
    node.request({MIG_GPU: [MigInstance("1g.10gb", 0)]})
    node.api.dry_run = True
    before = node.writes()
    node.agent.tick()
    assert node.writes() == before
    assert node.layout() == []
    assert NODE_GPUS not in node.annotations()
    assert "would change MIG instances: GPU 0: create 1g.10gb@0" in node.lines
    assert any(line.startswith(f"would annotate node/{NODE} {NODE_GPUS}=") for line in node.lines)
    assert "would delete pod/gpu-operator/nvidia-device-plugin-gpu-0 (device plugin restart)" in (
        node.lines
    )
    printed = len(node.lines)
    node.agent.tick()  # the same writes again: not printed again
    assert len(node.lines) == printed and node.writes() == before


# --- fractions -------------------------------------------------------------------------------


def fraction_pod(node: Node, name: str, gpu: int, share: dict[str, str]) -> dict[str, Any]:
    gpu_uuid = node.backend.gpus()[gpu].uuid
    return pod_object("team", name, NODE, annotations={GPU_UUID: gpu_uuid, **share})


def over_share_events(node: Node) -> list[tuple[str, str, str]]:
    return [
        (e["involvedObject"]["name"], e["type"], e["message"])
        for e in node.events()
        if e["reason"] == "GpuMemoryOverShare"
    ]


@pytest.mark.parametrize("policy", ["warn", "evict"])
def test_a_fraction_pod_over_its_share_gets_one_event_and_under_evict_an_eviction(emulator, policy):
    node = Node(emulator, policy=AgentPolicy(fraction_policy=policy, grace=30))
    share = {GPU_MEMORY_LIMIT: str(10 * 1024)}  # 10 GiB
    node.run_pod(fraction_pod(node, "greedy", PLAIN_GPU, share), 100, PLAIN_GPU, 12 * GIB)
    node.run_pod(fraction_pod(node, "modest", PLAIN_GPU, share), 101, PLAIN_GPU, 9 * GIB)
    node.agent.tick()
    [(name, kind, message)] = over_share_events(node)
    assert (name, kind) == ("greedy", "Warning")
    assert "uses 12.0 GiB" in message and "share of 10.0 GiB" in message
    node.clock.now += 29
    node.agent.tick()
    assert len(over_share_events(node)) == 1  # once per episode
    assert node.pod("team", "greedy") is not None
    node.clock.now += 1
    node.agent.tick()
    assert len(over_share_events(node)) == 1
    evicted = node.pod("team", "greedy") is None or bool(
        node.pod("team", "greedy")["metadata"].get("deletionTimestamp")
    )
    assert evicted == (policy == "evict")
    assert node.pod("team", "modest") is not None


def test_a_projects_fraction_policy_on_the_pod_overrides_the_agents(emulator):
    """The compiler renders the project's `fractionPolicy` on its fraction pods: a project
    that evicts gets evictions on a node whose agent only warns, and the other way round."""
    node = Node(emulator, policy=AgentPolicy(fraction_policy="warn", grace=0))
    share = {GPU_MEMORY_LIMIT: str(10 * 1024)}
    strict = fraction_pod(node, "strict", PLAIN_GPU, {**share, FRACTION_POLICY: "evict"})
    lenient = fraction_pod(node, "lenient", PLAIN_GPU, {**share, FRACTION_POLICY: "warn"})
    node.run_pod(strict, 100, PLAIN_GPU, 12 * GIB)
    node.run_pod(lenient, 101, PLAIN_GPU, 12 * GIB)
    node.agent.tick()
    node.clock.now += 1
    node.agent.tick()
    assert sorted(name for name, _, _ in over_share_events(node)) == ["lenient", "strict"]
    gone = node.pod("team", "strict")
    assert gone is None or gone["metadata"].get("deletionTimestamp")
    assert not node.pod("team", "lenient")["metadata"].get("deletionTimestamp")


def test_a_fraction_share_is_the_fraction_of_the_gpus_memory_without_a_memory_limit(node):
    pod = fraction_pod(node, "half", PLAIN_GPU, {GPU_FRACTION: "0.5"})  # of 48 GB
    node.run_pod(pod, 100, PLAIN_GPU, 20 * GIB)
    node.agent.tick()
    assert over_share_events(node) == []
    node.backend.run_process(PLAIN_GPU, 100, 30 * GIB)
    node.agent.tick()
    [(name, _, _)] = over_share_events(node)
    assert name == "half"


# --- idleness --------------------------------------------------------------------------------


def interactive_pod(name: str, kind: str = "interactive") -> dict[str, Any]:
    return pod_object("team", name, NODE, labels={TYPE_LABEL: kind}, limits={"nvidia.com/gpu": "1"})


def idle_annotation(node: Node, name: str) -> str | None:
    return (node.pod("team", name)["metadata"].get("annotations") or {}).get(IDLE_SINCE)


def test_an_idle_interactive_pod_is_marked_after_the_window_and_unmarked_when_busy(emulator):
    node = Node(emulator, policy=AgentPolicy(idle_window=60))
    node.run_pod(interactive_pod("notebook"), 200, PLAIN_GPU, GIB, sm_util=0)
    node.run_pod(interactive_pod("trainer", kind="train"), 201, PLAIN_GPU, GIB, sm_util=0)
    node.agent.tick()
    node.clock.now += 59
    node.agent.tick()
    assert idle_annotation(node, "notebook") is None
    node.clock.now += 1
    node.agent.tick()
    assert idle_annotation(node, "notebook") == format_time(T0)
    assert idle_annotation(node, "trainer") is None  # only interactive pods are stopped idle
    before = node.writes()
    node.clock.now += 600
    node.agent.tick()
    assert node.writes() == before  # written on the change only
    node.backend.run_process(PLAIN_GPU, 200, GIB, sm_util=40)
    node.agent.tick()
    assert idle_annotation(node, "notebook") is None


def test_a_restarted_agent_keeps_the_published_idle_time(emulator):
    node = Node(emulator, policy=AgentPolicy(idle_window=60))
    node.run_pod(interactive_pod("notebook"), 200, PLAIN_GPU, GIB, sm_util=0)
    node.agent.tick()
    node.clock.now += 60
    node.agent.tick()
    restarted = NodeAgent(
        node.backend, node.api, node.agent.policy, pod_of=node.pids.get, clock=node.clock
    )
    before = node.writes()
    restarted.tick()
    assert idle_annotation(node, "notebook") == format_time(T0)
    assert node.writes() == before


def test_processes_are_mapped_to_pods_through_their_cgroup_in_proc(emulator, tmp_path):
    node = Node(emulator)
    node.agent.pod_of = lambda pid: pod_uid_for_pid(pid, tmp_path)
    pod = fraction_pod(node, "greedy", PLAIN_GPU, {GPU_MEMORY_LIMIT: "1024"})
    uid = node.client.create(pod)["metadata"]["uid"]
    slice_name = f"kubepods-burstable-pod{uid.replace('-', '_')}.slice"
    (tmp_path / "4321").mkdir()
    (tmp_path / "4321" / "cgroup").write_text(
        f"0::/kubepods.slice/kubepods-burstable.slice/{slice_name}/cri-containerd-ab12.scope\n"
    )
    node.backend.run_process(PLAIN_GPU, 4321, 2 * GIB)
    node.backend.run_process(PLAIN_GPU, 999, 30 * GIB)  # not in a pod: nobody's share
    node.agent.tick()
    assert [name for name, _, _ in over_share_events(node)] == ["greedy"]


def test_an_eviction_its_disruption_budget_refuses_is_tried_again_next_tick(emulator):
    node = Node(emulator, policy=AgentPolicy(fraction_policy="evict", grace=0))
    pod = fraction_pod(node, "greedy", PLAIN_GPU, {GPU_MEMORY_LIMIT: "1024"})
    pod["metadata"]["labels"] = {"app": "greedy"}
    node.run_pod(pod, 100, PLAIN_GPU, 2 * GIB)
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    ref = ObjectRef("v1", "Pod", "team", "greedy")
    node.client.patch(ref, {"status": ready}, subresource="status")
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": "team"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "greedy"}}},
    }
    node.client.create(budget)
    node.agent.tick()
    assert node.pod("team", "greedy") is not None
    assert any(line.startswith("eviction of pod/team/greedy failed: 429") for line in node.lines)
    node.client.delete(ObjectRef("policy/v1", "PodDisruptionBudget", "team", "keep"))
    node.agent.tick()
    pod = node.pod("team", "greedy")
    assert pod is None or pod["metadata"].get("deletionTimestamp")
    assert len(over_share_events(node)) == 1
