"""Retrying what a busy or flaky API server answers: 409 (optimistic concurrency), 429
(throttled; its Retry-After is honoured), 5xx, and requests that timed out or lost their
connection. Waits grow exponentially with full jitter, so replicas that failed together do
not retry together."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from gitops_sched.cluster.errors import ApiFailure

T = TypeVar("T")
RETRIED_STATUSES = frozenset({0, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Backoff:
    attempts: int = 6
    base: float = 0.2  # seconds before the first retry, at most (full jitter)
    cap: float = 10.0  # the longest wait between two tries
    sleep: Callable[[float], None] = time.sleep

    def delay(self, attempt: int, error: ApiFailure) -> float:
        if error.retry_after is not None:
            return min(self.cap, error.retry_after)
        return random.uniform(0, min(self.cap, self.base * 2**attempt))

    def call(
        self, action: Callable[[], T], retry_conflicts: bool = True, retry_throttled: bool = True
    ) -> T:
        """`action()`, tried again on what is worth retrying; `retry_throttled=False` leaves a
        429 to the caller (an Eviction refused by a PodDisruptionBudget is one)."""
        for attempt in range(self.attempts):
            try:
                return action()
            except ApiFailure as error:
                retried = error.status in RETRIED_STATUSES and not error.is_field_conflict
                if error.reason == "AlreadyExists":
                    retried = False
                if error.status == 409 and not retry_conflicts:
                    retried = False
                if error.status == 429 and not retry_throttled:
                    retried = False
                if not retried or attempt == self.attempts - 1:
                    raise
                self.sleep(self.delay(attempt, error))
        raise AssertionError("unreachable")
