"""What the reconciler must never do, on the real control plane: delete what it does not own
(a namespace holding anything else), take over what someone else made, or die of a failed
request. Faults come from `testkit/control_plane/faultproxy.py` in front of the real API
server (seeded: a failing seed reruns the same faults); the chaos test kills `reconcile`
processes with SIGKILL at seeded moments on top."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.compiler import render_repo
from gitops_sched.reconciler import OWNER_LABEL
from gitops_sched.reconciler.loop import RETRY_BASE_S, next_sync_wait
from gitops_sched.validate import check_repo
from testkit.control_plane.accounts import (
    RECONCILER,
    account_configuration,
    install_reconciler,
    token,
)
from testkit.control_plane.client import FAST_BACKOFF, connect
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.faultproxy import INTERNAL, UNAVAILABLE, FaultProxy, Rates, Rule
from testkit.control_plane.waiting import wait
from testkit.loops import running
from testkit.reconciler_harness import API, SYSTEM, Harness, commit, config
from tests.conftest import examples, seeds

CLI = str(Path(sys.executable).with_name("gitops-sched"))
ADOPT = "gitops-sched.io/adopt"
# every kind of random fault, about one request in five
FAULTS = Rates(throttle=0.05, error=0.05, drop=0.04, swallow=0.04, garble=0.03)
# half as many, for the chaos test, whose kills are its own faults
CHAOS = Rates(throttle=0.03, error=0.03, drop=0.02, swallow=0.02, garble=0.01)


@pytest.fixture
def harness(real_cluster: ControlPlane, tmp_path: Path) -> Iterator[Harness]:
    """The reconciler installed, running as its ServiceAccount; the test looks as an admin."""
    reconciler = install_reconciler(real_cluster)
    h = Harness(lambda: connect(real_cluster), tmp_path / "repo", reconciler=reconciler)
    yield h
    h.close()


@pytest.fixture
def proxy(real_cluster: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy(real_cluster.server, real_cluster.root / "ca.crt") as p:
        yield p


def proxied(plane: ControlPlane, proxy: FaultProxy) -> ClusterClient:
    """The reconciler's client (its ServiceAccount's) through the proxy."""
    configuration = account_configuration(plane, *RECONCILER)
    return ClusterClient(proxy.configuration(configuration), backoff=FAST_BACKOFF)


def reconcile(repo: Path, kubeconfig: Path, *args: str) -> subprocess.Popen[str]:
    command = [CLI, "reconcile", "--repo", str(repo), "--kubeconfig", str(kubeconfig)]
    return subprocess.Popen(
        [*command, "--namespace", SYSTEM, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def rendered(repo: Path) -> set[str]:
    loaded, diagnostics = check_repo(repo)
    assert loaded is not None, diagnostics
    return {str(ObjectRef.of(o)) for o in render_repo(loaded)}


def fingerprint(look: ClusterClient, objects: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """uid and resourceVersion of each object (absent: gone): any write changes them."""
    out = {}
    for obj in objects:
        live = look.get(ObjectRef.of(obj))
        if live is not None:
            meta = live["metadata"]
            out[str(ObjectRef.of(obj))] = (meta["uid"], meta["resourceVersion"])
    return out


def ours(h: Harness) -> set[str]:
    """Objects labelled ours, but those being deleted (a pruned namespace is emptied by
    kube-controller-manager for a few seconds)."""
    return {k for k, o in h.live().items() if not o["metadata"].get("deletionTimestamp")}


def make(look: ClusterClient, *objects: dict[str, Any]) -> list[dict[str, Any]]:
    return [look.create(o) for o in objects]


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def secret(ns: str, name: str = "hand-made") -> dict[str, Any]:
    meta = {"name": name, "namespace": ns}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": {"k": "v"}}


def role(ns: str) -> dict[str, Any]:
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
    meta = {"name": "hand-made", "namespace": ns}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta,
        "rules": [rule],
    }


def cron_job(ns: str) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "hand-made", "namespace": ns},
        "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": {"spec": pod}}}},
    }


def hand_made_copy(obj: dict[str, Any], ns: str) -> dict[str, Any]:
    """A custom resource made by hand: `obj`'s kind and spec, none of our labels."""
    meta = {"name": "hand-made", "namespace": ns}
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": meta,
        "spec": obj["spec"],
    }


# --- 1. a namespace is pruned only when it holds nothing but ours --------------------------


