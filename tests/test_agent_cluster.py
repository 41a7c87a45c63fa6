"""The node agent on the real control plane (kube-apiserver, etcd, kube-controller-manager,
kwok), running as its ServiceAccount with the RBAC `scheduler/agent/` ships, with fake GPUs
(and the recorded NVML driver where an NVML error must come from NVML): inventory published
on change, MIG requests converged and answered, the device plugin's pod deleted for a
restart, fraction shares enforced through real Events and the Eviction API (which refuses
while a PodDisruptionBudget, counted by the disruption controller, allows no disruption),
idle interactive pods marked.

The nodes are kwok nodes as GPU Feature Discovery and the device plugin show them; the pods
are bound to them (`spec.nodeName`) and run by kwok; the device plugin's pods are the
stand-in's (`testkit.control_plane.migplugin`). The namespaces and the agent's manifests are
made once for the module (a namespace takes kube-controller-manager over five seconds to
delete); each test starts with no node, pod, Event or budget in them and removes its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pynvml
import pytest

from gitops_sched.agent.cgroups import pod_uid_for_pid
from gitops_sched.agent.cluster import NodeApi
from gitops_sched.agent.fake import FakeBackend, FakeGpuSpec
from gitops_sched.agent.gpus import GpuBackend
from gitops_sched.agent.inventory import node_inventory
from gitops_sched.agent.node import DEFAULT_POLICY, AgentPolicy, NodeAgent
from gitops_sched.agent.nvml import NvmlBackend
from gitops_sched.agent.pods import format_time
from gitops_sched.cluster import ApiFailure, ObjectRef
from gitops_sched.contract.inventory import encode_inventory
from gitops_sched.contract.labels import TYPE_LABEL
from gitops_sched.contract.mig import encode_request, request_digest
from gitops_sched.contract.pods import (
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
from gitops_sched.hardware.mig import MigInstance
from testkit.control_plane.accounts import account_client, install_agent, make_namespace
from testkit.control_plane.client import connect
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.devices import PodLog
from testkit.control_plane.fixtures import wipe
from testkit.control_plane.migplugin import NAMESPACE as PLUGIN_NAMESPACE
from testkit.control_plane.migplugin import MigDevicePlugin
from testkit.control_plane.nodes import gpu_node, settled
from testkit.control_plane.waiting import wait
from tests.nvml_driver import RecordedNvml, a100_80gb

GIB = 1024**3
NODE, OTHER = "gpu-0", "gpu-1"
TEAM = "team"
MIG_GPU, PLAIN_GPU = 0, 1  # an A100-80GB in MIG mode, an L40S (48 GB)
T0 = 1_800_000_000.0
Obj = dict[str, Any]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def pod_object(
    namespace: str,
    name: str,
    node: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
) -> Obj:
    container: Obj = {"name": "main", "image": "busybox"}
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


def this_node(labels: dict[str, str] | None) -> Obj:
    """The agent's node: an A100 in MIG mode (no instances yet) and an L40S, which the device
    plugin's mixed strategy advertises as `nvidia.com/gpu`."""
    node = gpu_node(NODE, "A100-SXM4-80GB", 2, labels=labels, mig_instances={})
    node["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    node["status"]["capacity"]["nvidia.com/gpu"] = "1"
    return node


def phase(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase", ""))


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The session's control plane with the pods' namespaces and the agent's manifests."""
    client = connect(control_plane)
    try:
        for namespace in (PLUGIN_NAMESPACE, TEAM):
            make_namespace(client, namespace)
        install_agent(control_plane)
        yield control_plane
    finally:
        client.close()
        wipe(control_plane)


@pytest.fixture
def cluster(plane: ControlPlane) -> Iterator[Cluster]:
    cluster = Cluster(plane)
    try:
        yield cluster
    finally:
        cluster.clean()


class Cluster:
    """An admin client on the plane; what a test made is removed by `clean()`."""

    def bare(self) -> bool:
        pods = [self.client.list("v1", "Pod", namespace=ns) for ns in (PLUGIN_NAMESPACE, TEAM)]
        return not any(pods) and not self.client.list("v1", "Node")

    def __init__(self, plane: ControlPlane):
        self.plane = plane
        self.client = connect(plane)
        self.closing: list[Callable[[], None]] = [self.client.close]

    def clean(self) -> None:
        """Delete the pods (at once: no kubelet here needs the grace period), Events, budgets
        and nodes the test made, and close its clients."""
        with self.plane.api_client() as api:
            core, policy = kubernetes.client.CoreV1Api(api), kubernetes.client.PolicyV1Api(api)
            for namespace in (PLUGIN_NAMESPACE, TEAM):
                core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            core.delete_collection_namespaced_event(TEAM)
            policy.delete_collection_namespaced_pod_disruption_budget(TEAM)
            for name in (NODE, OTHER):
                try:
                    core.delete_node(name)
                except kubernetes.client.ApiException as exc:
                    if exc.status != 404:
                        raise
        wait("the test's pods and nodes gone", self.bare)
        for close in reversed(self.closing):
            close()


class Node:
    """Node gpu-0 with an agent on fake GPUs (running as the agent's ServiceAccount), node
    gpu-1, the device plugin's pod on each, a log of pod events, and the PIDs of pods'
    processes."""

    def __init__(
        self,
        cluster: Cluster,
        backend: GpuBackend | None = None,
        policy: AgentPolicy = DEFAULT_POLICY,
        labels: dict[str, str] | None = None,
    ):
        self.client = client = cluster.client
        client.create(this_node(labels))
        client.create(gpu_node(OTHER, "L40S", 1))
        # pods only once kwok plays the nodes, as a kubelet exists before its node's pods
        wait("the nodes settled", lambda: all(settled(n) for n in client.list("v1", "Node") or ()))
        self.backend: Any = backend or FakeBackend(
            [FakeGpuSpec("A100-80GB", mig=True), FakeGpuSpec("L40S")], node=NODE
        )
        other_gpus = FakeBackend([FakeGpuSpec("L40S")], node=OTHER)
        for name, gpus in ((NODE, self.backend), (OTHER, other_gpus)):
            MigDevicePlugin(client, name, gpus).start()
        wait("the device plugin's pods running", self.plugins_running)
        self.clock = Clock()
        self.lines: list[str] = []
        self.pids: dict[int, str] = {}
        self.uids: dict[str, str] = {}  # pod name -> uid
        self.agent_client = account_client(cluster.plane)
        cluster.closing.append(self.agent_client.close)
        self.cluster = cluster
        self.log: PodLog | None = None  # started with the first pod
        self.api = NodeApi(
            self.agent_client, NODE, dry_run=False, say=self.lines.append, clock=self.clock
        )
        self.agent = NodeAgent(
            self.backend, self.api, policy, pod_of=self.pids.get, clock=self.clock
        )

    def plugins_running(self) -> bool:
        pods = self.client.list("v1", "Pod", namespace=PLUGIN_NAMESPACE) or []
        return len(pods) == 2 and all(phase(p) == "Running" for p in pods)

    def annotations(self, name: str = NODE) -> dict[str, str]:
        node = self.client.get(ObjectRef("v1", "Node", "", name)) or {}
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
        """The nodes with a device plugin pod not being deleted."""
        pods = self.client.list("v1", "Pod", namespace=PLUGIN_NAMESPACE) or []
        return sorted(
            p["spec"]["nodeName"] for p in pods if not p["metadata"].get("deletionTimestamp")
        )

    def plugin_pod_name(self, node: str = NODE) -> str:
        pods = self.client.list("v1", "Pod", namespace=PLUGIN_NAMESPACE) or []
        (name,) = [p["metadata"]["name"] for p in pods if p["spec"]["nodeName"] == node]
        return str(name)

    def layout(self, gpu: int = MIG_GPU) -> list[tuple[str, int]]:
        return [(i.profile, i.start) for i in self.backend.gpus()[gpu].instances]

    def kwok_done(self) -> bool:
        """Every pod started, none being stopped."""
        pods = [
            p
            for ns in (TEAM, PLUGIN_NAMESPACE)
            for p in self.client.list("v1", "Pod", namespace=ns) or ()
        ]
        return all(
            phase(p) == "Running" and not p["metadata"].get("deletionTimestamp") for p in pods
        )

    def writes(self) -> tuple[int, dict[str, str]]:
        """The write requests the agent sent, and the resourceVersion of everything it could
        write (its node, the pods on it, the device plugin's pods, the Events), once kwok is
        done with the pods: both stay the same while the agent writes nothing."""
        wait("kwok done with the pods", self.kwok_done)
        objects = [self.client.get(ObjectRef("v1", "Node", "", NODE)) or {}]
        for kind, namespace in (("Pod", TEAM), ("Pod", PLUGIN_NAMESPACE), ("Event", TEAM)):
            objects += self.client.list("v1", kind, namespace=namespace) or []
        versions = {
            f"{o.get('kind')}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in objects
        }
        return self.agent_client.requests["write"], versions

    def pod(self, namespace: str, name: str) -> Obj | None:
        return self.client.get(ObjectRef("v1", "Pod", namespace, name))

    def run_pod(self, pod: Obj, pid: int, gpu: int, used: int, sm_util: float = 0.0) -> str:
        """Create the pod, wait until kwok runs it, and start its process on the GPU."""
        if self.log is None:
            self.log = PodLog(connect(self.cluster.plane)).start()
            self.cluster.closing += [self.log.stop, self.log.client.close]
        uid = str(self.client.create(pod)["metadata"]["uid"])
        name = pod["metadata"]["name"]
        self.uids[name] = uid
        wait(f"{name} running", lambda: phase(self.pod(TEAM, name)) == "Running")
        self.pids[pid] = uid
        self.backend.run_process(gpu, pid, used, sm_util=sm_util)
        return uid

    def events(self) -> list[Obj]:
        return self.client.list("v1", "Event", namespace=TEAM) or []

    def evicted(self) -> list[str]:
        """The pods the Eviction API stopped (their DisruptionTarget condition)."""
        assert self.log is not None, "no pod was run"
        return [p["metadata"]["name"] for p in self.log.evicted_pods()]


@pytest.fixture
def node(cluster: Cluster) -> Node:
    return Node(cluster)


def test_the_agent_runs_with_only_what_its_manifests_grant(node):
    """The agent's client holds its ServiceAccount's token: every test here passes with the
    shipped RBAC, which lets it delete pods only in the device plugin's namespace."""
    node.client.create(pod_object(TEAM, "bystander", NODE))
    for forbidden in (
        lambda: node.agent_client.delete(ObjectRef("v1", "Pod", TEAM, "bystander")),
        lambda: node.agent_client.list("v1", "Secret", namespace=TEAM),
    ):
        with pytest.raises(ApiFailure) as refused:
            forbidden()
        assert refused.value.status == 403
    assert node.agent_client.delete(
        ObjectRef("v1", "Pod", PLUGIN_NAMESPACE, node.plugin_pod_name(OTHER))
    )


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
def test_an_nvml_error_is_reported_by_its_name(cluster, monkeypatch, code, name, state):
    driver = RecordedNvml([a100_80gb("GPU-a100-0")])
    driver.install(monkeypatch)
    node = Node(cluster, backend=NvmlBackend())
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
def test_a_static_nodes_gpus_are_never_changed(cluster, how):
    if how == "label":
        node = Node(cluster, labels={MIG_STATIC_LABEL: "true"})
    else:
        node = Node(cluster, policy=AgentPolicy(mig_static=True))
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
        }
    )
    node.agent.tick()
    assert node.layout() == [("1g.10gb", 6)]
    messages = {gpu["index"]: (gpu["state"], gpu["message"]) for gpu in node.status()["gpus"]}
    assert messages == {
        0: ("error", "not a valid A100-SXM4-80GB MIG layout: 4g.40gb@0, 3g.40gb@4, 1g.10gb@6"),
        1: ("error", "MIG mode is unsupported on GPU 1"),
    }


