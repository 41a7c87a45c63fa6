"""The scheduler's process parts on the real control plane: informers that list and watch,
the scheduler's own writes assumed until its informers show them, and `--once`'s report and
the loop's log of the pods it cannot take. Only an expired watch version, which a real
server gives on no test's demand, is asked of the API emulator."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gitops_sched.cli import main
from gitops_sched.cluster import ApiFailure, ClusterClient, ObjectRef
from gitops_sched.cluster.informer import Informer
from gitops_sched.compiler import render_repo
from gitops_sched.contract.labels import PROJECT_LABEL
from gitops_sched.contract.pods import GPU_RESOURCE as GPU
from gitops_sched.contract.pods import NODE_GPUS
from gitops_sched.contract.policy import POLICY_CONFIGMAP, POLICY_KEY
from gitops_sched.scheduler.assumed import ASSUME_FOR_S, Assumed
from gitops_sched.scheduler.loop import SHOWN_IGNORED, Scheduler, Settings, ignored_lines
from gitops_sched.scheduler.status import COMPONENT
from gitops_sched.scheduler.view import Ignored
from gitops_sched.validate import check_repo
from testkit.control_plane.accounts import (
    SCHEDULER,
    account_client,
    account_kubeconfig,
    make_namespace,
)
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.install import apply_kustomization
from testkit.control_plane.nodes import add_settled, gpu_node
from testkit.control_plane.waiting import wait
from testkit.loops import running
from tests.kube_emulator.fixtures import connect as connect_emulator
from tests.kube_emulator.server import KubeEmulator

NS = "team"


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}


def configmap(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": {"v": value},
    }


def wait_for(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


ROOT_CA = "kube-root-ca.crt"  # kube-controller-manager publishes it into every namespace


def names(informer: Informer) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["data"]["v"]
        for o in informer.items()
        if o["metadata"]["name"] != ROOT_CA
    }


def test_an_informer_lists_then_follows_changes_and_wakes_its_owner(real_client):
    client = real_client
    client.create(namespace())
    client.create(configmap("a", "1"))
    woken = threading.Event()
    informer = Informer(client, "v1", "ConfigMap", namespace=NS, on_change=woken.set)
    stop = threading.Event()
    informer.start(stop, timeout=2)
    try:
        assert informer.wait_synced(30)
        assert names(informer) == {"a": "1"}
        woken.clear()
        client.create(configmap("b", "2"))
        wait("b seen", lambda: names(informer) == {"a": "1", "b": "2"})
        assert woken.is_set()
        client.delete(ObjectRef("v1", "ConfigMap", NS, "a"))
        wait("a gone", lambda: names(informer) == {"b": "2"})
    finally:
        stop.set()


def test_an_informer_whose_version_expired_lists_again():
    with KubeEmulator(watch_history=3) as small:
        client = connect_emulator(small)
        client.create(namespace())
        client.create(configmap("a", "1"))
        informer = Informer(client, "v1", "ConfigMap", namespace=NS, retry_after=0.01)
        informer.relist()
        for n in range(5):  # more changes than the server remembers: the version expires
            client.create(configmap(f"c{n}", "x"))
        try:
            informer.watch_once(timeout=1)
        except ApiFailure as exc:
            assert exc.status == 410
        else:
            raise AssertionError("an expired version must end the watch with 410")
        stop = threading.Event()
        informer.start(stop, timeout=1)  # lists again, then watches
        try:
            assert wait_for(lambda: len(informer.items()) == 6)
        finally:
            stop.set()
            client.close()


def pod(uid: str, node: str = "", deleting: bool = False, version: str = "1") -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": uid,
        "namespace": NS,
        "uid": uid,
        "annotations": {},
        "resourceVersion": version,
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}}


def test_a_bind_is_assumed_until_the_cache_shows_it():
    assumed = Assumed()
    assumed.bound((NS, "u1"), "u1", "n1", {"x": "1"}, now=100.0)
    seen = assumed.overlay([pod("u1"), pod("u2")], now=101.0)
    assert seen[0]["spec"]["nodeName"] == "n1" and seen[0]["metadata"]["annotations"] == {"x": "1"}
    assert seen[1]["spec"] == {}  # others untouched
    # the informer caught up: the assumption goes, the cache is believed from then on
    assert assumed.overlay([pod("u1", node="n1")], now=102.0)[0]["spec"]["nodeName"] == "n1"
    assert assumed.writes == {}


def test_an_assumption_the_cache_never_confirms_is_checked_not_dropped():
    """A silent watch must not hand the GPUs out again once the assumption is old: the
    pod is read, and what the server says is believed until the cache has that version."""
    assumed = Assumed()
    assumed.bound((NS, "u1"), "u1", "n1", {}, now=0.0)
    assumed.terminating((NS, "u2"), "u2", now=0.0)
    assert assumed.to_check(1.0) == []
    later = ASSUME_FOR_S + 1
    seen = assumed.overlay([pod("u1"), pod("u2")], now=later)
    assert seen[0]["spec"]["nodeName"] == "n1" and seen[1]["metadata"]["deletionTimestamp"]
    assert assumed.to_check(later) == [(NS, "u1"), (NS, "u2")]
    assumed.read((NS, "u1"), pod("u1", node="n1", version="7"), later)
    assumed.read((NS, "u2"), None, later)  # gone
    assert assumed.to_check(later) == []
    seen = assumed.overlay([pod("u1", version="3"), pod("u2")], now=later)
    assert [p["metadata"]["name"] for p in seen] == ["u1"]  # u2 gone: not in the view
    assert seen[0]["spec"]["nodeName"] == "n1"
    seen = assumed.overlay([pod("u1", node="n1", version="8")], now=later)  # caught up
    assert assumed.writes == {}


def test_a_write_of_unknown_outcome_is_assumed_and_checked_at_once():
    assumed = Assumed()
    assumed.bound((NS, "u1"), "u1", "n1", {}, now=0.0, unsure=True)
    assert assumed.to_check(0.0) == [(NS, "u1")]
    assumed.read((NS, "u1"), pod("u1", version="5"), now=0.0)  # it was not bound
    assert assumed.overlay([pod("u1", version="4")], now=1.0)[0]["spec"] == {}
    assumed.overlay([pod("u1", version="5")], now=1.0)
    assert assumed.writes == {}


def test_a_pod_we_created_and_bound_is_seen_before_the_cache_lists_it():
    assumed = Assumed()
    made = pod("r1")
    assumed.created(made, now=0.0)
    assumed.bound((NS, "r1"), "r1", "n1", {}, now=0.0)
    (seen,) = assumed.overlay([], now=1.0)
    assert seen["metadata"]["name"] == "r1" and seen["spec"]["nodeName"] == "n1"
    (seen,) = assumed.overlay([pod("r1")], now=2.0)  # listed, the bind not shown yet
    assert seen["spec"]["nodeName"] == "n1"
    assumed.overlay([pod("r1", node="n1")], now=3.0)
    assert assumed.writes == {}


def test_an_eviction_is_assumed_until_the_pod_terminates_and_a_gone_pod_drops_it():
    assumed = Assumed()
    assumed.terminating((NS, "u1"), "u1", now=10.0)
    seen = assumed.overlay([pod("u1", node="n1")], now=11.0)
    assert seen[0]["metadata"]["deletionTimestamp"]
    assumed.overlay([pod("u1", node="n1", deleting=True)], now=12.0)
    assert assumed.writes == {}
    assumed.terminating((NS, "u3"), "u3", now=0.0)
    assumed.overlay([], now=1.0)
    assert assumed.writes == {}


# --- pods with our schedulerName that the scheduler cannot take ---------------------------

SYSTEM = "gitops-sched-system"
TEAM_A = "project-team-a"  # netapp-dgx's namespace of project team-a
SCRATCH = "scratch"  # a namespace of no project
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "netapp-dgx"


def our_pod(
    name: str,
    namespace: str = TEAM_A,
    labels: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A one-GPU pod with gitops-sched's schedulerName."""
    pod_spec: dict[str, Any] = {
        "schedulerName": "gitops-sched",
        "containers": [
            {"name": "main", "image": "pytorch:2.3", "resources": {"limits": {GPU: "1"}}}
        ],
    }
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": pod_spec,
    }


