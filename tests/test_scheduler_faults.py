"""The scheduler under faults: on the real control plane behind the fault-injecting proxy
(`testkit.control_plane.faultproxy`), a pod watch that stays silent and a Binding answered
429 never put two pods on one GPU (`DevicePlugin.overbooked()` sees what a kubelet would
refuse); and, as a property over randomised faults on the API emulator, never a GPU given
twice nor a shared GPU over 1, and once the faults stop, nothing written asked again.

A silent watch is played by never listing again after the first cycle: the informers'
caches then stay as they were, which is what a watch that delivers nothing leaves them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitops_sched.cluster import ClusterClient
from gitops_sched.compiler import render_repo
from gitops_sched.contract.pods import GPU_FRACTION, GPU_UUID, PLACEMENT, RESERVATION_LABEL
from gitops_sched.engine.codec import pod_from_dict
from gitops_sched.scheduler.assumed import ASSUME_FOR_S
from gitops_sched.scheduler.loop import Scheduler, Settings
from gitops_sched.validate import check_repo
from testkit.control_plane.accounts import (
    RESERVATION,
    SCHEDULER,
    account_configuration,
    account_kubeconfig,
)
from testkit.control_plane.client import FAST_BACKOFF, connect
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.devices import DevicePlugin, gpus_asked
from testkit.control_plane.faultproxy import THROTTLED, FaultProxy, Rule
from testkit.control_plane.install import apply_kustomization
from testkit.control_plane.nodes import gpu_node
from testkit.control_plane.waiting import wait
from tests.cluster_standins import Kubelet
from tests.kube_emulator import Fault
from tests.kube_emulator.fixtures import connect as emulator_client
from tests.kube_emulator.server import KubeEmulator

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "netapp-dgx"
SYSTEM = "gitops-sched-system"
TEAM_A = "project-team-a"  # netapp-dgx's namespaces of projects team-a and team-b
TEAM_B = "project-team-b"
NODE = "dgx-0"
Obj = dict[str, Any]


def user_pod(name: str, gpus: int = 0, fraction: str = "", namespace: str = TEAM_A) -> Obj:
    """A pod a user submits by hand to a project: whole GPUs, or a fraction of one."""
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {GPU_FRACTION: fraction} if fraction else {},
        },
        "spec": {
            "schedulerName": "gitops-sched",
            "containers": [{"name": "main", "image": "pytorch:2.3", "resources": resources}],
        },
    }


def install(plane: ControlPlane, client: ClusterClient) -> None:
    """The scheduler's shipped manifests (`kubectl apply -k scheduler/`: its namespace,
    ServiceAccounts and RBAC), netapp-dgx's policy and projects' namespaces, one DGX-1 of 8
    GPUs."""
    apply_kustomization(plane, "scheduler")
    for name in (TEAM_A, TEAM_B):
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    repo, diagnostics = check_repo(EXAMPLE)
    assert repo is not None, diagnostics
    (policy,) = [o for o in render_repo(repo) if o["kind"] == "ConfigMap"]
    client.create(policy)
    (group,) = repo.node_groups
    client.create(gpu_node(NODE, group.gpu_model, 8, labels=group.node_selector))
    wait("the node Ready", lambda: _node_ready(client))


def _node_ready(client: ClusterClient) -> bool:
    (node,) = client.list("v1", "Node") or [{}]
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


class Clock:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def proxied(real_cluster: ControlPlane) -> Iterator[tuple[ClusterClient, FaultProxy]]:
    """A client straight to the API server, and the proxy in front of it."""
    client = connect(real_cluster)
    proxy = FaultProxy(real_cluster.server, real_cluster.root / "ca.crt", seed=19).start()
    try:
        yield client, proxy
    finally:
        proxy.stop()
        client.close()


def bound_pods(client: ClusterClient) -> dict[str, str]:
    pods = client.list("v1", "Pod") or []
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}


def reservation_uuid(client: ClusterClient) -> str:
    pods = client.list("v1", "Pod", namespace=SYSTEM) or []
    return "".join((p["metadata"].get("annotations") or {}).get(GPU_UUID, "") for p in pods)


def test_a_silent_pod_watch_and_a_throttled_binding_never_give_a_gpu_twice(
    real_cluster: ControlPlane, proxied: tuple[ClusterClient, FaultProxy]
):
    bound = silent_watch_and_throttled_binding(real_cluster, *proxied)
    assert "notebook" in bound  # on the GPU its reservation pod holds
    assert sum(name.startswith("train-") for name in bound) == 7
    assert sum(name.startswith("gpu-reservation-") for name in bound) == 1


def silent_watch_and_throttled_binding(
    real_cluster: ControlPlane, client: ClusterClient, proxy: FaultProxy
) -> dict[str, str]:
    """The first cycle puts team-b's notebook on a GPU among team-a's eight trains (the
    fair share takes turns), creates and binds that GPU's reservation pod, and has one
    train's Binding answered 429. The next cycle, the watch silent, gives the notebook the
    lowest free GPU and the throttled train the next: the one the reservation pod already
    holds, unless that pod is in the assumed state. On the scheduler before every write was
    assumed (e246abd's parent) that bind made it 9 GPUs asked of 8 at the second check.
    The scheduler reads its writes back as its ServiceAccount. The pods bound, by name."""
    install(real_cluster, client)
    client.create(user_pod("notebook", fraction="0.5", namespace=TEAM_B))
    for i in range(8):  # one more whole GPU than the node has beside the shared one
        client.create(user_pod(f"train-{i}", gpus=1))
    configuration = proxy.configuration(account_configuration(real_cluster, *SCHEDULER))
    clock = Clock()
    scheduler = Scheduler(
        ClusterClient(configuration, backoff=FAST_BACKOFF),
        Settings(namespace=SYSTEM),
        clock=clock,
    )
    devices = DevicePlugin(client, account_kubeconfig(real_cluster, *RESERVATION))
    proxy.add(Rule(THROTTLED, path=f"/namespaces/{TEAM_A}/pods/[^/]+/binding", method="POST"))

    def quiet() -> bool:
        devices.step()
        pods = client.list("v1", "Pod") or []
        return all(p["status"].get("phase") == "Running" for p in pods if p["spec"].get("nodeName"))

    try:
        scheduler.sync_once()  # the only list: from here on the pod watch says nothing
        for _ in range(3):
            wait("the node to start what was bound", quiet)
            assert devices.overbooked() == []
            scheduler.cycle()
        wait("the node to start what was bound", quiet)
        assert devices.overbooked() == []
        assert [f.split()[0] for f in proxy.injected] == ["429"]

        wait("the reservation pod's GPU UUID", lambda: reservation_uuid(client))
        clock.offset += ASSUME_FOR_S + 1  # the watch still silent: our writes are read back
        for _ in range(2):
            scheduler.cycle()
            wait("the node to start what was bound", quiet)
            assert devices.overbooked() == []
    finally:
        devices.close()
        scheduler.client.close()
    return bound_pods(client)


# --- the property: under any faults, never a GPU given twice ------------------------------

V100 = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}  # what netapp-dgx's group selects
BINDING = r"/pods/[^/]+/binding$"
FAULTS = {  # what one cycle's requests may meet, as the emulator injects it
    "throttled binding": Fault(429, method="POST", path=BINDING, retry_after=0),
    "binding refused by a 500": Fault(500, method="POST", path=BINDING),
    "binding answer lost": Fault(500, method="POST", path=BINDING, after=True),
    "reservation created, answer lost": Fault(
        500, method="POST", path=f"{SYSTEM}/pods$", after=True
    ),
    "reservation delete answer lost": Fault(503, method="DELETE", path="/pods/", after=True),
    "reading a pod fails": Fault(503, method="GET", path=r"/pods/[^/]+$"),
}
STEPS = st.one_of(
    st.tuples(st.just("submit"), st.sampled_from(["1", "2", "0.5", "0.25"]), st.booleans()),
    st.tuples(st.just("finish"), st.integers(0, 20)),
    st.tuples(
        st.just("cycle"),
        st.booleans(),  # the watch delivered everything (a fresh list), or nothing
        st.lists(st.sampled_from(sorted(FAULTS)), max_size=2),
    ),
    st.tuples(st.just("later"), st.just(ASSUME_FOR_S + 1)),
)


def emulated_cluster(kube: KubeEmulator) -> None:
    """netapp-dgx's policy and one DGX-1 of 8 GPUs, made in-process (never faulted)."""
    api = kube.api
    for name in (SYSTEM, TEAM_A, TEAM_B):
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        api.call("POST", "/api/v1/namespaces", namespace)
    repo, diagnostics = check_repo(EXAMPLE)
    assert repo is not None, diagnostics
    (policy,) = [o for o in render_repo(repo) if o["kind"] == "ConfigMap"]
    api.call("POST", f"/api/v1/namespaces/{SYSTEM}/configmaps", policy)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": V100}}
    api.call("POST", "/api/v1/nodes", node)
    status = {
        "allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    api.call("PATCH", f"/api/v1/nodes/{NODE}/status", {"status": status})


def publish_uuid(kube: KubeEmulator) -> Callable[[Obj, Obj], None]:
    """What `gitops-sched reserve` does once its pod runs: its GPU's UUID on the pod."""

    def on_start(pod: Obj, node: Obj) -> None:
        meta = pod["metadata"]
        if RESERVATION_LABEL in (meta.get("labels") or {}):
            annotations = {GPU_UUID: f"GPU-{meta['uid'][:8]}"}
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            kube.api.call("PATCH", path, {"metadata": {"annotations": annotations}})

    return on_start


def double_booked(kube: KubeEmulator) -> list[str]:
    """What gives a GPU twice among the pods bound and not finished: more whole GPUs asked
    on the node than it has, a GPU held whole by two pods (reservation pods included), a
    shared GPU over 1."""
    holders: dict[int, list[str]] = {}
    shares: dict[int, float] = {}
    asked = 0
    for pod in kube.api.objects("v1", "Pod"):
        meta, spec = pod["metadata"], pod["spec"]
        if not spec.get("nodeName") or pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        asked += gpus_asked(pod)
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        if RESERVATION_LABEL in labels:
            holders.setdefault(int(labels[RESERVATION_LABEL]), []).append(meta["name"])
        elif PLACEMENT in annotations:
            placed = pod_from_dict(json.loads(annotations[PLACEMENT]))
            for gpu in placed.gpus:
                if placed.fraction > 0:
                    shares[gpu] = shares.get(gpu, 0.0) + placed.fraction
                else:
                    holders.setdefault(gpu, []).append(meta["name"])
    found = [f"{NODE}: {asked} GPUs asked of 8"] if asked > 8 else []
    found += [f"GPU {g} held by {', '.join(sorted(n))}" for g, n in holders.items() if len(n) > 1]
    found += [f"GPU {g} shared {s:g}" for g, s in shares.items() if s > 1 + 1e-9]
    return sorted(found)


@pytest.fixture(scope="module")
def emulated() -> Iterator[tuple[KubeEmulator, ClusterClient, dict[str, Any]]]:
    """One emulator and client for every example (discovery and the repo's render once);
    each example starts from the state saved here."""
    with KubeEmulator(pod_termination="graceful") as kube:
        emulated_cluster(kube)
        client = emulator_client(kube, timeout=0.5)
        try:
            yield kube, client, kube.api.snapshot()
        finally:
            client.close()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEPS, min_size=4, max_size=14))
