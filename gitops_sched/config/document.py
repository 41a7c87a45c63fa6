"""One YAML document of a config repo: its data, and the position of every value in it.

Positions are kept as flat lists in document order while loading (`yamlbuild`) and indexed
by path only when a diagnostic asks for one (`Document.location`): most documents never do.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gitops_sched.config.diagnostics import Location
from gitops_sched.contract.labels import GROUP

KINDS = ("Cluster", "NodeGroup", "Department", "Project", "Template", "Workload")
# The repo's own tests (`gitops-sched test`): checked by `validate`, never compiled.
SIMULATION = "Simulation"

Path_ = tuple[str | int, ...]
Position = tuple[int, int]
POSITION_ARRAY = "L"  # array type of the flat position lists: unsigned, at least 32 bits


@dataclass(eq=False)
class Document:
    """One YAML document of a config file, as plain data plus positions."""

    file: str
    index: int  # position of the document inside its file, from 0
    data: Any
    positions: Mapping[Path_, Position] = field(repr=False)
    # where the key naming each mapping value starts: "unknown field" points at the key
    key_positions: Mapping[Path_, Position] = field(default_factory=dict, repr=False)

    # kind and name are asked for at every stage; `data` does not change after loading

    @cached_property
    def kind(self) -> str:
        kind = self.data.get("kind") if isinstance(self.data, dict) else None
        return kind if isinstance(kind, str) else ""  # `kind: {}` is no kind (the schema says)

    @cached_property
    def name(self) -> str:
        meta = self.data.get("metadata") if isinstance(self.data, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        return name if isinstance(name, str) else ""

    @property
    def foreign(self) -> bool:
        """Of another API (`apiVersion: apps/v1`: a Deployment left in the folder), not a
        misspelt one of ours: it names none of our objects and is no kind of ours."""
        api = self.data.get("apiVersion") if isinstance(self.data, dict) else None
        return isinstance(api, str) and "/" in api and not api.startswith(f"{GROUP}/")

    @property
    def ref(self) -> str:
        """`Kind/name`, as diagnostics name objects."""
        return f"{self.kind or '?'}/{self.name or '?'}"

    def location(self, path: Path_ = ()) -> Location:
        """The position of the value at `path`, or of its nearest ancestor that exists."""
        path = tuple(path)
        while path not in self.positions and path:
            path = path[:-1]
        line, col = self.positions.get(path, (1, 1))
        return Location(self.file, line, col)

    def key_location(self, path: Path_) -> Location:
        """The position of the key naming the value at `path` (else as `location`)."""
        if (key := self.key_positions.get(tuple(path))) is not None:
            return Location(self.file, *key)
        return self.location(path)


# --- positions: flat while loading, by path on demand --------------------------------------


class FlatPositions(Mapping[Path_, Position]):
    """Positions of one document by path, of its values or of its keys, found on first use.

    While loading, positions go to two flat arrays of 0-based (line, column) pairs in
    document order: `values` one per value (a mapping or sequence before its contents),
    `keys` one per mapping key. Walking the data in the same order pairs them with paths
    again; loading so pays no tuple or dict entry per value, and most documents are never
    asked. The data must not change before then; nothing changes it.
    """

    __slots__ = ("_data", "_keys", "_table", "_values", "_which")

    def __init__(self, data: Any, values: array[int], keys: array[int], which: int) -> None:
        self._data, self._values, self._keys = data, values, keys
        self._which = which  # 0: values, 1: keys
        self._table: dict[Path_, Position] | None = None

    def _get(self) -> dict[Path_, Position]:
        if self._table is None:
            self._table = _index_positions(self._data, self._values, self._keys)[self._which]
            self._data = None
            self._values, self._keys = array(POSITION_ARRAY), array(POSITION_ARRAY)
        return self._table

    def __getitem__(self, path: Path_) -> Position:
        return self._get()[path]

    def __iter__(self) -> Iterator[Path_]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def _index_positions(
    data: Any, values: array[int], keys: array[int]
) -> tuple[dict[Path_, Position], dict[Path_, Position]]:
    """Pair the flat positions with paths by walking `data` in document order (no recursion)."""
    positions: dict[Path_, Position] = {}
    key_positions: dict[Path_, Position] = {}
    stack: list[tuple[Path_, Any, bool]] = [((), data, False)]
    v = k = 0
    while stack:
        path, value, keyed = stack.pop()
        if keyed:
            key_positions[path] = (keys[k] + 1, keys[k + 1] + 1)
            k += 2
        positions[path] = (values[v] + 1, values[v + 1] + 1)
        v += 2
        if isinstance(value, dict):
            stack.extend(((*path, key), item, True) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*path, i), item, False) for i, item in reversed(list(enumerate(value))))
    return positions, key_positions
