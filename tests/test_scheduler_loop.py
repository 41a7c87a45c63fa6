"""The scheduler's process parts against the API emulator over HTTP: informers that list and
watch, the scheduler's own writes assumed until its informers show them, and `--once`."""

from __future__ import annotations

import threading
import time
from typing import Any

from gitops_sched.cluster import ApiFailure, ObjectRef
from gitops_sched.cluster.informer import Informer
from gitops_sched.scheduler.assumed import ASSUME_FOR_S, Assumed
from tests.kube_emulator.fixtures import client, connect, kube  # noqa: F401  (fixtures)
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


def names(informer: Informer) -> dict[str, str]:
    return {o["metadata"]["name"]: o["data"]["v"] for o in informer.items()}


def test_an_informer_lists_then_follows_changes_and_wakes_its_owner(kube, client):  # noqa: F811
    client.create(namespace())
    client.create(configmap("a", "1"))
    woken = threading.Event()
    informer = Informer(client, "v1", "ConfigMap", namespace=NS, on_change=woken.set)
    stop = threading.Event()
    informer.start(stop, timeout=2)
    try:
        assert informer.wait_synced(5)
        assert names(informer) == {"a": "1"}
        woken.clear()
        client.create(configmap("b", "2"))
        assert wait_for(lambda: names(informer) == {"a": "1", "b": "2"})
        assert woken.is_set()
        client.delete(ObjectRef("v1", "ConfigMap", NS, "a"))
        assert wait_for(lambda: names(informer) == {"b": "2"})
    finally:
        stop.set()


def test_an_informer_whose_version_expired_lists_again():
    with KubeEmulator(watch_history=3) as small:
        client = connect(small)
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


def pod(uid: str, node: str = "", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": uid, "namespace": NS, "uid": uid, "annotations": {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}}


def test_a_bind_is_assumed_until_the_cache_shows_it():
    assumed = Assumed()
    assumed.bound("u1", "n1", {"x": "1"}, now=100.0)
    seen = assumed.overlay([pod("u1"), pod("u2")], now=101.0)
    assert seen[0]["spec"]["nodeName"] == "n1" and seen[0]["metadata"]["annotations"] == {"x": "1"}
    assert seen[1]["spec"] == {}  # others untouched
    # the informer caught up: the assumption goes, the cache is believed from then on
    assert assumed.overlay([pod("u1", node="n1")], now=102.0)[0]["spec"]["nodeName"] == "n1"
    assert assumed.binds == {}


def test_an_assumption_the_cache_never_confirms_expires_and_a_gone_pod_drops_it():
    assumed = Assumed()
    assumed.bound("u1", "n1", {}, now=0.0)
    assumed.evicted("u2", now=0.0)
    later = ASSUME_FOR_S + 1
    seen = assumed.overlay([pod("u1"), pod("u2")], now=later)
    assert seen[0]["spec"] == {} and "deletionTimestamp" not in seen[1]["metadata"]
    assumed.evicted("u3", now=0.0)
    assumed.overlay([], now=1.0)
    assert assumed.evictions == {}


def test_an_eviction_is_assumed_until_the_pod_terminates():
    assumed = Assumed()
    assumed.evicted("u1", now=10.0)
    seen = assumed.overlay([pod("u1", node="n1")], now=11.0)
    assert seen[0]["metadata"]["deletionTimestamp"]
    assumed.overlay([pod("u1", node="n1", deleting=True)], now=12.0)
    assert assumed.evictions == {}
