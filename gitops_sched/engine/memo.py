"""A table of values worked out on the first ask, for answers asked for again and again."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from inspect import ismethod
from typing import TypeVar
from weakref import WeakMethod

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(dict[K, V]):
    """key -> work_out(key), worked out on the first ask and kept: a lookup that finds the
    value makes no call, where a method asked hundreds of thousands of times a cycle
    makes at least one. For values fixed for as long as the memo lives.

    A memo of its owner's own method (the usual use) holds that method weakly: held
    strongly, owner and memo would form a reference cycle, and a cycle's session (tens of
    thousands of objects) would wait for the garbage collector instead of being freed
    when the cycle ends -- through a whole settle, as the collector is paused then."""

    def __init__(self, work_out: Callable[[K], V]) -> None:
        super().__init__()
        self._work_out: Callable[[], Callable[[K], V] | None] = (
            WeakMethod(work_out) if ismethod(work_out) else lambda: work_out
        )

    def __missing__(self, key: K) -> V:
        work_out = self._work_out()
        assert work_out is not None, "a memo is used only while its owner lives"
        value = self[key] = work_out(key)
        return value
