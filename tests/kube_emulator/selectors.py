"""Label selectors as the API server parses them: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
`a notin (x)`, `a`, `!a`, joined by commas. A selector that does not parse is a 400."""

from __future__ import annotations

import re
from collections.abc import Callable

Labels = dict[str, str]
Requirement = Callable[[Labels], bool]

_SET = re.compile(r"^\s*(!?)\s*([A-Za-z0-9._/-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_EQUALITY = re.compile(r"^\s*([A-Za-z0-9._/-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")


class SelectorError(ValueError):
    pass


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _requirement(term: str) -> Requirement:
    match = _EQUALITY.match(term)
    if match:
        key, op, value = match.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    match = _SET.match(term)
    if not match:
        raise SelectorError(f"unable to parse requirement: {term!r}")
    negated, key, op, values_text = match.groups()
    if op is None:
        if negated:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    if negated:
        raise SelectorError(f"unable to parse requirement: {term!r}")
    values = {v.strip() for v in values_text.split(",") if v.strip()}
    if op == "in":
        return lambda labels: labels.get(key) in values
    return lambda labels: labels.get(key) not in values


def parse_selector(text: str | None) -> Requirement:
    """A predicate over an object's labels; an empty selector matches everything."""
    if not text or not text.strip():
        return lambda labels: True
    requirements = [_requirement(term) for term in _split(text)]
    return lambda labels: all(r(labels) for r in requirements)


def parse_field_selector(text: str | None) -> Callable[[dict], bool]:
    """The field selectors every kind supports: metadata.name and metadata.namespace."""
    if not text:
        return lambda obj: True
    tests = []
    for term in text.split(","):
        match = re.match(r"^\s*(metadata\.name|metadata\.namespace)\s*(==|=|!=)\s*(\S*)\s*$", term)
        if not match:
            raise SelectorError(f"field label not supported: {term!r}")
        field, op, value = match.groups()
        key = field.split(".")[1]
        want = op != "!="
        tests.append(lambda obj, k=key, v=value, w=want: (obj["metadata"].get(k, "") == v) == w)
    return lambda obj: all(t(obj) for t in tests)
