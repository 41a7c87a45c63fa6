"""The engine's decisions carried out on the real control plane (kube-apiserver, etcd,
kube-controller-manager, kwok playing the kubelets): binds, gangs, evictions and
PodDisruptionBudgets, GPU reservation pods for fractions, MIG requests, queue status and
pending reasons, and a dry run that writes nothing.

The views are built by hand from the cluster's objects (`view`), so each test states the
situation it pins; the decisions are what the engine would say about it. The requests the
scheduler's client sends are counted as the server got them, through a fault proxy that
injects no fault (`Sent`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from click.testing import CliRunner

from gitops_sched.bridge.policy import ClusterPolicy
from gitops_sched.cli import main
from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.compiler import render_repo
from gitops_sched.compiler.crds import STATUS_FIELDS
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.loader import load_repo
from gitops_sched.config.model import build_repo
from gitops_sched.contract.labels import API_VERSION
from gitops_sched.contract.mig import request_digest
from gitops_sched.contract.pods import (
    GPU_FRACTION,
    GPU_MEMORY_LIMIT,
    GPU_UUID,
    NODE_MIG_REQUEST,
    NODE_MIG_STATUS,
    PLACEMENT,
    RESERVATION_LABEL,
    RESERVATION_NODE_LABEL,
)
from gitops_sched.engine.types import (
    Bind,
    Decisions,
    Evict,
    EvictReason,
    Fairness,
    Gpu,
    GpuRequest,
    Job,
    MigChange,
    Node,
    PodPlacement,
    Policy,
    QueueSpec,
    QueueStatus,
    RequestKind,
    Snapshot,
    UsageHistory,
)
from gitops_sched.hardware.mig import MigInstance
from gitops_sched.scheduler.actuate import Actuator
from gitops_sched.scheduler.loop import Scheduler, Settings
from gitops_sched.scheduler.reservations import reservation_name, reservation_pod
from gitops_sched.scheduler.reserve import publish
from gitops_sched.scheduler.status import COMPONENT, StatusWriter
from gitops_sched.scheduler.usage import UsageKeeper, usage_status
from gitops_sched.scheduler.view import ClusterView, Ignored, PodRef, Reservation
from testkit.control_plane.accounts import (
    RESERVATION,
    account_client,
    account_configuration,
    account_kubeconfig,
    make_namespace,
)
from testkit.control_plane.accounts import SCHEDULER as SCHEDULER_ACCOUNT
from testkit.control_plane.client import FAST_BACKOFF
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.faultproxy import FaultProxy
from testkit.control_plane.install import apply_kustomization
from testkit.control_plane.nodes import add_settled, gpu_node
from testkit.control_plane.waiting import wait

NS = "team-a"
TEAM_A = "project-team-a"  # the example repos' namespace of project team-a
EXAMPLES = Path(__file__).parent.parent / "examples" / "clusters"
SYSTEM = "gitops-sched-system"
SCHEDULER = "gitops-sched"
MODEL = "A100-SXM4-80GB"
MEMORY_MIB = 81920
QUEUES = Policy(
    departments=(QueueSpec("research", 8, 1),),
    projects=(QueueSpec("team-a", 8, 1, parent="research"),),
)
POLICY = ClusterPolicy(
    policy=QUEUES,
    cluster="lab",
    scheduler_name=SCHEDULER,
    system_namespace=SYSTEM,
    cycle_period_s=1.0,
    projects={},
    namespaces={NS: "team-a"},
    node_groups=(),
)


# --- the cluster ------------------------------------------------------------------------


def engine_node(name: str, mig: tuple[MigInstance, ...] = ()) -> Node:
    gpus = tuple(Gpu(i, MEMORY_MIB, bool(mig), mig if i == 0 else ()) for i in range(2))
    return Node(name, "dgx", MODEL, gpus)


def add_pods(client: ClusterClient, job: str, count: int, start: int = 0) -> None:
    for index in range(start, start + count):
        client.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{job}-{index}", "namespace": NS, "labels": {"job": job}},
                "spec": {
                    "schedulerName": SCHEDULER,
                    "containers": [{"name": "main", "image": "pytorch:2.3"}],
                },
            }
        )


class Sent:
    """The requests the scheduler's client sent since `reset()`, as the API server got them
    (method, path, query), read from the proxy they pass through."""

    def __init__(self, proxy: FaultProxy):
        self.proxy, self.start = proxy, 0

    def reset(self) -> None:
        self.start = len(self.proxy.seen)

    def requests(self) -> list[tuple[str, str, str]]:
        out = []
        for line in self.proxy.seen[self.start :]:
            method, target = line.split(" ", 1)
            path, _, query = target.partition("?")
            out.append((method, path, query))
        return out

    def writes(self) -> list[tuple[str, str]]:
        return [(method, path) for method, path, _ in self.requests() if method != "GET"]

    def count(self, method: str) -> int:
        return sum(m == method for m, _, _ in self.requests())


@pytest.fixture
def proxy(real_cluster: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy(real_cluster.server, real_cluster.root / "ca.crt") as p:
        yield p


@pytest.fixture
def sent(proxy: FaultProxy) -> Sent:
    return Sent(proxy)


@pytest.fixture
def client(real_cluster: ControlPlane, proxy: FaultProxy) -> Iterator[ClusterClient]:
    """A client of the real control plane whose requests `sent` sees."""
    made = ClusterClient(
        proxy.configuration(real_cluster.configuration()), backoff=FAST_BACKOFF, timeout=30.0
    )
    yield made
    made.close()


@pytest.fixture
def installed(real_cluster: ControlPlane) -> None:
    """The scheduler's shipped manifests (`kubectl apply -k scheduler/`, its Deployment
    aside): its namespace, its ServiceAccount and the reservation pods', their RBAC."""
    apply_kustomization(real_cluster, "scheduler")


@pytest.fixture
def scheduler_client(
    real_cluster: ControlPlane, proxy: FaultProxy, installed: None
) -> Iterator[ClusterClient]:
    """The scheduler's own client: its ServiceAccount's token, through the proxy (what
    `sent` counts)."""
    configuration = account_configuration(real_cluster, *SCHEDULER_ACCOUNT)
    made = ClusterClient(proxy.configuration(configuration), backoff=FAST_BACKOFF, timeout=30.0)
    yield made
    made.close()


