"""Read a config repo: every YAML document, as plain data, with the position of every value.

PyYAML's C parser gives events with marks; we build the Python values from them in one pass
(no node tree), so that each value keeps its line and column, duplicate keys are caught, and
alias expansion is bounded. Positions are kept as flat lists in document order and indexed
by path only when a diagnostic asks for one (`Document.location`): most documents never do.
"""

from __future__ import annotations

import errno
import os
import stat
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError

from gitops_sched.config import codes
from gitops_sched.config.codes import Code
from gitops_sched.config.diagnostics import Diagnostics, Location
from gitops_sched.config.ignore import IGNORE_FILE, IgnoreRules
from gitops_sched.config.yaml_hints import syntax_hint

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

KINDS = ("Cluster", "NodeGroup", "Department", "Project", "Template", "Workload")
# The repo's own tests (`gitops-sched test`): checked by `validate`, never compiled.
SIMULATION = "Simulation"
YAML_SUFFIXES = (".yaml", ".yml")
MAX_FILE_BYTES = 4 * 1024 * 1024
# An alias may repeat a node, but a document may not grow past this many values in
# total, written out or through aliases (the "billion laughs" attack expands exponentially).
MAX_EXPANDED_NODES = 200_000
# Documents one file may hold: past this, the rest of the file is not read (a million
# empty or tiny documents fit in the size limit, and each costs a check and a message).
MAX_DOCUMENTS = 10_000
# Mappings and sequences may nest this deep: far beyond any real config (a Workload's
# deepest field is under ten levels), and shallow enough that no later stage (jsonschema,
# the model, copying an anchor) recurses anywhere near Python's limit.
MAX_DEPTH = 64

Path_ = tuple[str | int, ...]
Position = tuple[int, int]
_POSITION = "L"  # array type of the flat position lists: unsigned, at least 32 bits


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


class _Positions(Mapping[Path_, Position]):
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
            self._data, self._values, self._keys = None, array(_POSITION), array(_POSITION)
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


# --- scalars -------------------------------------------------------------------------------

_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
# An integer literal longer than this is refused (GS111): no field takes more than 19 digits
# (a longer one is a schema error naming the maximum), and a much longer one could not be
# printed (Python's 4,300-digit limit: 1,000 hex digits print as 1,205) or would cost time
# quadratic in its length to build (YAML 1.1's base-60 `1:2:3`, octal and hex forms).
MAX_INT_CHARS = 1_000


def _bounded_int(node: yaml.ScalarNode) -> int:
    if len(node.value) > MAX_INT_CHARS:
        raise ValueError(f"integer longer than {MAX_INT_CHARS} characters")
    return int(_CONSTRUCTOR.construct_yaml_int(node))


_SCALAR_TYPES: dict[str, Callable[[yaml.ScalarNode], Any] | None] = {
    _STR_TAG: None,
    "tag:yaml.org,2002:timestamp": None,  # keep dates as written: the schema wants strings
    "tag:yaml.org,2002:int": _bounded_int,
    "tag:yaml.org,2002:float": _CONSTRUCTOR.construct_yaml_float,
    "tag:yaml.org,2002:bool": _CONSTRUCTOR.construct_yaml_bool,
    "tag:yaml.org,2002:null": _CONSTRUCTOR.construct_yaml_null,
}


class _LoadError(Exception):
    def __init__(self, mark: yaml.Mark | None, message: str, code: Code) -> None:
        super().__init__(message)
        self.mark = mark
        self.message = message
        self.code = code


class _TooDeep(_LoadError):
    """Nesting past `MAX_DEPTH`: the rest of the file is not read (libyaml takes time
    quadratic in the depth of flow nesting: 100,000 levels take minutes)."""


# PyYAML's errors from scanning and parsing: the scanner reads ahead of the events (up to
# 1,024 characters of a line, to learn whether a `[` or `{` starts a key), so one of these
# may come before the events of the text it has already read (`_too_deep_before`).
_READ_AHEAD_ERRORS = (yaml.scanner.ScannerError, yaml.parser.ParserError)
# libyaml's own nesting limit (1,000 levels since libyaml 0.2.5; the pure parser has none):
# reached first only where `MAX_DEPTH` is above it, it is still nesting too deep (GS108)
_PARSER_TOO_DEEP = "exceeded maximum nesting depth"