def test_an_unreadable_request_is_answered_with_an_error(node):
    ref = ObjectRef("v1", "Node", "", NODE)
    node.client.patch(ref, {"metadata": {"annotations": {NODE_MIG_REQUEST: '{"gpus": 3}'}}})
    node.agent.tick()
    status = node.status()
    assert status["gpus"] == [] and status["error"].startswith("unreadable: ")
    assert status["observed"] == request_digest('{"gpus": 3}')


GARBAGE = "[" * 5000  # what a neighbour's bug may leave in an annotation


@pytest.mark.parametrize("annotation", [NODE_GPUS, NODE_MIG_REQUEST, NODE_MIG_STATUS])
def test_garbage_in_an_annotation_is_answered_or_repaired_not_a_crash(node, annotation):
    """Not a RecursionError on every tick (a crash loop): the request is answered as
    unreadable, the status and the inventory are written anew."""
    node.request({MIG_GPU: [MigInstance("1g.10gb", 0)]})
    node.agent.tick()
    ref = ObjectRef("v1", "Node", "", NODE)
    node.client.patch(ref, {"metadata": {"annotations": {annotation: GARBAGE}}})
    node.agent.tick()
    annotations = node.annotations()
    assert annotations[NODE_GPUS] == encode_inventory(node_inventory(node.backend.gpus()))
    status = node.status()
    assert status["observed"] == request_digest(annotations[NODE_MIG_REQUEST])
    if annotation == NODE_MIG_REQUEST:
        assert status["gpus"] == []
        assert status["error"] == "unreadable: nested 5000 levels deep, more than 16"
    else:
        assert [gpu["state"] for gpu in status["gpus"]] == ["done"]