@pytest.fixture
def reservation_client(real_cluster: ControlPlane, installed: None) -> Iterator[ClusterClient]:
    """What a reservation pod's `gitops-sched reserve` runs as: its ServiceAccount."""
    made = account_client(real_cluster, *RESERVATION)
    yield made
    made.close()


@pytest.fixture
def cluster(client: ClusterClient, installed: None) -> ClusterClient:
    """The client, on a cluster with the scheduler installed, the project's namespace and
    one node of two GPUs, Ready."""
    make_namespace(client, NS)
    add_settled(client, gpu_node("node-a", MODEL, 2))
    return client


def job(name: str, request: GpuRequest, pods: int = 1, **kw: Any) -> Job:
    return Job(name, "team-a", "train", 50, True, request, pods, pods, namespace=NS, **kw)


WHOLE = GpuRequest(RequestKind.WHOLE, count=1)
HALF = GpuRequest(RequestKind.FRACTION, fraction=0.5)
MIG_1G = GpuRequest(RequestKind.MIG, mig_profile="1g.10gb")


def view(
    client: ClusterClient,
    jobs: list[Job],
    nodes: tuple[Node, ...] | None = None,
    releasing: tuple = (),
    ignored: tuple[Ignored, ...] = (),
) -> ClusterView:
    """What the snapshot would make of the emulator's objects: each job's pods (named
    `<job>-<index>`), the reservation pods and the nodes."""
    pods = client.list("v1", "Pod", namespace=NS) or []
    by_name = {p["metadata"]["name"]: p for p in pods}
    refs: dict[str, tuple[PodRef, ...]] = {}
    for j in jobs:
        live = [(i, by_name.get(f"{j.name}-{i}")) for i in range(j.pods)]
        refs[j.key] = tuple(_ref(pod, i) for i, pod in live if pod is not None)
    reservations = tuple(
        Reservation(
            SYSTEM,
            pod["metadata"]["name"],
            pod["spec"].get("nodeName") or pod["metadata"]["labels"][RESERVATION_NODE_LABEL],
            int(pod["metadata"]["labels"][RESERVATION_LABEL]),
            (pod["metadata"].get("annotations") or {}).get(GPU_UUID, ""),
            bool(pod["spec"].get("nodeName")),
            bool(pod["metadata"].get("deletionTimestamp")),
        )
        for pod in client.list("v1", "Pod", label_selector=RESERVATION_LABEL, namespace=SYSTEM)
        or []
    )
    snapshot = Snapshot(QUEUES, nodes or (engine_node("node-a"),), tuple(jobs), releasing=releasing)
    node_objects = {n["metadata"]["name"]: n for n in client.list("v1", "Node") or []}
    return ClusterView(snapshot, refs, node_objects, reservations, ignored)


def _ref(pod: dict[str, Any], index: int) -> PodRef:
    meta = pod["metadata"]
    return PodRef(
        NS,
        meta["name"],
        meta["uid"],
        index,
        pod["spec"].get("nodeName") or "",
        bool(meta.get("deletionTimestamp")),
        tuple(sorted((meta.get("annotations") or {}).items())),
    )


def live_pod(client: ClusterClient, name: str, namespace: str = NS) -> dict[str, Any] | None:
    return client.get(ObjectRef("v1", "Pod", namespace, name))


def gone_or_terminating(client: ClusterClient, name: str, namespace: str = NS) -> bool:
    """Deleted with its grace period: kwok stops a deleted pod and it goes within moments."""
    pod = live_pod(client, name, namespace)
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


def hold(client: ClusterClient, name: str, namespace: str = NS) -> None:
    """A finalizer of someone else's on the pod: once deleted, it stays terminating (as a
    pod whose containers take their time to stop does) until the finalizer goes."""
    patch = {"metadata": {"finalizers": ["example.com/hold"]}}
    client.patch(ObjectRef("v1", "Pod", namespace, name), patch)


def gone(client: ClusterClient, namespace: str, name: str | None = None) -> None:
    """Wait until the deleted pod (every deleted pod in `namespace`) is gone: kwok stops it."""

    def done() -> bool:
        pods = client.list("v1", "Pod", namespace=namespace) or []
        return not [
            p
            for p in pods
            if p["metadata"].get("deletionTimestamp") and name in (None, p["metadata"]["name"])
        ]

    wait(f"the deleted pods of {namespace} gone", done)


def placed(node: str, gpus: tuple[int, ...], index: int, **kw: Any) -> PodPlacement:
    return PodPlacement(node, gpus, index=index, **kw)


# --- binds ------------------------------------------------------------------------------


def test_a_gang_is_bound_with_its_placement_annotations_in_one_request_a_pod(
    sent, cluster, scheduler_client
):
    train = job("train", WHOLE, pods=2)
    add_pods(cluster, "train", 2)
    pods = (placed("node-a", (0,), 0), placed("node-a", (1,), 1))
    sent.reset()

    outcome = Actuator(scheduler_client, POLICY).carry_out(
        view(cluster, [train]), Decisions(binds=(Bind(train.key, pods),))
    )

    assert len(outcome.bound) == 2 and not outcome.errors
    assert outcome.bound_by_kind[RequestKind.WHOLE] == 2
    for index in (0, 1):
        pod = live_pod(cluster, f"train-{index}")
        assert pod["spec"]["nodeName"] == "node-a"
        placement = json.loads(pod["metadata"]["annotations"][PLACEMENT])
        assert placement == {
            "node": "node-a",
            "gpus": [index],
            "fraction": None,
            "mig": None,
            "index": index,
        }
    base = f"/api/v1/namespaces/{NS}/pods"
    # the Binding carries the annotations: the server writes both at once, never one alone
    assert sent.writes() == [("POST", f"{base}/train-{index}/binding") for index in (0, 1)]


def test_a_gang_with_a_pod_missing_binds_none(sent, cluster, scheduler_client):
    train = job("train", WHOLE, pods=4)
    add_pods(cluster, "train", 3)  # pod 3 is not created yet
    pods = tuple(placed("node-a", (i % 2,), i) for i in range(4))
    sent.reset()

    outcome = Actuator(scheduler_client, POLICY).carry_out(
        view(cluster, [train]), Decisions(binds=(Bind(train.key, pods),))
    )

    assert outcome.bound == [] and outcome.waiting == 4
    assert "pod 3 of the gang is missing" in outcome.waiting_reasons[train.key]
    assert sent.writes() == []


