"""Deterministic YAML for plain data (dicts, lists, strings, numbers, booleans, None).

A small emitter of our own instead of PyYAML's: rendering a large repo writes tens of
thousands of objects, and PyYAML's node-by-node representer took most of the time. The
output is block style in the order the compiler built each dict (apiVersion, kind, metadata,
then the body), sequences not indented under their key, no anchors, no line wrapping.

Strings are plain only when no YAML reader could take them for something else: PyYAML's
YAML 1.1 resolver, and the YAML 1.2 / Go readers kubectl and kustomize use, which read
`3e-4` as a number and `y`/`n` as booleans. Everything else is double-quoted (JSON's
escaping is valid YAML, with the few characters YAML will not print raw escaped), and
multi-line text is a literal `|` block.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any

import yaml

# Conservative plain scalars: safe characters, no leading indicator, no ": " or " #"
# (excluded characters make those impossible), no leading or trailing space.
_PLAIN = re.compile(
    r"(?:[A-Za-z0-9_./$]|-{1,2}[A-Za-z0-9])(?:[-A-Za-z0-9_./=+@,$() ]|:(?=[^ ]))*(?<![ :])\Z"
)
# What YAML 1.2 and Go's YAML readers take for numbers or booleans beyond YAML 1.1's rules.
_NOT_STRING_ELSEWHERE = re.compile(
    r"[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?0(?:b[01_]+|o[0-7_]+|x[0-9a-fA-F_]+)|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|[yYnN]"
)
# Characters JSON leaves raw that YAML does not print raw (controls, line separators, BOM).
_UNPRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
_BLOCK = re.compile(r"[\x21-\x7e][\x20-\x7e\n]*")
_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"


def dump_object(value: dict[str, Any] | list[Any]) -> str:
    """One YAML document, byte-identical for equal input (dict order included)."""
    lines: list[str] = []
    _block(value, "", lines)
    return "".join(lines)


def _block(value: dict[str, Any] | list[Any], indent: str, lines: list[str]) -> None:
    if isinstance(value, dict):
        _mapping(value, indent, lines)
    else:
        _sequence(value, indent, lines)


# Single-line strings and integers, most of any object, are written inline: the general
# `_inline` path would give the same text at twice the cost.


def _mapping(value: dict[str, Any], indent: str, lines: list[str]) -> None:
    inner = indent + "  "
    for key, item in value.items():
        head = f"{indent}{_string(key)}:"
        kind = type(item)
        if kind is str and "\n" not in item:
            lines.append(f"{head} {_string(item)}\n")
        elif kind is int:
            lines.append(f"{head} {item}\n")
        elif isinstance(item, dict) and item:
            lines.append(head + "\n")
            _mapping(item, inner, lines)
        elif isinstance(item, list) and item:
            lines.append(head + "\n")
            _sequence(item, indent, lines)
        else:
            lines.append(_inline(head, item, inner))


def _sequence(value: list[Any], indent: str, lines: list[str]) -> None:
    inner = indent + "  "
    for item in value:
        if type(item) is str and "\n" not in item:
            lines.append(f"{indent}- {_string(item)}\n")
        elif isinstance(item, dict | list) and item:
            start = len(lines)
            _block(item, inner, lines)
            lines[start] = f"{indent}- {lines[start][len(inner) :]}"
        else:
            lines.append(_inline(f"{indent}-", item, inner))


def _inline(head: str, value: Any, indent: str) -> str:
    """`head value` for a scalar or an empty collection; a literal block for multi-line text."""
    if isinstance(value, str) and "\n" in value and _BLOCK.fullmatch(value):
        stripped = value.rstrip("\n")
        trailing = len(value) - len(stripped)
        chomp = "-" if trailing == 0 else "" if trailing == 1 else "+"
        body = "".join(f"{indent}{line}\n" if line else "\n" for line in value.split("\n")[:-1])
        last = "" if trailing else f"{indent}{value.rsplit(chr(10), 1)[1]}\n"
        return f"{head} |{chomp}\n{body}{last}"
    return f"{head} {_scalar(value)}\n"


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    raise TypeError(f"cannot write {type(value).__name__} as YAML: {value!r}")


@lru_cache(maxsize=1 << 16)  # keys and most values repeat across objects
def _string(value: str) -> str:
    if (
        _PLAIN.match(value)
        and not _NOT_STRING_ELSEWHERE.fullmatch(value)
        and _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _STR_TAG
    ):
        return value
    return _UNPRINTABLE.sub(_escape, json.dumps(value, ensure_ascii=False))


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match[0]):04x}"


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    if "e" in text and "." not in text:  # YAML 1.1 wants a dot: 1e-05 would read as a string
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text