def _tag(event: yaml.ScalarEvent) -> str:
    """The scalar's tag as PyYAML's composer resolves it (plain scalars by their text)."""
    if event.tag is not None and event.tag != "!":
        return event.tag
    if not event.implicit[0]:
        return _STR_TAG
    return _RESOLVER.resolve(yaml.ScalarNode, event.value, (True, False))


@lru_cache(maxsize=1 << 14)  # keys and most values repeat across documents
def _plain(text: str) -> tuple[str, Any]:
    """A plain scalar's resolved tag and value: `4` is an int, `true` a bool, `~` None.

    Raises ValueError or LookupError for text its tag cannot read (`0x_`).
    """
    tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))
    return tag, _construct(tag, text)


def _construct(tag: str, text: str) -> Any:
    construct = _SCALAR_TYPES.get(tag)
    return text if construct is None else construct(yaml.ScalarNode(tag, text))


def _scalar_value(event: yaml.ScalarEvent) -> Any:
    try:
        if event.tag is None or event.tag == "!":
            return _plain(event.value)[1] if event.implicit[0] else event.value
        return _construct(event.tag, event.value)
    except (ValueError, LookupError) as exc:  # e.g. `!!int abc`, `!!bool maybe`, `0x_`
        text = event.value
        shown = repr(text) if len(text) <= 60 else f"{text[:60]!r}... ({len(text)} characters)"
        message = f"{shown} is not a valid {_tag(event)}"
        raise _LoadError(event.start_mark, message, codes.BAD_SCALAR) from exc


# --- building documents from events --------------------------------------------------------


class _Anchor:
    """A node with an anchor: what an alias to it repeats."""

    __slots__ = ("done", "event", "keys", "mark", "tag", "value", "values")

    def __init__(self, event: Any, tag: str | None) -> None:
        self.mark = event.start_mark
        self.tag = tag  # a scalar's resolved tag, a container's explicit one
        self.event = event if isinstance(event, yaml.ScalarEvent) else None
        self.value: Any = None  # a container, once complete
        self.values = array(_POSITION, (self.mark.line, self.mark.column))
        self.keys = array(_POSITION)
        self.done = self.event is not None  # a container is done at its end event

    @property
    def text(self) -> str | None:
        """A scalar's text as written: what a key made from this node is."""
        return None if self.event is None else self.event.value

    def repeat(self) -> Any:
        """A fresh copy of the value, as building the anchored node again gave."""
        return _copy(self.value) if self.event is None else _scalar_value(self.event)


class _Frame:
    """An open mapping or sequence."""

    __slots__ = ("anchor", "container", "is_map", "key", "keys_at", "seen", "values_at")

    def __init__(self, container: dict | list, anchor: _Anchor | None, at: tuple[int, int]):
        self.container: Any = container  # a dict when `is_map`, else a list
        self.is_map = isinstance(container, dict)
        self.anchor = anchor
        self.values_at, self.keys_at = at  # where its positions start in the flat lists
        self.key: str | None = None  # a mapping's key waiting for its value
        self.seen: dict[str, int] = {}  # a mapping's keys, with their 0-based lines

    @property
    def awaits_key(self) -> bool:
        return self.is_map and self.key is None


