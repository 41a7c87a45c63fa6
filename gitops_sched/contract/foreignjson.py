"""JSON that another process wrote (node and pod annotations), read with bounded size and
nesting.

`json.loads` recurses once per nesting level: ~5 KB of `[` raise RecursionError, which no
caller expects, and one node's garbage would stop the scheduler's cycle or crash the node
agent. Every format we read back nests a few levels and fits the API server's 256 KiB
limit on an object's annotations, so anything deeper or larger is refused up front, with
a ValueError like any other unreadable text.
"""

from __future__ import annotations

import json
from typing import Any

MAX_BYTES = 256 * 1024  # the API server refuses an object whose annotations total more
MAX_DEPTH = 16  # ours nest at most 5 levels


def loads(text: str, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of `text`; ValueError when it is not JSON, is over `max_bytes` (UTF-8)
    or nests deeper than `max_depth`."""
    if len(text) > max_bytes or len(text.encode()) > max_bytes:
        raise ValueError(f"{len(text.encode())} bytes, more than {max_bytes}")
    depth = _depth(text, max_depth)
    if depth > max_depth:
        raise ValueError(f"nested {depth} levels deep, more than {max_depth}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None


def _depth(text: str, limit: int) -> int:
    """How deep arrays and objects nest (brackets inside strings do not count); a text with
    no more brackets than `limit` is not scanned (it cannot nest deeper)."""
    opening = text.count("[") + text.count("{")
    if opening <= limit:
        return opening
    deepest = depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
