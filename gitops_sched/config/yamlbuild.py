"""YAML text to documents: PyYAML's parser events built into plain data with positions.

PyYAML's C parser gives events with marks; we build the Python values from them in one pass
(no node tree), so that each value keeps its line and column, duplicate keys are caught, and
alias expansion and nesting are bounded.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaml
from yaml.composer import ComposerError

from gitops_sched.config import codes
from gitops_sched.config.codes import Code
from gitops_sched.config.diagnostics import Diagnostics, Location
from gitops_sched.config.document import POSITION_ARRAY, Document, FlatPositions
from gitops_sched.config.yaml_hints import syntax_hint

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

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


def _bounded_float(node: yaml.ScalarNode) -> float:
    """A float; YAML 1.1's base-60 form (`1:30.5`) past the largest float is an error, not
    PyYAML's OverflowError (each `:` multiplies by 60: 174 of them are past 1e308)."""
    if len(node.value) > MAX_INT_CHARS and ":" in node.value:
        raise ValueError(f"base-60 number longer than {MAX_INT_CHARS} characters")
    try:
        return float(_CONSTRUCTOR.construct_yaml_float(node))
    except OverflowError as exc:
        raise ValueError("number past the largest float") from exc


_SCALAR_TYPES: dict[str, Callable[[yaml.ScalarNode], Any] | None] = {
    _STR_TAG: None,
    "tag:yaml.org,2002:timestamp": None,  # keep dates as written: the schema wants strings
    "tag:yaml.org,2002:int": _bounded_int,
    "tag:yaml.org,2002:float": _bounded_float,
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
        self.values = array(POSITION_ARRAY, (self.mark.line, self.mark.column))
        self.keys = array(POSITION_ARRAY)
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
        self.values = array(POSITION_ARRAY)  # 0-based line, column of every value, in order
        self.keys = array(POSITION_ARRAY)  # 0-based line, column of every mapping key, in order
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
    positions = FlatPositions(data, values, keys, 0)
    key_positions = FlatPositions(data, values, keys, 1)
    return [Document(file, index, data, positions, key_positions)]


def _yaml_problem(exc: yaml.MarkedYAMLError) -> str:
    parts = [p for p in (exc.context, exc.problem) if p]
    return ", ".join(parts) or str(exc)


def _mark_location(file: str, mark: yaml.Mark | None) -> Location:
    if mark is None:
        return Location(file)
    return Location(file, mark.line + 1, mark.column + 1)
