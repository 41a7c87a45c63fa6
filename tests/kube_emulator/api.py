"""The API server's behaviour, without HTTP: `Api.handle` takes a request and returns a status
code and a JSON body. `server.py` puts it on a socket.

Strict where gitops-sched's code relies on the server: resourceVersion preconditions (409),
server-side apply with field managers and conflicts, dry runs, defaulting and canonical
quantities, generation, label and field selectors, lists at a resourceVersion (410 or 504
like a real server when it cannot serve one), namespaces that must exist, CRDs that must be
Established before their custom resources are served, unknown fields of built-in kinds
rejected against the official OpenAPI schema (kubernetes-validate) and unknown fields of
custom resources pruned. Faults (status codes, timeouts) can be injected per request, and
every request is counted as discovery, read or write.

Pods as a scheduler meets them (`pods.py`, `disruption.py`): the binding and eviction
subresources, PodDisruptionBudgets whose status follows their pods, graceful deletion
(`pod_termination="graceful"`, `finish_terminating`), finalizers, the few pod fields an
update may change, priority admission, field selectors per kind. Jobs (`jobs.py`): the spec
fields an update may not change (422 "field is immutable"). A deletion with
propagationPolicy Foreground keeps the object, marked, until its dependents that block it
are gone (the garbage collector's part, played at once). Watches (`watch.py`) stream
every change from a bounded history. `call` serves the tests' stand-ins in-process.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from jsonschema import Draft4Validator

from tests.kube_emulator import disruption, fields, jobs, pods
from tests.kube_emulator.defaults import apply_defaults, prune_unknown
from tests.kube_emulator.errors import ApiError
from tests.kube_emulator.quantity import QuantityError, parse
from tests.kube_emulator.resources import BUILTIN_TYPES, ResourceType, custom_types
from tests.kube_emulator.schemas import schema_causes
from tests.kube_emulator.selectors import SelectorError, parse_field_selector, parse_selector
from tests.kube_emulator.watch import TRUE, Change, History, Watch, timeout_of

KUBERNETES_VERSION = "1.32"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_NAMED_KINDS = ("Namespace", "Service")  # names must be DNS-1123 labels
QUANTITY_PARENTS = ("limits", "requests", "capacity", "allocatable", "hard")
LEGACY_BINDINGS = re.compile(r"^/api/v1/namespaces/[^/]+/bindings/?$")
DELETION_FIELDS = ("deletionTimestamp", "deletionGracePeriodSeconds")
# what a disruption budget's status is computed from
BUDGET_INPUTS = {("", "Pod"), ("policy", "PodDisruptionBudget"), *disruption.SCALABLE}
FOREGROUND = "foregroundDeletion"  # the finalizer of an object deleted in the foreground
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


@dataclass
class Fault:
    """Answer matching requests with `status` (or hang for `delay` seconds when it is
    "timeout"), `times` times. With `after`, the request is carried out first and only its
    response is lost, as when a connection drops after the server committed."""

    status: int | str
    method: str | None = None  # GET, POST, PUT, PATCH, DELETE; None for any
    path: str | None = None  # a regular expression searched in the path
    times: int = 1
    after: bool = False
    delay: float = 0.0
    retry_after: int | None = None

    def matches(self, method: str, path: str) -> bool:
        if self.times <= 0:
            return False
        if self.method is not None and self.method != method:
            return False
        return self.path is None or re.search(self.path, path) is not None


@dataclass
class Response:
    code: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    hang: float = 0.0  # seconds to wait and then drop the connection without an answer
    stream: Iterator[dict[str, Any]] | None = None  # a watch: events, one JSON line each


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    code: int = 0

    @property
    def category(self) -> str:
        if _is_discovery(self.path):
            return "discovery"
        return "read" if self.method == "GET" else "write"


def _is_discovery(path: str) -> bool:
    parts = path.strip("/").split("/")
    return (
        path in ("/version", "/api", "/apis")
        or (parts[0] == "api" and len(parts) == 2)
        or (parts[0] == "apis" and len(parts) == 3)
    )


@dataclass
class _Route:
    type: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class Api:
    """`pod_termination`: "immediate" removes a deleted pod at once; "graceful" keeps a bound
    pod with a deletionTimestamp until `finish_terminating` (the kubelet's part) removes it.
    `watch_history`: how many changes a watch can start behind the newest (older: 410)."""

    def __init__(
        self,
        validate_builtins: bool = True,
        crd_establish_delay: float = 0.0,
        kubernetes_version: str = KUBERNETES_VERSION,
        pod_termination: str = "immediate",
        watch_history: int = 1000,
    ):
        if pod_termination not in ("immediate", "graceful"):
            raise ValueError(f"pod_termination is immediate or graceful, not {pod_termination!r}")
        self.lock = threading.RLock()
        self.pod_termination = pod_termination
        self.history = History(self.lock, watch_history)
        self.validate_builtins = validate_builtins
        self.crd_establish_delay = crd_establish_delay
        self.kubernetes_version = kubernetes_version
        self.resource_version = 1
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.store: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self.pending_crds: dict[str, float] = {}  # CRD name -> time it becomes Established
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        for rtype in BUILTIN_TYPES:
            self._serve(rtype)

    # --- bookkeeping ---------------------------------------------------------------

    def _serve(self, rtype: ResourceType) -> None:
        self.types[(rtype.group, rtype.version, rtype.plural)] = rtype
        self.store.setdefault(rtype.key, {})

    def _next_version(self) -> str:
        self.resource_version += 1
        return str(self.resource_version)

    def counts(self) -> Counter:
        """Requests so far by category (discovery, read, write) and by method."""
        with self.lock:
            counter = Counter(r.category for r in self.requests)
            counter.update(f"{r.method}" for r in self.requests)
            return counter

    def reset_counts(self) -> None:
        with self.lock:
            self.requests.clear()

    def snapshot(self) -> dict[str, Any]:
        """The stored state, to `restore` later (tests that replay a sync many times)."""
        with self.lock:
            return copy.deepcopy(
                {"rv": self.resource_version, "types": self.types, "store": self.store}
            )

    def restore(self, snapshot: dict[str, Any]) -> None:
        with self.lock:
            state = copy.deepcopy(snapshot)
            self.resource_version = state["rv"]
            self.types, self.store = state["types"], state["store"]
            self.pending_crds.clear()
            self.history.reset(self.resource_version)

    def close(self) -> None:
        """End every open watch (the server is stopping)."""
        self.history.close()

    def add_fault(self, fault: Fault) -> Fault:
        with self.lock:
            self.faults.append(fault)
        return fault

    def type_for(self, api_version: str, kind: str) -> ResourceType:
        group, _, version = api_version.rpartition("/")
        for rtype in self.types.values():
            if (rtype.group, rtype.version, rtype.kind) == (group, version, kind):
                return rtype
        raise KeyError(f"{api_version} {kind} is not served")

    def objects(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        """Stored objects of a kind (copies), sorted by namespace and name."""
        with self.lock:
            rtype = self.type_for(api_version, kind)
            store = self.store[rtype.key]
            return [copy.deepcopy(store[k]) for k in sorted(store)]

    def find(self, api_version: str, kind: str, name: str, namespace: str | None = None):
        with self.lock:
            try:
                rtype = self.type_for(api_version, kind)
            except KeyError:
                return None
            obj = self.store[rtype.key].get((namespace or "", name))
            return copy.deepcopy(obj) if obj is not None else None

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str | None = None,
        manager: str = "kube-emulator",
    ) -> Any:
        """A request made in-process, for the tests' controller and kubelet stand-ins: not
        counted in `requests`, never faulted; the answer's body, or ApiError. A PATCH is a
        merge patch unless `content_type` says otherwise."""
        default = "application/merge-patch+json" if method == "PATCH" else "application/json"
        headers = {"content-type": content_type or default, "user-agent": manager}
        data = body if isinstance(body, bytes) else json.dumps(body).encode() if body else b""
        with self.lock:
            self._establish_due_crds()
            return self._dispatch(method, path, query or {}, headers, data).body

    def finish_terminating(self, namespace: str | None = None, name: str | None = None):
        """The kubelet's part of a graceful deletion (and PodGC's for unbound pods): each
        terminating pod (in `namespace`, named `name`, or all) stops: its phase becomes
        Failed unless it had finished, and it is gone, or, held by finalizers, kept with a
        zero grace period. Returns the namespace/name of the pods that changed."""
        with self.lock:
            rtype = self.type_for("v1", "Pod")
            store = self.store[rtype.key]
            done = []
            for key in sorted(store):
                pod = store[key]
                meta = pod["metadata"]
                if not meta.get("deletionTimestamp") or namespace not in (None, key[0]):
                    continue
                if name not in (None, key[1]):
                    continue
                held = meta.get("finalizers") and meta.get("deletionGracePeriodSeconds") == 0
                if held and pods.stopped(pod) == pod:
                    continue  # stopped already: its finalizers are someone else's
                stopped = pods.stopped(pod)
                if stopped != pod:
                    self._put(rtype, stopped, pod)
                self._delete_object(rtype, stopped, {"gracePeriodSeconds": 0})
                done.append("/".join(key))
            return done

    # --- entry point -----------------------------------------------------------------

    def handle(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        headers: dict[str, str],
        body: bytes,
    ) -> Response:
        record = Request(method, path, query)
        with self.lock:
            self.requests.append(record)
            fault = next((f for f in self.faults if f.matches(method, path)), None)
            if fault is not None:
                fault.times -= 1
        if fault is not None and not fault.after:
            response = self._fault_response(fault)
        else:
            with self.lock:
                self._establish_due_crds()
                try:
                    response = self._dispatch(method, path, query, headers, body)
                except ApiError as exc:
                    response = Response(exc.code, exc.status())
            if fault is not None:
                response = self._fault_response(fault)
        record.code = response.code
        return response

    def _fault_response(self, fault: Fault) -> Response:
        if fault.status == "timeout":
            return Response(0, None, hang=fault.delay or 5.0)
        code = int(fault.status)
        reasons = {
            409: "Conflict",
            429: "TooManyRequests",
            500: "InternalError",
            503: "ServiceUnavailable",
            504: "Timeout",
        }
        error = ApiError(code, reasons.get(code, "Unknown"), f"injected fault: {code}")
        headers = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        return Response(code, error.status(), headers)

    def _dispatch(self, method, path, query, headers, body) -> Response:
        if path == "/version":
            major, minor = self.kubernetes_version.split(".")[:2]
            return Response(
                200,
                {
                    "major": major,
                    "minor": minor,
                    "gitVersion": f"v{major}.{minor}.0",
                    "platform": "linux/amd64",
                },
            )
        if path == "/api":
            return Response(
                200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
            )
        if path == "/apis":
            return Response(200, self._group_list())
        parts = [p for p in path.split("/") if p]
        if _is_discovery(path):
            return Response(200, self._resource_list(parts))
        dry_run = query.get("dryRun") == "All"
        if "dryRun" in query and not dry_run:
            raise ApiError(400, "BadRequest", f"unsupported dryRun value {query['dryRun']!r}")
        if method == "POST" and LEGACY_BINDINGS.match(path):
            return self._bind(parts[3], None, body, dry_run)
        route = self._route(parts)
        if query.get("watch") in TRUE:
            if method != "GET" or route.name is not None:
                raise ApiError(405, "MethodNotAllowed", "watch a list path")
            return Response(200, None, stream=self._watch(route, query).events())
        if route.subresource in route.type.actions:
            if method != "POST":
                raise ApiError(
                    405,
                    "MethodNotAllowed",
                    "the server does not allow this method on the requested resource",
                )
            if route.subresource == "binding":
                return self._bind(route.namespace, route.name, body, dry_run)
            return self._evict(route, body, dry_run)
        if method == "GET":
            if route.name is None:
                return Response(200, self._list(route, query))
            return Response(200, self._get(route))
        manager = query.get("fieldManager") or _manager_from_agent(headers.get("user-agent", ""))
        if method == "POST" and route.name is None:
            return Response(201, self._create(route, _json(body), manager, dry_run))
        if route.name is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} needs an object name")
        if method == "PUT":
            return Response(200, self._replace(route, _json(body), manager, dry_run))
        if method == "PATCH":
            content_type = headers.get("content-type", "").split(";")[0].strip()
            return self._patch(route, content_type, body, query, manager, dry_run)
        if method == "DELETE":
            return Response(200, self._delete(route, _delete_options(body, query), dry_run))
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")

    # --- discovery -------------------------------------------------------------------

    def _group_list(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = {}
        for group, version, _ in self.types:
            if group and version not in groups.setdefault(group, []):
                groups[group].append(version)
        out = []
        for group, versions in sorted(groups.items()):
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
            out.append({"name": group, "versions": entries, "preferredVersion": dict(entries[0])})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}

    def _resource_list(self, parts: list[str]) -> dict[str, Any]:
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        served = [t for (g, v, _), t in sorted(self.types.items()) if (g, v) == (group, version)]
        if not served:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": [entry for t in served for entry in t.discovery()],
        }

    # --- routing ---------------------------------------------------------------------

    def _route(self, parts: list[str]) -> _Route:
        not_found = ApiError(404, "NotFound", "the server could not find the requested resource")
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise not_found
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            candidate = self.types.get((group, version, rest[2]))
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        rtype = self.types.get((group, version, rest[0]))
        if rtype is None or len(rest) > 3:
            raise not_found
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and not (
            (sub == "status" and rtype.status_subresource) or sub in rtype.actions
        ):
            raise not_found
        if rtype.namespaced and name is not None and namespace is None:
            raise not_found
        return _Route(rtype, namespace, name, sub)

    def _key(self, route: _Route) -> tuple[str, str]:
        return (route.namespace or "", route.name or "")

    # --- reads -----------------------------------------------------------------------

    def _get(self, route: _Route) -> dict[str, Any]:
        obj = self.store[route.type.key].get(self._key(route))
        if obj is None:
            raise _not_found(route)
        return copy.deepcopy(obj)

    def _list(self, route: _Route, query: dict[str, str]) -> dict[str, Any]:
        rtype = route.type
        current = self.resource_version
        wanted = query.get("resourceVersion", "")
        match = query.get("resourceVersionMatch", "")
        if wanted not in ("", "0"):
            if not wanted.isdigit():
                raise ApiError(400, "BadRequest", f"invalid resourceVersion {wanted!r}")
            if int(wanted) > current:
                raise ApiError(
                    504, "Timeout", f"Too large resource version: {wanted}, current: {current}"
                )
            if match == "Exact" and int(wanted) != current:
                raise ApiError(410, "Expired", f"resourceVersion {wanted} is too old")
        try:
            labels = parse_selector(query.get("labelSelector"))
            field_ok = parse_field_selector(query.get("fieldSelector"), rtype.kind)
        except SelectorError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc
        store = self.store[rtype.key]
        keys = sorted(k for k in store if route.namespace is None or k[0] == route.namespace)
        token = query.get("continue")
        if token:
            try:
                start_after = tuple(json.loads(base64.b64decode(token)))
            except ValueError as exc:
                raise ApiError(400, "BadRequest", "invalid continue token") from exc
            keys = [k for k in keys if k > start_after]
        items, more, last = [], None, None
        limit = int(query.get("limit") or 0)
        for key in keys:
            obj = store[key]
            if labels(obj["metadata"].get("labels") or {}) and field_ok(obj):
                if limit and len(items) == limit:
                    more = base64.b64encode(json.dumps(list(last)).encode()).decode()
                    break
                item = copy.deepcopy(obj)
                if rtype.schema is None:
                    # typed lists of built-in kinds carry no apiVersion/kind per item
                    item.pop("apiVersion", None)
                    item.pop("kind", None)
                items.append(item)
                last = key
        metadata: dict[str, Any] = {"resourceVersion": str(current)}
        if more:
            metadata["continue"] = more
        return {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version,
            "metadata": metadata,
            "items": items,
        }

    # --- writes ----------------------------------------------------------------------

    def _check_body(self, route: _Route, body: dict[str, Any]) -> None:
        rtype = route.type
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body must be a JSON object")
        if body.get("apiVersion") != rtype.api_version or body.get("kind") != rtype.kind:
            raise ApiError(
                400,
                "BadRequest",
                f"the API version/kind in the data ({body.get('apiVersion')}/{body.get('kind')}) "
                f"does not match the expected {rtype.api_version}/{rtype.kind}",
            )
        meta = body.setdefault("metadata", {})
        body_ns = meta.get("namespace")
        if rtype.namespaced:
            if body_ns not in (None, "", route.namespace):
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request",
                )
            meta["namespace"] = route.namespace
        elif body_ns:
            meta.pop("namespace")  # cluster-scoped objects have none; the server drops it
        if route.name is not None and meta.get("name") not in (None, route.name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the URL")

    def _validate(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        name = meta.get("name", "")
        pattern = DNS_LABEL if rtype.kind in LABEL_NAMED_KINDS else DNS_SUBDOMAIN
        limit = 63 if rtype.kind in LABEL_NAMED_KINDS else 253
        causes = []
        if not pattern.match(name) or len(name) > limit:
            causes.append(("metadata.name", f"Invalid value: {name!r}: a lowercase RFC 1123 name"))
        for key, value in (meta.get("labels") or {}).items():
            prefix, _, label = key.rpartition("/")
            if (
                not LABEL_NAME.match(label)
                or len(label) > 63
                or (prefix and not DNS_SUBDOMAIN.match(prefix))
            ):
                causes.append(("metadata.labels", f"Invalid value: {key!r}: a qualified name"))
            if not isinstance(value, str) or not LABEL_VALUE.match(value) or len(value) > 63:
                causes.append(("metadata.labels", f"Invalid value: {value!r}: a label value"))
        for key, value in (meta.get("annotations") or {}).items():
            if not isinstance(value, str):
                causes.append(("metadata.annotations", f"{key}: annotation values are strings"))
        if not causes and rtype.schema is None and self.validate_builtins:
            causes += schema_causes(obj, self.kubernetes_version)
        if not causes and rtype.schema is not None:
            validator = Draft4Validator(rtype.schema)
            for error in validator.iter_errors(obj):
                causes.append((".".join(str(p) for p in error.absolute_path), error.message))
        if causes:
            raise ApiError(
                422,
                "Invalid",
                f"{rtype.kind} {name!r} is invalid: " + "; ".join(f"{f}: {m}" for f, m in causes),
                name=name,
                group=rtype.group,
                kind=rtype.kind,
                causes=[{"field": f, "message": m} for f, m in causes],
            )

    def _finish(
        self,
        route: _Route,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        dry_run: bool,
    ) -> dict[str, Any]:
        """Default, canonicalise, validate and store `obj` (a create when `old` is None)."""
        rtype = route.type
        meta = obj["metadata"]
        if old is None:
            if rtype.namespaced and ("", route.namespace) not in self.store[("", "namespaces")]:
                raise ApiError(
                    404,
                    "NotFound",
                    f'namespaces "{route.namespace}" not found',
                    name=route.namespace,
                    kind="namespaces",
                )
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = fields.now()
            if rtype.generation:
                meta["generation"] = 1
        else:
            for key in ("uid", "creationTimestamp", *DELETION_FIELDS):
                meta.pop(key, None)
                if key in old["metadata"]:
                    meta[key] = old["metadata"][key]
            _check_finalizers(old, obj)
        if rtype.schema is not None:
            kept = {k: obj[k] for k in ("apiVersion", "kind", "metadata")}
            obj = {**prune_unknown(obj, rtype.schema), **kept}
        try:
            apply_defaults(obj)
        except (QuantityError, KeyError, TypeError) as exc:
            raise ApiError(
                422, "Invalid", f"{rtype.kind} {meta.get('name')!r} is invalid: {exc}"
            ) from exc
        if old is not None and rtype.generation:
            changed = _spec_of(obj) != _spec_of(old)
            meta["generation"] = old["metadata"].get("generation", 1) + changed
        if rtype.kind == "PodDisruptionBudget":
            disruption.check_spec(obj)
        if rtype.kind == "Pod" and old is None:
            pods.admit(obj, self._priority_classes())
        elif rtype.kind == "Pod" and route.subresource is None:
            pods.check_update(old, obj)
        is_job = (rtype.group, rtype.kind) == ("batch", "Job")
        if is_job and old is not None and route.subresource is None:
            jobs.check_update(old, obj)
        self._validate(rtype, obj)
        if old is not None and _content(obj) == _content(old):
            return copy.deepcopy(old)  # a no-op write keeps its resourceVersion
        if dry_run:
            if old is not None:
                meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            return obj
        if old is not None and _finalized(rtype, obj):
            return self._remove(rtype, obj)
        self._put(rtype, obj, old)
        if rtype.kind == "CustomResourceDefinition":
            self._crd_changed(obj, created=old is None)
        return copy.deepcopy(obj)

    # --- storage: every change is an event for watches -----------------------------

    def _put(self, rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None):
        """Store `obj` under a new resourceVersion."""
        meta = obj["metadata"]
        meta["resourceVersion"] = self._next_version()
        self.store[rtype.key][(meta.get("namespace", ""), meta["name"])] = obj
        kind = "ADDED" if old is None else "MODIFIED"
        self.history.add(
            Change(
                self.resource_version,
                kind,
                rtype.key,
                copy.deepcopy(obj),
                old and copy.deepcopy(old),
            )
        )
        self._changed(rtype, meta.get("namespace", ""))

    def _remove(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Remove `obj`; the answer (and the DELETED event) carry the removal's version."""
        meta = obj["metadata"]
        del self.store[rtype.key][(meta.get("namespace", ""), meta["name"])]
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = self._next_version()
        self.history.add(
            Change(self.resource_version, "DELETED", rtype.key, copy.deepcopy(gone), None)
        )
        self._changed(rtype, meta.get("namespace", ""))
        self._owner_released(gone)
        return gone

    def _changed(self, rtype: ResourceType, namespace: str) -> None:
        """The disruption controller's part: budgets follow their pods (and scales)."""
        if (rtype.group, rtype.kind) in BUDGET_INPUTS:
            self._sync_budgets(namespace)

    def _sync_budgets(self, namespace: str) -> None:
        budgets = self.store.get(("policy", "poddisruptionbudgets"), {})
        keys = sorted(k for k in budgets if k[0] == namespace)
        if not keys:
            return
        pod_store = self.store[("", "pods")]
        in_namespace = [pod_store[k] for k in sorted(pod_store) if k[0] == namespace]
        rtype = self.type_for("policy/v1", "PodDisruptionBudget")
        for key in keys:
            pdb = budgets[key]
            status = disruption.budget_status(pdb, in_namespace, self._scale_of)
            if status != pdb.get("status"):
                self._put(rtype, {**copy.deepcopy(pdb), "status": status}, pdb)

    def _scale_of(self, namespace: str, owner: dict[str, Any]) -> int | None:
        """The replicas of a pod's controller, when it has a scale subresource."""
        group = owner.get("apiVersion", "").rpartition("/")[0]
        if (group, owner.get("kind")) not in disruption.SCALABLE:
            return None
        for rtype in self.types.values():
            if (rtype.group, rtype.kind) == (group, owner["kind"]):
                found = self.store[rtype.key].get((namespace, owner.get("name")))
                if found is not None and found["metadata"]["uid"] == owner.get("uid"):
                    return (found.get("spec") or {}).get("replicas", 1)
        return None

    def _priority_classes(self) -> dict[str, dict[str, Any]]:
        store = self.store[("scheduling.k8s.io", "priorityclasses")]
        return {name: obj for (_, name), obj in store.items()}

    def _create(self, route: _Route, body: dict[str, Any], manager: str, dry_run: bool):
        self._check_body(route, body)
        meta = body["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        route = _Route(route.type, route.namespace, meta.get("name"), None)
        if self._key(route) in self.store[route.type.key]:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{route.type.plural} "{route.name}" already exists',
                name=route.name,
                group=route.type.group,
                kind=route.type.plural,
            )
        for key in (
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "managedFields",
            *DELETION_FIELDS,
        ):
            meta.pop(key, None)
        if route.type.status_subresource and route.type.kind != "Node":
            body.pop("status", None)  # a node registers with its status; others get defaults
        meta["managedFields"] = fields.record_update(
            {"apiVersion": body["apiVersion"], "metadata": {}}, body, manager
        )
        return self._finish(route, body, None, dry_run)

    def _replace(self, route: _Route, body: dict[str, Any], manager: str, dry_run: bool):
        self._check_body(route, body)
        old = self._get(route)
        wanted = body["metadata"].get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise _conflict(route)
        return self._write(route, old, body, manager, dry_run)

    def _write(self, route, old, new, manager, dry_run):
        """Store `new` in place of `old` as an update by `manager`."""
        new = _keep_other_half(route, old, new)
        new["metadata"]["managedFields"] = fields.record_update(
            old, new, manager, route.subresource
        )
        return self._finish(route, new, old, dry_run)

    def _patch(self, route, content_type, body, query, manager, dry_run) -> Response:
        if content_type == "application/apply-patch+yaml":
            return self._apply(route, body, query, dry_run)
        old = self._get(route)
        try:
            patch = json.loads(body or b"null")
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"invalid JSON patch body: {exc}") from exc
        if content_type in (
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ):
            if not isinstance(patch, dict):
                raise ApiError(400, "BadRequest", "a merge patch is a JSON object")
            new = _merge_patch(copy.deepcopy(old), patch)
        elif content_type == "application/json-patch+json":
            new = _json_patch(copy.deepcopy(old), patch)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type!r}")
        wanted = new["metadata"].get("resourceVersion")
        if wanted != old["metadata"]["resourceVersion"]:
            raise _conflict(route)
        self._check_body(route, new)
        return Response(200, self._write(route, old, new, manager, dry_run))

    def _apply(self, route: _Route, body: bytes, query: dict[str, str], dry_run: bool):
        manager = query.get("fieldManager")
        if not manager:
            raise ApiError(400, "BadRequest", "PATCH with apply requires a fieldManager")
        force = query.get("force") in ("true", "1")
        try:
            applied = yaml.safe_load(body)
        except yaml.YAMLError as exc:
            raise ApiError(400, "BadRequest", f"invalid apply patch: {exc}") from exc
        if not isinstance(applied, dict):
            raise ApiError(400, "BadRequest", "an apply patch is an object")
        self._check_body(route, applied)
        for key in ("managedFields", "uid", "creationTimestamp", "generation"):
            applied["metadata"].pop(key, None)
        wanted = applied["metadata"].pop("resourceVersion", None)
        old = self.store[route.type.key].get(self._key(route))
        if old is None and route.subresource:
            raise _not_found(route)
        if wanted and (old is None or wanted != old["metadata"]["resourceVersion"]):
            raise _conflict(route)
        if route.subresource == "status":
            applied = {
                k: v
                for k, v in applied.items()
                if k in ("apiVersion", "kind", "metadata", "status")
            }
        elif route.type.status_subresource:
            applied.pop("status", None)
        try:
            merged, managed = fields.apply(
                old, applied, manager, force, _values_equal, route.subresource
            )
        except fields.Conflict as exc:
            causes = [
                {
                    "reason": "FieldManagerConflict",  # StatusCause.Type is "reason" in JSON
                    "message": f'conflict with "{m}"',
                    "field": "." + ".".join(p),
                }
                for m, p in exc.conflicts
            ]
            raise ApiError(
                409,
                "Conflict",
                str(exc),
                name=route.name,
                group=route.type.group,
                kind=route.type.plural,
                causes=causes,
            ) from exc
        merged["metadata"]["managedFields"] = managed
        if old is None:
            return Response(201, self._finish(route, merged, None, dry_run))
        return Response(200, self._finish(route, merged, old, dry_run))

    def _delete(self, route: _Route, options: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        obj = self._get(route)
        _check_preconditions(route, obj, options.get("preconditions") or {})
        if dry_run:
            return obj
        if route.type.kind == "Namespace":
            for rtype in {t.key: t for t in self.types.values() if t.namespaced}.values():
                store = self.store[rtype.key]
                for key in sorted(k for k in store if k[0] == route.name):
                    self._remove(rtype, store[key])
        if route.type.kind == "CustomResourceDefinition":
            self._crd_removed(obj)
        if options.get("propagationPolicy") == "Foreground" and route.type.kind != "Pod":
            return self._delete_foreground(route.type, obj)
        return self._delete_object(route.type, obj, options)

    def _delete_foreground(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """propagationPolicy Foreground: the server marks the object (a deletionTimestamp and
        the foregroundDeletion finalizer); the garbage collector deletes its dependents and
        removes the finalizer once no dependent that blocks its owner's deletion is left.
        The emulator plays the collector at once, so the object goes with its last blocking
        dependent (a pod, in graceful mode, once its kubelet has stopped it)."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return copy.deepcopy(obj)  # already on its way
        marked = copy.deepcopy(obj)
        marked["metadata"]["finalizers"] = [*(meta.get("finalizers") or []), FOREGROUND]
        marked["metadata"]["deletionTimestamp"] = fields.now()
        marked["metadata"]["deletionGracePeriodSeconds"] = 0
        self._put(rtype, marked, obj)
        for dependent_type, dependent in self._dependents(marked):
            if not dependent["metadata"].get("deletionTimestamp"):
                self._delete_object(dependent_type, dependent, {})
        return self._collect(rtype, marked)

    def _dependents(self, owner: dict[str, Any]) -> list[tuple[ResourceType, dict[str, Any]]]:
        """The objects whose ownerReferences name `owner` (by uid)."""
        uid, namespace = owner["metadata"]["uid"], owner["metadata"].get("namespace")
        found = []
        for rtype in {t.key: t for t in self.types.values()}.values():
            store = self.store[rtype.key]
            for key in sorted(store):
                if namespace and key[0] != namespace:
                    continue
                references = store[key]["metadata"].get("ownerReferences") or []
                if any(r.get("uid") == uid for r in references):
                    found.append((rtype, store[key]))
        return found

    def _collect(self, rtype: ResourceType, owner: dict[str, Any]) -> dict[str, Any]:
        """The garbage collector's last step for an owner deleted in the foreground: once no
        dependent with blockOwnerDeletion is left, the foregroundDeletion finalizer goes,
        and the object with it when it was the last finalizer."""
        meta = owner["metadata"]
        current = self.store[rtype.key].get((meta.get("namespace", ""), meta["name"]))
        if current is None or current["metadata"]["uid"] != meta["uid"]:
            return copy.deepcopy(owner)  # gone already
        finalizers = current["metadata"].get("finalizers") or []
        blocked = any(
            r.get("uid") == meta["uid"] and r.get("blockOwnerDeletion")
            for _, dependent in self._dependents(current)
            for r in dependent["metadata"].get("ownerReferences") or []
        )
        if FOREGROUND not in finalizers or blocked:
            return copy.deepcopy(current)
        released = copy.deepcopy(current)
        rest = [f for f in finalizers if f != FOREGROUND]
        if rest:
            released["metadata"]["finalizers"] = rest
            self._put(rtype, released, current)
            return copy.deepcopy(released)
        del released["metadata"]["finalizers"]
        return self._remove(rtype, released)

    def _owner_released(self, dependent: dict[str, Any]) -> None:
        """A dependent is gone: its owners deleted in the foreground may go now."""
        namespace = dependent["metadata"].get("namespace", "")
        for reference in dependent["metadata"].get("ownerReferences") or []:
            try:
                rtype = self.type_for(reference.get("apiVersion", ""), reference.get("kind", ""))
            except KeyError:
                continue
            key = (namespace if rtype.namespaced else "", reference.get("name", ""))
            owner = self.store[rtype.key].get(key) or {"metadata": {}}
            same = owner["metadata"].get("uid") == reference.get("uid")
            if same and FOREGROUND in (owner["metadata"].get("finalizers") or []):
                self._collect(rtype, owner)

    def _delete_object(self, rtype: ResourceType, obj: dict[str, Any], options: dict[str, Any]):
        """Remove `obj` now, or mark it terminating: a pod the kubelet must stop first (in
        graceful mode), or an object whose finalizers are still there."""
        meta = obj["metadata"]
        grace = 0
        if rtype.kind == "Pod" and self.pod_termination == "graceful":
            grace = pods.grace_period(obj, options.get("gracePeriodSeconds"))
        if not meta.get("finalizers") and grace == 0:
            return self._remove(rtype, obj)
        terminating = meta.get("deletionTimestamp")
        if terminating and grace >= meta.get("deletionGracePeriodSeconds", 0):
            return copy.deepcopy(obj)  # only a shorter grace period changes anything
        marked = copy.deepcopy(obj)
        when = datetime.now(UTC) + timedelta(seconds=grace)
        marked["metadata"]["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        marked["metadata"]["deletionGracePeriodSeconds"] = grace
        self._put(rtype, marked, obj)
        return copy.deepcopy(marked)

    # --- pods: binding and eviction ----------------------------------------------------

    def _bind(self, namespace: str | None, url_name: str | None, body: bytes, dry_run: bool):
        """A pod's binding (or the legacy bindings collection): spec.nodeName, the Binding's
        annotations and PodScheduled, with the Binding's uid/resourceVersion preconditions."""
        binding = _json(body)
        target = pods.check_binding(binding, url_name)
        meta = binding.get("metadata") or {}
        if meta.get("namespace") not in (None, "", namespace):
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on "
                "the request",
            )
        rtype = self.type_for("v1", "Pod")
        route = _Route(rtype, namespace, meta.get("name"), None)
        old = self._get(route)
        _check_preconditions(route, old, meta)
        pod = copy.deepcopy(old)
        pods.assign(pod, target["name"], meta.get("annotations") or {})
        if not dry_run:
            self._put(rtype, pod, old)
        return Response(201, copy.deepcopy(SUCCESS))

    def _evict(self, route: _Route, body: bytes, dry_run: bool) -> Response:
        """The Eviction API: the pod's one disruption budget must allow it (a pod not running
        needs none); then DisruptionTarget, and a deletion with the Eviction's options."""
        eviction = _json(body)
        if (
            not isinstance(eviction, dict)
            or eviction.get("kind") != "Eviction"
            or eviction.get("apiVersion") not in ("policy/v1", "policy/v1beta1")
        ):
            raise ApiError(400, "BadRequest", "the body must be a policy/v1 Eviction")
        if (eviction.get("metadata") or {}).get("name") != route.name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
        options = eviction.get("deleteOptions") or {}
        dry_run = dry_run or "All" in (options.get("dryRun") or [])
        pod = self._get(route)
        if not pods.evictable_without_budget(pod):
            store = self.store[("policy", "poddisruptionbudgets")]
            budgets = [
                store[k]
                for k in sorted(store)
                if k[0] == route.namespace and disruption.selects(store[k], pod)
            ]
            if len(budgets) > 1:
                raise ApiError(
                    500,
                    "",
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                )
            if budgets:
                pods.check_budget(pod, budgets[0])
        _check_preconditions(route, pod, options.get("preconditions") or {})
        if not dry_run:
            marked = copy.deepcopy(pod)
            pods.set_condition(
                marked, "DisruptionTarget", "EvictionByEvictionAPI", "Eviction API: evicting"
            )
            self._put(route.type, marked, pod)
            self._delete_object(route.type, marked, options)
        return Response(201, copy.deepcopy(SUCCESS))

    # --- watches ---------------------------------------------------------------------

    def _watch(self, route: _Route, query: dict[str, str]) -> Watch:
        rtype = route.type
        try:
            labels = parse_selector(query.get("labelSelector"))
            field_ok = parse_field_selector(query.get("fieldSelector"), rtype.kind)
        except SelectorError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc

        def matches(obj: dict[str, Any]) -> bool:
            return labels(obj["metadata"].get("labels") or {}) and field_ok(obj)

        wanted = query.get("resourceVersion", "")
        initial = []
        if wanted in ("", "0"):  # the current state first, then what changes
            start = self.resource_version
            store = self.store[rtype.key]
            initial = [
                copy.deepcopy(store[k])
                for k in sorted(store)
                if route.namespace in (None, k[0]) and matches(store[k])
            ]
        elif not wanted.isdigit():
            raise ApiError(400, "BadRequest", f"invalid resourceVersion {wanted!r}")
        else:
            start = int(wanted)
            if start > self.resource_version:
                raise ApiError(
                    504,
                    "Timeout",
                    f"Too large resource version: {wanted}, current: {self.resource_version}",
                )
        return Watch(
            self.history,
            rtype.key,
            rtype.kind,
            rtype.api_version,
            route.namespace,
            matches,
            start,
            lambda: self.resource_version,
            initial,
            timeout_of(query),
            query.get("allowWatchBookmarks") in TRUE,
        )

    # --- custom resource definitions -------------------------------------------------

    def _crd_changed(self, crd: dict[str, Any], created: bool) -> None:
        name = crd["metadata"]["name"]
        if created:
            self.pending_crds[name] = time.monotonic() + self.crd_establish_delay
            self._establish_due_crds()
        elif _condition(crd, "Established"):
            for rtype in custom_types(crd):
                self._serve(rtype)

    def _establish_due_crds(self) -> None:
        now = time.monotonic()
        for name, due in list(self.pending_crds.items()):
            if due > now:
                continue
            del self.pending_crds[name]
            store = self.store[("apiextensions.k8s.io", "customresourcedefinitions")]
            crd = store.get(("", name))
            if crd is None:
                continue
            before = copy.deepcopy(crd)
            stamp = fields.now()
            names = crd["spec"]["names"]
            crd["status"] = {
                **crd.get("status", {}),
                "acceptedNames": {
                    "kind": names["kind"],
                    "listKind": names["listKind"],
                    "plural": names["plural"],
                    "singular": names["singular"],
                },
                "conditions": [
                    {
                        "type": t,
                        "status": "True",
                        "reason": r,
                        "message": m,
                        "lastTransitionTime": stamp,
                    }
                    for t, r, m in (
                        ("NamesAccepted", "NoConflicts", "no conflicts found"),
                        (
                            "Established",
                            "InitialNamesAccepted",
                            "the initial names have been accepted",
                        ),
                    )
                ],
            }
            self._put(
                self.type_for("apiextensions.k8s.io/v1", "CustomResourceDefinition"), crd, before
            )
            for rtype in custom_types(crd):
                self._serve(rtype)

    def _crd_removed(self, crd: dict[str, Any]) -> None:
        self.pending_crds.pop(crd["metadata"]["name"], None)
        for rtype in custom_types(crd):
            self.types.pop((rtype.group, rtype.version, rtype.plural), None)
            self.store.pop(rtype.key, None)


# --- helpers -------------------------------------------------------------------------


def _delete_options(body: bytes, query: dict[str, str]) -> dict[str, Any]:
    options = _json(body) if body else {}
    if not isinstance(options, dict):
        raise ApiError(400, "BadRequest", "DeleteOptions must be a JSON object")
    if "gracePeriodSeconds" in query:
        try:
            options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
        except ValueError as exc:
            raise ApiError(400, "BadRequest", "gracePeriodSeconds must be an integer") from exc
    return options


def _check_preconditions(route: _Route, obj: dict[str, Any], preconditions: dict[str, Any]):
    meta = obj["metadata"]
    uid = preconditions.get("uid")
    if uid and uid != meta["uid"]:
        raise ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {route.type.plural} "{route.name}": '
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta['uid']}",
            name=route.name,
            kind=route.type.plural,
        )
    version = preconditions.get("resourceVersion")
    if version and version != meta["resourceVersion"]:
        raise _conflict(route)


