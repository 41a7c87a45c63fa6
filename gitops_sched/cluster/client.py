"""A small client over the official one's ApiClient: plain dicts in and out, one retrying
request path, and request counting.

A kind's resource (its plural, whether it is namespaced) comes from its group version's
discovery document (`GET /apis/<group>/<version>`, `/api/v1`), read once per group version
through the same retrying request path as everything else, and read again when it lacks the
kind asked for (a CRD applied a moment ago adds kinds); a group version the server answers
404 for is not served. The official DynamicClient's discoverer did this by reading every
group and building an object per resource and subresource: most of a short-lived client's
CPU, and a group that answered 503 came out of it as one without kinds. Every request goes
through `_request`, which retries with jittered backoff (see `retry`) and calls the
`before_request` hooks (tests use them to stop a process between two requests).
"""

from __future__ import annotations

import builtins  # `list` is also a method of ClusterClient
import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import kubernetes.watch
import urllib3

from gitops_sched.cluster.errors import ApiFailure, NotFound
from gitops_sched.cluster.retry import Backoff

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True, order=True)
class ObjectRef:
    """An object's identity: apiVersion, kind, namespace ("" when cluster-scoped), name."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: dict[str, Any]) -> ObjectRef:
        meta = obj["metadata"]
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}/{where}{self.name}"


@dataclass(frozen=True)
class Resource:
    """Where a kind's objects are: its group version's path (`/apis/<group>/<version>` or
    `/api/v1`), its plural, whether it is namespaced and whether it can be listed."""

    prefix: str
    plural: str
    namespaced: bool
    listable: bool

    def path(self, name: str | None = None, namespace: str | None = None) -> str:
        """The path of one object (`name`), or of the list of them (in `namespace`, or in
        every namespace)."""
        where = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{self.prefix}{where}/{self.plural}" + (f"/{name}" if name else "")


class ClusterClient:
    def __init__(
        self,
        configuration: kubernetes.client.Configuration,
        backoff: Backoff | None = None,
        timeout: float = 30.0,
        user_agent: str = "gitops-sched",
    ):
        configuration.retries = False
        self.api_client = kubernetes.client.ApiClient(configuration)
        self.api_client.user_agent = user_agent
        self.backoff = backoff or Backoff()
        self.timeout = timeout
        self.before_request: list[Callable[[str, str], None]] = []
        self.requests: Counter[str] = Counter()  # "read" / "write" requests sent, retries too
        self._kinds: dict[str, dict[str, Resource]] = {}  # api_version -> kind -> Resource

    def close(self) -> None:
        self.api_client.close()

    # --- discovery -------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> Resource | None:
        """Where the objects of a kind are, or None when the server does not serve it (its
        group version answers 404, or lists no such kind)."""
        known = self._kinds.get(api_version)
        if known is not None and kind in known:
            return known[kind]
        known = self._discover(api_version)
        return known.get(kind) if known is not None else None

    def _discover(self, api_version: str) -> dict[str, Resource] | None:
        """The kinds of a group version's discovery document (its subresources aside), read
        afresh; None when the server does not serve the group version."""
        prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        try:
            body = self._request("GET", prefix)
        except NotFound:
            self._kinds.pop(api_version, None)
            return None
        kinds = {
            str(r["kind"]): Resource(
                prefix,
                str(r["name"]),
                bool(r.get("namespaced")),
                "list" in (r.get("verbs") or ()),
            )
            for r in body.get("resources") or []
            if isinstance(r, dict) and "/" not in str(r.get("name", "/")) and r.get("kind")
        }
        self._kinds[api_version] = kinds
        return kinds

    def listable_kinds(self, namespaced_only: bool = False) -> builtins.list[tuple[str, str]]:
        """Every kind the server lists (or every namespaced one), in each group's preferred
        version, read afresh: one request per group version, each with its own retries.
        ApiFailure (NotFound too) when a group cannot be read, so a group that did not
        answer is never taken for one without kinds."""
        groups = self._request("GET", "/apis").get("groups") or []
        versions = ["v1"] + [str(g["preferredVersion"]["groupVersion"]) for g in groups]
        kinds = set()
        for api_version in versions:
            found = self._discover(api_version)
            if found is None:
                raise NotFound(404, "NotFound", f"{api_version}: listed, but not served")
            for kind, resource in found.items():
                if resource.listable and (resource.namespaced or not namespaced_only):
                    kinds.add((api_version, kind))
        return sorted(kinds)

    def _path(self, ref: ObjectRef, subresource: str | None = None) -> str:
        resource = self.resource(ref.api_version, ref.kind)
        if resource is None:
            raise NotFound(404, "NotFound", f"{ref.api_version} {ref.kind} is not served")
        path = resource.path(name=ref.name, namespace=ref.namespace or None)
        return f"{path}/{subresource}" if subresource else path

    # --- requests --------------------------------------------------------------------

    def get(self, ref: ObjectRef) -> dict[str, Any] | None:
        try:
            return self._request("GET", self._path(ref))
        except NotFound:
            return None

    def list(
        self,
        api_version: str,
        kind: str,
        label_selector: str | None = None,
        namespace: str | None = None,
    ) -> list[dict[str, Any]] | None:
        """Objects of a kind (in every namespace unless one is given), each with its
        apiVersion and kind; None when the server does not serve the kind."""
        resource = self.resource(api_version, kind)
        if resource is None:
            return None
        query = [("labelSelector", label_selector)] if label_selector else []
        try:
            body = self._request("GET", resource.path(namespace=namespace), query=query)
        except NotFound:
            return None
        return [{"apiVersion": api_version, "kind": kind, **item} for item in body["items"]]

    def list_metadata(
        self, api_version: str, kind: str, namespace: str
    ) -> builtins.list[dict[str, Any]]:
        """The metadata of a kind's objects in a namespace (PartialObjectMetadata: names,
        labels, owners; never a Secret's data), to tell what a namespace holds."""
        resource = self.resource(api_version, kind)
        if resource is None:
            return []
        accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        try:
            body = self._request("GET", resource.path(namespace=namespace), accept=accept)
        except NotFound:
            return []
        return [item.get("metadata") or {} for item in body.get("items") or []]

    def list_versioned(
        self,
        api_version: str,
        kind: str,
        field_selector: str | None = None,
        namespace: str | None = None,
    ) -> tuple[builtins.list[dict[str, Any]], str]:
        """Objects of a kind and the list's resourceVersion, to watch from; NotFound when the
        server does not serve the kind."""
        resource = self.resource(api_version, kind)
        if resource is None:
            raise NotFound(404, "NotFound", f"{api_version} {kind} is not served")
        query = [("fieldSelector", field_selector)] if field_selector else []
        body = self._request("GET", resource.path(namespace=namespace), query=query)
        items = [{"apiVersion": api_version, "kind": kind, **item} for item in body["items"]]
        return items, body.get("metadata", {}).get("resourceVersion", "")

    def watch(
        self,
        api_version: str,
        kind: str,
        resource_version: str,
        timeout: int,
        field_selector: str | None = None,
        namespace: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Change events after `resource_version` (`{"type", "object"}`, objects as plain
        dicts, bookmarks included) until the server ends the watch after `timeout` seconds.

        Not retried: a watch that fails (ApiFailure; 410 Gone when the version is too old)
        is the caller's cue to list again."""
        resource = self.resource(api_version, kind)
        if resource is None:
            raise NotFound(404, "NotFound", f"{api_version} {kind} is not served")
        query = [("watch", "true"), ("allowWatchBookmarks", "true")]
        query += [("resourceVersion", resource_version), ("timeoutSeconds", str(timeout))]
        query += [("fieldSelector", field_selector)] if field_selector else []
        path = resource.path(namespace=namespace)

        def open_watch(**_: Any) -> Any:
            """The open response; `Watch.stream`'s own arguments are all in `query`."""
            return self._send("GET", path, query=query, timeout=timeout + self.timeout)

        watcher = kubernetes.watch.Watch()
        # `timeout_seconds` given: the official watch neither resumes nor retries on its own
        events = watcher.stream(open_watch, timeout_seconds=timeout)
        self.requests["read"] += 1
        try:
            while True:
                try:
                    event = _translated(lambda: next(events))
                except StopIteration:
                    return
                if event is not None:
                    yield event
        finally:
            watcher.stop()

    def apply(
        self,
        obj: dict[str, Any],
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Server-side apply of `obj` (the fields `field_manager` wants, and only those)."""
        query = [("fieldManager", field_manager), ("force", "true" if force else "false")]
        query += _dry(dry_run)
        path = self._path(ObjectRef.of(obj), subresource)
        return self._request("PATCH", path, body=obj, query=query, content_type=APPLY_PATCH)

    def create(
        self, obj: dict[str, Any], field_manager: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        meta = obj["metadata"]
        resource = self.resource(obj["apiVersion"], obj["kind"])
        if resource is None:
            raise NotFound(404, "NotFound", f"{obj['apiVersion']} {obj['kind']} is not served")
        path = resource.path(namespace=meta.get("namespace"))
        query = [("fieldManager", field_manager)] if field_manager else []
        query += _dry(dry_run)
        return self._request("POST", path, body=obj, query=query, retry_conflicts=False)

    def replace(self, obj: dict[str, Any], field_manager: str | None = None) -> dict[str, Any]:
        """PUT with the object's resourceVersion: a 409 means someone else wrote first, and
        is returned to the caller rather than retried."""
        query = [("fieldManager", field_manager)] if field_manager else []
        path = self._path(ObjectRef.of(obj))
        return self._request("PUT", path, body=obj, query=query, retry_conflicts=False)

    def patch(
        self,
        ref: ObjectRef,
        body: dict[str, Any],
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """A merge patch (or `content_type`'s) of the object or of a subresource (`status`)."""
        path = self._path(ref, subresource)
        query = _dry(dry_run)
        return self._request("PATCH", path, body=body, query=query, content_type=content_type)

    def post(
        self,
        ref: ObjectRef,
        subresource: str,
        body: dict[str, Any],
        dry_run: bool = False,
        retry_throttled: bool = False,
    ) -> dict[str, Any]:
        """POST to a subresource (`binding`, `eviction`). A 409 is not retried, nor a 429
        unless `retry_throttled`: a pod already bound, or an eviction a PodDisruptionBudget
        refuses, is an answer the caller acts on (the next cycle tries again); a Binding's
        429 is only the server's throttling."""
        path = self._path(ref, subresource)
        return self._request(
            "POST",
            path,
            body=body,
            query=_dry(dry_run),
            retry_conflicts=False,
            retry_throttled=retry_throttled,
        )

    def delete(
        self, ref: ObjectRef, propagation: str = "Background", dry_run: bool = False
    ) -> bool:
        """Delete an object; False when it was already gone."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        try:
            self._request("DELETE", self._path(ref), body=body, query=_dry(dry_run))
        except NotFound:
            return False
        return True

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: builtins.list[tuple[str, str]] | None = None,
        content_type: str | None = None,
        retry_conflicts: bool = True,
        retry_throttled: bool = True,
        accept: str | None = None,
    ) -> dict[str, Any]:
        headers = {"Accept": accept} if accept else {}

        def send() -> dict[str, Any]:
            for hook in self.before_request:
                hook(method, path)
            self.requests["read" if method == "GET" else "write"] += 1
            response = self._send(method, path, body, query, headers, content_type)
            try:
                answer = json.loads(response.data or b"{}")
            except ValueError as exc:
                raise ApiFailure(0, "BadResponse", f"{method} {path}: {exc}") from exc
            if not isinstance(answer, dict):
                raise ApiFailure(0, "BadResponse", f"{method} {path}: not a JSON object")
            return answer

        return self._call(send, retry_conflicts, retry_throttled)

    def _send(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: builtins.list[tuple[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        content_type: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """One request, not retried: the open urllib3 response (a watch streams from it);
        an error answer raises the official client's ApiException."""
        header_params = {"Accept": "application/json", **(headers or {})}
        header_params["Content-Type"] = content_type or "application/json"
        request = self.api_client.param_serialize(
            method,
            path,
            query_params=list(query or []),
            header_params=header_params,
            body=body,
            auth_settings=["BearerToken"],
        )
        answer = self.api_client.call_api(*request, _request_timeout=timeout or self.timeout)
        if not 200 <= answer.status <= 299:
            answer.read()
            self.api_client.response_deserialize(answer, {})  # raises ApiException
        return answer.response

    def _call(
        self, action: Callable[[], Any], retry_conflicts: bool = True, retry_throttled: bool = True
    ) -> Any:
        return self.backoff.call(lambda: _translated(action), retry_conflicts, retry_throttled)


def _dry(dry_run: bool) -> list[tuple[str, str]]:
    """The query of a server-side dry run: the server checks the write as it would do it
    (authorization, admission, validation, a PodDisruptionBudget) and stores nothing."""
    return [("dryRun", "All")] if dry_run else []


def _translated(action: Callable[[], Any]) -> Any:
    """`action()`, with the client's and the network's exceptions as ApiFailure."""
    try:
        return action()
    except kubernetes.client.ApiException as exc:
        raise ApiFailure.from_response(exc.status, exc.body, exc.headers) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ApiFailure(0, "Unreachable", f"{type(exc).__name__}: {exc}") from exc