def test_a_dropped_projects_namespace_holding_anything_not_ours_is_kept_with_a_warning(harness):
    """Whatever kind it is (a Secret, a Role, a CronJob, a custom resource): discovery lists
    every namespaced kind. A kept namespace is a warning (the sync is ok, `--once` exits 0)
    and is pruned by the first sync that finds it empty."""
    h = harness
    commit(h.repo, config({"vision": 8, "nlp": 1, "speech": 1, "audio": 1, "video": 1, "ocr": 1}))
    assert h.sync().ok
    workload = h.get(API, "Workload", "vision-train", "gpu-vision")
    hand_made = make(
        h.look,
        secret("gpu-nlp"),
        role("gpu-speech"),
        cron_job("gpu-audio"),
        hand_made_copy(workload, "gpu-video"),
    )
    commit(h.repo, config({"vision": 8}))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert outcome.result.warnings == [
        f"Namespace/gpu-{project}: not pruned: it holds {kind}/hand-made, which gitops-sched "
        "does not manage"
        for project, kind in [
            ("audio", "CronJob"),
            ("nlp", "Secret"),
            ("speech", "Role"),
            ("video", "Workload"),
        ]
    ]
    for obj in hand_made:
        ns = h.get("v1", "Namespace", obj["metadata"]["namespace"])
        assert not ns["metadata"].get("deletionTimestamp")
        assert h.look.get(ObjectRef.of(obj)) is not None
        assert f"Job/{ns['metadata']['name']}/{ns['metadata']['name'][4:]}-train" in (
            outcome.result.pruned
        )
    # the one holding only what Kubernetes puts in every namespace (and its Job's Events) went
    assert "Namespace/gpu-ocr" in outcome.result.pruned
    assert h.listed() >= {f"Namespace/gpu-{p}" for p in ("audio", "nlp", "speech", "video")}
    status = h.get(API, "Cluster", "lab")["status"]
    assert status["warnings"] == outcome.result.warnings and status["errors"] == []
    assert status["syncedCommit"] == outcome.revision
    kept = [
        e
        for e in h.look.list("v1", "Event", namespace=SYSTEM) or ()
        if e["reason"] == "PruneSkipped"
    ]
    assert len(kept) == 1 and "gpu-nlp" in kept[0]["message"]
    assert h.reconciler.metrics.warnings._value.get() == 4

    h.reset()
    again = h.sync()
    assert again.ok and again.result.warnings == outcome.result.warnings
    assert h.writes == 0, h.written()
    for obj in hand_made:
        h.look.delete(ObjectRef.of(obj))
    last = h.sync()
    assert last.ok and not last.result.warnings
    assert {f"Namespace/gpu-{p}" for p in ("audio", "nlp", "speech", "video")} <= set(
        last.result.pruned
    )
    assert ours(h) == h.listed()


# --- 2. what someone else made is not taken without consent --------------------------------


def test_objects_someone_else_made_are_refused_unless_adopted(harness):
    """A Namespace and a PriorityClass that existed before the first sync, without our label:
    refused (an error naming each, in the result, the status and an Event), never labelled,
    changed or listed; adopted when the object carries the adopt annotation, or by a sync
    with adopt on."""
    h = harness
    commit(h.repo, config({"vision": 8}))
    (train,) = [
        o
        for o in render_repo(check_repo(h.repo)[0])
        if o["metadata"]["name"] == "gitops-sched-train"
    ]
    theirs = make(
        h.look,
        namespace("gpu-vision", team="vision"),
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "gitops-sched-train"},
            "value": train["value"],
            "description": "made by hand",
        },
    )
    before = fingerprint(h.look, theirs)
    outcome = h.sync()
    assert not outcome.ok
    assert outcome.result.errors == [
        f"{ref}: exists and was not made by gitops-sched (no {OWNER_LABEL} label, not in the "
        f'inventory); not taken over: annotate it {ADOPT}="true" or sync with --adopt to adopt it'
        for ref in ("Namespace/gpu-vision", "PriorityClass/gitops-sched-train")
    ]
    assert fingerprint(h.look, theirs) == before
    assert not {"Namespace/gpu-vision", "PriorityClass/gitops-sched-train"} & h.listed()
    assert "Job/gpu-vision/vision-train" in outcome.result.created  # the rest goes on
    status = h.get(API, "Cluster", "lab")["status"]
    assert status["errors"] == outcome.result.errors
    failed = [
        e for e in h.look.list("v1", "Event", namespace=SYSTEM) or () if e["reason"] == "SyncFailed"
    ]
    assert failed and "Namespace/gpu-vision: exists and was not made by" in failed[0]["message"]

    # consent for one object, on the object
    h.look.patch(
        ObjectRef("v1", "Namespace", "", "gpu-vision"),
        {"metadata": {"annotations": {ADOPT: "true"}}},
    )
    second = h.sync()
    assert second.result.adopted == ["Namespace/gpu-vision"]
    assert second.result.errors == outcome.result.errors[1:]
    labels = h.get("v1", "Namespace", "gpu-vision")["metadata"]["labels"]
    assert labels[OWNER_LABEL] == "gitops-sched" and labels["team"] == "vision"
    # consent for a sync
    adopting = h.new_reconciler(h.client, adopt=True)
    third = adopting.sync_once()
    assert third.ok, third.result.errors
    assert third.result.adopted == ["PriorityClass/gitops-sched-train"]
    assert (
        h.get("scheduling.k8s.io/v1", "PriorityClass", "gitops-sched-train")["description"]
        == train["description"]
    )
    assert set(h.live()) == h.listed() == rendered(h.repo)
    h.reset()
    assert not h.sync().result.changed and h.writes == 0