def _check_finalizers(old: dict[str, Any], new: dict[str, Any]) -> None:
    """An object being deleted may lose finalizers, never gain one."""
    if not old["metadata"].get("deletionTimestamp"):
        return
    added = [
        f
        for f in new["metadata"].get("finalizers") or []
        if f not in (old["metadata"].get("finalizers") or [])
    ]
    if added:
        name = new["metadata"]["name"]
        raise ApiError(
            422,
            "Invalid",
            f'{new["kind"]} "{name}" is invalid: metadata.finalizers: Forbidden: no new '
            f"finalizers can be added if the object is being deleted, found new finalizers "
            f"{added}",
            name=name,
            kind=new["kind"],
        )


def _finalized(rtype: ResourceType, obj: dict[str, Any]) -> bool:
    """A terminating object whose last finalizer went (a pod: once its grace period ended)."""
    meta = obj["metadata"]
    if not meta.get("deletionTimestamp") or meta.get("finalizers"):
        return False
    return rtype.kind != "Pod" or meta.get("deletionGracePeriodSeconds") == 0


def _json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise ApiError(400, "BadRequest", f"invalid JSON body: {exc}") from exc


def _manager_from_agent(agent: str) -> str:
    """The server's default field manager: the user agent up to its first slash."""
    return (agent.split("/")[0] or "unknown")[:128]


