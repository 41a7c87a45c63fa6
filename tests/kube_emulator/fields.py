"""Field ownership (managedFields) and server-side apply, for the object shapes used.

A field set is a set of paths to leaves: scalars, empty maps, and lists (every list is
treated as atomic, as `x-kubernetes-list-type: atomic` would: a manager owns the whole
list). `metadata` contributes its labels, annotations, finalizers and ownerReferences only,
as on a real server. On the wire a field set is FieldsV1 (`{"f:spec": {"f:replicas": {}}}`).

Apply (`apply`): the applied configuration's fields become the manager's set; a field
another manager owns with a different value is a conflict (409) unless forced, in which case
the field changes hands; fields the manager applied before and no longer applies are removed
when no one else owns them. Update (`record_update`): whoever changes a field owns it.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

Path = tuple[str, ...]
METADATA_FIELDS = ("labels", "annotations", "finalizers", "ownerReferences")
IGNORED = ("apiVersion", "kind", "status", "metadata")


def leaf_paths(obj: dict[str, Any], include_status: bool = False) -> set[Path]:
    paths: set[Path] = set()
    for key, value in obj.items():
        if key == "metadata":
            for field in METADATA_FIELDS:
                if field in value:
                    _walk(value[field], ("metadata", field), paths)
        elif (key == "status" and include_status) or key not in IGNORED:
            _walk(value, (key,), paths)
    return paths


def _walk(value: Any, path: Path, paths: set[Path]) -> None:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            _walk(sub, (*path, key), paths)
    else:
        paths.add(path)


def get_path(obj: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def delete_path(obj: dict[str, Any], path: Path) -> None:
    parents = []
    node: Any = obj
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return
        parents.append((node, key))
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, key in reversed(parents):  # drop maps the removal emptied
        if parent[key] == {} and key not in ("metadata", "spec"):
            del parent[key]
        else:
            break


def merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """`overlay` over `base`: maps merge key by key, everything else is replaced."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and value:
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def overlaps(a: Path, b: Path) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return root


def from_fields_v1(fields: dict[str, Any]) -> set[Path]:
    paths: set[Path] = set()

    def walk(node: dict[str, Any], path: Path) -> None:
        children = {k: v for k, v in node.items() if k.startswith("f:")}
        if not children and path:
            paths.add(path)
        for key, sub in children.items():
            walk(sub, (*path, key[2:]))

    walk(fields, ())
    return paths


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Conflict(Exception):
    def __init__(self, conflicts: list[tuple[str, Path]]):
        self.conflicts = conflicts
        lines = [f'conflict with "{m}": .{".".join(p)}' for m, p in conflicts]
        super().__init__(f"Apply failed with {len(conflicts)} conflict(s): " + "; ".join(lines))


def managers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj.get("metadata", {}).get("managedFields") or []


def _entry(manager: str, operation: str, api_version: str, paths: set[Path], sub: str | None):
    entry = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(paths),
    }
    if sub:
        entry["subresource"] = sub
    return entry


def apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    manager: str,
    force: bool,
    values_equal,
    subresource: str | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The merged object (before defaulting) and its new managedFields. Raises Conflict."""
    status = subresource == "status"
    applied_paths = leaf_paths(applied, include_status=status)
    if status:
        applied_paths = {p for p in applied_paths if p[0] == "status"}
    if live is None:
        entry = _entry(manager, "Apply", applied["apiVersion"], applied_paths, subresource)
        return copy.deepcopy(applied), [entry]
    entries = copy.deepcopy(managers(live))
    conflicts: list[tuple[str, Path]] = []
    mine_before: set[Path] = set()
    others: list[tuple[dict[str, Any], set[Path]]] = []
    for entry in entries:
        paths = from_fields_v1(entry.get("fieldsV1", {}))
        if (
            entry["manager"] == manager
            and entry["operation"] == "Apply"
            and entry.get("subresource") == subresource
        ):
            mine_before = paths
            continue
        others.append((entry, paths))
        if entry["manager"] == manager:
            continue  # a manager never conflicts with itself
        for path in applied_paths:
            for owned in paths:
                if overlaps(path, owned):
                    shortest = path if len(path) <= len(owned) else owned
                    if not values_equal(get_path(applied, shortest), get_path(live, shortest)):
                        conflicts.append((entry["manager"], owned))
    if conflicts and not force:
        raise Conflict(sorted(set(conflicts)))
    merged = copy.deepcopy(live)
    owned_by_others = set()
    new_entries = []
    for entry, paths in others:
        if force:
            paths = {p for p in paths if not any(overlaps(p, a) for a in applied_paths)}
        owned_by_others |= paths
        if paths:
            entry["fieldsV1"] = to_fields_v1(paths)
            new_entries.append(entry)
    for path in mine_before - applied_paths:
        if not any(overlaps(path, o) for o in owned_by_others | applied_paths):
            delete_path(merged, path)
    merged = merge(merged, applied)
    new_entries.append(_entry(manager, "Apply", applied["apiVersion"], applied_paths, subresource))
    return merged, new_entries


def record_update(
    old: dict[str, Any],
    new: dict[str, Any],
    manager: str,
    subresource: str | None = None,
) -> list[dict[str, Any]]:
    """managedFields after `manager` changed `old` into `new` with an update (PUT or PATCH)."""
    status = subresource == "status"
    old_paths = leaf_paths(old, include_status=status)
    new_paths = leaf_paths(new, include_status=status)
    changed = {p for p in old_paths | new_paths if get_path(old, p) != get_path(new, p)}
    if status:
        changed = {p for p in changed if p[0] == "status"}
    else:
        changed = {p for p in changed if p[0] != "status"}
    entries = []
    mine: set[Path] = set()
    for entry in copy.deepcopy(managers(old)):
        paths = from_fields_v1(entry.get("fieldsV1", {}))
        same = (
            entry["manager"] == manager
            and entry["operation"] == "Update"
            and entry.get("subresource") == subresource
        )
        if same:
            mine = paths
            continue
        paths = {p for p in paths if not any(overlaps(p, c) for c in changed)}
        if paths:
            entry["fieldsV1"] = to_fields_v1(paths)
            entries.append(entry)
    mine = {p for p in mine if p in new_paths or get_path(new, p) is not _MISSING} | (
        changed & new_paths
    )
    if mine:
        entries.append(_entry(manager, "Update", new["apiVersion"], mine, subresource))
    return entries
