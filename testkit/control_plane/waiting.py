"""Polling the real control plane with a deadline: kwok and the controllers act within a
fraction of a second, so a test waits for what it needs, never a fixed time. The pause
grows from `every` to `most`: a quick answer is seen at once, and a long wait (a lease, a
cycle, a restart) does not spend the suite's CPU asking twenty times a second."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait(
    what: str, done: Callable[[], T], seconds: float = 60.0, every: float = 0.05, most: float = 0.25
) -> T:
    """`done()`'s first true value, polled after `every` seconds, then half as long again
    each time up to `most`; AssertionError naming `what` when it is still false after
    `seconds`."""
    deadline = time.monotonic() + seconds
    pause = every
    while True:
        value = done()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {seconds:g}s")
        time.sleep(pause)
        pause = min(max(most, every), pause * 1.5)
