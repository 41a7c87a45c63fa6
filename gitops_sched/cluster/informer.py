"""A kind's live objects kept current in memory, as client-go's informers do: list once, then
watch from the list's resourceVersion; when the watch breaks or the version has expired
(410 Gone), list again.

The scheduler reads the cache every cycle instead of listing thousands of pods, and wakes
up on change (`on_change`). The cache holds plain dicts keyed by namespace/name; readers get
a list copy, so a cycle sees one consistent set while events keep arriving.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from gitops_sched.cluster.client import ClusterClient
from gitops_sched.cluster.errors import ApiFailure

log = logging.getLogger(__name__)
WATCH_TIMEOUT_S = 300  # the server ends a watch after this; we start the next one
GONE = 410
MAX_PAUSE_S = 30.0  # the longest wait before listing again after failures in a row


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


class Informer:
    def __init__(
        self,
        client: ClusterClient,
        api_version: str,
        kind: str,
        field_selector: str | None = None,
        namespace: str | None = None,
        on_change: Callable[[], None] | None = None,
        retry_after: float = 1.0,
    ):
        self.client = client
        self.api_version, self.kind = api_version, kind
        self.field_selector, self.namespace = field_selector, namespace
        self.on_change = on_change
        self.retry_after = retry_after
        self._objects: dict[str, dict[str, Any]] = {}
        self._version = ""
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None

    # --- reading ---------------------------------------------------------------------

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects.values())

    @property
    def synced(self) -> bool:
        """Whether the first list has arrived: before that the cache is not the cluster."""
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    # --- keeping current -------------------------------------------------------------

    def relist(self) -> None:
        """Replace the cache with a fresh list (ApiFailure when the server cannot answer)."""
        items, version = self.client.list_versioned(
            self.api_version, self.kind, self.field_selector, self.namespace
        )
        with self._lock:
            self._objects = {object_key(obj): obj for obj in items}
            self._version = version
        self._synced.set()
        self._changed()

    def apply_event(self, event: dict[str, Any]) -> None:
        """One watch event into the cache (bookmarks only move the version on)."""
        kind, obj = event.get("type"), event.get("object") or {}
        version = (obj.get("metadata") or {}).get("resourceVersion") or self._version
        with self._lock:
            self._version = version
            if kind == "BOOKMARK":
                return
            obj = {"apiVersion": self.api_version, "kind": self.kind, **obj}
            if kind == "DELETED":
                self._objects.pop(object_key(obj), None)
            else:
                self._objects[object_key(obj)] = obj
        self._changed()

    def watch_once(self, timeout: int = WATCH_TIMEOUT_S) -> None:
        """Follow one watch until the server ends it; a 410 clears the version so the next
        round lists again."""
        try:
            for event in self.client.watch(
                self.api_version,
                self.kind,
                self._version,
                timeout,
                self.field_selector,
                self.namespace,
            ):
                self.apply_event(event)
        except ApiFailure as exc:
            if exc.status == GONE:
                self._version = ""
            raise

    def run(self, stop: threading.Event, timeout: int = WATCH_TIMEOUT_S) -> None:
        """List and watch until `stop`. Any failure (an API failure, an event that does not
        decode, a bug) is logged and followed by a fresh list after a pause that doubles
        with each failure in a row, up to `MAX_PAUSE_S`: the thread never stops by itself."""
        failures = 0
        while not stop.is_set():
            try:
                if not self._version:
                    self.relist()
                    failures = 0
                self.watch_once(timeout)
            except Exception as exc:  # the cache must keep following, whatever went wrong
                if isinstance(exc, ApiFailure):
                    log.info("%s informer: %s; listing again", self.kind, exc)
                else:
                    log.exception("%s informer failed; listing again", self.kind)
                self._version = ""
                stop.wait(min(MAX_PAUSE_S, self.retry_after * 2**failures))
                failures += 1

    def start(self, stop: threading.Event, timeout: int = WATCH_TIMEOUT_S) -> None:
        self._thread = threading.Thread(
            target=self.run, args=(stop, timeout), name=f"informer-{self.kind}", daemon=True
        )
        self._thread.start()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
