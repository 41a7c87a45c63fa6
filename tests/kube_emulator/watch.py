"""Watches: every stored change is an event in a bounded history, and a watch streams the
events after its resourceVersion as the API server's watch cache does.

- `resourceVersion` unset or "0": first a synthetic ADDED for each current object.
- A version older than the history still holds: one ERROR event, a 410 Expired Status.
- Selectors apply to the object before and after a change: an object that starts matching
  arrives as ADDED, one that stops matching as DELETED.
- `timeoutSeconds` ends the stream; with `allowWatchBookmarks`, a BOOKMARK carrying the
  current resourceVersion goes out first.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tests.kube_emulator.errors import ApiError

TRUE = ("1", "t", "T", "true", "TRUE", "True")  # strconv.ParseBool
Event = dict[str, Any]


@dataclass(frozen=True)
class Change:
    version: int
    type: str  # ADDED, MODIFIED, DELETED
    key: tuple[str, str]  # the resource type's storage key
    obj: dict[str, Any]
    old: dict[str, Any] | None


class History:
    """The last `size` changes; `floor` is the newest version whose successors are all kept."""

    def __init__(self, lock: threading.RLock, size: int):
        self.changes: deque[Change] = deque(maxlen=size)
        self.floor = 0
        self.closed = False
        self.changed = threading.Condition(lock)

    def add(self, change: Change) -> None:
        if self.changes.maxlen and len(self.changes) == self.changes.maxlen:
            self.floor = self.changes[0].version
        self.changes.append(change)
        self.changed.notify_all()

    def reset(self, version: int) -> None:
        """Forget everything up to `version` (a restored snapshot: older watches expire)."""
        self.changes.clear()
        self.floor = version

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def after(self, version: int) -> list[Change]:
        """The changes after `version`, found from the newest end: a watch that keeps up
        asks for the last few, and scanning the whole history each time made every write
        cost as much as the history is long."""
        newer = []
        for change in reversed(self.changes):
            if change.version <= version:
                break
            newer.append(change)
        newer.reverse()
        return newer


@dataclass
class Watch:
    """One watch request, checked; `events()` streams it (call it without the lock held)."""

    history: History
    key: tuple[str, str]
    kind: str
    api_version: str
    namespace: str | None
    matches: Callable[[dict[str, Any]], bool]
    start: int
    current: Callable[[], int]
    initial: list[dict[str, Any]]
    timeout: float | None
    bookmarks: bool

    def events(self) -> Iterator[Event]:
        if self.start < self.history.floor:
            yield _expired(self.start, self.history.floor)
            return
        for obj in self.initial:
            yield {"type": "ADDED", "object": obj}
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        cursor = self.start
        while True:
            with self.history.changed:
                if cursor < self.history.floor:  # fell behind the history
                    pending: list[Event] = [_expired(cursor, self.history.floor)]
                    done = True
                else:
                    changes = self.history.after(cursor)
                    left = None if deadline is None else deadline - time.monotonic()
                    done = self.history.closed or (left is not None and left <= 0)
                    if not changes and not done:
                        self.history.changed.wait(left)
                        continue
                    if changes:
                        cursor = changes[-1].version
                    pending = [e for c in changes if (e := self._event(c)) is not None]
                    if done and self.bookmarks and not self.history.closed:
                        pending.append(self._bookmark(self.current()))
            yield from pending
            if done:
                return

    def _event(self, change: Change) -> Event | None:
        if change.key != self.key:
            return None
        if self.namespace and change.obj["metadata"].get("namespace") != self.namespace:
            return None
        now = self.matches(change.obj)
        before = change.old is not None and self.matches(change.old)
        if change.type == "DELETED":
            kind = "DELETED" if now else None
        elif change.type == "ADDED":
            kind = "ADDED" if now else None
        else:
            kind = {(True, True): "MODIFIED", (True, False): "ADDED", (False, True): "DELETED"}
            kind = kind.get((now, before))
        return None if kind is None else {"type": kind, "object": copy.deepcopy(change.obj)}

    def _bookmark(self, version: int) -> Event:
        obj = {
            "kind": self.kind,
            "apiVersion": self.api_version,
            "metadata": {"resourceVersion": str(version)},
        }
        return {"type": "BOOKMARK", "object": obj}


def _expired(wanted: int, oldest: int) -> Event:
    status = ApiError(410, "Expired", f"too old resource version: {wanted} ({oldest + 1})")
    return {"type": "ERROR", "object": status.status()}


def timeout_of(query: dict[str, str]) -> float | None:
    """timeoutSeconds; unset or 0 is the server's default: here, until the server stops."""
    text = query.get("timeoutSeconds")
    if text is None:
        return None
    try:
        seconds = int(text)
    except ValueError as exc:
        raise ApiError(400, "BadRequest", f"invalid timeoutSeconds {text!r}") from exc
    return float(seconds) if seconds > 0 else None