class _Builder:
    """Builds one document from its events, recording positions in document order.

    A problem with the data (duplicate key, merge key, alias bomb) fails this document only,
    and is reported once the document's end is reached: PyYAML's composer reads a whole
    document before it is built, so a composer or syntax error later in the same document
    wins, as it did when the loader built from a composed node tree. Nesting past
    `MAX_DEPTH` is the exception: it ends the file at once (`_TooDeep`), in a document that
    has already failed too.
    """

    def __init__(self, first_mark: yaml.Mark | None = None) -> None:
        self.first_mark = first_mark  # where the document starts
        self.values = array(_POSITION)  # 0-based line, column of every value, in order
        self.keys = array(_POSITION)  # 0-based line, column of every mapping key, in order
        self.anchors: dict[str, _Anchor] = {}
        self.stack: list[_Frame] = []
        # open mappings and sequences, counted on once the document has failed (and `stack`
        # is dropped): the nesting limit bounds the parser's work in every document
        self.depth = 0
        self.repeated = 0  # values added through aliases (the rest are written out)
        self.root: Any = None
        self.root_mark: Any = None  # the root's yaml.Mark, once the root is read
        self.root_text: str | None = None  # the document's text when it is one scalar
        self.error: _LoadError | None = None

    def build(self, next_event: Callable[[], Any]) -> None:
        """Consume the document's events, through its end.

        Untagged values without anchors inside a mapping or sequence are the bulk of any
        config: they take the short path inline; every other event goes to its handler.
        """
        stack, values, keys = self.stack, self.values, self.keys
        while (event := next_event()).__class__ is not yaml.DocumentEndEvent:
            if event.__class__ is not yaml.ScalarEvent or event.tag or event.anchor:
                _HANDLERS[event.__class__](self, event)
                continue
            frame = stack[-1] if stack and self.error is None else None
            if frame is None:
                self.scalar(event)  # a lone scalar document, or a failed document
                continue
            text = event.value
            try:
                tag, value = _plain(text) if event.implicit[0] else (_STR_TAG, text)
            except (ValueError, LookupError):
                self.scalar(event)  # reports the text its tag cannot read
                continue
            mark = event.start_mark
            if not frame.is_map:
                values.extend((mark.line, mark.column))
                frame.container.append(value)
            elif frame.key is not None:
                values.extend((mark.line, mark.column))
                frame.container[frame.key] = value
                frame.key = None
            elif tag == _MERGE_TAG or text in frame.seen:
                self.scalar(event)  # reports the merge key or the duplicate
            else:
                frame.seen[text] = mark.line
                frame.key = text
                keys.extend((mark.line, mark.column))

    # events

    def scalar(self, event: yaml.ScalarEvent) -> None:
        if event.anchor is not None:
            self._anchor(event, _tag(event))
        if self.error is not None:
            return
        frame = self.stack[-1] if self.stack else None
        mark = event.start_mark
        if frame is None:
            self.root_text, self.root_mark = event.value, mark
        try:
            if frame is not None and frame.awaits_key:
                self._key(frame, event.value, _tag(event), mark)
                return
            value = _scalar_value(event)
        except _LoadError as exc:
            self._fail(exc)
            return
        self.values.extend((mark.line, mark.column))
        self._place(frame, value, mark)

    def start(self, event: yaml.MappingStartEvent | yaml.SequenceStartEvent) -> None:
        anchor = None if event.anchor is None else self._anchor(event, event.tag)
        mark = event.start_mark
        self.depth += 1
        if self.depth > MAX_DEPTH:  # ends the file: the parser is quadratic in depth
            message = f"mappings and sequences nested more than {MAX_DEPTH} deep"
            raise _TooDeep(mark, message, codes.TOO_DEEP)
        if self.error is not None:
            return
        frame = self.stack[-1] if self.stack else None
        if frame is not None and frame.awaits_key:
            merge = event.tag == _MERGE_TAG
            self._fail(
                _LoadError(mark, _MERGE_KEY if merge else _COMPLEX_KEY, codes.UNSUPPORTED_YAML)
            )
            return
        container: dict | list = {} if isinstance(event, yaml.MappingStartEvent) else []
        self._place(frame, container, mark)
        self.stack.append(_Frame(container, anchor, (len(self.values), len(self.keys))))
        self.values.extend((mark.line, mark.column))

    def end(self, event: yaml.MappingEndEvent | yaml.SequenceEndEvent) -> None:
        self.depth -= 1
        if self.error is not None:
            return
        frame = self.stack.pop()
        if (anchor := frame.anchor) is not None:
            anchor.value, anchor.done = frame.container, True
            anchor.values = self.values[frame.values_at :]
            anchor.keys = self.keys[frame.keys_at :]

    def alias(self, event: yaml.AliasEvent) -> None:
        anchor = self.anchors.get(event.anchor)
        if anchor is None:
            raise ComposerError(None, None, "found undefined alias", event.start_mark)
        if self.error is not None:
            return
        frame = self.stack[-1] if self.stack else None
        try:
            if frame is not None and frame.awaits_key:
                self._alias_key(frame, anchor)
            elif not anchor.done:  # an alias inside its own anchor repeats without end
                raise _LoadError(event.start_mark, _expansion_message(), codes.ALIAS_BOMB)
            else:
                self.values += anchor.values
                self.keys += anchor.keys
                self.repeated += len(anchor.values) // 2
                if self._expanded_too_far():
                    self._fail()
                else:
                    self._place(frame, anchor.repeat(), event.start_mark)
        except _LoadError as exc:
            self._fail(exc)

    def finish(self) -> Any:
        """The document's value; raises `_LoadError` for a problem found in it."""
        if self.error is None and self._expanded_too_far():
            self._fail()
        if self.error is not None:
            raise self.error
        return self.root

    # helpers

    def _anchor(self, event: Any, tag: str | None) -> _Anchor:
        """Register the event's anchor, as the composer does, before the node's contents."""
        if (first := self.anchors.get(event.anchor)) is not None:
            raise ComposerError(
                "found duplicate anchor; first occurrence",
                first.mark,
                "second occurrence",
                event.start_mark,
            )
        anchor = self.anchors[event.anchor] = _Anchor(event, tag)
        return anchor

    def _key(self, frame: _Frame, key: str, tag: str, mark: yaml.Mark) -> None:
        if tag == _MERGE_TAG:
            raise _LoadError(mark, _MERGE_KEY, codes.UNSUPPORTED_YAML)
        if (first := frame.seen.get(key)) is not None:
            message = f"duplicate key {key!r} (first at line {first + 1})"
            raise _LoadError(mark, message, codes.DUPLICATE_KEY)
        frame.seen[key] = mark.line
        frame.key = key
        self.keys.extend((mark.line, mark.column))

    def _alias_key(self, frame: _Frame, anchor: _Anchor) -> None:
        """An alias as a key stands for its anchor's node, which must be a scalar."""
        if anchor.tag == _MERGE_TAG:
            raise _LoadError(anchor.mark, _MERGE_KEY, codes.UNSUPPORTED_YAML)
        if anchor.text is None:
            raise _LoadError(anchor.mark, _COMPLEX_KEY, codes.UNSUPPORTED_YAML)
        self._key(frame, anchor.text, anchor.tag or _STR_TAG, anchor.mark)

    def _place(self, frame: _Frame | None, value: Any, mark: yaml.Mark) -> None:
        if frame is None:
            self.root, self.root_mark = value, mark
        elif frame.is_map:
            frame.container[frame.key] = value
            frame.key = None
        else:
            frame.container.append(value)

    def _expanded_too_far(self) -> bool:
        return len(self.values) > 2 * MAX_EXPANDED_NODES

    def _fail(self, error: _LoadError | None = None) -> None:
        """Keep the first problem (None: the limit on values was passed).

        Past the limit, the problem is the limit itself, at the first value over it: the
        node-tree builder counted values as it went and stopped there, before any later
        problem.
        """
        if self._expanded_too_far():
            at = 2 * MAX_EXPANDED_NODES
            mark = _Mark(self.values[at], self.values[at + 1])
            if self.repeated:
                error = _LoadError(mark, _expansion_message(), codes.ALIAS_BOMB)
            else:  # written out, not repeated: no alias bomb, a document too large
                message = f"document holds more than {MAX_EXPANDED_NODES} values: split it"
                error = _LoadError(mark, message, codes.FILE_TOO_LARGE)
        self.error = error
        self.stack.clear()