def test_no_gpu_is_ever_given_twice_under_faults_and_silent_watches(emulated, steps) -> None:
    kube, client, bare = emulated
    kube.api.restore(bare)
    kube.api.faults.clear()
    clock = Clock()
    kubelet = Kubelet(kube.api, on_start=publish_uuid(kube))
    scheduler = Scheduler(client, Settings(namespace=SYSTEM), clock=clock)
    scheduler.sync_once()
    submitted = 0
    for step in steps:
        if step[0] == "submit":
            gpus, fraction = (step[1], "") if "." not in step[1] else (0, step[1])
            namespace = TEAM_B if step[2] else TEAM_A
            pod = user_pod(f"p{submitted}", int(gpus), fraction, namespace)
            kube.api.call("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
            submitted += 1
        elif step[0] == "finish":
            running = sorted(
                (p["metadata"]["namespace"], p["metadata"]["name"])
                for p in kube.api.objects("v1", "Pod")
                if p["metadata"]["namespace"] in (TEAM_A, TEAM_B) and p["spec"].get("nodeName")
            )
            if running:
                namespace, name = running[step[1] % len(running)]
                kube.api.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
        elif step[0] == "later":
            clock.offset += step[1]
        else:
            _, fresh, faults = step
            for fault in faults:
                kube.api.add_fault(replace(FAULTS[fault]))
            scheduler.sync_once() if fresh else scheduler.cycle()
            kube.api.faults.clear()
            assert double_booked(kube) == [], step
        kubelet.step()
    # the faults over, the watch still silent: what was written is read back, and the
    # scheduler does not keep asking for what it has done already
    clock.offset += ASSUME_FOR_S + 1
    errors: list[str] = []
    for _ in range(2):
        report = scheduler.cycle()
        assert report is not None
        errors = report.outcome.errors
        kubelet.step()
    assert errors == []  # no Binding (409) or reservation pod (AlreadyExists) asked again
    assert double_booked(kube) == []
    rejected = [
        p["status"].get("reason", "")
        for p in kube.api.objects("v1", "Pod")
        if p["status"].get("reason", "").startswith("OutOf")
    ]
    assert rejected == []  # no pod the kubelet had to turn away
