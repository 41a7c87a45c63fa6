"""In-process loops (a reconciler's or a scheduler's `run(stop)`) on threads, for the tests
on the real control plane. A loop must have ended when its test does: the cluster is wiped
between tests, and a loop still syncing or binding then writes into the next test's cluster
(an object the next test finds made before its first sync)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

Loop = Callable[[threading.Event], object]


@dataclass
class Running:
    """One loop on its thread; `stop` tells it to end after what it is doing."""

    thread: threading.Thread
    stop: threading.Event


@contextmanager
def running(*loops: Loop, seconds: float = 60) -> Iterator[list[Running]]:
    """Start each loop on its own thread (a test may stop one early). On leaving, stop them
    all and wait up to `seconds` for each to end: one that does not fails the test that
    started it, not the next."""
    started = []
    for loop in loops:
        stop = threading.Event()
        thread = threading.Thread(target=loop, args=(stop,), daemon=True)
        started.append(Running(thread, stop))
        thread.start()
    try:
        yield started
    finally:
        for each in started:
            each.stop.set()
        for each in started:
            each.thread.join(seconds)
        left = sum(each.thread.is_alive() for each in started)
        if left:
            raise AssertionError(f"{left} loop(s) still running {seconds:.0f}s after their stop")