# --- 3. no request failure kills a sync ------------------------------------------------------


@pytest.mark.usefixtures("bare_cluster")  # the discovery refreshed as the sync makes the CRDs
def test_reconcile_once_survives_a_group_discovery_answering_503_and_the_core_500(
    harness, real_cluster, proxy, tmp_path
):
    """Two 503s on the discovery of our CRDs' group (read as the sync makes the CRDs) and a
    500 on the core group's: the official client's discovery once read such a group as one
    without kinds, or was left half-reset (KeyError: 'resources'). A group version's
    discovery is a request like any other, retried within its budget."""
    h = harness
    commit(h.repo, config({"vision": 8}))
    proxy.add(
        Rule(UNAVAILABLE, r"^/apis/gitops-sched\.io/v1alpha1$", "GET", times=2),
        Rule(INTERNAL, r"^/api/v1$", "GET", times=1),
    )
    kubeconfig = proxy.write_kubeconfig(tmp_path / "proxied", token(real_cluster, *RECONCILER))
    done = reconcile(h.repo, kubeconfig, "--once")
    _, err = done.communicate(timeout=120)
    assert sorted(proxy.injected) == [
        "500 GET /api/v1",
        "503 GET /apis/gitops-sched.io/v1alpha1",
        "503 GET /apis/gitops-sched.io/v1alpha1",
    ]
    assert done.returncode == 0, err
    assert "Traceback" not in err
    assert set(h.live()) == h.listed() == rendered(h.repo)


@pytest.mark.parametrize("seed", seeds(11))
def test_syncs_through_random_faults_converge_and_touch_nothing_foreign(
    real_cluster, proxy, tmp_path, seed
):
    """Seeded random faults on every request (429 with Retry-After, 5xx, dropped
    connections, writes whose answer is lost) while projects come and go: every sync ends
    (none raises), they converge to the repo, and what others made is never written."""
    proxy.state.rng.seed(seed)
    h = Harness(
        lambda: connect(real_cluster),
        tmp_path / "repo",
        reconciler=install_reconciler(real_cluster),
        via=lambda: proxied(real_cluster, proxy),
    )
    try:
        commit(h.repo, config({"vision": 8, "nlp": 2}))
        foreign = make(
            h.look,
            namespace("team-data"),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "theirs", "namespace": "team-data"},
            },
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "theirs"},
                "value": 7,
            },
        )
        proxy.rates = FAULTS
        assert until_synced(h)
        foreign += make(h.look, secret("gpu-nlp"))
        before = fingerprint(h.look, foreign)
        commit(h.repo, config({"vision": 8, "speech": 2}))
        last = until_synced(h)
        assert last.result.warnings == [
            "Namespace/gpu-nlp: not pruned: it holds Secret/hand-made, which gitops-sched does "
            "not manage"
        ]
        assert len(proxy.injected) >= 10, proxy.injected
        proxy.clear()
        h.reset()
        assert not h.sync().result.changed and h.writes == 0
        assert fingerprint(h.look, foreign) == before
        assert ours(h) == h.listed() == rendered(h.repo) | {"Namespace/gpu-nlp"}
    finally:
        h.close()


def broken_lists(monkeypatch: pytest.MonkeyPatch, client: ClusterClient, times: int) -> None:
    """The client's first `times` lists raise KeyError('resources'), as the official
    client's half-reset discovery cache once did."""
    real = client.list
    left = [times]

    def list_(*args: Any, **kw: Any) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise KeyError("resources")
        return real(*args, **kw)

    monkeypatch.setattr(client, "list", list_)


