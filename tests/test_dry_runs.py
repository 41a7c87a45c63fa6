"""Dry runs on a real control plane tell what the real run that follows then does: the same
writes, the same failures, the same ignored objects (README: "Dry runs").

Each test runs the dry run, checks it stored nothing, runs the real thing, and compares.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.reconciler.sync import Syncer, SyncResult
from testkit.control_plane.accounts import (
    RECONCILER,
    SCHEDULER,
    account_client,
    account_kubeconfig,
)
from testkit.control_plane.client import connect
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.install import apply_kustomization
from testkit.control_plane.waiting import wait
from testkit.reconciler_harness import SYSTEM, Harness, commit, config
from tests.test_scheduler_e2e import EXAMPLE, Cluster, installed_repo

CLI = str(Path(sys.executable).with_name("gitops-sched"))
OUTCOMES = ("prepared", "created", "updated", "replaced", "pruned", "orphaned", "errors")


def outcome(result: SyncResult) -> dict[str, list[str]]:
    return {name: sorted(getattr(result, name)) for name in OUTCOMES}


# --- the reconciler ------------------------------------------------------------------------


@pytest.fixture
def harness(real_cluster: ControlPlane, tmp_path: Path) -> Iterator[Harness]:
    made = Harness(lambda: connect(real_cluster), tmp_path / "repo")
    yield made
    made.close()


@pytest.mark.as_admin("a bare cluster: no ServiceAccount yet, an admin runs it from outside")
@pytest.mark.usefixtures("bare_cluster", "uninstalled")  # the CRDs too: not served yet
def test_a_dry_run_on_a_bare_cluster_lists_what_the_first_sync_then_creates(harness: Harness):
    """The reconciler's own namespace (its inventory lives there) is a write of the sync:
    the dry run lists it, as the real sync does, and creates nothing."""
    commit(harness.repo, config({"vision": 8}))
    dry = harness.new_reconciler(harness.client, dry_run=True).sync_once()
    assert dry.ok, dry.errors
    assert harness.get("v1", "Namespace", SYSTEM) is None and harness.live() == {}
    assert dry.result.prepared == [f"Namespace/{SYSTEM}"]
    assert any(d.startswith(f"# Namespace/{SYSTEM}: created first") for d in dry.result.diff)

    real = harness.sync()
    assert real.ok, real.result.errors
    assert outcome(dry.result) == outcome(real.result)


def test_a_dry_run_reports_the_object_the_real_sync_cannot_create(
    real_cluster: ControlPlane, real_client: ClusterClient
):
    """An object in a namespace nobody creates fails in the real sync; the dry run says so,
    while an object whose namespace the sync creates first is listed as created. The
    reconciler as its ServiceAccount, installed."""
    apply_kustomization(real_cluster, "reconciler")
    reconciler = account_client(real_cluster, *RECONCILER)

    def config_map(namespace: str) -> dict[str, Any]:
        meta = {"name": "settings", "namespace": namespace}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "1"}}

    created = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dry-made"}}
    rendered = [created, config_map("dry-made"), config_map("dry-nowhere")]
    syncer = Syncer(reconciler, "dry", SYSTEM, "test")

    dry = syncer.sync(rendered, "r1", dry_run=True)
    assert real_client.get(ObjectRef("v1", "Namespace", "", "dry-made")) is None
    real = syncer.sync(rendered, "r1")

    refused = 'ConfigMap/dry-nowhere/settings: namespaces "dry-nowhere" not found'
    assert dry.errors == real.errors == [refused]
    assert outcome(dry) == outcome(real)
    assert "ConfigMap/dry-made/settings" in real.created
    [note] = [d for d in dry.diff if "ConfigMap/dry-made/settings" in d.splitlines()[0]]
    assert note.startswith(
        "# ConfigMap/dry-made/settings: checked by the server once its namespace dry-made exists"
    )
    reconciler.close()


# --- the scheduler -------------------------------------------------------------------------

SCHEDULER_ROLE = ObjectRef(
    "rbac.authorization.k8s.io/v1", "ClusterRole", "", "gitops-sched-scheduler"
)
ACCOUNT = SCHEDULER


@pytest.fixture
def cluster(real_cluster: ControlPlane) -> Iterator[Cluster]:
    with installed_repo(real_cluster, EXAMPLE) as made:
        yield made


def may_bind(client: ClusterClient) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": {
            "user": f"system:serviceaccount:{ACCOUNT[0]}:{ACCOUNT[1]}",
            "resourceAttributes": {"verb": "create", "resource": "pods", "subresource": "binding"},
        },
    }
    return bool(client.create(review)["status"].get("allowed"))


def set_binding_permission(client: ClusterClient, allowed: bool) -> None:
    """The scheduler's ClusterRole with or without `create pods/binding`, once the API
    server's authorizer answers so."""
    role = client.get(SCHEDULER_ROLE)
    rules = [r for r in role["rules"] if "pods/binding" not in r["resources"]]
    rules += [{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]
    if allowed:
        rules.append({"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]})
    client.replace({**role, "rules": rules})
    wait("the authorizer to see the role", lambda: may_bind(client) == allowed)


def once(kubeconfig: Path, namespace: str, *more: str) -> subprocess.CompletedProcess[str]:
    command = [CLI, "scheduler", "--once", "--kubeconfig", str(kubeconfig)]
    return subprocess.run(
        [*command, "--namespace", namespace, *more], capture_output=True, text=True, timeout=120
    )


def assert_same(
    dry: subprocess.CompletedProcess[str], real: subprocess.CompletedProcess[str]
) -> None:
    """The dry run printed, refused and exited as the real run that followed it."""
    assert (dry.returncode, dry.stdout, errors(dry)) == (
        real.returncode,
        real.stdout,
        errors(real),
    ), dry.stdout + dry.stderr[-3000:] + real.stdout + real.stderr[-3000:]


def errors(run: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in run.stderr.splitlines() if line.startswith("error: ")]


def test_a_scheduler_dry_run_prints_what_the_real_cycle_then_does_refusals_included(
    cluster: Cluster, tmp_path: Path
):
    cluster.submit_repo_workloads(4)
    stray = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stray", "namespace": "default"},
        "spec": {"schedulerName": "gitops-sched", "containers": [{"name": "c", "image": "x"}]},
    }
    cluster.client.create(stray)
    kubeconfig = account_kubeconfig(cluster.plane, *ACCOUNT)
    set_binding_permission(cluster.client, allowed=False)  # as a stale manifest would leave it
    before = cluster.fingerprint()

    dry = once(kubeconfig, cluster.system, "--dry-run")
    assert cluster.fingerprint() == before
    real = once(kubeconfig, cluster.system)
    assert_same(dry, real)
    assert real.returncode == 1
    assert "ignored default/stray: namespace 'default' belongs to no project" in real.stdout
    assert "0 bound, 0 evicted, 0 evictions refused, 0 waiting, 1 ignored, 5 errors" in real.stdout
    assert all("binding" in e and "forbidden" in e for e in errors(real)), errors(real)

    set_binding_permission(cluster.client, allowed=True)
    dry = once(kubeconfig, cluster.system, "--dry-run")
    assert not any(p["spec"].get("nodeName") for p in cluster.pods())
    real = once(kubeconfig, cluster.system)
    assert_same(dry, real)
    assert real.returncode == 0
    assert "5 bound, 0 evicted, 0 evictions refused, 0 waiting, 1 ignored, 0 errors" in real.stdout
    assert sum(bool(p["spec"].get("nodeName")) for p in cluster.pods()) == 5