def dgx(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A DGX-1 of netapp-dgx's node group (8 V100s), as GFD and the device plugin show it."""
    node = gpu_node(name, "V100-SXM2-32GB", 8)
    node["metadata"]["annotations"] = annotations or {}
    return node


def install_example(plane: ControlPlane, cluster: ClusterClient) -> None:
    """The scheduler's shipped manifests (`kubectl apply -k scheduler/`: it runs as its
    ServiceAccount), netapp-dgx's policy ConfigMap and one DGX-1 node of its group, Ready."""
    apply_kustomization(plane, "scheduler")
    for name in (TEAM_A, SCRATCH):
        make_namespace(cluster, name)
    repo, diagnostics = check_repo(EXAMPLE)
    assert repo is not None, diagnostics
    (policy,) = [o for o in render_repo(repo) if o["kind"] == "ConfigMap"]
    cluster.create(policy)
    add_settled(cluster, dgx("dgx-0"))


def scheduler_client(plane: ControlPlane) -> ClusterClient:
    return account_client(plane, *SCHEDULER)


def test_scheduler_once_lists_the_pods_it_cannot_take_with_why_and_counts_them(
    real_cluster: ControlPlane, real_client: ClusterClient
):
    client = real_client
    install_example(real_cluster, client)
    client.create(our_pod("train"))  # one it takes, and binds
    client.create(our_pod("ghost", labels={PROJECT_LABEL: "nobody"}))
    client.create(our_pod("on-h100", node_selector={"nvidia.com/gpu.product": "H100-SXM5-80GB"}))
    for i in range(22):  # more than a report lists by name
        client.create(our_pod(f"stray-{i:02}", namespace=SCRATCH))
    kubeconfig = account_kubeconfig(real_cluster, *SCHEDULER)

    result = CliRunner().invoke(
        main, ["scheduler", "--once", "--kubeconfig", str(kubeconfig), "--namespace", SYSTEM]
    )

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    ignored = [line for line in lines if line.startswith(("ignored ", "... and "))]
    assert ignored[:3] == [
        f"ignored {TEAM_A}/ghost: labelled for project 'nobody' but in 'team-a''s namespace "
        f"'{TEAM_A}'",
        f"ignored {TEAM_A}/on-h100: "
        "no node group it may use admits its nodeSelector and node affinity",
        f"ignored {SCRATCH}/stray-00: namespace '{SCRATCH}' belongs to no project",
    ]
    assert len(ignored) == SHOWN_IGNORED + 1  # the first ones by name, then how many more
    assert ignored[-2] == f"ignored {SCRATCH}/stray-17: namespace '{SCRATCH}' belongs to no project"
    assert ignored[-1] == "... and 4 more ignored pods"
    assert lines[-1] == "1 bound, 0 evicted, 0 evictions refused, 0 waiting, 24 ignored, 0 errors"
    assert client.get(ObjectRef("v1", "Pod", TEAM_A, "train"))["spec"]["nodeName"] == "dgx-0"


def test_a_dry_run_lists_the_pods_it_cannot_take_with_why_as_the_real_cycle_then_does(
    real_cluster: ControlPlane, real_client: ClusterClient
):
    # nine one-GPU pods for a node of eight: one waits, and the dry run says which and why
    install_example(real_cluster, real_client)
    for i in range(9):
        real_client.create(our_pod(f"train-{i}"))
    kubeconfig = account_kubeconfig(real_cluster, *SCHEDULER)
    command = ["scheduler", "--once", "--kubeconfig", str(kubeconfig)]
    command += ["--namespace", SYSTEM]

    dry = CliRunner().invoke(main, [*command, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    pods = real_client.list("v1", "Pod", namespace=TEAM_A) or []
    assert not [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")]
    real = CliRunner().invoke(main, command)

    assert dry.output == real.output
    pending = [line for line in dry.output.splitlines() if line.startswith("pending ")]
    assert len(pending) == 1 and pending[0].startswith(f"pending {TEAM_A}/train-"), dry.output
    assert "it needs 1 GPU" in pending[0] and "have 0 free" in pending[0], pending
    assert dry.output.splitlines()[-1] == (
        "8 bound, 0 evicted, 0 evictions refused, 0 waiting, 0 ignored, 0 errors"
    )


def metric(scheduler: Scheduler, name: str, **labels: str) -> float | None:
    return scheduler.metrics.registry.get_sample_value(name, labels)


def test_the_loop_logs_an_ignored_pod_once_and_again_when_its_reason_changes(
    real_cluster: ControlPlane, real_client: ClusterClient, caplog
):
    client = real_client
    install_example(real_cluster, client)
    client.create(our_pod("ghost", labels={PROJECT_LABEL: "nobody"}))
    scheduler = Scheduler(
        scheduler_client(real_cluster), Settings(namespace=SYSTEM, cycle_period=0.02)
    )

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]

    def cycles() -> float:
        return metric(scheduler, "gitops_sched_cycle_duration_seconds_count") or 0

    try:
        with (
            caplog.at_level(logging.INFO, logger="gitops_sched.scheduler.loop"),
            running(scheduler.run),
        ):
            wait("the ignored pod logged", lambda: len(said()) == 1)
            before = cycles()
            wait("five more cycles", lambda: cycles() >= before + 5)  # said once, not a cycle
            assert said() == [
                f"ignored {TEAM_A}/ghost: labelled for project 'nobody' but in 'team-a''s "
                f"namespace '{TEAM_A}'"
            ]
            summaries = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
            assert len(summaries) == 1 and summaries[0].endswith(
                "0 bound, 0 evicted, 0 evictions refused, 0 waiting, 1 ignored, 0 errors"
            )
            relabelled = {"metadata": {"labels": {PROJECT_LABEL: "no-such-project"}}}
            client.patch(ObjectRef("v1", "Pod", TEAM_A, "ghost"), relabelled)
            wait("the new reason logged", lambda: len(said()) == 2)
            assert "'no-such-project'" in said()[1]
            assert metric(scheduler, "gitops_sched_ignored_pods", namespace=TEAM_A) == 1
    finally:
        scheduler.client.close()


def test_a_report_names_a_bound_ignored_pod_and_counts_only_what_it_leaves_out():
    bound = Ignored("team-a", "old", "u0", "its placement names GPUs its node does not have", True)
    strays = [Ignored(SCRATCH, f"stray-{i}", f"u{i}", "no project") for i in range(1, 20)]
    assert ignored_lines([bound, *strays])[0] == (
        "ignored team-a/old (bound): its placement names GPUs its node does not have"
    )
    assert len(ignored_lines([bound, *strays])) == SHOWN_IGNORED  # all shown: no "and N more"
    assert ignored_lines([bound, *strays], shown=3)[-1] == "... and 17 more ignored pods"
    assert ignored_lines([]) == []


# --- whatever a request raises, the informers and the loop go on --------------------------


def fail_first(target: ClusterClient, times: int, method: str, path: str) -> list[str]:
    """Make the client raise, on its first `times` requests matching, what the official
    client raised from inside its discovery cache under faults (`KeyError: 'resources'`),
    which is no API error; the requests it failed."""
    failed: list[str] = []

    def hook(sent: str, to: str) -> None:
        if sent == method and path in to and len(failed) < times:
            failed.append(to)
            raise KeyError("resources")

    target.before_request.append(hook)
    return failed


def test_an_informer_survives_an_exception_that_is_no_api_error(real_client):
    client = real_client
    client.create(namespace())
    client.create(configmap("a", "1"))
    informer = Informer(client, "v1", "ConfigMap", namespace=NS, retry_after=0.01)
    failed = fail_first(client, 2, "GET", "/configmaps")
    stop = threading.Event()
    informer.start(stop, timeout=2)
    try:
        assert informer.wait_synced(30)
        assert len(failed) == 2
        client.create(configmap("b", "2"))
        wait("b seen", lambda: names(informer) == {"a": "1", "b": "2"})
    finally:
        stop.set()


def test_the_loop_survives_a_cycle_that_raises_and_binds_on_a_later_one(
    real_cluster: ControlPlane, real_client: ClusterClient
):
    client = real_client
    install_example(real_cluster, client)
    client.create(our_pod("train"))
    scheduler = Scheduler(
        scheduler_client(real_cluster), Settings(namespace=SYSTEM, cycle_period=0.02)
    )
    failed = fail_first(scheduler.client, 2, "POST", "/binding")
    try:
        with running(scheduler.run) as (loop,):
            ref = ObjectRef("v1", "Pod", TEAM_A, "train")
            wait("train bound", lambda: (client.get(ref) or {})["spec"].get("nodeName") == "dgx-0")
            assert len(failed) == 2 and loop.thread.is_alive()
    finally:
        scheduler.client.close()


def test_a_node_with_garbage_annotations_is_skipped_with_an_event_and_a_metric(
    real_cluster: ControlPlane, real_client: ClusterClient
):
    client = real_client
    install_example(real_cluster, client)
    garbage = add_settled(client, dgx("dgx-1", {NODE_GPUS: "[" * 5000}))
    client.create(our_pod("train"))
    scheduler = Scheduler(scheduler_client(real_cluster), Settings(namespace=SYSTEM))
    try:
        report = scheduler.sync_once()
        assert report is not None and len(report.outcome.bound) == 1  # on dgx-0
        assert metric(scheduler, "gitops_sched_nodes", state="skipped") == 1
        scheduler.sync_once()  # skipped again, for the same reason: not said again
    finally:
        scheduler.client.close()
    nodes = {
        garbage["metadata"]["uid"],
        client.get(ObjectRef("v1", "Node", "", "dgx-0"))["metadata"]["uid"],
    }
    events = [  # ours about this test's nodes (the control plane's own are about them too)
        (e["involvedObject"]["name"], e["reason"], e["message"])
        for e in client.list("v1", "Event", namespace="default") or ()
        if e.get("reportingComponent") == COMPONENT and e["involvedObject"].get("uid") in nodes
    ]
    assert events == [
        (
            "dgx-1",
            "NodeSkipped",
            f"left out of scheduling: annotation {NODE_GPUS}: nested 5000 levels deep, "
            "more than 16",
        )
    ]


def test_with_fairness_over_time_the_loop_adds_what_each_project_held_between_cycles(
    real_cluster: ControlPlane, real_client: ClusterClient
):
    """The policy's fairness reaches the loop: the GPU team-a held from one cycle to the
    next is its past usage, exported per queue (a share of the window's capacity)."""
    client = real_client
    install_example(real_cluster, client)
    ref = ObjectRef("v1", "ConfigMap", SYSTEM, POLICY_CONFIGMAP)
    config_map = client.get(ref)
    document = yaml.safe_load(config_map["data"][POLICY_KEY])
    document["fairness"] = {"historyWeight": 1, "windowSeconds": 1200, "halfLifeSeconds": 0}
    client.patch(ref, {"data": {POLICY_KEY: yaml.safe_dump(document)}})
    client.create(our_pod("train"))
    now = [1200.0]
    scheduler = Scheduler(
        scheduler_client(real_cluster), Settings(namespace=SYSTEM), clock=lambda: now[0]
    )
    usage = {"level": "project", "queue": "team-a"}
    name = "gitops_sched_queue_usage_ratio"
    try:
        report = scheduler.sync_once()
        assert report is not None and len(report.outcome.bound) == 1
        assert metric(scheduler, name, **usage) == 0
        now[0] += 600  # half the window with 1 of the node's 8 GPUs
        scheduler.sync_once()
    finally:
        scheduler.client.close()
    assert metric(scheduler, name, **usage) == pytest.approx(600 / (8 * 1200))
