"""Polling the real control plane with a deadline: kwok and the controllers act within a
fraction of a second, so a test waits for what it needs, never a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait(what: str, done: Callable[[], T], seconds: float = 60.0, every: float = 0.05) -> T:
    """`done()`'s first true value, polled every `every` seconds; AssertionError naming
    `what` when it is still false after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = done()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {seconds:g}s")
        time.sleep(every)
