"""The reconciler under faults a real API server cannot be made to produce on demand, on the
API emulator (`tests/kube_emulator`); everything else the reconciler does is tested on the
real control plane in `test_reconciler.py`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gitops_sched.cluster import ObjectRef
from gitops_sched.reconciler import OWNER_LABEL
from testkit.reconciler_harness import SYSTEM, Harness, commit, config
from tests.kube_emulator import Fault, KubeEmulator
from tests.kube_emulator.fixtures import connect

SYSTEM_NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}}


class EmulatedHarness(Harness):
    def __init__(self, kube: KubeEmulator, *args: Any, **kw: Any):
        self.kube = kube
        super().__init__(lambda: connect(kube), *args, **kw)

    def live(self) -> dict[str, dict[str, Any]]:
        """Read from the emulator's store (a list per kind would make the kill test, which
        looks twice per request of a sync, several times slower)."""
        out = {}
        for rtype in {t.key: t for t in self.kube.api.types.values()}.values():
            for obj in self.kube.api.objects(rtype.api_version, rtype.kind):
                if obj["metadata"].get("labels", {}).get(OWNER_LABEL) == self.name:
                    out[str(ObjectRef.of(obj))] = obj
        return out


@pytest.fixture
def kube() -> Iterator[KubeEmulator]:
    with KubeEmulator(crd_establish_delay=0.05) as emulator:
        yield emulator


def test_injected_conflicts_throttling_errors_and_timeouts_do_not_stop_a_sync(kube, tmp_path):
    """A 409, 429, 500 or 503 and a request that times out, each on the request the test
    picks and as often as it says: a real server answers those only when it is in trouble."""
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8, "nlp": 4}))
    h = EmulatedHarness(kube, repo)
    h.look.create(SYSTEM_NAMESPACE)
    h.client.timeout = 0.5
    kube.api.add_fault(Fault(409, method="PATCH", times=2))
    kube.api.add_fault(Fault(429, method="GET", path="/configmaps", retry_after=0))
    kube.api.add_fault(Fault(500, method="PATCH", path="/jobs/"))
    kube.api.add_fault(Fault(503, method="PATCH", path="/namespaces/gpu-nlp$"))
    kube.api.add_fault(Fault("timeout", method="PATCH", path="/roles/", after=True, delay=1.0))
    kube.api.add_fault(Fault("timeout", method="GET", path="/projects", delay=1.0))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert all(f.times == 0 for f in kube.api.faults)
    assert set(h.live()) == h.listed()
    h.reset()
    assert not h.sync().result.changed and h.writes == 0
    h.close()


class Killed(BaseException):
    """The process died (not an Exception: nothing in the reconciler may catch it)."""


def test_a_kill_between_any_two_requests_then_a_restart_converges(tmp_path):
    """The process dies just before a request of a sync, then a new one starts from there:
    the cluster is put back to the same state before each try, which the emulator's snapshot
    does in a millisecond and a real cluster cannot. What the new process finds depends only
    on the writes done before the kill (a read changes nothing), so the kills are the
    distinct ones: before the first request and just after each write, every one of them."""
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8, "nlp": 4}))
    with KubeEmulator(validate_builtins=False) as kube:
        h = EmulatedHarness(kube, repo)
        h.look.create(SYSTEM_NAMESPACE)
        assert h.sync().ok
        start = kube.api.snapshot()
        # the change: a project added, one removed, one changed, and the Jobs' image (the
        # Jobs that stay are replaced)
        commit(repo, config({"vision": 6, "speech": 2}, image="pytorch:2.4"))
        reference = connect(kube)  # a new process's requests, discovery included
        sent: list[str] = []
        reference.before_request.append(lambda method, path: sent.append(method))
        changed = h.new_reconciler(reference).sync_once()
        reference.close()
        assert changed.ok and changed.result.replaced == ["Job/gpu-vision/vision-train"]
        expected = set(h.live())
        kills = [k for k in range(len(sent)) if k == 0 or sent[k - 1] != "GET"]
        assert len(kills) > 15  # one for each write, and the first
        for kill_at in kills:
            kube.api.restore(start)
            client = connect(kube)
            seen = [0]

            def hook(method: str, path: str, seen=seen, kill_at=kill_at) -> None:
                if seen[0] == kill_at:
                    raise Killed
                seen[0] += 1

            client.before_request.append(hook)
            with pytest.raises(Killed):
                h.new_reconciler(client).sync_once()
            # whatever was created is listed: nothing can be orphaned
            assert set(h.live()) <= h.listed(), kill_at
            restarted = connect(kube)
            outcome = h.new_reconciler(restarted).sync_once()
            assert outcome.ok, (kill_at, outcome.result.errors)
            assert set(h.live()) == expected, kill_at
            assert h.listed() == expected, kill_at
            client.close()
            restarted.close()
        h.close()
