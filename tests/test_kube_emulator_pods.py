"""The emulator treats pods as a 1.32 API server does where a scheduler relies on it:
binding, eviction against disruption budgets, graceful deletion, the pod fields an update may
change, priority admission and watches; driven through the official client over HTTP."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import kubernetes
import pytest
from kubernetes.client import CoreV1Api, PolicyV1Api
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from tests.cluster_standins import (
    HASH_LABEL,
    INDEX_KEY,
    DeploymentController,
    JobController,
    Kubelet,
    settle,
)
from tests.kube_emulator import ApiError, KubeEmulator

NS = "a"


@pytest.fixture
def kube() -> Iterator[KubeEmulator]:
    with KubeEmulator(pod_termination="graceful") as emulator:
        emulator.api.call("POST", "/api/v1/namespaces", namespace(NS))
        yield emulator


@pytest.fixture
def core(kube: KubeEmulator) -> Iterator[CoreV1Api]:
    with kubernetes.client.ApiClient(kube.configuration()) as api:
        yield CoreV1Api(api)


@pytest.fixture
def policy(kube: KubeEmulator) -> Iterator[PolicyV1Api]:
    with kubernetes.client.ApiClient(kube.configuration()) as api:
        yield PolicyV1Api(api)


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def pod(name: str, labels: dict | None = None, **spec) -> dict:
    container = {"name": "main", "image": "trainer:1"}
    meta = {"name": name, "namespace": NS, "labels": labels or {}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [container], **spec},
    }


def binding(name: str, node: str, kind: str = "Node", **meta) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, **meta},
        "target": {"apiVersion": "v1", "kind": kind, "name": node},
    }


def eviction(name: str) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": NS},
    }


def bind(core: CoreV1Api, name: str, node: str, **meta):
    """Bind and read the raw answer: the client cannot deserialise the Status a real server
    answers a binding with into the V1Binding it expects (a known client issue)."""
    response = core.create_namespaced_pod_binding(
        name, NS, binding(name, node, **meta), _preload_content=False
    )
    return response.status, json.loads(response.data)


def running(core: CoreV1Api, name: str, node: str = "n1") -> None:
    """Bound, and Running and Ready as its kubelet would report."""
    bind(core, name, node)
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    core.patch_namespaced_pod_status(name, NS, {"status": status})


def error(call) -> tuple[int, dict]:
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body)


# --- binding -------------------------------------------------------------------------------


def test_a_binding_sets_the_node_once(core: CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    code, body = bind(core, "p", "n1", annotations={"gpu": "0"})
    assert (code, body["kind"], body["status"], body["code"]) == (201, "Status", "Success", 201)
    bound = core.read_namespaced_pod("p", NS)
    assert bound.spec.node_name == "n1"
    assert bound.metadata.annotations == {"gpu": "0"}
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    code, body = error(lambda: bind(core, "p", "n2"))
    assert (code, body["reason"]) == (409, "Conflict")
    assert 'pod p is already assigned to node "n1"' in body["message"]
    assert core.read_namespaced_pod("p", NS).spec.node_name == "n1"


def test_a_binding_needs_a_live_pod_a_node_and_its_preconditions(core: CoreV1Api) -> None:
    assert error(lambda: bind(core, "missing", "n1"))[0] == 404
    core.create_namespaced_pod(NS, pod("p"))
    assert error(lambda: bind(core, "p", "n1", uid="not-the-uid"))[0] == 409
    assert error(lambda: bind(core, "p", "n1", resourceVersion="1"))[0] == 409
    wrong_kind = binding("p", "n1", kind="Pod")
    assert error(lambda: core.create_namespaced_pod_binding("p", NS, wrong_kind))[0] == 500
    other_name = binding("q", "n1")
    assert error(lambda: core.create_namespaced_pod_binding("p", NS, other_name))[0] == 400
    live = core.read_namespaced_pod("p", NS).metadata
    assert bind(core, "p", "n1", uid=live.uid, resourceVersion=live.resource_version)[0] == 201


def test_a_pod_being_deleted_cannot_be_bound(core: CoreV1Api) -> None:
    core.create_namespaced_pod(NS, {**pod("p"), "metadata": {"name": "p", "finalizers": ["x/y"]}})
    core.delete_namespaced_pod("p", NS)  # held by its finalizer
    code, body = error(lambda: bind(core, "p", "n1"))
    assert code == 409 and "is being deleted" in body["message"]


def test_the_legacy_bindings_collection_binds_too(kube: KubeEmulator, core: CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    response = core.create_namespaced_binding(NS, binding("p", "n1"), _preload_content=False)
    assert response.status == 201
    assert kube.api.find("v1", "Pod", "p", NS)["spec"]["nodeName"] == "n1"


# --- eviction and disruption budgets -------------------------------------------------------


def budget(name: str, **spec) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


def test_an_eviction_keeps_the_budget(
    kube: KubeEmulator, core: CoreV1Api, policy: PolicyV1Api
) -> None:
    for name in ("w0", "w1", "w2"):
        core.create_namespaced_pod(NS, pod(name, {"app": "web"}))
        running(core, name)
    policy.create_namespaced_pod_disruption_budget(NS, budget("web", minAvailable=2))
    status = policy.read_namespaced_pod_disruption_budget("web", NS).status
    assert (status.current_healthy, status.desired_healthy, status.expected_pods) == (3, 2, 3)
    assert status.disruptions_allowed == 1

    core.create_namespaced_pod_eviction("w0", NS, eviction("w0"))
    evicted = core.read_namespaced_pod("w0", NS)  # terminating, not gone: graceful mode
    assert evicted.metadata.deletion_timestamp is not None
    assert evicted.metadata.deletion_grace_period_seconds == 30
    target = [c for c in evicted.status.conditions if c.type == "DisruptionTarget"]
    assert [(c.status, c.reason) for c in target] == [("True", "EvictionByEvictionAPI")]
    assert policy.read_namespaced_pod_disruption_budget("web", NS).status.disruptions_allowed == 0

    code, body = error(lambda: core.create_namespaced_pod_eviction("w1", NS, eviction("w1")))
    assert (code, body["reason"]) == (429, "TooManyRequests")
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert core.read_namespaced_pod("w1", NS).metadata.deletion_timestamp is None


def test_a_pod_under_two_budgets_cannot_be_evicted(core: CoreV1Api, policy: PolicyV1Api) -> None:
    core.create_namespaced_pod(NS, pod("w0", {"app": "web"}))
    running(core, "w0")
    policy.create_namespaced_pod_disruption_budget(NS, budget("one", maxUnavailable="100%"))
    policy.create_namespaced_pod_disruption_budget(NS, budget("two", minAvailable=0))
    code, body = error(lambda: core.create_namespaced_pod_eviction("w0", NS, eviction("w0")))
    assert code == 500 and "more than one PodDisruptionBudget" in body["message"]


def test_a_pending_pod_can_always_be_evicted(
    kube: KubeEmulator, core: CoreV1Api, policy: PolicyV1Api
) -> None:
    core.create_namespaced_pod(NS, pod("w0", {"app": "web"}))
    policy.create_namespaced_pod_disruption_budget(NS, budget("web", minAvailable=5))
    core.create_namespaced_pod_eviction("w0", NS, eviction("w0"))
    assert kube.api.find("v1", "Pod", "w0", NS) is None  # unbound: nothing to wait for


def test_a_percentage_budget_counts_its_controllers_scale(
    kube: KubeEmulator, core: CoreV1Api, policy: PolicyV1Api
) -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1", "controller": True}
    labelled = pod("w0", {"app": "web"})
    labelled["metadata"]["ownerReferences"] = [owner]
    core.create_namespaced_pod(NS, labelled)
    policy.create_namespaced_pod_disruption_budget(NS, budget("web", maxUnavailable="50%"))
    status = policy.read_namespaced_pod_disruption_budget("web", NS).status
    # a Job has no scale: the controller fails safe
    assert status.disruptions_allowed == 0
    assert [(c.type, c.status, c.reason) for c in status.conditions] == [
        ("DisruptionAllowed", "False", "SyncFailed")
    ]


# --- graceful deletion ---------------------------------------------------------------------


def test_a_bound_pod_terminates_until_its_kubelet_finishes(
    kube: KubeEmulator, core: CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, pod("p", terminationGracePeriodSeconds=10))
    bind(core, "p", "n1")
    deleted = core.delete_namespaced_pod("p", NS)
    assert deleted.metadata.deletion_grace_period_seconds == 10
    core.delete_namespaced_pod("p", NS, grace_period_seconds=3)  # a shorter period wins
    assert core.read_namespaced_pod("p", NS).metadata.deletion_grace_period_seconds == 3
    assert kube.api.finish_terminating() == ["a/p"]
    assert error(lambda: core.read_namespaced_pod("p", NS))[0] == 404


def test_an_unbound_pod_is_deleted_at_once(kube: KubeEmulator, core: CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    core.delete_namespaced_pod("p", NS)
    assert kube.api.find("v1", "Pod", "p", NS) is None


def test_immediate_mode_deletes_bound_pods_at_once() -> None:
    with KubeEmulator(validate_builtins=False) as kube:
        kube.api.call("POST", "/api/v1/namespaces", namespace(NS))
        kube.api.call("POST", f"/api/v1/namespaces/{NS}/pods", pod("p", nodeName="n1"))
        kube.api.call("DELETE", f"/api/v1/namespaces/{NS}/pods/p")
        assert kube.api.find("v1", "Pod", "p", NS) is None


def test_finalizers_keep_a_deleted_object_until_removed(
    kube: KubeEmulator, core: CoreV1Api
) -> None:
    held = {**pod("p"), "metadata": {"name": "p", "finalizers": ["x/y"]}}
    core.create_namespaced_pod(NS, held)
    core.delete_namespaced_pod("p", NS)
    code, _ = error(
        lambda: core.patch_namespaced_pod("p", NS, {"metadata": {"finalizers": ["x/y", "x/z"]}})
    )
    assert code == 422  # no new finalizers on an object being deleted
    core.patch_namespaced_pod("p", NS, {"metadata": {"finalizers": None}})
    assert kube.api.find("v1", "Pod", "p", NS) is None


# --- what an update may change -------------------------------------------------------------


def test_a_bound_pods_spec_is_immutable_but_its_annotations_are_not(core: CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p", activeDeadlineSeconds=100))
    bind(core, "p", "n1")
    core.patch_namespaced_pod("p", NS, {"metadata": {"annotations": {"gpu-uuid": "GPU-1"}}})
    for change in (
        {"nodeName": "n2"},
        {"activeDeadlineSeconds": 200},
        {"restartPolicy": "Never"},
    ):
        code, body = error(lambda c=change: core.patch_namespaced_pod("p", NS, {"spec": c}))
        assert (code, body["reason"]) == (422, "Invalid"), change
    toleration = {"key": "gpu", "operator": "Exists"}
    patched = core.patch_namespaced_pod(
        "p", NS, {"spec": {"activeDeadlineSeconds": 50, "tolerations": [toleration]}}
    )
    assert patched.spec.active_deadline_seconds == 50
    assert (
        error(lambda: core.patch_namespaced_pod("p", NS, {"spec": {"tolerations": []}}))[0] == 422
    )
    live = core.read_namespaced_pod("p", NS)
    assert (live.spec.node_name, live.metadata.annotations) == ("n1", {"gpu-uuid": "GPU-1"})


def test_an_unbound_pod_cannot_be_given_a_node_by_update(core: CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    code, _ = error(lambda: core.patch_namespaced_pod("p", NS, {"spec": {"nodeName": "n1"}}))
    assert code == 422


# --- priority ------------------------------------------------------------------------------


def test_priority_comes_from_an_existing_priority_class(
    kube: KubeEmulator, core: CoreV1Api
) -> None:
    kube.api.call(
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "train"},
            "value": 100,
            "preemptionPolicy": "Never",
        },
    )
    created = core.create_namespaced_pod(NS, pod("p", priorityClassName="train"))
    assert (created.spec.priority, created.spec.preemption_policy) == (100, "Never")
    plain = core.create_namespaced_pod(NS, pod("q"))
    assert (plain.spec.priority, plain.spec.scheduler_name) == (0, "default-scheduler")
    code, body = error(lambda: core.create_namespaced_pod(NS, pod("r", priorityClassName="nope")))
    assert (code, body["reason"]) == (403, "Forbidden")
    assert "no PriorityClass with name nope was found" in body["message"]
    code, _ = error(
        lambda: core.create_namespaced_pod(NS, pod("s", priorityClassName="train", priority=5))
    )
    assert code == 403


# --- watches -------------------------------------------------------------------------------


def watched(func, *args, count: int, **kwargs) -> list[tuple[str, str]]:
    """The first `count` events (type, pod name) of a watch that ends after 5 s at most."""
    watcher = kubernetes.watch.Watch()
    events = []
    for event in watcher.stream(func, *args, timeout_seconds=5, **kwargs):
        events.append((event["type"], event["raw_object"]["metadata"].get("name")))
        if len(events) == count:
            watcher.stop()
    return events


def test_a_watch_replays_the_changes_after_a_lists_version(core: CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("before"))
    version = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("p"))
    bind(core, "p", "n1")
    core.delete_namespaced_pod("before", NS)
    events = watched(core.list_namespaced_pod, NS, resource_version=version, count=3)
    assert events == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "before")]
    everywhere = watched(core.list_pod_for_all_namespaces, resource_version=version, count=3)
    assert everywhere == events


def test_a_watch_from_no_version_starts_with_the_current_objects(core: CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    assert watched(core.list_namespaced_pod, NS, count=1) == [("ADDED", "p")]


def test_a_watch_streams_each_change_as_it_happens(core: CoreV1Api) -> None:
    version = core.list_namespaced_pod(NS).metadata.resource_version
    later = threading.Timer(0.1, lambda: core.create_namespaced_pod(NS, pod("p")))
    later.start()
    started = time.monotonic()
    events = watched(core.list_namespaced_pod, NS, resource_version=version, count=1)
    later.join()
    assert events == [("ADDED", "p")]
    assert time.monotonic() - started < 4  # not held back until the 5 s watch ends


def test_selectors_turn_changes_into_arrivals_and_departures(core: CoreV1Api) -> None:
    version = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("p", {"app": "web"}))
    core.create_namespaced_pod(NS, pod("q", {"app": "db"}))
    bind(core, "p", "n1")
    bind(core, "q", "n1")
    core.delete_namespaced_pod("p", NS)
    kwargs = {"resource_version": version, "label_selector": "app=web"}
    on_node = watched(
        core.list_namespaced_pod, NS, field_selector="spec.nodeName=n1", count=2, **kwargs
    )
    assert on_node == [("ADDED", "p"), ("MODIFIED", "p")]  # bound: arrives; then terminating
    unbound = watched(
        core.list_namespaced_pod, NS, field_selector="spec.nodeName=", count=2, **kwargs
    )
    assert unbound == [("ADDED", "p"), ("DELETED", "p")]  # bound: leaves the selection


def test_a_watch_from_an_expired_version_is_gone() -> None:
    with KubeEmulator(watch_history=2, validate_builtins=False) as kube:
        kube.api.call("POST", "/api/v1/namespaces", namespace(NS))
        with kubernetes.client.ApiClient(kube.configuration()) as api:
            core = CoreV1Api(api)
            version = core.list_namespaced_pod(NS).metadata.resource_version
            for name in ("p", "q", "r"):
                core.create_namespaced_pod(NS, pod(name))
            with pytest.raises(ApiException) as gone:
                watched(core.list_namespaced_pod, NS, resource_version=version, count=1)
            assert gone.value.status == 410
            recent = core.list_namespaced_pod(NS).metadata.resource_version
            core.delete_namespaced_pod("p", NS)
            assert watched(core.list_namespaced_pod, NS, resource_version=recent, count=1) == [
                ("DELETED", "p")
            ]


def test_a_watch_ends_at_its_timeout_with_a_bookmark(core: CoreV1Api) -> None:
    version = core.list_namespaced_pod(NS).metadata.resource_version
    watcher = kubernetes.watch.Watch()
    events = list(
        watcher.stream(
            core.list_namespaced_pod,
            NS,
            resource_version=version,
            timeout_seconds=1,
            allow_watch_bookmarks=True,
        )
    )
    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert events[0]["raw_object"]["metadata"]["resourceVersion"] == version


def test_the_dynamic_client_watches_too(kube: KubeEmulator, tmp_path) -> None:
    with kubernetes.client.ApiClient(kube.configuration()) as api:
        dynamic = DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
        pods = dynamic.resources.get(api_version="v1", kind="Pod")
        version = dynamic.get(pods, namespace=NS).metadata.resourceVersion
        dynamic.create(pods, body=pod("p"), namespace=NS)
        for event in pods.watch(namespace=NS, resource_version=version, timeout=5):
            assert (event["type"], event["object"].metadata.name) == ("ADDED", "p")
            break


# --- events ----------------------------------------------------------------------------------


def test_events_are_recorded_in_existing_namespaces(kube: KubeEmulator) -> None:
    involved = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": NS}
    core_event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "p.1", "namespace": NS},
        "involvedObject": involved,
        "reason": "Scheduled",
        "message": "bound to n1",
        "type": "Normal",
    }
    kube.api.call("POST", f"/api/v1/namespaces/{NS}/events", core_event)
    new_event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "p.2", "namespace": NS},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "gitops-sched",
        "reportingInstance": "gitops-sched-0",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": involved,
        "type": "Normal",
    }
    kube.api.call("POST", f"/apis/events.k8s.io/v1/namespaces/{NS}/events", new_event)
    with pytest.raises(ApiError) as missing:
        elsewhere = {**core_event, "metadata": {"name": "p.3"}}
        kube.api.call("POST", "/api/v1/namespaces/nowhere/events", elsewhere)
    assert missing.value.code == 404


# --- stand-ins: the Job controller and the kubelet -------------------------------------------


def node(name: str, gpus: int, **labels: str) -> dict:
    amounts = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus), "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": amounts, "allocatable": amounts},
    }


def gpu_job(name: str, replicas: int) -> dict:
    container = {
        "name": "main",
        "image": "trainer:1",
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parallelism": replicas,
            "completions": replicas,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "Ignore",
                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                    }
                ]
            },
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"note": "x"}},
                "spec": {"schedulerName": "gitops-sched", "containers": [container]},
            },
        },
    }


def job_pods(kube: KubeEmulator) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in kube.api.objects("v1", "Pod")}


def test_the_job_controller_replaces_an_evicted_pod(kube: KubeEmulator, core: CoreV1Api) -> None:
    kube.api.call("POST", "/api/v1/nodes", node("n1", gpus=2))
    kube.api.call("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", gpu_job("train", 2))
    jobs, kubelet = JobController(kube.api, seed=7), Kubelet(kube.api)
    jobs.step()
    pods = job_pods(kube)
    assert sorted(n.rsplit("-", 1)[0] for n in pods) == ["train-0", "train-1"]
    first = next(p for n, p in pods.items() if n.startswith("train-0-"))
    assert first["metadata"]["annotations"] == {"note": "x", INDEX_KEY: "0"}
    assert first["metadata"]["labels"]["job-name"] == "train"
    assert first["metadata"]["labels"][INDEX_KEY] == "0"
    assert first["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert first["spec"]["schedulerName"] == "gitops-sched"
    for name in pods:
        bind(core, name, "n1")
    settle(jobs, kubelet)
    evicted = first["metadata"]["name"]
    core.create_namespaced_pod_eviction(evicted, NS, eviction(evicted))
    jobs.step()  # the evicted pod still runs: no replacement yet (podReplacementPolicy Failed)
    assert len(job_pods(kube)) == 2
    settle(jobs, kubelet)
    pods = job_pods(kube)
    assert evicted not in pods  # stopped, counted, its finalizer removed
    assert sorted(n.rsplit("-", 1)[0] for n in pods) == ["train-0", "train-1"]
    status = kube.api.find("batch/v1", "Job", "train", NS)["status"]
    assert status.get("failed", 0) == 0  # an eviction is not a failure
    assert status["active"] == 2


def test_the_job_completes_when_every_index_succeeds(kube: KubeEmulator, core: CoreV1Api) -> None:
    kube.api.call("POST", "/api/v1/nodes", node("n1", gpus=2))
    kube.api.call("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", gpu_job("train", 2))
    jobs, kubelet = JobController(kube.api), Kubelet(kube.api)
    jobs.step()
    for name in job_pods(kube):
        bind(core, name, "n1")
    kubelet.step()
    for name in job_pods(kube):
        kubelet.finish(NS, name)
    settle(jobs, kubelet)
    status = kube.api.find("batch/v1", "Job", "train", NS)["status"]
    assert (status["succeeded"], status["completedIndexes"]) == (2, "0-1")
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert all(not p["metadata"].get("finalizers") for p in job_pods(kube).values())


def test_the_kubelet_rejects_a_pod_on_a_gpu_that_is_taken(
    kube: KubeEmulator, core: CoreV1Api
) -> None:
    kube.api.call("POST", "/api/v1/nodes", node("n1", gpus=1))
    gpu = {"limits": {"nvidia.com/gpu": "1"}}
    started = []
    kubelet = Kubelet(kube.api, terminate_after=1, on_start=lambda p, n: started.append(p))
    core.create_namespaced_pod(
        NS, pod("first", containers=[{"name": "m", "image": "x:1", "resources": gpu}])
    )
    bind(core, "first", "n1")
    kubelet.step()
    assert core.read_namespaced_pod("first", NS).status.phase == "Running"
    assert [p["metadata"]["name"] for p in started] == ["first"]
    core.delete_namespaced_pod("first", NS)  # terminating: it holds its GPU until it stops
    core.create_namespaced_pod(
        NS, pod("second", containers=[{"name": "m", "image": "x:1", "resources": gpu}])
    )
    bind(core, "second", "n1")
    kubelet.step()
    rejected = core.read_namespaced_pod("second", NS).status
    assert (rejected.phase, rejected.reason) == ("Failed", "OutOfnvidia.com/gpu")
    assert "requested: 1, used: 1, capacity: 1" in rejected.message
    kubelet.step()  # the first pod's grace ends
    assert kube.api.find("v1", "Pod", "first", NS) is None
    core.create_namespaced_pod(
        NS, pod("third", containers=[{"name": "m", "image": "x:1", "resources": gpu}])
    )
    bind(core, "third", "n1")
    kubelet.step()
    assert core.read_namespaced_pod("third", NS).status.phase == "Running"


def test_the_kubelets_start_hook_can_annotate_the_pod(kube: KubeEmulator, core: CoreV1Api) -> None:
    kube.api.call("POST", "/api/v1/nodes", node("n1", gpus=1))

    def reserve(started: dict, on: dict) -> None:
        meta = started["metadata"]
        patch = {"metadata": {"annotations": {"gpu-uuid": f"GPU-{on['metadata']['name']}-0"}}}
        kube.api.call("PATCH", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", patch)

    kubelet = Kubelet(kube.api, start_after=1, on_start=reserve)
    core.create_namespaced_pod(NS, pod("reservation"))
    bind(core, "reservation", "n1")
    kubelet.step()
    assert core.read_namespaced_pod("reservation", NS).status.phase == "Pending"  # not yet
    kubelet.step()
    started = core.read_namespaced_pod("reservation", NS)
    assert started.status.phase == "Running" and started.status.start_time is not None
    assert started.metadata.annotations == {"gpu-uuid": "GPU-n1-0"}


def test_the_deployment_controller_rolls_pods_within_its_budget(
    kube: KubeEmulator, core: CoreV1Api
) -> None:
    kube.api.call("POST", "/api/v1/nodes", node("n1", gpus=0))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve", "namespace": NS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "serve"}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "template": {
                "metadata": {"labels": {"app": "serve"}},
                "spec": {"containers": [{"name": "m", "image": "serve:1"}]},
            },
        },
    }
    path = f"/apis/apps/v1/namespaces/{NS}/deployments"
    kube.api.call("POST", path, deployment)
    deployments, kubelet = DeploymentController(kube.api), Kubelet(kube.api)

    def bind_all() -> None:
        for p in kube.api.objects("v1", "Pod"):
            if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"):
                bind(core, p["metadata"]["name"], "n1")

    deployments.step()
    first = {p["metadata"]["labels"][HASH_LABEL] for p in kube.api.objects("v1", "Pod")}
    assert len(kube.api.objects("v1", "Pod")) == 2 and len(first) == 1
    bind_all()
    settle(deployments, kubelet)
    kube.api.call(
        "PATCH",
        f"{path}/serve",
        {"spec": {"template": {"spec": {"containers": [{"name": "m", "image": "serve:2"}]}}}},
    )
    deployments.step()
    live = [p for p in kube.api.objects("v1", "Pod") if not p["metadata"].get("deletionTimestamp")]
    assert len(live) == 2  # one old pod went, one new came: never more than 2
    for _ in range(4):
        bind_all()
        settle(deployments, kubelet)
    hashes = {p["metadata"]["labels"][HASH_LABEL] for p in kube.api.objects("v1", "Pod")}
    assert len(kube.api.objects("v1", "Pod")) == 2 and hashes.isdisjoint(first)
    status = kube.api.find("apps/v1", "Deployment", "serve", NS)["status"]
    assert (status["updatedReplicas"], status["readyReplicas"]) == (2, 2)


def test_a_budget_sets_one_of_min_available_and_max_unavailable(policy: PolicyV1Api) -> None:
    both = budget("web", minAvailable=1, maxUnavailable=1)
    code, body = error(lambda: policy.create_namespaced_pod_disruption_budget(NS, both))
    assert (code, body["reason"]) == (422, "Invalid")
    too_much = budget("web", maxUnavailable="120%")
    assert error(lambda: policy.create_namespaced_pod_disruption_budget(NS, too_much))[0] == 422


def test_a_binding_is_only_ever_created(kube: KubeEmulator, core: CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{kube.url}/api/v1/namespaces/{NS}/pods/p/binding", timeout=5)
    assert refused.value.code == 405


def test_a_node_registers_with_its_status_in_canonical_quantities(core: CoreV1Api) -> None:
    registered = node("n1", gpus=2)
    registered["status"]["allocatable"] = {"memory": "65536Mi", "nvidia.com/gpu": "2"}
    registered["spec"] = {"unschedulable": True}
    core.create_node(registered)
    core.create_node(node("n2", gpus=1))
    stored = core.read_node("n1").status.allocatable
    assert stored == {"memory": "64Gi", "nvidia.com/gpu": "2"}
    cordoned = core.list_node(field_selector="spec.unschedulable=true").items
    assert [n.metadata.name for n in cordoned] == ["n1"]
    code, body = error(lambda: core.list_node(field_selector="status.phase=Ready"))
    assert code == 400 and "field label not supported" in body["message"]


@pytest.mark.parametrize("termination", ["graceful", "immediate"])
def test_the_pods_of_a_deleted_job_go_with_it(termination: str) -> None:
    with KubeEmulator(pod_termination=termination, validate_builtins=False) as kube:
        api = kube.api
        api.call("POST", "/api/v1/namespaces", namespace(NS))
        api.call("POST", "/api/v1/nodes", node("n1", gpus=2))
        api.call("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", gpu_job("train", 2))
        jobs, kubelet = JobController(api), Kubelet(api)
        jobs.step()
        for name in job_pods(kube):
            api.call("POST", f"/api/v1/namespaces/{NS}/pods/{name}/binding", binding(name, "n1"))
        settle(jobs, kubelet)
        assert all(p["status"]["phase"] == "Running" for p in job_pods(kube).values())
        api.call("DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/train")
        settle(jobs, kubelet)
        assert job_pods(kube) == {}
