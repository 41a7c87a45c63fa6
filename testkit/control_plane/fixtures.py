"""pytest fixtures for the real control plane.

`control_plane` (session): one cluster for the whole run (a worker's), started on first use,
stopped at the end even when tests fail (the run's summary says which kube-apiserver the
tests on it ran against and how they ended: `report.py`). Its baseline
holds the reconciler and the scheduler installed (`installed.py`) and the product's CRDs as
the default reconciler (`--name gitops-sched`) leaves them after its first sync
(`install_crds`): a later sync of that reconciler finds them its own and unchanged, so most
tests neither create nor delete them (a CRD costs the API server about a second to create
and as much to delete).
`real_cluster` (per test): that cluster, wiped back to its baseline after the test (new
namespaces, nodes, CRDs, priority classes and cluster RBAC deleted, namespaces waited for;
what a test left in the `default` namespace deleted too, or a pod bound to a node of the
last test would hold that node's name in the next; every custom resource of the baseline
CRDs deleted, a baseline CRD a test changed or deleted put back), so every test starts
from the same state. `real_client`: a ClusterClient on it.
`bare_cluster` (per test, or `bare(plane)`): the cluster without the baseline CRDs, for a
test about what a bare cluster does (the first sync creating the CRDs, kubectl applying
them, the reconciler's calls on them); the wipe puts them back. `uninstalled` (or
`uninstall(plane)`): without the installed parts; the wipe installs them again.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.cluster.diff import FIELD_MANAGER
from gitops_sched.compiler.crds import render_crds
from gitops_sched.reconciler.sync import CRD_KIND, OWNER_LABEL, established, owned
from testkit.control_plane import installed
from testkit.control_plane.client import connect
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.plain_api import Kind, PlainApi, Refused
from testkit.control_plane.waiting import wait

# how the wipe deletes: no grace (no kubelet here needs the time), dependents in the
# background. Without a policy a batch/v1 Job gets its API's default, orphan: the server only
# marks it, with an `orphan` finalizer the garbage collector removes, and cannot once the
# wipe has finalized the namespace ("namespaces not found"): the Job stays in etcd and is
# there again when a later test makes that namespace.
AT_ONCE = {"gracePeriodSeconds": 0, "propagationPolicy": "Background"}
SHARED = "default"  # beside the installed parts' namespaces, where tests put objects too
# kinds the control plane itself writes into it all along; never a test's leftover
OWN_WRITES = {("", "Event"), ("events.k8s.io", "Event"), ("", "Endpoints")}
OWN_WRITES |= {("discovery.k8s.io", "EndpointSlice")}
# cluster-scoped kinds a test may create; what exists when the session starts is kept
NAMESPACE = ("", "Namespace")
WIPED = (
    NAMESPACE,
    ("", "Node"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
)
# the reconciler's default name (`Settings`, `reconcile --name`): the baseline CRDs are its
RECONCILER_NAME = "gitops-sched"
OURS = f"{OWNER_LABEL}={RECONCILER_NAME}"


def _by_key(kinds: list[Kind]) -> dict[tuple[str, str], Kind]:
    return {(k.group, k.kind): k for k in kinds}


def _names(
    api: PlainApi, by_key: dict[tuple[str, str], Kind], since: str = ""
) -> dict[tuple[str, str], set[str]]:
    """The names of the objects of each cluster-scoped kind the wipe deletes (`WIPED`), as
    of resourceVersion `since` or newer (`PlainApi.metadata`)."""
    return {key: {m["name"] for m in api.metadata(by_key[key].path(), since)} for key in WIPED}


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"))
    plane.start()  # the run's summary names its kube-apiserver's version (`report.py`)
    plane.crds = install_crds(plane)  # type: ignore[attr-defined]
    api = PlainApi(plane)
    plane.parts = installed.install(plane, api)  # type: ignore[attr-defined]
    kinds = api.kinds()
    plane.baseline = _names(api, _by_key(kinds))  # type: ignore[attr-defined]
    kept = _namespaced(api, _emptied(kinds), _shared(plane))
    plane.shared = {key for key, _ in kept}  # type: ignore[attr-defined]
    api.close()
    try:
        yield plane
    finally:
        plane.stop()


def wipe(plane: ControlPlane) -> None:
    """Back to the session's baseline: delete what the session did not start with (and every
    custom resource of the baseline CRDs), put back a baseline CRD a test changed or
    deleted. A namespace is emptied here (every namespaced kind, finalizers dropped, no
    grace: no kubelet here needs the time) and then finalized, as the namespace controller
    would do after its fixed 5 s wait. Plain requests (`PlainApi`): this runs after every
    in-cluster test."""
    api = PlainApi(plane)
    try:
        baseline = plane.baseline  # type: ignore[attr-defined]
        kinds = api.kinds()
        by_key = _by_key(kinds)
        listed = api.metadata(by_key[NAMESPACE].path())
        # new namespaces, and those of the installed parts a test deleted or made again
        namespaces = {m["name"] for m in listed if m.get("deletionTimestamp")}
        namespaces |= {m["name"] for m in listed} - baseline[NAMESPACE]
        namespaces |= plane.parts.replaced(listed)  # type: ignore[attr-defined]
        _delete_namespaces(plane, api, kinds, namespaces)
        since = api.now()
        for key, names in _names(api, by_key, since).items():
            for name in sorted(names - baseline[key]):
                api.delete(by_key[key].path(name=name))
        _delete_custom_resources(api, since)
        plane.crds = _restore_crds(plane, api, plane.crds)  # type: ignore[attr-defined]
        _gone(api, by_key[NAMESPACE], namespaces)
        installed.restore(plane, api, kinds, plane.parts)  # type: ignore[attr-defined]
    finally:
        api.close()


def uninstall(plane: ControlPlane) -> ControlPlane:
    """`plane` without the product's installed parts (their namespaces and cluster-scoped
    roles deleted, waited for until gone), for a test about a cluster they are not on yet;
    the wipe after the test installs them again."""
    api = PlainApi(plane)
    try:
        kinds = api.kinds()
        parts: installed.Installed = plane.parts  # type: ignore[attr-defined]
        _delete_namespaces(plane, api, kinds, parts.namespaces())
        for path, (applied, _) in parts.objects.items():
            if "namespace" not in applied["metadata"] and applied["kind"] != "Namespace":
                api.delete(path)
        _gone(api, _by_key(kinds)[NAMESPACE], parts.namespaces())
        plane.installed.clear()
    finally:
        api.close()
    return plane


def _delete_namespaces(
    plane: ControlPlane, api: PlainApi, kinds: list[Kind], names: set[str]
) -> None:
    """Delete the namespaces, empty them and finalize them (`_gone` waits for them)."""
    namespace = _by_key(kinds)[NAMESPACE]
    for name in sorted(names):
        api.delete(namespace.path(name=name))  # no new objects in them
    _empty(plane, api, _emptied(kinds), names)
    for name in sorted(names):
        with contextlib.suppress(Refused):
            body = {"metadata": {"name": name}, "spec": {"finalizers": []}}
            api.request("PUT", f"{namespace.path(name=name)}/finalize", body)


def _gone(api: PlainApi, namespace: Kind, names: set[str]) -> None:
    deadline = time.monotonic() + 120
    while left := {m["name"] for m in api.metadata(namespace.path())} & names:
        if time.monotonic() > deadline:
            raise AssertionError(f"namespaces {sorted(left)} still terminating after 120s")
        time.sleep(0.1)


def install_crds(plane: ControlPlane, crds: list[dict[str, Any]] | None = None) -> dict[str, str]:
    """The product's CRDs (or those of them in `crds`) as the default reconciler's sync
    writes them (server-side apply as its field manager, its owner label), waited for until
    all are Established; name -> resourceVersion."""
    client = connect(plane)
    try:
        for crd in render_crds() if crds is None else crds:
            client.apply(owned(crd, RECONCILER_NAME), FIELD_MANAGER, force=True)
        return _established(plane, client)
    finally:
        client.close()


def _established(plane: ControlPlane, client: ClusterClient) -> dict[str, str]:
    """Once every CRD the product renders is Established and its custom resources' storage
    ready: name -> resourceVersion. (A CRD deleted while the API server still fills its
    watch cache stays for a minute: its finalizer fails on "storage is (re)initializing",
    then waits out a minute-long poll before it tries again.)"""
    crds = render_crds()
    names = {_name(crd) for crd in crds}

    def served() -> dict[str, str]:
        live = [c for c in _crds(client, OURS) if _name(c) in names]
        if len(live) < len(names) or not all(established(c) for c in live):
            return {}
        return {_name(c): c["metadata"]["resourceVersion"] for c in live}

    versions = wait("the product's CRDs Established", served)
    _storage_ready(plane, crds)
    return versions


def _storage_ready(plane: ControlPlane, crds: list[dict[str, Any]]) -> None:
    """Wait until the API server answers a list of each CRD's kind from its watch cache
    (resourceVersion 0): not while it still fills it (429, "storage is (re)initializing"),
    and then the CRD can be deleted at once. A kind not served (404) has nothing to wait for."""
    api = PlainApi(plane)

    def cached(kind: Kind) -> bool:
        try:
            api.request("GET", f"{kind.path()}?resourceVersion=0&limit=1")  # None: 404
        except Refused as exc:
            if exc.status != 429:
                raise
            return False
        return True

    try:
        for crd in crds:
            wait(f"the storage of {_name(crd)} ready", functools.partial(cached, _kind_of(crd)))
    finally:
        api.close()


def _kind_of(crd: dict[str, Any]) -> Kind:
    """The kind a CRD serves, in its first version."""
    spec = crd["spec"]
    names = spec["names"]
    return Kind(
        spec["group"],
        spec["versions"][0]["name"],
        names["kind"],
        names["plural"],
        spec["scope"] == "Namespaced",
        frozenset(),
    )


def _restore_crds(plane: ControlPlane, api: PlainApi, versions: dict[str, str]) -> dict[str, str]:
    """Put back each baseline CRD a test deleted or changed (its resourceVersion moved): a
    changed one is deleted first, so it comes back exactly as `install_crds` made it, not
    merged with the test's fields; the baseline's versions (`versions` when none moved)."""
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

    def live() -> dict[str, str]:
        return {m["name"]: m["resourceVersion"] for m in api.metadata(path)}

    now = live()
    moved = [crd for crd in render_crds() if now.get(_name(crd)) != versions[_name(crd)]]
    if not moved:
        return versions
    _storage_ready(plane, [crd for crd in moved if _name(crd) in now])
    for crd in moved:
        if _name(crd) in now:
            api.delete(f"{path}/{_name(crd)}")
    wait("the changed CRDs deleted", lambda: not {_name(c) for c in moved} & live().keys())
    return install_crds(plane, moved)


def _crds(client: ClusterClient, selector: str | None = None) -> list[dict[str, Any]]:
    return client.list(*CRD_KIND, selector) or []


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _delete_custom_resources(api: PlainApi, since: str) -> None:
    """Delete every custom resource of the baseline CRDs a test left (those in its
    namespaces went with them), finalizers dropped first, as deleting the CRD would."""
    for kind in map(_kind_of, render_crds()):
        for meta in api.metadata(kind.path(), since):
            path = kind.path(meta.get("namespace", ""), meta["name"])
            if meta.get("finalizers"):
                api.drop_finalizers(path)
            api.delete(path)


def bare(plane: ControlPlane) -> ControlPlane:
    """`plane` without its baseline CRDs (deleted, waited for until gone), for a test about
    a bare cluster; the wipe after the test puts them back."""
    client = connect(plane)
    try:
        for name in sorted(plane.crds):  # type: ignore[attr-defined]
            client.delete(ObjectRef(*CRD_KIND, "", name))
        wait("the baseline CRDs deleted", lambda: not _crds(client, OURS))
    finally:
        client.close()
    return plane


def _empty(
    plane: ControlPlane, api: PlainApi, kinds: list[Kind], namespaces: set[str], seconds: float = 60
) -> None:
    """Delete every object of `kinds` in `namespaces`, and what the session did not start with
    in the namespaces it keeps (`_shared`), until none is left: finalizers dropped one
    object at a time, then one collection delete per kind and namespace (a test's namespace
    goes whole), so a wipe costs requests per kind, not per object. The namespaces are being
    deleted already, so nothing new appears in them (the API server refuses it); all the kinds
    are listed again only after a pass that deleted something in a kept namespace (a
    controller may make more there) or was refused, else only those it deleted: an object a
    delete only marked (a finalizer) must be gone before its namespace is finalized, or it
    stays in etcd, and a later test that makes the namespace again finds it there."""
    kept = plane.shared  # type: ignore[attr-defined]
    shared = _shared(plane)
    deadline = time.monotonic() + seconds
    while True:
        left = [
            (kind, meta)
            for key, (kind, meta) in _namespaced(api, kinds, namespaces | shared, api.now())
            if meta["namespace"] in namespaces
            or (key not in kept and not _own_write(kind, meta["namespace"]))
        ]
        if not left:
            return
        if time.monotonic() > deadline:
            named = ", ".join(f"{k.kind}/{m['namespace']}/{m['name']}" for k, m in left[:5])
            raise AssertionError(
                f"{len(left)} objects left in {sorted(namespaces | shared)} after {seconds:g}s: "
                f"{named}{', ...' if len(left) > 5 else ''}"
            )
        again = False
        whole: dict[tuple[str, str, str], Kind] = {}
        for kind, meta in left:
            path = kind.path(meta["namespace"], meta["name"])
            try:
                if meta.get("finalizers"):
                    api.drop_finalizers(path)
                if meta["namespace"] in namespaces and "deletecollection" in kind.verbs:
                    whole[(kind.group, kind.kind, meta["namespace"])] = kind
                    continue
                api.delete(path, AT_ONCE)
            except Refused:
                again = True
            again = again or meta["namespace"] not in namespaces
        for (_, _, namespace), kind in whole.items():
            try:
                api.delete(kind.path(namespace), AT_ONCE)  # the whole collection
            except Refused:
                again = True
        if not again:
            kinds = list(dict.fromkeys(kind for kind, _ in left))


def _shared(plane: ControlPlane) -> set[str]:
    """The namespaces of the baseline tests put objects in: `default` and the installed
    parts'; the wipe deletes there only what the session did not start with."""
    return {SHARED} | plane.parts.namespaces()  # type: ignore[attr-defined]


