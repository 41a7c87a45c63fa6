"""Plain JSON requests to the test control plane as its admin, for the wipe after each test.

The wipe runs after every in-cluster test, so its cost is paid hundreds of times a run: the
kinds come from the API server's aggregated discovery (two requests, not one per group
version parsed into the dynamic client's objects), lists ask for the objects' metadata only
(PartialObjectMetadataList: a CRD's schema or a role's rules are never sent), and answers
stay dicts. A wipe lists some thirty kinds at a time: it asks the server for its current
resourceVersion once (`now`, a consistent read) and lists each kind as of that version or
newer (`since`), which the API server answers from its watch cache without going to etcd:
half the CPU of a consistent list, and the same guarantee (nothing older than the moment
the wipe asked).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import urllib3

from testkit.control_plane.cluster import ControlPlane

METADATA = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
NOT_OLDER = "resourceVersionMatch=NotOlderThan"
# a watch cache still filling (429) or not yet at the version asked for after its wait (504)
UNCACHED = {429, 504}


class Refused(Exception):
    """The server answered with an error other than 404."""

    def __init__(self, method: str, path: str, status: int, body: bytes):
        super().__init__(f"{method} {path}: {status} {body[:500]!r}")
        self.status = status


@dataclass(frozen=True)
class Kind:
    """A kind in its group's preferred version, as discovery lists it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    verbs: frozenset[str]

    def path(self, namespace: str = "", name: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else "/api/v1"
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"{base}{where}/{self.plural}" + (f"/{name}" if name else "")


class PlainApi:
    def __init__(self, plane: ControlPlane):
        self.server = plane.server
        self.pool = urllib3.PoolManager(ca_certs=str(plane.root / "ca.crt"), timeout=30.0)
        self.auth = {"Authorization": f"Bearer {plane.token}"}

    def close(self) -> None:
        self.pool.clear()

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        accept: str = "application/json",
        content_type: str = "application/json",
    ) -> dict[str, Any] | None:
        """The answer; None for 404 (gone already, or a kind no longer served); Refused for
        any other error."""
        headers = {**self.auth, "Accept": accept, "Content-Type": content_type}
        data = json.dumps(body).encode() if body is not None else None
        answer = self.pool.request(method, self.server + path, body=data, headers=headers)
        if answer.status == 404:
            return None
        if answer.status >= 400:
            raise Refused(method, path, answer.status, answer.data)
        return json.loads(answer.data or b"{}")  # type: ignore[no-any-return]

    def kinds(self) -> list[Kind]:
        """Every kind the server serves (subresources aside), in each group's preferred
        version."""
        found = []
        for root in ("/api", "/apis"):
            for group in (self.request("GET", root, accept=DISCOVERY) or {}).get("items") or []:
                preferred = (group.get("versions") or [{}])[0]
                for r in preferred.get("resources") or []:
                    kind = r.get("responseKind") or {}
                    found.append(
                        Kind(
                            group=group["metadata"].get("name", ""),
                            version=preferred["version"],
                            kind=kind.get("kind", ""),
                            plural=r["resource"],
                            namespaced=r.get("scope") == "Namespaced",
                            verbs=frozenset(r.get("verbs") or ()),
                        )
                    )
        return found

    def metadata(self, path: str, since: str = "") -> list[dict[str, Any]]:
        """The metadata of each object a list path answers with (none when not served); with
        `since` (a resourceVersion from `now`), as of that version or newer, from the API
        server's watch cache (a consistent list where that cache is not ready yet: a CRD
        just made)."""
        if since:
            try:
                return self._items(f"{path}?resourceVersion={since}&{NOT_OLDER}")
            except Refused as exc:
                if exc.status not in UNCACHED:
                    raise
        return self._items(path)

    def now(self) -> str:
        """The cluster's current resourceVersion (a consistent read of one namespace)."""
        listed = self.request("GET", "/api/v1/namespaces?limit=1", accept=METADATA) or {}
        return str(listed["metadata"]["resourceVersion"])

    def _items(self, path: str) -> list[dict[str, Any]]:
        listed = self.request("GET", path, accept=METADATA) or {}
        return [item["metadata"] for item in listed.get("items") or []]

    def delete(self, path: str, body: dict[str, Any] | None = None) -> None:
        self.request("DELETE", path, body)

    def drop_finalizers(self, path: str) -> None:
        patch = {"metadata": {"finalizers": None}}
        self.request("PATCH", path, patch, content_type="application/merge-patch+json")
