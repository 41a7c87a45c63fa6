"""Is a live object what the repo wants? Compared by value, over the fields we set.

Only the fields of the rendered object are compared (the server adds defaults: a Service's
clusterIP, a Job's selector, a container's terminationMessagePath), and quantities are
compared as numbers, so the server's canonical `12` for our `12000m`, `1Gi` for `1024Mi`
or `"1"` for a GPU count `1` is never a difference. Lists are compared item by item.

The field set is compared too: the fields the live object's managedFields say our field
manager applied must be the fields of the rendered object. A field we stopped rendering
(it must be removed) or a field another manager took from us (a hand edit) shows up there
even where a value comparison could not see it.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal, InvalidOperation
from typing import Any

from gitops_sched.quantity import parse_quantity

FIELD_MANAGER = "gitops-sched"
QUANTITY_MAPS = ("limits", "requests", "hard", "capacity", "allocatable")
QUANTITY_KEYS = ("sizeLimit", "storage")
METADATA_FIELDS = ("labels", "annotations")
Path = tuple[str, ...]


def content_hash(obj: dict[str, Any]) -> str:
    """A short digest of a rendered object, kept in the inventory to tell repo changes
    (a new digest) from drift (the same digest, a different live object)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def compared(obj: dict[str, Any]) -> dict[str, Any]:
    """The part of a rendered object that is compared: all but apiVersion, kind, status and
    the metadata other than labels and annotations."""
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k in METADATA_FIELDS}
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    return {"metadata": meta, **rest} if meta else rest


def differences(want: Any, have: Any, path: Path = ()) -> list[Path]:
    """Paths where `have` does not hold the value of `want` (extra fields in `have` allowed)."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [path]
        out: list[Path] = []
        for key, value in want.items():
            if key not in have:
                if not _omitted(value):
                    out.append((*path, key))
            else:
                out += differences(value, have[key], (*path, key))
        return out
    if isinstance(want, list):
        if not isinstance(have, list) or len(want) != len(have):
            return [path]
        return [
            p
            for i, (w, h) in enumerate(zip(want, have))
            for p in differences(w, h, (*path, str(i)))
        ]
    return [] if _same_value(want, have, path) else [path]


def _omitted(value: Any) -> bool:
    """An empty value the server leaves out of what it returns (`omitempty`: false, 0, "",
    an empty list or map), so its absence from the live object is no difference."""
    return value in (False, "", [], {})  # 0 == False


def _same_value(want: Any, have: Any, path: Path) -> bool:
    if want == have and type(want) is type(have):
        return True
    if isinstance(want, bool) or isinstance(have, bool):
        return False
    if isinstance(want, int | float) and isinstance(have, int | float):
        return want == have
    if _is_quantity(path):
        return _quantity(want) is not None and _quantity(want) == _quantity(have)
    return False


def _is_quantity(path: Path) -> bool:
    in_map = len(path) >= 2 and path[-2] in QUANTITY_MAPS
    return in_map or (bool(path) and path[-1] in QUANTITY_KEYS)


def _quantity(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        return parse_quantity(value)
    except (ValueError, InvalidOperation):
        return None


def field_paths(obj: dict[str, Any]) -> set[Path]:
    """The leaf fields of a rendered object as server-side apply records them (a list is one
    field: how its items are tracked differs between list types and does not matter here)."""
    paths: set[Path] = set()

    def walk(value: Any, path: Path) -> None:
        if isinstance(value, dict) and value:
            for key, sub in value.items():
                walk(sub, (*path, key))
        else:
            paths.add(path)

    walk(compared(obj), ())
    return paths


def managed_paths(live: dict[str, Any], manager: str = FIELD_MANAGER) -> set[Path] | None:
    """The fields `manager` applied to `live` (None when it applied none), from FieldsV1:
    `f:` keys descend, a node whose children are list items (`k:`, `v:`, `i:`) is a leaf."""
    for entry in live.get("metadata", {}).get("managedFields") or []:
        if (
            entry.get("manager") == manager
            and entry.get("operation") == "Apply"
            and not entry.get("subresource")
        ):
            paths: set[Path] = set()
            _fields_v1(entry.get("fieldsV1") or {}, (), paths)
            return {p for p in paths if p[0] != "metadata" or p[1] in METADATA_FIELDS}
    return None


def _fields_v1(node: dict[str, Any], path: Path, paths: set[Path]) -> None:
    children = [k for k in node if k.startswith("f:")]
    if path and (not children or any(k[:2] in ("k:", "v:", "i:") for k in node)):
        paths.add(path)
        return
    for key in children:
        _fields_v1(node[key], (*path, key[2:]), paths)


def field_gaps(want: dict[str, Any], owned: set[Path]) -> tuple[list[Path], list[Path]]:
    """Where the fields of `want` and those our manager `owned` differ: (fields we render
    that it does not own: another manager took them; fields it owns that we no longer
    render: the apply removes them). A struct the server tracks as one field (an atomic
    one, such as a RoleBinding's roleRef or a pod's required node affinity: FieldsV1 lists
    it without its children) owns the fields we render inside it."""
    rendered = field_paths(want)
    inside = {p[:i] for p in rendered for i in range(1, len(p))}
    taken = [p for p in rendered - owned if not any(p[:i] in owned for i in range(1, len(p)))]
    stale = [p for p in owned - rendered if p not in inside]
    return sorted(taken), sorted(stale)


def value_changes(want: dict[str, Any], live: dict[str, Any]) -> list[str]:
    """The dotted fields whose value applying `want` changes in `live`: those that differ,
    and those our field manager applied that `want` no longer has (the apply removes them).
    A field only owned by another manager, with our value, is no change."""
    paths = differences(compared(want), compared(live))
    owned = managed_paths(live)
    if owned is not None:
        paths += field_gaps(want, owned)[1]
    return sorted({".".join(p) for p in paths})


def why_apply(want: dict[str, Any], live: dict[str, Any] | None) -> list[str]:
    """Why `live` needs `want` applied: the differing fields, dotted; [] when it does not."""
    if live is None:
        return ["missing"]
    reasons = [".".join(p) for p in differences(compared(want), compared(live))]
    owned = managed_paths(live)
    if owned is None:
        reasons.append("not applied by gitops-sched")
    else:
        taken, stale = field_gaps(want, owned)
        reasons += [f"{'.'.join(p)} (owned by another manager)" for p in taken]
        reasons += [f"{'.'.join(p)} (to remove)" for p in stale]
    return sorted(set(reasons))
