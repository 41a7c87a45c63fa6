"""The product's parts installed once a session, as a team's cluster has them installed:
`kubectl apply -k reconciler/` and `scheduler/` (less what runs an image) are in the control
plane's baseline, and the wipe keeps them as installed.

Tests used to install a part themselves and the wipe to delete it: about a CPU-second each
time (kubectl, the API server, namespaces made and finalized), some seventy times a run; and
a part started right after met API server caches that still held the ServiceAccount of the
last test or not yet the new roles (a 401 or 403 no real install sees).

- `install`: the parts applied; their namespaces' `default` ServiceAccount and root CA
  ConfigMap waited for (kube-controller-manager makes them), then `ready`; every object
  recorded as installed.
- `ready`: each ServiceAccount's token authenticated (TokenReview) and each binding granted
  (SubjectAccessReview), so a part started next is let in.
- `restore` (in the wipe): an installed object a test changed is put back as recorded (its
  labels, annotations, rules and managed fields), one it deleted is made again as kubectl
  made it, then `ready` again if an account or a role came back.
- `apply_kustomization` of an installed part sends nothing (`ControlPlane.installed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.install import apply_kustomization
from testkit.control_plane.plain_api import Kind, PlainApi
from testkit.control_plane.waiting import wait

PARTS = ("reconciler", "scheduler")
NAMESPACE_MADE = (("/api/v1", "serviceaccounts", "default"),)
NAMESPACE_MADE += (("/api/v1", "configmaps", "kube-root-ca.crt"),)
APPLY = "application/apply-patch+yaml"
KUBECTL = "fieldManager=kubectl&force=true"  # as `kubectl apply --server-side` writes
# the kinds that decide who the API server lets in and what it grants them
ACCESS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


@dataclass
class Installed:
    """Each installed object's path -> (as applied, as the server then held it)."""

    objects: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)

    def namespaces(self) -> set[str]:
        return {a["metadata"]["name"] for a, _ in self.objects.values() if a["kind"] == "Namespace"}

    def replaced(self, listed: list[dict[str, Any]]) -> set[str]:
        """The installed namespaces in `listed` (metadata) a test deleted and made again."""
        uids = {r["metadata"]["name"]: r["metadata"]["uid"] for _, r in self.objects.values()}
        names = self.namespaces()
        return {m["name"] for m in listed if m["name"] in names and m["uid"] != uids[m["name"]]}


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    """An object's (group, kind)."""
    return obj["apiVersion"].rpartition("/")[0], obj["kind"]