def test_a_request_for_gpus_the_node_does_not_have_is_refused_in_a_small_answer(node):
    """A valid request for 6,000 GPUs (179 KB) would be answered GPU by GPU in ~400 KB,
    more than the API server stores in an object's annotations: every tick would fail.
    Refused whole, as one listing a single GPU the node does not have is."""
    text = node.request({index: [] for index in range(6000)})
    assert len(text) > 150_000
    node.agent.tick()
    status = node.status()
    assert status["gpus"] == []
    assert status["error"] == (
        "the request lists GPUs this node does not have: 2, 3, 4 and 5995 more (it has 2)"
    )
    assert node.layout() == []  # nothing touched
    assert len(node.annotations()[NODE_MIG_STATUS]) < 1024
    node.request({MIG_GPU: [MigInstance("1g.10gb", 0)], 5: []})
    node.agent.tick()
    assert node.status()["error"] == "the request lists GPUs this node does not have: 5 (it has 2)"
    assert node.layout() == []


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
    plugin = node.plugin_pod_name()
    assert f"would delete pod/{PLUGIN_NAMESPACE}/{plugin} (device plugin restart)" in node.lines
    assert node.plugin_pods() == [NODE, OTHER]
    printed = len(node.lines)
    node.agent.tick()  # the same writes again: not printed again
    assert len(node.lines) == printed and node.writes() == before