_HANDLERS: dict[type, Callable[[_Builder, Any], None]] = {
    yaml.ScalarEvent: _Builder.scalar,
    yaml.MappingStartEvent: _Builder.start,
    yaml.SequenceStartEvent: _Builder.start,
    yaml.MappingEndEvent: _Builder.end,
    yaml.SequenceEndEvent: _Builder.end,
    yaml.AliasEvent: _Builder.alias,
}
_MERGE_KEY = "merge keys (<<) are not supported"
_COMPLEX_KEY = "mapping keys must be plain scalars"


@dataclass(frozen=True)
class _Mark:
    """A position kept as numbers (0-based, like PyYAML's marks)."""

    line: int
    column: int


def _expansion_message() -> str:
    return (
        f"document expands to more than {MAX_EXPANDED_NODES} values through aliases (alias bomb?)"
    )


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


def _built(text: str, skip: int = 0) -> Iterator[_Builder]:
    """Each document of `text` built in turn, but for the first `skip`, only read past.

    Raises what ends the file: `_TooDeep`, or PyYAML's error.
    """
    loader = _Loader(text)
    try:
        while not isinstance(event := loader.get_event(), yaml.StreamEndEvent | None):
            if not isinstance(event, yaml.DocumentStartEvent):
                continue
            if skip:
                skip -= 1
                while not isinstance(loader.get_event(), yaml.DocumentEndEvent):
                    pass
                continue
            builder = _Builder(event.start_mark)
            builder.build(loader.get_event)
            yield builder
    finally:
        loader.dispose()


