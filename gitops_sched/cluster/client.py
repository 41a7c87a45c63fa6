"""A small client over the official one's DynamicClient: plain dicts in and out, one
retrying request path, and request counting.

Resources are found through discovery (the DynamicClient's), refreshed once when a kind is
missing, since a CRD applied a moment ago adds kinds. A kind discovery says is missing is
checked with a GET of its group version (the official discoverer reads a group that answered
503 as empty); discovery that fails in any way (an error answer, a dropped connection, an
answer that does not decode, the discoverer's cache left half-reset) is thrown away and
started afresh, within the retry budget of the request that needed it. Every request goes
through `_request`, which retries with jittered backoff (see `retry`) and calls the
`before_request` hooks (tests use them to stop a process between two requests).
"""

from __future__ import annotations

import builtins  # `list` is also a method of ClusterClient
import contextlib
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import kubernetes.watch
import urllib3
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.discovery import LazyDiscoverer
from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError

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
        self._cache_dir = tempfile.mkdtemp(prefix="gitops-sched-discovery-")
        self._dynamic: DynamicClient | None = None

    def close(self) -> None:
        self.api_client.close()
        shutil.rmtree(self._cache_dir, ignore_errors=True)

    # --- discovery -------------------------------------------------------------------

    @property
    def dynamic(self) -> DynamicClient:
        if self._dynamic is None:
            cache = os.path.join(self._cache_dir, "discovery.json")
            self._dynamic = self._call(
                lambda: self._discovering(
                    lambda: _Discovering(self.api_client, cache, self.backoff)
                )
            )
        return self._dynamic

    def resource(self, api_version: str, kind: str) -> Any | None:
        """The DynamicClient resource of a kind, or None when the server does not serve it
        (its group version answers 404, or lists no such kind)."""

        def find() -> Any | None:
            def get() -> Any:
                return self.dynamic.resources.get(api_version=api_version, kind=kind)

            try:
                return self._discovering(get)
            except ResourceNotFoundError:  # the discoverer already refreshed once
                return None

        found = self._call(find)
        if found is None and self._served(api_version, kind):
            self._forget_discovery()  # it read a group that failed as one without kinds
            found = self._call(find)
            if found is None:
                raise ApiFailure(503, "DiscoveryIncomplete", f"{api_version} {kind}: not found")
        return found

    def namespaced_kinds(self) -> builtins.list[tuple[str, str]]:
        """Every namespaced kind the server lists, in each group's preferred version, read
        afresh (not from the discoverer's cache): one request per group version, each with
        its own retries. ApiFailure when a group cannot be read, so a group that did not
        answer is never taken for one without kinds."""
        groups = self._request("GET", "/apis").get("groups") or []
        paths = ["/api/v1"] + [f"/apis/{g['preferredVersion']['groupVersion']}" for g in groups]
        kinds = set()
        for path in paths:
            body = self._request("GET", path)
            for r in body.get("resources") or []:
                listed = "list" in (r.get("verbs") or ())
                if r.get("namespaced") and listed and "/" not in r["name"]:
                    kinds.add((str(body["groupVersion"]), str(r["kind"])))
        return sorted(kinds)

    def _served(self, api_version: str, kind: str) -> bool:
        """Whether the group version's own discovery document lists the kind."""
        prefix = "/apis" if "/" in api_version else "/api"
        try:
            body = self._request("GET", f"{prefix}/{api_version}")
        except NotFound:
            return False
        resources = body.get("resources") or []
        return any(r.get("kind") == kind and "/" not in r.get("name", "/") for r in resources)

    def _discovering(self, action: Callable[[], Any]) -> Any:
        """`action()` on the discoverer; when it fails, the discoverer is thrown away (its
        cache may be half-reset) and the failure is an ApiFailure, retried like any other."""
        try:
            return action()
        except ResourceNotFoundError:
            raise
        except (DynamicApiError, kubernetes.client.ApiException, urllib3.exceptions.HTTPError):
            self._forget_discovery()
            raise  # `_translated` makes it an ApiFailure
        except Exception as exc:  # whatever a half-reset cache or an undecodable answer raises
            self._forget_discovery()
            raise ApiFailure(0, "DiscoveryFailed", f"{type(exc).__name__}: {exc}") from exc

    def _forget_discovery(self) -> None:
        self._dynamic = None
        with contextlib.suppress(OSError):
            os.remove(os.path.join(self._cache_dir, "discovery.json"))

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
        watcher = kubernetes.watch.Watch()
        events = watcher.stream(
            resource.get,
            namespace=namespace,
            field_selector=field_selector,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            serialize=False,  # plain dicts (the client's own ERROR handling needs its parsing)
            _request_timeout=timeout + self.timeout,
        )
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
            response = DynamicClient.request(
                self.dynamic,
                method,
                path,
                body=body,
                serialize=False,
                query_params=list(query or []),
                content_type=content_type,
                header_params=dict(headers),
                _request_timeout=self.timeout,
            )
            try:
                answer = json.loads(response.data or b"{}")
            except ValueError as exc:
                raise ApiFailure(0, "BadResponse", f"{method} {path}: {exc}") from exc
            if not isinstance(answer, dict):
                raise ApiFailure(0, "BadResponse", f"{method} {path}: not a JSON object")
            return answer

        return self._call(send, retry_conflicts, retry_throttled)

    def _call(
        self, action: Callable[[], Any], retry_conflicts: bool = True, retry_throttled: bool = True
    ) -> Any:
        return self.backoff.call(lambda: _translated(action), retry_conflicts, retry_throttled)


def _dry(dry_run: bool) -> list[tuple[str, str]]:
    """The query of a server-side dry run: the server checks the write as it would do it
    (authorization, admission, validation, a PodDisruptionBudget) and stores nothing."""
    return [("dryRun", "All")] if dry_run else []


class _Discovering(DynamicClient):
    """The DynamicClient whose discoverer retries each of its requests on its own: one
    lookup may read every group, and one budget for all of them would rarely suffice on a
    flaky server. A request that still fails raises what the discoverer expects (its 404
    and 503 handling stay as they are)."""

    def __init__(self, api_client: kubernetes.client.ApiClient, cache: str, backoff: Backoff):
        self.backoff = backoff
        super().__init__(api_client, cache_file=cache, discoverer=_Unwritten)

    def request(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        def send() -> Any:
            return super(_Discovering, self).request(method, path, body, **params)

        try:
            return self.backoff.call(lambda: _translated(send))
        except ApiFailure as failure:
            raise (failure.__cause__ or failure) from None


class _Unwritten(LazyDiscoverer):
    """The official lazy discoverer, its cache file never written. The file (in the
    client's own folder) would only be read by a discoverer made after it, and the client
    makes one only after removing the file (`_forget_discovery`), so writing it was pure
    cost: the whole cache through the pure-Python JSON encoder after each lookup that
    learnt a group (about 2 ms each, six writes a sync of a small repo)."""

    def _write_cache(self) -> None:
        pass


def _translated(action: Callable[[], Any]) -> Any:
    """`action()`, with the client's and the network's exceptions as ApiFailure."""
    try:
        return action()
    except DynamicApiError as exc:
        raise ApiFailure.from_response(exc.status, exc.body, exc.headers) from exc
    except kubernetes.client.ApiException as exc:
        raise ApiFailure.from_response(exc.status, exc.body, exc.headers) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ApiFailure(0, "Unreachable", f"{type(exc).__name__}: {exc}") from exc