def _not_found(route: _Route) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{route.type.plural} "{route.name}" not found',
        name=route.name,
        group=route.type.group,
        kind=route.type.plural,
    )


def _conflict(route: _Route) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {route.type.plural} "{route.name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        name=route.name,
        group=route.type.group,
        kind=route.type.plural,
    )


def _condition(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """What makes a write a change: everything but the bookkeeping metadata."""
    meta = {
        k: v
        for k, v in obj["metadata"].items()
        if k not in ("resourceVersion", "managedFields", "generation")
    }
    managed = [
        {k: v for k, v in e.items() if k != "time"}
        for e in obj["metadata"].get("managedFields", [])
    ]
    return {**obj, "metadata": {**meta, "managedFields": managed}}


def _keep_other_half(route: _Route, old: dict[str, Any], new: dict[str, Any]):
    """With a status subresource, a write to the object keeps the old status and a write to
    /status keeps everything else."""
    if not route.type.status_subresource:
        return new
    if route.subresource == "status":
        kept = copy.deepcopy(old)
        kept["status"] = new.get("status", {})
        return kept
    new = dict(new)
    if "status" in old:
        new["status"] = copy.deepcopy(old["status"])
    else:
        new.pop("status", None)
    return new


def _values_equal(a: Any, b: Any, parent: str = "") -> bool:
    """Equal as the server compares them: quantities by value."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_values_equal(a[k], b[k], k) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_values_equal(x, y, parent) for x, y in zip(a, b))
    if a == b:
        return True
    if parent in QUANTITY_PARENTS or parent == "sizeLimit":
        try:
            return parse(a)[0] == parse(b)[0]
        except (QuantityError, TypeError):
            return False
    return False


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (strategic merge patches are treated the same: lists are
    replaced, which is what a strategic patch does to lists without a merge key)."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge_patch(target.get(key), value)
    return target


def _json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, test."""
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "a JSON patch is a list of operations")
    for op in operations:
        path = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = target
        for key in path[:-1]:
            parent = parent[int(key)] if isinstance(parent, list) else parent.get(key)
            if parent is None:
                raise ApiError(422, "Invalid", f"path {op['path']} does not exist")
        last = path[-1]
        kind = op["op"]
        if kind == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op["value"]:
                raise ApiError(422, "Invalid", f"test failed at {op['path']}")
        elif kind == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        elif kind in ("add", "replace"):
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if kind == "add":
                    parent.insert(index, op["value"])
                else:
                    parent[index] = op["value"]
            else:
                parent[last] = op["value"]
        else:
            raise ApiError(422, "Invalid", f"unsupported JSON patch op {kind!r}")
    return target