def _too_deep_before(text: str, mark: yaml.Mark | None, built: int) -> _TooDeep | None:
    """The nesting past `MAX_DEPTH` in the text before a scanning or parsing error, if any.

    The scanner reads a line up to 1,024 characters ahead of the events (to learn whether a
    `[` or `{` is a key), so an error there ends the file before the events of the levels it
    has read: libyaml's own limit on flow levels (1,000 in the libyaml of PyYAML 6.0.4, not
    in earlier ones) or any syntax error. Reading the text again up to the error shows those
    events; the documents before the `built` one had every event and are only read past.
    """
    if mark is None:
        return None
    try:
        for _ in _built(text[: mark.index], skip=built):
            pass
    except _TooDeep as exc:
        return exc
    except yaml.YAMLError:
        pass  # the text cut short ends inside a node; nothing too deep before the cut
    return None


def load_text(text: str, file: str, diagnostics: Diagnostics) -> list[Document]:
    """Parse every document of one file; problems go to `diagnostics`."""
    documents: list[Document] = []
    index = -1
    try:
        for index, builder in enumerate(_built(text)):
            if index == MAX_DOCUMENTS:
                message = f"more than {MAX_DOCUMENTS} documents in one file: the rest is not read"
                diagnostics.error(
                    _mark_location(file, builder.first_mark), message, code=codes.FILE_TOO_LARGE
                )
                break
            documents.extend(_finish(builder, file, index, diagnostics))
    except _TooDeep as exc:
        diagnostics.error(_mark_location(file, exc.mark), exc.message, code=exc.code)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        read_ahead = isinstance(exc, _READ_AHEAD_ERRORS)
        if read_ahead and (deep := _too_deep_before(text, mark, index + 1)) is not None:
            diagnostics.error(_mark_location(file, deep.mark), deep.message, code=deep.code)
        elif exc.problem == _PARSER_TOO_DEEP:  # a parser whose own limit is below ours
            message = "mappings and sequences nested deeper than the YAML parser allows"
            diagnostics.error(_mark_location(file, mark), message, code=codes.TOO_DEEP)
        else:
            message = f"YAML syntax error: {_yaml_problem(exc)}"
            if mark is not None and (hint := syntax_hint(text, mark.line, exc.problem)):
                message += f"; {hint}"
            diagnostics.error(_mark_location(file, mark), message, code=codes.YAML_SYNTAX)
    except yaml.YAMLError as exc:
        diagnostics.error(Location(file), f"YAML error: {exc}", code=codes.YAML_SYNTAX)
    return documents


def _finish(builder: _Builder, file: str, index: int, diagnostics: Diagnostics) -> list[Document]:
    """The built document, or none once its problem is reported (the next ones still load)."""
    if builder.root_text == "":
        line = builder.root_mark.line + 1
        diagnostics.warning(
            Location(file, line, 1), "empty document ignored", code=codes.EMPTY_DOCUMENT
        )
        return []
    try:
        data = builder.finish()
    except _LoadError as exc:
        diagnostics.error(_mark_location(file, exc.mark), exc.message, code=exc.code)
        return []
    if not isinstance(data, dict):
        mark = builder.root_mark
        diagnostics.error(
            Location(file, mark.line + 1, mark.column + 1),
            "a document must be a mapping with apiVersion, kind, metadata and spec",
            code=codes.NOT_A_MAPPING,
        )
        return []
    values, keys = builder.values, builder.keys
    positions, key_positions = _Positions(data, values, keys, 0), _Positions(data, values, keys, 1)
    return [Document(file, index, data, positions, key_positions)]


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
        message = f"file is not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
        diagnostics.error(Location(file, line, col), message, code=codes.NOT_UTF8)

        return None
    return text.removeprefix("\ufeff")