def test_a_pipelined_bind_waits_for_its_victims(sent, cluster, scheduler_client):
    train = job("train", WHOLE)
    add_pods(cluster, "train", 1)
    bind = Bind(train.key, (placed("node-a", (0,), 0),), waits_for=("team-b/old",))
    sent.reset()

    outcome = Actuator(scheduler_client, POLICY).carry_out(
        view(cluster, [train]), Decisions(binds=(bind,))
    )

    assert outcome.bound == [] and outcome.waiting == 1
    assert (
        outcome.waiting_reasons[train.key] == "waiting for the pods of team-b/old to leave its GPUs"
    )
    assert sent.writes() == []
    assert "nodeName" not in live_pod(cluster, "train-0")["spec"]


def test_a_pod_bound_meanwhile_is_a_conflict_not_retried(sent, cluster, scheduler_client):
    train = job("train", WHOLE)
    add_pods(cluster, "train", 1)
    stale = view(cluster, [train])  # taken before someone else bound the pod
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "train-0", "namespace": NS},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
    }
    cluster.post(ObjectRef("v1", "Pod", NS, "train-0"), "binding", binding)
    sent.reset()

    outcome = Actuator(scheduler_client, POLICY).carry_out(
        stale, Decisions(binds=(Bind(train.key, (placed("node-a", (1,), 0),)),))
    )

    assert outcome.bound == [] and len(outcome.errors) == 1 and "409" in outcome.errors[0]
    bindings = [w for w in sent.writes() if w[1].endswith("/binding")]
    assert len(bindings) == 1  # tried once, not retried


# --- evictions --------------------------------------------------------------------------


def running(pod: dict[str, Any] | None) -> bool:
    status = (pod or {}).get("status") or {}
    ready = any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])
    )
    return status.get("phase") == "Running" and ready


def run_pods(client: ClusterClient, names: list[str], namespace: str = NS) -> None:
    """Bind the pods to node-a; wait until its kubelet (kwok) has them Running and Ready."""
    for name in names:
        ref = ObjectRef("v1", "Pod", namespace, name)
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
        }
        client.post(ref, "binding", binding)
    for name in names:
        wait(f"{name} running", lambda name=name: running(live_pod(client, name, namespace)))


def test_an_eviction_refused_by_a_budget_is_counted_and_never_forced(
    sent, cluster, scheduler_client
):
    train = job("train", WHOLE, pods=2)
    add_pods(cluster, "train", 2)
    run_pods(cluster, ["train-0", "train-1"])
    cluster.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "keep-train", "namespace": NS},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"job": "train"}}},
        }
    )
    running = job(
        "train", WHOLE, pods=2, placement=(placed("node-a", (0,), 0), placed("node-a", (1,), 1))
    )
    evict = Evict(train.key, EvictReason.RECLAIM, "team-b/big", running.placement)
    actuator = Actuator(scheduler_client, POLICY)

    for _ in range(2):  # refused each cycle, never deleted
        sent.reset()
        outcome = actuator.carry_out(view(cluster, [running]), Decisions(evictions=(evict,)))
        assert outcome.eviction_refused == 2 and outcome.evicted == [] and not outcome.errors
        assert sent.count("POST") == 2  # one try each: the next cycle asks again
    for name in ("train-0", "train-1"):
        pod = live_pod(cluster, name)
        assert pod is not None and not pod["metadata"].get("deletionTimestamp")
    assert not [w for w in sent.writes() if w[0] == "DELETE"]

    cluster.delete(ObjectRef("policy/v1", "PodDisruptionBudget", NS, "keep-train"))
    sent.reset()
    outcome = actuator.carry_out(view(cluster, [running]), Decisions(evictions=(evict,)))
    assert len(outcome.evicted) == 2 and outcome.evicted_by_reason[EvictReason.RECLAIM] == 2
    base = f"/api/v1/namespaces/{NS}/pods"
    # evicted, with their grace period, never deleted by force
    assert sent.writes() == [("POST", f"{base}/train-{i}/eviction") for i in (0, 1)]
    for name in ("train-0", "train-1"):
        assert gone_or_terminating(cluster, name)


def test_pods_gone_or_already_terminating_are_not_evicted_again(sent, cluster, scheduler_client):
    train = job("train", WHOLE, pods=3)
    add_pods(cluster, "train", 3)
    run_pods(cluster, ["train-0", "train-1", "train-2"])
    hold(cluster, "train-1")
    cluster.delete(ObjectRef("v1", "Pod", NS, "train-1"))  # terminating already
    running = job(
        "train", WHOLE, pods=3, placement=tuple(placed("node-a", (0,), i) for i in range(3))
    )
    current = view(cluster, [running])
    cluster.delete(ObjectRef("v1", "Pod", NS, "train-2"))
    gone(cluster, NS, "train-2")  # gone since the view was taken
    sent.reset()

    outcome = Actuator(scheduler_client, POLICY).carry_out(
        current, Decisions(evictions=(Evict(train.key, EvictReason.IDLE, "", running.placement),))
    )

    assert [w for w in sent.writes() if w[1].endswith("/eviction")] == [
        ("POST", f"/api/v1/namespaces/{NS}/pods/train-0/eviction"),
        ("POST", f"/api/v1/namespaces/{NS}/pods/train-2/eviction"),
    ]
    assert len(outcome.evicted) == 1 and not outcome.errors  # train-2's 404: already gone


# --- fractions and reservation pods -------------------------------------------------------


