"""Read a config repo: every YAML document, as plain data, with the position of every value.

PyYAML's (C) composer gives nodes with marks; we build the Python values ourselves so
that each value keeps its line and column, duplicate keys are caught, and alias
expansion is bounded. Later stages ask `Document.location(path)` to point at a line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gitops_sched.config.diagnostics import Diagnostics, Location

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

API_VERSION = "gitops-sched.io/v1alpha1"
KINDS = ("Cluster", "NodeGroup", "Department", "Project", "Template", "Workload")
YAML_SUFFIXES = (".yaml", ".yml")
MAX_FILE_BYTES = 4 * 1024 * 1024
# An alias may repeat a node, but a document may not grow past this many values in
# total through aliases (the "billion laughs" attack expands exponentially).
MAX_EXPANDED_NODES = 200_000

Path_ = tuple[str | int, ...]


@dataclass(eq=False)
class Document:
    """One YAML document of a config file, as plain data plus positions."""

    file: str
    index: int  # position of the document inside its file, from 0
    data: Any
    positions: dict[Path_, tuple[int, int]] = field(repr=False)
    # where the key naming each mapping value starts: "unknown field" points at the key
    key_positions: dict[Path_, tuple[int, int]] = field(default_factory=dict, repr=False)

    @property
    def kind(self) -> str:
        return self.data.get("kind", "") if isinstance(self.data, dict) else ""

    @property
    def name(self) -> str:
        meta = self.data.get("metadata") if isinstance(self.data, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        return name if isinstance(name, str) else ""

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


class _LoadError(Exception):
    def __init__(self, mark: yaml.Mark | None, message: str) -> None:
        super().__init__(message)
        self.mark = mark
        self.message = message


class _Builder:
    """Turns a composed node tree into plain values, recording positions by path."""

    _constructor = yaml.constructor.SafeConstructor()
    _scalar_types = {
        "tag:yaml.org,2002:str": None,
        "tag:yaml.org,2002:timestamp": None,  # keep dates as written: the schema wants strings
        "tag:yaml.org,2002:int": _constructor.construct_yaml_int,
        "tag:yaml.org,2002:float": _constructor.construct_yaml_float,
        "tag:yaml.org,2002:bool": _constructor.construct_yaml_bool,
        "tag:yaml.org,2002:null": _constructor.construct_yaml_null,
    }

    def __init__(self) -> None:
        self.positions: dict[Path_, tuple[int, int]] = {}
        self.key_positions: dict[Path_, tuple[int, int]] = {}
        self.expanded = 0

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.expanded += 1
        if self.expanded > MAX_EXPANDED_NODES:
            raise _LoadError(
                node.start_mark,
                f"document expands to more than {MAX_EXPANDED_NODES} values "
                "through aliases (alias bomb?)",
            )
        self.positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.ScalarNode):
            construct = self._scalar_types.get(node.tag, None)
            return node.value if construct is None else construct(node)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self._mapping(node, path)

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict:
        result: dict = {}
        seen: dict[Any, yaml.Mark] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _LoadError(key_node.start_mark, "merge keys (<<) are not supported")
            if not isinstance(key_node, yaml.ScalarNode):
                raise _LoadError(key_node.start_mark, "mapping keys must be plain scalars")
            key = key_node.value
            if key in seen:
                first = seen[key]
                raise _LoadError(
                    key_node.start_mark,
                    f"duplicate key {key!r} (first at line {first.line + 1})",
                )
            mark = seen[key] = key_node.start_mark
            self.key_positions[(*path, key)] = (mark.line + 1, mark.column + 1)
            result[key] = self.build(value_node, (*path, key))
        return result


def load_text(text: str, file: str, diagnostics: Diagnostics) -> list[Document]:
    """Parse every document of one file; problems go to `diagnostics`."""
    documents: list[Document] = []
    try:
        for index, node in enumerate(yaml.compose_all(text, Loader=_Loader)):
            if node is None or (isinstance(node, yaml.ScalarNode) and node.value == ""):
                line = node.start_mark.line + 1 if node is not None else 1
                diagnostics.warning(Location(file, line, 1), "empty document ignored")
                continue
            builder = _Builder()
            try:
                data = builder.build(node, ())
            except _LoadError as exc:  # this document only: the next ones still load
                diagnostics.error(_mark_location(file, exc.mark), exc.message)
                continue
            if not isinstance(data, dict):
                diagnostics.error(
                    Location(file, node.start_mark.line + 1, node.start_mark.column + 1),
                    "a document must be a mapping with apiVersion, kind, metadata and spec",
                )
                continue
            documents.append(Document(file, index, data, builder.positions, builder.key_positions))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        diagnostics.error(_mark_location(file, mark), f"YAML syntax error: {_yaml_problem(exc)}")
    except yaml.YAMLError as exc:
        diagnostics.error(Location(file), f"YAML error: {exc}")
    return documents


def _yaml_problem(exc: yaml.MarkedYAMLError) -> str:
    parts = [p for p in (exc.context, exc.problem) if p]
    return ", ".join(parts) or str(exc)


def _mark_location(file: str, mark: yaml.Mark | None) -> Location:
    if mark is None:
        return Location(file)
    return Location(file, mark.line + 1, mark.column + 1)


def _decode(raw: bytes, file: str, diagnostics: Diagnostics) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        diagnostics.error(
            Location(file, line, col), f"file is not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
        )
        return None
    return text.removeprefix("\ufeff")


def iter_yaml_files(root: Path) -> Iterator[Path]:
    """YAML files under `root` in a stable order, skipping hidden folders such as .git."""
    if root.is_file():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(YAML_SUFFIXES) and not name.startswith("."):
                yield Path(dirpath) / name


def load_repo(root: Path, diagnostics: Diagnostics) -> list[Document]:
    """Every gitops-sched document of a repo, files in path order, documents in file order."""
    documents: list[Document] = []
    for path in iter_yaml_files(root):
        file = path.as_posix()  # as the user named the repo, so editors and CI can open it
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            diagnostics.error(
                Location(file), f"file is {size} bytes, over the {MAX_FILE_BYTES}-byte limit"
            )
            continue
        text = _decode(path.read_bytes(), file, diagnostics)
        if text is not None:
            documents.extend(load_text(text, file, diagnostics))
    return documents