def _kind(mode: int) -> str:
    kinds = {
        stat.S_IFIFO: "a FIFO",
        stat.S_IFSOCK: "a socket",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFDIR: "a folder",
    }
    return kinds.get(stat.S_IFMT(mode), "not a regular file")


@dataclass(frozen=True)
class Unreadable:
    """Why a path of a source could not be read: reported at the path, in place of its bytes."""

    reason: str
    code: Code = codes.UNREADABLE_FILE


def read_capped(
    path: Path, inside: Path | None = None, cap: int = MAX_FILE_BYTES
) -> bytes | Unreadable:
    """The bytes of the regular file at `path`, or why not; never blocks, never reads past `cap`.

    A symlink is followed only to a file under `inside` (the repo's resolved root), when given.
    FIFOs, sockets and devices are refused before they are opened (and opened non-blocking, so a
    swap between the check and the open cannot hang); at most `cap + 1` bytes are read, whatever
    `st_size` says (/proc files and devices report 0).
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            return Unreadable(f"dangling symlink: its target {os.readlink(path)!r} does not exist")
        return Unreadable("file not found (removed while the repo was read?)")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Unreadable("symlink loop: the link never leads to a file")
        return Unreadable(f"cannot be read: {exc.strerror}")
    if inside is not None and path.is_symlink():
        target = Path(os.path.realpath(path))
        if not target.is_relative_to(inside):
            return Unreadable(f"symlink leads outside the repo (to {target}): refused")
    if not stat.S_ISREG(info.st_mode):
        return Unreadable(f"{_kind(info.st_mode)}, not a regular file: only files are read")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return Unreadable(f"cannot be read: {exc.strerror}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the check above
            return Unreadable("not a regular file: only files are read")
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return Unreadable(f"cannot be read: {exc.strerror}")
    finally:
        os.close(fd)
    if size > cap:
        return Unreadable(f"file is over the {cap}-byte limit", codes.FILE_TOO_LARGE)
    return b"".join(chunks)


Source = Iterable[tuple[str, bytes | Unreadable]]
"""A config repo as (path, bytes) pairs in load order: a folder (`folder_files`) or a Git
tree (`gitops_sched.plan.gitsource`) load the same way through `load_files`. A path that
could not be read comes with an `Unreadable` (the reason) instead of its bytes."""


def folder_rules(root: Path, excludes: Iterable[str] = ()) -> IgnoreRules | Unreadable:
    """The root's `.gitops-schedignore` (if any) plus `excludes`, or why the file is unreadable."""
    path = root / IGNORE_FILE
    if not os.path.lexists(path):
        return IgnoreRules.of("", excludes)
    raw = read_capped(path, root.resolve())
    if isinstance(raw, Unreadable):
        return raw
    try:
        return IgnoreRules.of(raw.decode("utf-8"), excludes)
    except UnicodeDecodeError:
        return Unreadable("file is not valid UTF-8", codes.BAD_IGNORE_FILE)
    except ValueError as exc:  # a malformed pattern, or past the bounds on patterns
        return Unreadable(f"bad pattern: {exc}", codes.BAD_IGNORE_FILE)


def loaded_folder(root: Path, folder: Path) -> str | None:
    """`folder` relative to the config folder `root` ("." for `root` itself) when a load of
    `root` reads the files written in it, else None: a folder outside `root`, hidden, or left
    out by the repo's own `.gitops-schedignore` (an `--exclude` lasts one command: it does
    not count)."""
    try:
        relative = folder.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None
    if any(part.startswith(".") for part in relative.split("/") if part != "."):
        return None
    rules = folder_rules(root)
    if relative != "." and isinstance(rules, IgnoreRules) and rules.leaves_out(relative, True):
        return None
    return relative


