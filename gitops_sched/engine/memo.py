"""A table of values worked out on the first ask, for answers asked for again and again."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(dict[K, V]):
    """key -> work_out(key), worked out on the first ask and kept: a lookup that finds the
    value makes no call, where a method asked hundreds of thousands of times a cycle
    makes at least one. For values fixed for as long as the memo lives."""

    def __init__(self, work_out: Callable[[K], V]) -> None:
        super().__init__()
        self.work_out = work_out

    def __missing__(self, key: K) -> V:
        value = self[key] = self.work_out(key)
        return value