def _path(kinds: dict[tuple[str, str], Kind], obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return kinds[_key(obj)].path(meta.get("namespace", ""), meta["name"])


def install(plane: ControlPlane, api: PlainApi) -> Installed:
    kinds = {(k.group, k.kind): k for k in api.kinds()}
    installed = Installed()
    for folder in PARTS:
        for obj in apply_kustomization(plane, folder):
            installed.objects[_path(kinds, obj)] = (obj, {})
    _made_by_namespace(api, installed.namespaces())
    _record(api, installed)
    ready(api, installed)
    plane.installed.update(PARTS)
    return installed


def _made_by_namespace(api: PlainApi, namespaces: set[str]) -> None:
    """What kube-controller-manager makes in a new namespace; the wipe keeps it."""
    for namespace in sorted(namespaces):
        for base, plural, name in NAMESPACE_MADE:
            path = f"{base}/namespaces/{namespace}/{plural}/{name}"
            wait(f"{plural}/{name} in {namespace}", lambda p=path: api.request("GET", p))


def _record(api: PlainApi, installed: Installed) -> None:
    for path, (applied, _) in installed.objects.items():
        live = api.request("GET", path)
        assert live is not None, f"{path} not installed"
        installed.objects[path] = (applied, live)


def restore(plane: ControlPlane, api: PlainApi, kinds: list[Kind], installed: Installed) -> None:
    """Put back what a test changed, deleted or made again of the installed parts (such a
    namespace is gone by now: the wipe finalized it). The API server's caches are waited
    for (`ready`) only when an account or a role came back: a namespace a sync labelled
    (the reconciler adopts the scheduler's), put back as it was, lets nobody in or out."""
    made: set[str] = set()
    access = False
    now = _metadata(api, kinds, installed)
    for path, (applied, recorded) in installed.objects.items():  # namespaces first
        meta = now.get(path)
        if meta is not None and meta["uid"] != recorded["metadata"]["uid"]:
            api.delete(path)  # a test made it again: not what was installed
            meta = None
        if meta is None:
            live = api.request("PATCH", f"{path}?{KUBECTL}", applied, content_type=APPLY)
            if applied["kind"] == "Namespace":
                made.add(applied["metadata"]["name"])
        elif meta["resourceVersion"] != recorded["metadata"]["resourceVersion"]:
            body = {**recorded, "metadata": {**recorded["metadata"]}}
            body["metadata"]["resourceVersion"] = meta["resourceVersion"]
            live = api.request("PUT", path, body)
        else:
            continue
        assert live is not None, f"{path} not restored"
        installed.objects[path] = (applied, live)
        access = access or applied["kind"] in ACCESS
    _made_by_namespace(api, made)
    if access or made:
        ready(api, installed)
    plane.installed.update(PARTS)


def _metadata(api: PlainApi, kinds: list[Kind], installed: Installed) -> dict[str, Any]:
    """Each installed object's path -> its metadata now, absent where deleted: one list of
    each installed kind (a few) rather than a GET of each object (some twenty), after
    every test."""
    by_key = {(k.group, k.kind): k for k in kinds}
    since = api.now()
    found = {}
    for key in sorted({_key(applied) for applied, _ in installed.objects.values()}):
        kind = by_key[key]
        for meta in api.metadata(kind.path(), since):
            found[kind.path(meta.get("namespace", ""), meta["name"])] = meta
    return found


def ready(api: PlainApi, installed: Installed) -> None:
    """Until the API server lets each ServiceAccount in and grants each of its bindings."""
    objects = [live for _, live in installed.objects.values()]
    roles = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
    }
    for account in (o for o in objects if o["kind"] == "ServiceAccount"):
        _authenticated(api, account)
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        namespace = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role = roles[(ref["kind"], namespace if ref["kind"] == "Role" else "", ref["name"])]
        rule = next((r for r in role.get("rules") or () if r.get("resources")), None)
        if rule is None:  # non-resource URLs only: no resource to ask about
            continue
        for subject in binding["subjects"]:
            _granted(api, subject, namespace, rule)


def _authenticated(api: PlainApi, account: dict[str, Any]) -> None:
    meta = account["metadata"]
    path = f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{meta['name']}/token"
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    token = (api.request("POST", path, request) or {})["status"]["token"]
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"}
    review["spec"] = {"token": token}

    def known() -> bool:
        status = (api.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", review) or {})[
            "status"
        ]
        return bool(status.get("authenticated")) and status["user"].get("uid") == meta["uid"]

    wait(f"the token of {meta['namespace']}/{meta['name']} authenticated", known)


def _granted(api: PlainApi, subject: dict[str, Any], namespace: str, rule: dict[str, Any]) -> None:
    user = f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
    resource, _, subresource = rule["resources"][0].partition("/")
    attributes = {
        "namespace": namespace,
        "verb": rule["verbs"][0],
        "group": rule["apiGroups"][0],
        "resource": resource,
        "subresource": subresource,
        "name": (rule.get("resourceNames") or [""])[0],
    }
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{subject['namespace']}"],
            "resourceAttributes": attributes,
        },
    }
    path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    wait(
        f"{user} granted {attributes}",
        lambda: (api.request("POST", path, review) or {})["status"].get("allowed"),
    )
