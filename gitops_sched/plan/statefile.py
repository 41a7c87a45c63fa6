"""Reading `plan --state`: the JSON `simulate --format json` prints, as untrusted input.

Read like a config file (`read_capped`: a regular file only, never a device or FIFO, at
most MAX_STATE_BYTES), parsed with Python's JSON reader refusing what it would otherwise
take (`NaN`, `Infinity`, `1e999`, integers of more than MAX_INT_DIGITS digits), then walked
once without recursion: nested at most MAX_DEPTH levels (the config's own limit), no lone
surrogate (no UTF-8 writer can print one back).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from gitops_sched.config.loader import Unreadable, read_capped
from gitops_sched.config.yamlbuild import MAX_DEPTH

MAX_STATE_BYTES = 64 * 1024 * 1024  # a state of 100,000 workloads is about 20 MB
MAX_INT_DIGITS = 100  # no count or size in a state comes near it
# Workloads a state may list: the most a repo holds (a Workload's replicas and a group's
# nodes have the same maximum); each is schema-checked and simulated (a third of a
# millisecond), so 64 MiB of tiny entries would otherwise take minutes
MAX_STATE_WORKLOADS = 100_000
_SURROGATE = re.compile("[\ud800-\udfff]")


class StateFileError(Exception):
    """Why the file is no state: one line, naming the file."""


def read_state(path: Path) -> dict[str, Any]:
    """The state's top-level object; StateFileError saying why not."""
    raw = read_capped(path, cap=MAX_STATE_BYTES)
    if isinstance(raw, Unreadable):
        raise StateFileError(f"{path}: {raw.reason}")
    try:
        data = json.loads(
            raw.decode("utf-8"), parse_constant=_no_constant, parse_int=_int, parse_float=_float
        )
    except UnicodeDecodeError as exc:
        raise StateFileError(f"{path}: not UTF-8 (byte {exc.start})") from exc
    except RecursionError as exc:
        raise StateFileError(f"{path}: nested more than {MAX_DEPTH} deep") from exc
    except ValueError as exc:  # JSONDecodeError, an integer past Python's digit limit
        raise StateFileError(
            f"{path}: not a JSON state from `simulate --format json` ({exc})"
        ) from exc
    if problem := _problem(data):
        raise StateFileError(f"{path}: {problem}")
    if not isinstance(data, dict) or not isinstance(data.get("workloads"), list):
        raise StateFileError(f"{path}: not a `simulate --format json` state (no `workloads` list)")
    if len(data["workloads"]) > MAX_STATE_WORKLOADS:
        raise StateFileError(
            f"{path}: more than {MAX_STATE_WORKLOADS:,} workloads ({len(data['workloads']):,})"
        )
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of more than {MAX_INT_DIGITS} digits")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is past the largest number")
    return value


def _problem(data: Any) -> str | None:
    """What no state holds: deep nesting, lone surrogates (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                return f"nested more than {MAX_DEPTH} deep"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                stack.append((key, depth + 1))
                stack.append((item, depth + 1))
        elif isinstance(value, str) and _SURROGATE.search(value):
            return "holds a lone surrogate (\\ud800-\\udfff), which is no character"
    return None