# --- fractions -------------------------------------------------------------------------------


def fraction_pod(node: Node, name: str, gpu: int, share: dict[str, str]) -> Obj:
    gpu_uuid = node.backend.gpus()[gpu].uuid
    return pod_object(TEAM, name, NODE, annotations={GPU_UUID: gpu_uuid, **share})


def over_share_events(node: Node) -> list[tuple[str, str, str]]:
    """(pod, type, message) of the agent's over-share Events, each on its pod (by uid, as
    `kubectl describe pod` finds them) and said by the agent on this node."""
    found = []
    for event in node.events():
        if event["reason"] != "GpuMemoryOverShare":
            continue
        about = event["involvedObject"]
        assert (about["kind"], about["namespace"]) == ("Pod", TEAM)
        assert about["uid"] == node.uids[about["name"]]
        assert event["source"] == {"component": "gitops-sched-agent", "host": NODE}
        found.append((about["name"], event["type"], event["message"]))
    return found


def going(pod: Obj | None) -> bool:
    """Deleted, or being deleted (kwok stops it, then it is gone)."""
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


@pytest.mark.parametrize("policy", ["warn", "evict"])
def test_a_fraction_pod_over_its_share_gets_one_event_and_under_evict_an_eviction(cluster, policy):
    node = Node(cluster, policy=AgentPolicy(fraction_policy=policy, grace=30))
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
    assert node.pod(TEAM, "greedy") is not None
    node.clock.now += 1
    node.agent.tick()
    assert len(over_share_events(node)) == 1
    assert going(node.pod(TEAM, "greedy")) == (policy == "evict")
    if policy == "evict":  # through the Eviction API, not a plain delete
        wait("greedy evicted", lambda: node.evicted() == ["greedy"])
    assert not going(node.pod(TEAM, "modest"))
    assert node.evicted() == (["greedy"] if policy == "evict" else [])