def _own_write(kind: Kind, namespace: str) -> bool:
    """What the control plane writes into `default` all along (elsewhere a test's)."""
    return namespace == SHARED and (kind.group, kind.kind) in OWN_WRITES


def _emptied(kinds: list[Kind]) -> list[Kind]:
    """The namespaced kinds a wipe lists and deletes."""
    return [k for k in kinds if k.namespaced and {"list", "delete"} <= k.verbs]


def _namespaced(
    api: PlainApi, kinds: list[Kind], namespaces: set[str], since: str = ""
) -> list[tuple[tuple[str, ...], tuple[Kind, dict[str, Any]]]]:
    """The metadata of each object of `kinds` in `namespaces`, keyed by group, kind,
    namespace and name, as of resourceVersion `since` or newer."""
    return [
        ((k.group, k.kind, meta["namespace"], meta["name"]), (k, meta))
        for k in kinds
        for meta in api.metadata(k.path(), since)
        if meta.get("namespace") in namespaces
    ]


@pytest.fixture
def real_cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    yield control_plane
    wipe(control_plane)


@pytest.fixture
def real_client(real_cluster: ControlPlane) -> Iterator[ClusterClient]:
    client = connect(real_cluster)
    yield client
    client.close()


@pytest.fixture
def bare_cluster(real_cluster: ControlPlane) -> ControlPlane:
    """`real_cluster` without the product's CRDs, as before the reconciler's first sync."""
    return bare(real_cluster)


@pytest.fixture
def uninstalled(real_cluster: ControlPlane) -> ControlPlane:
    """`real_cluster` without the product's installed parts, as before an admin installs
    them (`kubectl apply -k reconciler/ scheduler/`)."""
    return uninstall(real_cluster)
