"""pytest fixtures for the real control plane.

`control_plane` (session): one cluster for the whole run, started on first use, its
kube-apiserver's version printed once, stopped at the end even when tests fail.
`real_cluster` (per test): that cluster, wiped back to how the session found it after the
test (new namespaces, nodes, CRDs, priority classes and cluster RBAC deleted, namespaces
waited for; what a test left in the `default` namespace deleted too, or a pod bound to a
node of the last test would hold that node's name in the next), so every test starts on a
bare cluster. `real_client`: a ClusterClient on it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import kubernetes.dynamic
import kubernetes.dynamic.exceptions
import pytest
from kubernetes.dynamic.resource import ResourceList

from gitops_sched.cluster import Backoff, ClusterClient, ObjectRef
from testkit.control_plane.cluster import ControlPlane

FAST_BACKOFF = Backoff(attempts=6, base=0.05, cap=0.5)
NO_GRACE = {"gracePeriodSeconds": 0}  # no kubelet here needs the time
SHARED = "default"  # the one namespace the session starts with that tests put objects in
# kinds the control plane itself writes into it all along; never a test's leftover
OWN_WRITES = {("", "Event"), ("events.k8s.io", "Event"), ("", "Endpoints")}
OWN_WRITES |= {("discovery.k8s.io", "EndpointSlice")}
# cluster-scoped kinds a test may create; what exists when the session starts is kept
WIPED = (
    ("v1", "Namespace"),
    ("v1", "Node"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
)


def connect(plane: ControlPlane, timeout: float = 30.0) -> ClusterClient:
    return ClusterClient(plane.configuration(), backoff=FAST_BACKOFF, timeout=timeout)


def _names(client: ClusterClient) -> dict[tuple[str, str], set[str]]:
    return {kind: {o["metadata"]["name"] for o in client.list(*kind) or ()} for kind in WIPED}


@pytest.fixture(scope="session")
def control_plane(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"))
    started = time.monotonic()
    plane.start()
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(
                f"\nreal control plane: kube-apiserver {plane.version} at {plane.server} "
                f"(etcd, kube-controller-manager, kwok; up in {time.monotonic() - started:.1f}s)"
            )
    client = connect(plane)
    plane.baseline = _names(client)  # type: ignore[attr-defined]
    plane.shared = {key for key, _ in _namespaced(_namespaced_kinds(plane), {SHARED})}  # type: ignore[attr-defined]
    client.close()
    try:
        yield plane
    finally:
        plane.stop()


def wipe(plane: ControlPlane) -> None:
    """Delete what the session did not start with. A namespace is emptied here (every
    namespaced kind, finalizers dropped, no grace: no kubelet here needs the time) and then
    finalized, as the namespace controller would do after its fixed 5 s wait."""
    client = connect(plane)
    core = kubernetes.client.CoreV1Api(plane.api_client())
    try:
        baseline = plane.baseline  # type: ignore[attr-defined]
        namespaces = _names(client)[("v1", "Namespace")] - baseline[("v1", "Namespace")]
        for name in sorted(namespaces):
            client.delete(ObjectRef("v1", "Namespace", "", name))  # no new objects in them
        _empty(plane, namespaces)
        for name in sorted(namespaces):
            with contextlib.suppress(kubernetes.client.ApiException):
                body = {"metadata": {"name": name}, "spec": {"finalizers": []}}
                core.replace_namespace_finalize(name, body)
        for kind, names in _names(client).items():
            for name in sorted(names - baseline[kind]):
                client.delete(ObjectRef(kind[0], kind[1], "", name))
        kept = baseline[("v1", "Namespace")]
        deadline = time.monotonic() + 120
        while left := {o["metadata"]["name"] for o in client.list("v1", "Namespace") or ()} - kept:
            if time.monotonic() > deadline:
                raise AssertionError(f"namespaces {sorted(left)} still terminating after 120s")
            time.sleep(0.1)
    finally:
        client.close()
        core.api_client.close()


def _empty(plane: ControlPlane, namespaces: set[str], seconds: float = 60) -> None:
    """Delete every object of every namespaced kind in `namespaces`, and what the session
    did not start with in `SHARED`, until none is left: finalizers dropped one object at a
    time, then one collection delete per kind and namespace (a test's namespace goes
    whole), so a wipe costs requests per kind, not per object."""
    kept = plane.shared  # type: ignore[attr-defined]
    kinds = _namespaced_kinds(plane)
    deadline = time.monotonic() + seconds
    while True:
        left = [
            (resource, item)
            for key, (resource, item) in _namespaced(kinds, namespaces | {SHARED})
            if item.metadata.namespace in namespaces
            or (key not in kept and (resource.group, resource.kind) not in OWN_WRITES)
        ]
        if not left:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(left)} objects left in {sorted(namespaces | {SHARED})}")
        whole: dict[tuple[str, str, str], Any] = {}
        for resource, item in left:
            meta = item.metadata
            with contextlib.suppress(kubernetes.client.ApiException):
                if meta.finalizers:
                    patch = {"metadata": {"finalizers": None}}
                    resource.patch(
                        name=meta.name,
                        namespace=meta.namespace,
                        body=patch,
                        content_type="application/merge-patch+json",
                    )
                if meta.namespace in namespaces and "deletecollection" in (resource.verbs or ()):
                    whole[(resource.group, resource.kind, meta.namespace)] = resource
                    continue
                resource.delete(name=meta.name, namespace=meta.namespace, body=NO_GRACE)
        for (_, _, namespace), resource in whole.items():
            with contextlib.suppress(kubernetes.client.ApiException):
                resource.delete(
                    namespace=namespace,
                    field_selector=f"metadata.namespace={namespace}",  # the whole collection
                    body=NO_GRACE,
                )


def _namespaced_kinds(plane: ControlPlane) -> list[Any]:
    """Every listable, deletable namespaced kind. Discovery is read afresh (the client's
    default cache file, shared by every client of the server, may still list the kinds of
    CRDs an earlier test's wipe deleted)."""
    with tempfile.TemporaryDirectory() as cache:
        dynamic = kubernetes.dynamic.DynamicClient(
            plane.api_client(), cache_file=os.path.join(cache, "discovery.json")
        )
        return list(
            {
                (r.group, r.kind): r
                for r in dynamic.resources.search()
                if not isinstance(r, ResourceList)
                and r.namespaced
                and {"list", "delete"} <= set(r.verbs or ())
                and "/" not in r.name
            }.values()
        )


def _namespaced(kinds: list[Any], namespaces: set[str]) -> list[tuple[tuple[str, ...], Any]]:
    """Each object of `kinds` in `namespaces`, keyed by group, kind, namespace and name."""
    return [
        ((r.group, r.kind, item.metadata.namespace, item.metadata.name), (r, item))
        for r in kinds
        for item in _items(r)
        if item.metadata.namespace in namespaces
    ]


def _items(resource: Any) -> list[Any]:
    """The objects of a kind; none when its CRD is gone (the dynamic client's discovery cache,
    a file shared by the run, still lists kinds an earlier test's wipe deleted)."""
    try:
        return resource.get().items
    except kubernetes.dynamic.exceptions.NotFoundError:
        return []


@pytest.fixture
def real_cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    yield control_plane
    wipe(control_plane)


@pytest.fixture
def real_client(real_cluster: ControlPlane) -> Iterator[ClusterClient]:
    client = connect(real_cluster)
    yield client
    client.close()
