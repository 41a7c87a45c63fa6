"""Label selectors as the API server parses them: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
`a notin (x)`, `a`, `!a`, joined by commas; field selectors on the fields each kind
supports. A selector that does not parse is a 400."""

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


# the fields each kind can be selected by, beyond metadata.name and metadata.namespace
# (the server's field label conversion functions)
FIELD_LABELS = {
    "Pod": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "Node": ("spec.unschedulable",),
    "Event": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "reason",
        "type",
    ),
}
_FIELD_TERM = re.compile(r"^\s*([A-Za-z.]+)\s*(==|=|!=)\s*(\S*)\s*$")


def _field_value(obj: dict, path: str) -> str:
    value = obj
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def parse_field_selector(text: str | None, kind: str = "") -> Callable[[dict], bool]:
    """A predicate over objects of `kind`: metadata.name and metadata.namespace for every
    kind, and the kind's own field labels (`FIELD_LABELS`); a missing field reads as ""."""
    if not text:
        return lambda obj: True
    supported = ("metadata.name", "metadata.namespace", *FIELD_LABELS.get(kind, ()))
    tests = []
    for term in text.split(","):
        match = _FIELD_TERM.match(term)
        if not match or match.group(1) not in supported:
            raise SelectorError(f"field label not supported: {term.split('=')[0].strip('! ')}")
        path, op, value = match.groups()
        want = op != "!="
        tests.append(lambda obj, p=path, v=value, w=want: (_field_value(obj, p) == v) == w)
    return lambda obj: all(t(obj) for t in tests)


def label_selector_matches(selector: dict | None, labels: Labels) -> bool:
    """Whether a LabelSelector object (matchLabels, matchExpressions) selects `labels`; a
    null selector selects nothing and an empty one everything, as in policy/v1."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True