def test_a_projects_fraction_policy_on_the_pod_overrides_the_agents(cluster):
    """The compiler renders the project's `fractionPolicy` on its fraction pods: a project
    that evicts gets evictions on a node whose agent only warns, and the other way round."""
    node = Node(cluster, policy=AgentPolicy(fraction_policy="warn", grace=0))
    share = {GPU_MEMORY_LIMIT: str(10 * 1024)}
    strict = fraction_pod(node, "strict", PLAIN_GPU, {**share, FRACTION_POLICY: "evict"})
    lenient = fraction_pod(node, "lenient", PLAIN_GPU, {**share, FRACTION_POLICY: "warn"})
    node.run_pod(strict, 100, PLAIN_GPU, 12 * GIB)
    node.run_pod(lenient, 101, PLAIN_GPU, 12 * GIB)
    node.agent.tick()
    node.clock.now += 1
    node.agent.tick()
    assert sorted(name for name, _, _ in over_share_events(node)) == ["lenient", "strict"]
    assert going(node.pod(TEAM, "strict"))
    wait("strict evicted", lambda: node.evicted() == ["strict"])
    assert not going(node.pod(TEAM, "lenient"))


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


def interactive_pod(name: str, kind: str = "interactive") -> Obj:
    return pod_object(TEAM, name, NODE, labels={TYPE_LABEL: kind}, limits={"nvidia.com/gpu": "1"})


def idle_annotation(node: Node, name: str) -> str | None:
    pod = node.pod(TEAM, name) or {}
    return (pod["metadata"].get("annotations") or {}).get(IDLE_SINCE)


def test_an_idle_interactive_pod_is_marked_after_the_window_and_unmarked_when_busy(cluster):
    node = Node(cluster, policy=AgentPolicy(idle_window=60))
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


def test_a_restarted_agent_keeps_the_published_idle_time(cluster):
    node = Node(cluster, policy=AgentPolicy(idle_window=60))
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


def test_processes_are_mapped_to_pods_through_their_cgroup_in_proc(cluster, tmp_path):
    node = Node(cluster)
    node.agent.pod_of = lambda pid: pod_uid_for_pid(pid, tmp_path)
    pod = fraction_pod(node, "greedy", PLAIN_GPU, {GPU_MEMORY_LIMIT: "1024"})
    uid = node.client.create(pod)["metadata"]["uid"]
    node.uids["greedy"] = uid
    slice_name = f"kubepods-burstable-pod{uid.replace('-', '_')}.slice"
    (tmp_path / "4321").mkdir()
    (tmp_path / "4321" / "cgroup").write_text(
        f"0::/kubepods.slice/kubepods-burstable.slice/{slice_name}/cri-containerd-ab12.scope\n"
    )
    node.backend.run_process(PLAIN_GPU, 4321, 2 * GIB)
    node.backend.run_process(PLAIN_GPU, 999, 30 * GIB)  # not in a pod: nobody's share
    node.agent.tick()
    assert [name for name, _, _ in over_share_events(node)] == ["greedy"]


def test_an_eviction_its_disruption_budget_refuses_is_tried_again_next_tick(cluster):
    """The disruption controller counts the pod healthy under a budget of minAvailable 1,
    so the Eviction API answers 429; once the budget is gone the next tick evicts."""
    node = Node(cluster, policy=AgentPolicy(fraction_policy="evict", grace=0))
    pod = fraction_pod(node, "greedy", PLAIN_GPU, {GPU_MEMORY_LIMIT: "1024"})
    pod["metadata"]["labels"] = {"app": "greedy"}
    node.run_pod(pod, 100, PLAIN_GPU, 2 * GIB)  # kwok runs it, Ready
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": TEAM},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "greedy"}}},
    }
    created = node.client.create(budget)
    ref = ObjectRef("policy/v1", "PodDisruptionBudget", TEAM, "keep")

    def counted() -> bool:
        status = (node.client.get(ref) or {}).get("status") or {}
        return (
            status.get("observedGeneration") == created["metadata"]["generation"]
            and status.get("currentHealthy") == 1
            and status.get("disruptionsAllowed") == 0
        )

    wait("the disruption controller to count the budget", counted)
    node.agent.tick()
    assert not going(node.pod(TEAM, "greedy"))
    [refused] = [line for line in node.lines if line.startswith("eviction of pod/team/greedy")]
    assert refused.startswith("eviction of pod/team/greedy failed: 429")
    assert "disruption budget" in refused
    node.client.delete(ref)
    node.agent.tick()
    assert going(node.pod(TEAM, "greedy"))
    wait("greedy evicted", lambda: node.evicted() == ["greedy"])
    assert len(over_share_events(node)) == 1