def test_a_fraction_waits_for_its_reservation_pod_then_gets_the_gpu_uuid(
    sent, cluster, scheduler_client, reservation_client
):
    notebook = job("notebook", HALF)
    add_pods(cluster, "notebook", 1)
    bind = Bind(notebook.key, (placed("node-a", (1,), 0, fraction=0.5),))
    actuator = Actuator(scheduler_client, POLICY)

    first = actuator.carry_out(view(cluster, [notebook]), Decisions(binds=(bind,)))

    name = reservation_name("node-a", 1)
    reservation = live_pod(cluster, name, SYSTEM)
    assert reservation["spec"]["nodeName"] == "node-a"  # created and bound at once
    limits = reservation["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1"
    assert reservation["metadata"]["labels"][RESERVATION_LABEL] == "1"
    assert first.bound == [] and first.waiting == 1 and first.reservations_created == 1
    assert "nodeName" not in live_pod(cluster, "notebook-0")["spec"]

    second = actuator.carry_out(view(cluster, [notebook]), Decisions(binds=(bind,)))
    assert second.bound == [] and "report its UUID" in second.waiting_reasons[notebook.key]
    assert second.reservations_created == 0  # the same pod, still starting

    env = {"NVIDIA_VISIBLE_DEVICES": "GPU-0d1e2f", "POD_NAME": name, "POD_NAMESPACE": SYSTEM}
    publish(reservation_client, env)  # what `gitops-sched reserve` does once the pod runs
    third = actuator.carry_out(view(cluster, [notebook]), Decisions(binds=(bind,)))

    assert len(third.bound) == 1
    pod = live_pod(cluster, "notebook-0")
    assert pod["spec"]["nodeName"] == "node-a"
    assert pod["metadata"]["annotations"][GPU_UUID] == "GPU-0d1e2f"
    assert pod["metadata"]["annotations"][GPU_MEMORY_LIMIT] == str(MEMORY_MIB // 2)


def test_two_fractions_share_one_reservation_and_an_unused_one_goes(
    sent, cluster, scheduler_client, reservation_client
):
    a, b = job("a", HALF), job("b", GpuRequest(RequestKind.MEMORY, memory_mib=20000))
    add_pods(cluster, "a", 1)
    add_pods(cluster, "b", 1)
    binds = (
        Bind(a.key, (placed("node-a", (0,), 0, fraction=0.5),)),
        Bind(b.key, (placed("node-a", (0,), 0, fraction=20000 / MEMORY_MIB),)),
    )
    actuator = Actuator(scheduler_client, POLICY)
    actuator.carry_out(view(cluster, [a, b]), Decisions(binds=binds))
    name = reservation_name("node-a", 0)
    publish(
        reservation_client,
        {"NVIDIA_VISIBLE_DEVICES": "GPU-aa", "POD_NAME": name, "POD_NAMESPACE": SYSTEM},
    )

    outcome = actuator.carry_out(view(cluster, [a, b]), Decisions(binds=binds))

    assert len(outcome.bound) == 2
    reservations = cluster.list("v1", "Pod", label_selector=RESERVATION_LABEL, namespace=SYSTEM)
    assert [p["metadata"]["name"] for p in reservations] == [name]
    for pod_name, memory in (("a-0", MEMORY_MIB // 2), ("b-0", 20000)):
        annotations = live_pod(cluster, pod_name)["metadata"]["annotations"]
        assert annotations[GPU_UUID] == "GPU-aa"
        assert annotations[GPU_MEMORY_LIMIT] == str(memory)

    # both fractions have finished: nothing of ours uses the GPU any more
    hold(cluster, name, SYSTEM)  # it takes its time to stop
    outcome = actuator.carry_out(view(cluster, []), Decisions())
    assert outcome.reservations_deleted == 1
    assert live_pod(cluster, name, SYSTEM)["metadata"]["deletionTimestamp"]  # its grace period
    for deleter in (actuator, Actuator(scheduler_client, POLICY)):  # this one, or a restarted one
        again = deleter.carry_out(view(cluster, []), Decisions())
        assert again.reservations_deleted == 0  # not deleted again while it terminates


def test_a_whole_gpu_pod_is_not_bound_to_a_gpu_a_reservation_pod_holds(
    sent, cluster, scheduler_client
):
    notebook, train = job("notebook", HALF), job("train", WHOLE)
    add_pods(cluster, "notebook", 1)
    add_pods(cluster, "train", 1)
    actuator = Actuator(scheduler_client, POLICY)
    share = Bind(notebook.key, (placed("node-a", (1,), 0, fraction=0.5),))
    actuator.carry_out(view(cluster, [notebook, train]), Decisions(binds=(share,)))

    # the engine moved the notebook and gave GPU 1 to a whole-GPU pod
    outcome = actuator.carry_out(
        view(cluster, [notebook, train]),
        Decisions(binds=(Bind(train.key, (placed("node-a", (1,), 0),)),)),
    )

    assert (
        outcome.bound == []
        and "reservation pod holding GPU 1" in outcome.waiting_reasons[train.key]
    )
    assert outcome.reservations_deleted == 1  # no fraction wants it any more: it goes
    assert "nodeName" not in live_pod(cluster, "train-0")["spec"]


def test_a_reservation_pod_name_is_a_dns_label_for_any_node_name():
    long = "gpu-node." + "x" * 80 + ".example.com"
    names = {reservation_name(node, 3) for node in ("node-a", "Node_A", long, long + "1")}
    assert reservation_name("node-a", 3) == "gpu-reservation-node-a-3"
    assert len(names) == 4
    for name in names:
        assert len(name) <= 63 and name.endswith("-3")
        assert all(c.isdigit() or c.islower() or c == "-" for c in name)


def test_a_reservation_pod_is_a_valid_pod():
    pod = reservation_pod("node-a", 1, SYSTEM, SCHEDULER, "gitops-sched:dev")
    kubernetes_validate.validate(pod, "1.32", strict=True)
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["gitops-sched", "reserve"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_reserve_publishes_the_uuid_of_its_gpu(real_cluster, cluster):
    """`gitops-sched reserve` in a reservation pod (one the system namespace's restricted
    Pod Security admits), as the reservation pods' ServiceAccount."""
    holder = cluster.create(reservation_pod("node-a", 0, SYSTEM, SCHEDULER, "img:1"))
    name = holder["metadata"]["name"]
    env = {
        "POD_NAME": name,
        "POD_NAMESPACE": SYSTEM,
        "KUBECONFIG": str(account_kubeconfig(real_cluster, *RESERVATION)),
    }
    runner = CliRunner()

    result = runner.invoke(
        main, ["reserve", "--once"], env={**env, "NVIDIA_VISIBLE_DEVICES": "GPU-12ab"}
    )
    assert result.exit_code == 0, result.output
    assert live_pod(cluster, name, SYSTEM)["metadata"]["annotations"][GPU_UUID] == "GPU-12ab"

    for devices in ("", "all", "0,1", "GPU-1,GPU-2"):
        result = runner.invoke(
            main, ["reserve", "--once"], env={**env, "NVIDIA_VISIBLE_DEVICES": devices}
        )
        assert result.exit_code == 1 and "NVIDIA_VISIBLE_DEVICES" in result.output


# --- MIG --------------------------------------------------------------------------------


def test_mig_request_written_and_the_bind_waits_until_the_profile_is_advertised(
    sent, cluster, scheduler_client
):
    existing = (MigInstance("3g.40gb", 4),)
    nodes = (engine_node("node-a", mig=existing),)
    infer = job("infer", MIG_1G)
    add_pods(cluster, "infer", 1)
    create = MigChange("node-a", 0, MigInstance("1g.10gb", 0), create=True)
    pod = placed("node-a", (0,), 0, mig=MigInstance("1g.10gb", 0))
    actuator = Actuator(scheduler_client, POLICY)

    outcome = actuator.carry_out(
        view(cluster, [infer], nodes),
        Decisions(binds=(Bind(infer.key, (pod,), waits_for_mig=(create,)),), mig_changes=(create,)),
    )

    request = live_pod_node(cluster)["metadata"]["annotations"][NODE_MIG_REQUEST]
    assert json.loads(request) == {
        "version": 1,
        "gpus": [
            {
                "index": 0,
                "instances": [
                    {"profile": "1g.10gb", "start": 0},
                    {"profile": "3g.40gb", "start": 4},
                ],
            }
        ],
    }
    assert outcome.bound == [] and outcome.mig_requests == 1
    assert "to be created" in outcome.waiting_reasons[infer.key]

    # the same decision again: the request is already there, nothing is rewritten
    sent.reset()
    again = actuator.carry_out(
        view(cluster, [infer], nodes),
        Decisions(binds=(Bind(infer.key, (pod,), waits_for_mig=(create,)),), mig_changes=(create,)),
    )
    assert again.mig_requests == 0 and sent.writes() == []

    # the agent made it, the engine sees the instance and binds; the plugin has not caught up
    made = (MigInstance("1g.10gb", 0), *existing)
    nodes = (engine_node("node-a", mig=made),)
    status = {
        "version": 1,
        "observed": request_digest(request),
        "gpus": [{"index": 0, "state": "done", "message": "created 1g.10gb@0"}],
    }
    cluster.patch(
        ObjectRef("v1", "Node", "", "node-a"),
        {"metadata": {"annotations": {NODE_MIG_STATUS: json.dumps(status)}}},
    )
    waiting = actuator.carry_out(
        view(cluster, [infer], nodes), Decisions(binds=(Bind(infer.key, (pod,)),))
    )
    assert waiting.bound == []
    assert (
        waiting.waiting_reasons[infer.key]
        == "waiting for node-a to advertise nvidia.com/mig-1g.10gb"
    )
    assert (
        json.loads(live_pod_node(cluster)["metadata"]["annotations"][NODE_MIG_REQUEST])["gpus"]
        == []
    )

    cluster.patch(
        ObjectRef("v1", "Node", "", "node-a"),
        {"status": {"allocatable": {"nvidia.com/mig-1g.10gb": "1"}}},
        subresource="status",
    )
    bound = actuator.carry_out(
        view(cluster, [infer], nodes), Decisions(binds=(Bind(infer.key, (pod,)),))
    )
    assert len(bound.bound) == 1 and live_pod(cluster, "infer-0")["spec"]["nodeName"] == "node-a"


def test_an_agent_error_is_the_waiting_pods_reason(sent, cluster, scheduler_client):
    nodes = (engine_node("node-a", mig=(MigInstance("3g.40gb", 4),)),)
    infer = job("infer", MIG_1G)
    add_pods(cluster, "infer", 1)
    create = MigChange("node-a", 0, MigInstance("1g.10gb", 0), create=True)
    bind = Bind(
        infer.key, (placed("node-a", (0,), 0, mig=create.instance),), waits_for_mig=(create,)
    )
    decisions = Decisions(binds=(bind,), mig_changes=(create,))
    actuator = Actuator(scheduler_client, POLICY)
    actuator.carry_out(view(cluster, [infer], nodes), decisions)
    request = live_pod_node(cluster)["metadata"]["annotations"][NODE_MIG_REQUEST]
    status = {
        "version": 1,
        "observed": request_digest(request),
        "gpus": [{"index": 0, "state": "error", "message": "NVML: insufficient resources"}],
    }
    cluster.patch(
        ObjectRef("v1", "Node", "", "node-a"),
        {"metadata": {"annotations": {NODE_MIG_STATUS: json.dumps(status)}}},
    )

    outcome = actuator.carry_out(view(cluster, [infer], nodes), decisions)

    assert outcome.waiting_reasons[infer.key].endswith("(failed: NVML: insufficient resources)")


def test_mig_changes_waiting_for_victims_are_not_requested_yet(sent, cluster, scheduler_client):
    nodes = (engine_node("node-a", mig=(MigInstance("7g.80gb", 0),)),)
    destroy = MigChange(
        "node-a", 0, MigInstance("7g.80gb", 0), create=False, waits_for=("team-b/old",)
    )
    create = MigChange("node-a", 0, MigInstance("1g.10gb", 0), create=True)
    sent.reset()

    outcome = Actuator(scheduler_client, POLICY).carry_out(
        view(cluster, [], nodes), Decisions(mig_changes=(destroy, create))
    )

    assert outcome.mig_requests == 0 and sent.writes() == []


def live_pod_node(client: ClusterClient) -> dict[str, Any]:
    node = client.get(ObjectRef("v1", "Node", "", "node-a"))
    assert node is not None
    return node


# --- status -----------------------------------------------------------------------------


def install_queues(client: ClusterClient) -> None:
    """A department and a project (their CRDs are in the session's baseline)."""
    specs = {
        "Department": ("research", {"quota": {"gpu": 8}}),
        "Project": ("team-a", {"department": "research", "quota": {"gpu": 8}}),
    }
    for kind, (name, spec) in specs.items():
        client.create(
            {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}
        )


def test_queue_status_written_once_and_not_rewritten_on_a_no_op(sent, cluster, scheduler_client):
    install_queues(cluster)
    decisions = Decisions(
        departments=(QueueStatus("research", 8, 8, 3, 0),),
        # quotas per node group: the same numbers per group, under nodeGroups
        projects=(
            QueueStatus(
                "team-a", 8, 8 / 3, 2.5, 1.0, pools=(QueueStatus("a100", 8, 8 / 3, 2.5, 1),)
            ),
        ),
    )
    writer = StatusWriter(scheduler_client)
    sent.reset()

    report = writer.write(view(cluster, []), decisions)

    assert report.queues == 2 and not report.errors
    project = cluster.get(ObjectRef(API_VERSION, "Project", "", "team-a"))
    assert project is not None
    numbers = {"deserved": 8, "fairShare": 2.6667, "allocated": 2.5, "queued": 1}
    assert project["status"] == {**numbers, "nodeGroups": {"a100": numbers}}
    # every field but the past usage, kept only with fairness over time (scheduler.usage)
    assert set(project["status"]) == set(STATUS_FIELDS["Project"]) - {"usage"}
    department = cluster.get(ObjectRef(API_VERSION, "Department", "", "research"))
    assert department is not None and department["status"]["allocated"] == 3
    assert len(sent.writes()) == 2

    sent.reset()
    again = StatusWriter(scheduler_client).write(
        view(cluster, []), decisions
    )  # a restarted writer too
    assert again.queues == 0 and sent.writes() == []


def scheduled(client: ClusterClient, name: str) -> tuple[str, str, str]:
    """The pod's PodScheduled condition: status, reason, message."""
    conditions = ((live_pod(client, name) or {}).get("status") or {}).get("conditions") or []
    found = next(c for c in conditions if c["type"] == "PodScheduled")
    return found["status"], found.get("reason", ""), found.get("message", "")


def events_of(client: ClusterClient, name: str) -> list[tuple[str, str, str]]:
    """The scheduler's Events about the pod, oldest first."""
    events = [
        e
        for e in client.list("v1", "Event", namespace=NS) or ()
        if e["involvedObject"]["name"] == name and e.get("reportingComponent") == COMPONENT
    ]
    events.sort(
        key=lambda e: (
            e.get("eventTime") or e.get("firstTimestamp") or "",
            e["metadata"]["creationTimestamp"],
        )
    )
    return [(e["type"], e["reason"], e["message"]) for e in events]


def test_a_pending_pod_gets_one_condition_and_one_event_per_reason(sent, cluster, scheduler_client):
    train = job("train", WHOLE, pods=2)
    add_pods(cluster, "train", 2)
    add_pods(cluster, "stray", 2)  # pods the snapshot ignored; stray-1 is bound already
    run_pods(cluster, ["stray-1"])
    strays = tuple(
        Ignored(NS, f"stray-{i}", live_pod(cluster, f"stray-{i}")["metadata"]["uid"], why, i == 1)
        for i, why in enumerate(("an unreadable annotation", "its placement names no GPU"))
    )
    writer = StatusWriter(scheduler_client)
    quota = Decisions(pending_reasons=((train.key, "over department quota"),))

    writer.write(view(cluster, [train], ignored=strays), quota)

    for name in ("train-0", "train-1"):
        assert scheduled(cluster, name) == ("False", "Unschedulable", "over department quota")
        assert events_of(cluster, name) == [
            ("Warning", "FailedScheduling", "over department quota")
        ]
    assert scheduled(cluster, "stray-0") == ("False", "Unschedulable", "an unreadable annotation")
    assert "Unschedulable" not in json.dumps(live_pod(cluster, "stray-1")["status"])  # bound:
    assert events_of(cluster, "stray-1") == [  # an Event only
        ("Warning", "FailedScheduling", "its placement names no GPU")
    ]

    sent.reset()
    writer.write(view(cluster, [train], ignored=strays), quota)
    assert sent.writes() == []  # the same reasons: nothing said again

    gang = Decisions(pending_reasons=((train.key, "waiting for gang 1/2: no room"),))
    writer.write(view(cluster, [train], ignored=strays), gang)
    assert len(sent.writes()) == 4  # two conditions, two events
    assert scheduled(cluster, "train-0")[2] == "waiting for gang 1/2: no room"
    assert len(events_of(cluster, "train-0")) == 2


def test_a_bound_pod_gets_no_pending_reason_and_a_waiting_one_says_why(
    sent, cluster, scheduler_client
):
    train, other = job("train", WHOLE), job("other", WHOLE)
    add_pods(cluster, "train", 1)
    add_pods(cluster, "other", 1)
    decisions = Decisions(
        binds=(
            Bind(train.key, (placed("node-a", (0,), 0),)),
            Bind(other.key, (placed("node-a", (1,), 0),), waits_for=("team-b/old",)),
        )
    )
    current = view(cluster, [train, other])
    outcome = Actuator(scheduler_client, POLICY).carry_out(current, decisions)

    StatusWriter(scheduler_client).write(current, decisions, outcome)

    assert "conditions" not in live_pod(cluster, "train-0").get("status", {}) or all(
        c["status"] == "True" for c in live_pod(cluster, "train-0")["status"]["conditions"]
    )
    condition = live_pod(cluster, "other-0")["status"]["conditions"][0]
    assert condition["message"] == "waiting for the pods of team-b/old to leave its GPUs"


# --- dry run ----------------------------------------------------------------------------


def test_a_dry_run_sends_every_write_as_a_server_dry_run_and_stores_nothing(
    sent, cluster, scheduler_client
):
    install_queues(cluster)
    train, notebook = job("train", WHOLE, pods=2), job("notebook", HALF)
    add_pods(cluster, "train", 2)
    add_pods(cluster, "notebook", 1)
    add_pods(cluster, "old", 1)
    run_pods(cluster, ["old-0"])
    running = job("old", WHOLE, placement=(placed("node-a", (1,), 0),))
    create = MigChange("node-a", 1, MigInstance("1g.10gb", 0), create=True)
    decisions = Decisions(
        evictions=(Evict(running.key, EvictReason.PREEMPT, train.key, running.placement),),
        binds=(
            Bind(train.key, (placed("node-a", (0,), 0), placed("node-a", (1,), 1))),
            Bind(notebook.key, (placed("node-a", (0,), 0, fraction=0.5),)),
        ),
        mig_changes=(create,),
        projects=(QueueStatus("team-a", 8, 8, 2, 1),),
        pending_reasons=(("team-a/ghost", "over quota"),),
    )
    current = view(cluster, [train, notebook, running])
    sent.reset()
    stored = stored_state(cluster)

    outcome = Actuator(scheduler_client, POLICY, dry_run=True).carry_out(current, decisions)
    report = StatusWriter(scheduler_client, dry_run=True).write(current, decisions, outcome)

    writes = [(method, query) for method, _, query in sent.requests() if method != "GET"]
    # the eviction, the MIG request, the reservation pod, the binds, the queue's status
    assert len(writes) >= 5 and all("dryRun=All" in query.split("&") for _, query in writes)
    assert stored_state(cluster) == stored
    assert not outcome.errors and not report.errors
    assert len(outcome.bound) == 2 and len(outcome.evicted) == 1
    assert outcome.reservations_created == 1 and outcome.mig_requests == 1
    assert report.queues == 1
    assert all(line.startswith(("would ", "team-a/")) for line in outcome.log)


def stored_state(client: ClusterClient) -> dict[str, Any]:
    """What a write of the scheduler would change: each pod's version (the project's and the
    system namespace's), node-a's metadata and spec (kwok rewrites its status all along),
    the queues and the Events."""
    pods = [
        (p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"]["resourceVersion"])
        for namespace in (NS, SYSTEM)
        for p in client.list("v1", "Pod", namespace=namespace) or ()
    ]
    node = live_pod_node(client)
    queues = [
        (q["metadata"]["name"], q["metadata"]["resourceVersion"])
        for kind in ("Department", "Project")
        for q in client.list(API_VERSION, kind) or ()
    ]
    events = sorted(e["metadata"]["name"] for e in client.list("v1", "Event", namespace=NS) or ())
    annotations = node["metadata"].get("annotations") or {}
    return {
        "pods": sorted(pods),
        "node": (annotations, node["spec"]),
        "queues": queues,
        "events": events,
    }


# --- end to end: the scheduler's loop ---------------------------------------------------


def example_policy(name: str = "netapp-dgx") -> dict[str, Any]:
    """The policy ConfigMap an example repo renders."""
    diagnostics = Diagnostics()
    repo = build_repo(load_repo(EXAMPLES / name, diagnostics))
    assert not diagnostics.has_errors
    (config_map,) = [o for o in render_repo(repo) if o["kind"] == "ConfigMap"]
    return config_map


def user_pod(name: str, gpus: int = 0, fraction: str = "") -> dict[str, Any]:
    """A pod a user submits by hand to project team-a: whole GPUs, or a fraction of one."""
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": TEAM_A,
            "annotations": {GPU_FRACTION: fraction} if fraction else {},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [{"name": "main", "image": "pytorch:2.3", "resources": resources}],
        },
    }


def one_dgx(client: ClusterClient) -> ClusterClient:
    """The cluster with the example's policy, its namespaces and one Ready DGX-1 of its node
    group (`dgx-0`, 8 V100s, as GFD and the device plugin show it)."""
    make_namespace(client, TEAM_A)
    client.create(example_policy())
    add_settled(client, gpu_node("dgx-0", "V100-SXM2-32GB", 8))
    return client


def test_in_the_loop_fractions_share_a_reserved_gpu_and_whole_gpu_pods_stay_off_it(
    sent, client, scheduler_client, reservation_client
):
    one_dgx(client)
    scheduler = Scheduler(scheduler_client, Settings(namespace=SYSTEM))
    client.create(user_pod("notebook-a", fraction="0.5"))

    for _ in range(2):  # the reservation pod starts: the notebook keeps its GPU meanwhile
        scheduler.sync_once()
    for i in range(8):  # more whole GPUs than the node has left
        client.create(user_pod(f"train-{i}", gpus=1))
    client.create(user_pod("notebook-b", fraction="0.25"))
    for _ in range(2):
        scheduler.sync_once()

    (reservation,) = client.list("v1", "Pod", label_selector=RESERVATION_LABEL, namespace=SYSTEM)
    name, reserved = (
        reservation["metadata"]["name"],
        int(reservation["metadata"]["labels"][RESERVATION_LABEL]),
    )
    publish(
        reservation_client,
        {"NVIDIA_VISIBLE_DEVICES": "GPU-5e7a", "POD_NAME": name, "POD_NAMESPACE": SYSTEM},
    )
    report = scheduler.sync_once()

    pods = {p["metadata"]["name"]: p for p in client.list("v1", "Pod", namespace=TEAM_A)}
    for notebook in ("notebook-a", "notebook-b"):  # both share the reserved GPU
        annotations = pods[notebook]["metadata"]["annotations"]
        assert pods[notebook]["spec"]["nodeName"] == "dgx-0"
        assert annotations[GPU_UUID] == "GPU-5e7a"
        assert json.loads(annotations[PLACEMENT])["gpus"] == [reserved]
    whole = [p for n, p in pods.items() if n.startswith("train-") and p["spec"].get("nodeName")]
    assert len(whole) == 7  # the eighth waits: one GPU is shared
    assert all(
        reserved not in json.loads(p["metadata"]["annotations"][PLACEMENT])["gpus"] for p in whole
    )
    assert not [w for w in sent.writes() if w[0] == "DELETE"]  # no reservation churn
    assert not report.outcome.errors

    # the notebooks finish: the reservation pod goes, then the last whole-GPU pod gets its GPU
    for notebook in ("notebook-a", "notebook-b"):
        client.delete(ObjectRef("v1", "Pod", TEAM_A, notebook))
    gone(client, TEAM_A)
    assert scheduler.sync_once().outcome.reservations_deleted == 1
    gone(client, SYSTEM)
    assert len(scheduler.sync_once().outcome.bound) == 1


def test_a_reservation_pod_starts_on_its_node_whatever_the_nodes_taints(sent, cluster):
    """The fraction pod it holds the GPU for tolerated the node; the kubelet must not turn
    the reservation away for a taint only the fraction pod names."""
    taint = {"key": "dedicated", "value": "ml", "effect": "NoExecute"}
    cluster.patch(ObjectRef("v1", "Node", "", "node-a"), {"spec": {"taints": [taint]}})
    pod = reservation_pod("node-a", 1, SYSTEM, SCHEDULER, "img:1")
    pod["spec"]["nodeName"] = "node-a"
    cluster.create(pod)
    name = pod["metadata"]["name"]
    # kwok starts it; kube-controller-manager's taint manager would evict it, were the
    # taint not tolerated (NoExecute)
    started = wait(
        f"{name} running",
        lambda: running(live_pod(cluster, name, SYSTEM)) and live_pod(cluster, name, SYSTEM),
    )
    assert not started["metadata"].get("deletionTimestamp")


def test_a_reservation_left_behind_is_used_by_the_next_fraction_or_released(
    sent, client, scheduler_client
):
    """A restart or a failed bind can leave a reservation pod holding a GPU no fraction
    uses. The next fraction takes it (no second GPU reserved, none deleted and made again),
    as one does a half-used GPU; one nobody takes is released."""
    one_dgx(client)
    left = []
    for gpu in (3, 5):  # left behind, running, each with its GPU's UUID
        pod = reservation_pod("dgx-0", gpu, SYSTEM, SCHEDULER, "img:1")
        pod["spec"]["nodeName"] = "dgx-0"
        pod["metadata"]["annotations"] = {GPU_UUID: f"GPU-{gpu}"}
        left.append(client.create(pod)["metadata"]["name"])
    for name in left:
        wait(f"{name} running", lambda name=name: running(live_pod(client, name, SYSTEM)))
    scheduler = Scheduler(scheduler_client, Settings(namespace=SYSTEM))
    client.create(user_pod("notebook-a", fraction="0.5"))
    sent.reset()

    report = scheduler.sync_once()

    notebook = live_pod(client, "notebook-a", TEAM_A)
    assert notebook["spec"]["nodeName"] == "dgx-0"  # at once: its GPU was set up already
    assert json.loads(notebook["metadata"]["annotations"][PLACEMENT])["gpus"] == [3]
    assert notebook["metadata"]["annotations"][GPU_UUID] == "GPU-3"
    assert report.outcome.reservations_created == 0
    assert report.outcome.reservations_deleted == 1  # GPU 5's: nothing wants it
    released = reservation_name("dgx-0", 5)
    assert [w for w in sent.writes() if w[0] == "DELETE"] == [
        ("DELETE", f"/api/v1/namespaces/{SYSTEM}/pods/{released}")
    ]
    assert gone_or_terminating(client, released, SYSTEM)

    client.create(user_pod("notebook-b", fraction="0.25"))  # packs beside notebook-a
    assert scheduler.sync_once().outcome.reservations_created == 0
    placed = json.loads(
        live_pod(client, "notebook-b", TEAM_A)["metadata"]["annotations"][PLACEMENT]
    )
    assert placed["gpus"] == [3]


def write_usage(
    cluster, scheduler_client, fairness: Fairness, history: UsageHistory, decisions: Decisions
) -> tuple[Any, dict, dict]:
    """The queues installed, a view at 250 s with `fairness` and `history`, and team-a's
    status written for `decisions`: (the view, the usage written, team-a's status.usage
    as the CRD kept it)."""
    install_queues(cluster)
    live = view(cluster, [])
    policy = replace(live.snapshot.policy, fairness=fairness)
    live = replace(live, snapshot=replace(live.snapshot, policy=policy, history=history, now=250))
    usage = usage_status(live.snapshot)
    assert StatusWriter(scheduler_client).write(live, decisions, usage=usage).queues == 1
    project = cluster.get(ObjectRef(API_VERSION, "Project", "", "team-a"))
    assert project is not None
    return live, usage, project["status"]["usage"]


def test_past_usage_is_kept_in_project_status_and_read_back_after_a_restart(
    sent, cluster, scheduler_client
):
    """Fairness over time: the closed buckets of a project's usage go into its status
    (the CRD keeps them), once; a restarted scheduler reads them back from there."""
    fairness = Fairness(history_weight=1, window_s=1200)  # buckets of 100s
    history = UsageHistory((("team-a", ((0.0, 800.0), (100.0, 400.0), (200.0, 50.0))),))
    decisions = Decisions(projects=(QueueStatus("team-a", 8, 8, 4, 0, usage=0.2),))
    live, usage, written = write_usage(cluster, scheduler_client, fairness, history, decisions)
    assert written == {  # the bucket still open (200s) is not written
        "buckets": [{"start": 0, "gpuSeconds": 800}, {"start": 100, "gpuSeconds": 400}]
    }
    sent.reset()
    again = StatusWriter(scheduler_client).write(live, decisions, usage=usage)
    assert again.queues == 0  # unchanged: not written again
    assert sent.writes() == []

    keeper = UsageKeeper()
    assert keeper.status(live.snapshot) == {}  # nothing to write before it has read
    assert keeper.history_at(scheduler_client, fairness, 300.0) == UsageHistory(
        (("team-a", ((0.0, 800.0), (100.0, 400.0))),)
    )
    assert keeper.status(live.snapshot) == usage
    keeper.held(300.0, decisions)  # team-a holds 4 GPUs from 300s
    assert keeper.history_at(scheduler_client, fairness, 350.0) == UsageHistory(
        (("team-a", ((0.0, 800.0), (100.0, 400.0), (300.0, 200.0))),)
    )


def test_past_usage_per_node_group_is_kept_in_project_status_and_read_back(
    cluster, scheduler_client
):
    """A project with per-group quotas: its usage in each node group goes into its
    status beside the total (the CRD keeps it), a restarted scheduler reads it back,
    and what the project holds in a group after a cycle is added there."""
    fairness = Fairness(history_weight=1, window_s=1200)  # buckets of 100s
    history = UsageHistory(
        (("team-a", ((0.0, 800.0),)),),
        ((("team-a", "h100"), ((0.0, 600.0), (200.0, 50.0))),),
    )
    h100 = QueueStatus("h100", 0, 4, 3, 0)
    decisions = Decisions(projects=(QueueStatus("team-a", 8, 8, 4, 0, pools=(h100,)),))
    _, _, written = write_usage(cluster, scheduler_client, fairness, history, decisions)
    assert written == {  # closed buckets only, as for the total
        "buckets": [{"start": 0, "gpuSeconds": 800}],
        "nodeGroups": {"h100": {"buckets": [{"start": 0, "gpuSeconds": 600}]}},
    }

    keeper = UsageKeeper()
    read = keeper.history_at(scheduler_client, fairness, 300.0)
    assert read.node_groups == ((("team-a", "h100"), ((0.0, 600.0),)),)
    keeper.held(300.0, decisions)  # team-a holds 3 GPUs in h100 from 300s
    later = keeper.history_at(scheduler_client, fairness, 350.0)
    assert later.node_groups == ((("team-a", "h100"), ((0.0, 600.0), (300.0, 150.0))),)