def _unreadable_folders(failed: list[OSError]) -> Iterator[tuple[str, Unreadable]]:
    """The folders os.walk could not list (its `onerror`), each once; the list is emptied."""
    for exc in failed:
        yield Path(exc.filename).as_posix(), Unreadable(f"folder cannot be read: {exc.strerror}")
    failed.clear()


def _walk(root: Path, failed: list[OSError]) -> Iterator[tuple[Path, list[str], list[str]]]:
    """os.walk, top down, without recursion (a tree thousands of folders deep): each folder
    with its subfolders and other entries; the caller may prune the subfolders in place.
    A folder that cannot be listed goes to `failed` (os.walk's `onerror`)."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as exc:
            failed.append(exc)
            continue
        dirnames: list[str] = []
        filenames: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirnames if is_dir else filenames).append(entry.name)
        yield folder, dirnames, filenames
        stack.extend(folder / name for name in reversed(dirnames))


def folder_files(
    root: Path, excludes: Iterable[str] = ()
) -> Iterator[tuple[str, bytes | Unreadable]]:
    """The YAML files under `root` as (path, bytes), paths as the user named the folder.

    Hidden files and folders (.git) are skipped, and so is what `.gitops-schedignore` or
    `excludes` leave out. Whatever cannot be read (an unreadable file or folder, a FIFO, a
    dangling link, a link leading outside the repo) comes as an `Unreadable`, never skipped.
    """
    if not root.is_dir():  # a single file (a Simulation, a one-file repo)
        yield root.as_posix(), read_capped(root)
        return
    rules = folder_rules(root, excludes)
    if isinstance(rules, Unreadable):
        yield (root / IGNORE_FILE).as_posix(), rules
        return
    inside, found, left_out = root.resolve(), False, 0
    failed: list[OSError] = []
    for folder, dirnames, filenames in _walk(root, failed):
        found = found or bool(failed)
        yield from _unreadable_folders(failed)
        relative = folder.relative_to(root).as_posix().removeprefix(".").lstrip("/")
        below = f"{relative}/" if relative else ""
        kept = []
        for name in sorted(d for d in dirnames if not d.startswith(".")):
            if rules.ignores(below + name, folder=True):
                left_out += 1
            elif os.path.islink(folder / name):  # not walked; one leading outside is refused
                target = Path(os.path.realpath(folder / name))
                if not target.is_relative_to(inside):
                    found = True
                    reason = f"symlink leads outside the repo (to {target}): refused"
                    yield (folder / name).as_posix(), Unreadable(reason)
            else:
                kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if not name.endswith(YAML_SUFFIXES) or name.startswith("."):
                continue
            if rules.ignores(below + name):
                left_out += 1
                continue
            found = True
            # as the user named the repo, so editors and CI can open it
            yield (folder / name).as_posix(), read_capped(folder / name, inside)
    found = found or bool(failed)
    yield from _unreadable_folders(failed)  # the root itself
    if not found:
        note = f" ({left_out} left out by {IGNORE_FILE} or --exclude)" if left_out else ""
        message = f"no YAML files found under {root.as_posix()}{note}"
        yield root.as_posix(), Unreadable(message, codes.NO_YAML_FILES)


def load_files(files: Source, diagnostics: Diagnostics) -> list[Document]:
    """Every gitops-sched document of a source, in its order, documents in file order."""
    documents: list[Document] = []
    for file, raw in files:
        if isinstance(raw, Unreadable):
            diagnostics.error(Location(file), raw.reason, code=raw.code)
            continue
        if len(raw) > MAX_FILE_BYTES:
            message = f"file is {len(raw)} bytes, over the {MAX_FILE_BYTES}-byte limit"
            diagnostics.error(Location(file), message, code=codes.FILE_TOO_LARGE)

            continue
        text = _decode(raw, file, diagnostics)
        if text is not None:
            documents.extend(load_text(text, file, diagnostics))
    return documents


def load_repo(root: Path, diagnostics: Diagnostics, excludes: Iterable[str] = ()) -> list[Document]:
    """Every gitops-sched document of a folder, files in path order, documents in file order."""
    return load_files(folder_files(root, excludes), diagnostics)
