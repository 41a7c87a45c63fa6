"""The background threads of `gitops_sched/cluster` (an informer's list-and-watch, leader
election) go on after any exception, not only API failures: an exception that escaped once
ended the thread silently (the cache stopped following, the Lease was no longer renewed).
The exception is KeyError('resources'), what the official client's half-reset discovery
cache raised; on the real control plane."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from gitops_sched.cluster import ClusterClient
from gitops_sched.cluster.informer import Informer
from gitops_sched.cluster.leader import LeaderElector
from testkit.control_plane.waiting import wait


def failing_once(monkeypatch: pytest.MonkeyPatch, client: ClusterClient, method: str) -> None:
    real = getattr(client, method)
    failed: list[bool] = []

    def once(*args: Any, **kw: Any) -> Any:
        if not failed:
            failed.append(True)
            raise KeyError("resources")
        return real(*args, **kw)

    monkeypatch.setattr(client, method, once)


def test_an_informer_lists_again_after_an_exception_that_is_no_api_failure(
    real_client, monkeypatch
):
    real_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "watched"}})
    failing_once(monkeypatch, real_client, "list_versioned")
    informer = Informer(real_client, "v1", "Namespace", retry_after=0.01)
    stop = threading.Event()
    informer.start(stop, timeout=5)
    try:
        wait("the informer's first list", lambda: informer.synced, 30)
        names = {o["metadata"]["name"] for o in informer.items()}
        assert "watched" in names
    finally:
        stop.set()


def test_a_leader_election_round_that_raises_is_a_round_not_led(real_client, monkeypatch):
    real_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elect"}})
    elector = LeaderElector(real_client, "elect", "lease", "me")
    failing_once(monkeypatch, real_client, "get")
    assert elector.try_acquire_or_renew() is False
    assert elector.try_acquire_or_renew() is True