def test_the_loop_goes_on_after_any_exception_after_a_backoff_shorter_than_its_interval(
    harness, monkeypatch
):
    """A sync cut off by an exception that is no API failure is logged and counted; the next
    comes after a backoff (about a second here, the interval being an hour) and syncs."""
    h = harness
    revision = commit(h.repo, config({"vision": 8}))
    broken_lists(monkeypatch, h.client, 1)
    reconciler = h.new_reconciler(h.client, interval=3600.0)

    def synced() -> bool:
        status = (h.get(API, "Cluster", "lab") or {}).get("status") or {}
        return status.get("syncedCommit") == revision

    with running(reconciler.run) as (loop,):
        wait("the sync after the failure", synced)
        assert loop.thread.is_alive()
    syncs = reconciler.metrics.syncs
    assert syncs.labels(outcome="failed")._value.get() == 1
    assert syncs.labels(outcome="synced")._value.get() == 1


def test_reconcile_once_tries_a_cut_off_sync_again_three_times_in_all(harness, monkeypatch):
    h = harness
    commit(h.repo, config({"vision": 8}))
    broken_lists(monkeypatch, h.client, 2)
    outcome = h.reconciler.run(threading.Event(), once=True)
    assert outcome is not None and outcome.ok, outcome
    broken_lists(monkeypatch, h.client, 3)
    outcome = h.reconciler.run(threading.Event(), once=True)
    assert outcome is not None and not outcome.ok
    assert outcome.errors == ("sync cut off: KeyError: 'resources'",)


@settings(max_examples=examples(50))
@given(st.integers(0, 10_000), st.floats(0.001, 86_400))
def test_the_wait_after_syncs_cut_off_doubles_from_a_second_up_to_the_interval(
    failures: int, interval: float
) -> None:
    wait = next_sync_wait(failures, interval)
    if not failures:
        assert wait == interval
    else:
        ceiling = min(interval, RETRY_BASE_S * 2.0 ** min(failures - 1, 30))
        assert ceiling / 2 <= wait <= ceiling


def until_synced(h: Harness, syncs: int = 4) -> Any:
    """Sync until a sync ends ok (a sync cut off is retried by the loop, as here); the last
    outcome."""
    for _ in range(syncs):
        outcome = h.sync()
        if outcome.ok:
            return outcome
    raise AssertionError(
        f"not synced after {syncs} syncs: {outcome.errors or outcome.result.errors}"
    )


def kill_after(process: subprocess.Popen[str], proxy: FaultProxy, requests: int) -> None:
    """SIGKILL `process` once the proxy has passed `requests` requests on (unless it ended)."""
    wait(
        "its end or its kill",
        lambda: process.poll() is not None or proxy.passed >= requests,
        120,
        0.005,
    )
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


# --- chaos: faults and kill -9 -----------------------------------------------------------------


@pytest.mark.parametrize("seed", seeds(19))
def test_chaos_reconcile_processes_killed_at_random_moments_through_random_faults(
    real_cluster, proxy, tmp_path, seed
):
    """Bounded and seeded: two commits (a project added, one dropped), each synced by
    `reconcile --once` processes through random faults, the first killed with SIGKILL after a
    random number of requests, the second left to end. Then a sync without faults: the
    cluster equals Git, the inventory lists exactly our objects (and the dropped namespace
    that holds someone's Secret), and nothing someone else made was written or deleted."""
    rng = random.Random(seed)
    proxy.state.rng.seed(seed)
    h = Harness(
        lambda: connect(real_cluster),
        tmp_path / "repo",
        reconciler=install_reconciler(real_cluster),
    )
    kubeconfig = proxy.write_kubeconfig(tmp_path / "proxied", token(real_cluster, *RECONCILER))
    try:
        foreign = make(
            h.look,
            namespace("team-data"),
            secret("team-data"),
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "theirs"},
                "value": 7,
            },
        )
        before = fingerprint(h.look, foreign)
        proxy.rates = CHAOS
        killed = 0
        for projects in ({"vision": 8, "nlp": 2}, {"nlp": 4, "speech": 1}):
            commit(h.repo, config(projects))
            for attempt in range(2):
                start = proxy.passed
                process = reconcile(h.repo, kubeconfig, "--once")
                if attempt == 0:
                    kill_after(process, proxy, start + rng.randint(5, 60))
                    killed += process.returncode == -signal.SIGKILL
                _, err = process.communicate(timeout=120)
                assert "Traceback" not in err, err
                assert process.returncode in (0, 1, -signal.SIGKILL), err
            if "vision" in projects:  # someone's Secret in a namespace the next commit drops
                foreign += make(h.look, secret("gpu-vision"))
                before |= fingerprint(h.look, foreign[-1:])
        assert killed == 2
        proxy.clear()
        done = reconcile(h.repo, kubeconfig, "--once")
        _, err = done.communicate(timeout=120)
        assert done.returncode == 0, err
        h.reset()
        assert not h.sync().result.changed and h.writes == 0
        assert ours(h) == h.listed() == rendered(h.repo) | {"Namespace/gpu-vision"}
        assert fingerprint(h.look, foreign) == before
    finally:
        h.close()
