"""Which Kubernetes objects a change adds, changes or removes, field by field.

Both configs are rendered by the compiler; objects pair up by kind, namespace and name.
Fields compare as the reconciler compares them (`cluster.diff`): by value, quantities
as numbers (`12000m` is `12`), mappings by key, so ordering and formatting in the YAML
never show as changes, and a change here is exactly what the reconciler would apply.

A changed object whose change touches a field Kubernetes fixes at creation (a Job's pod
template) is "replaced": the reconciler deletes it and creates it again (`cluster.replace`
decides, for both), and a replaced Job's or Deployment's running pods restart.

Most objects of a change are untouched: a pair equal by `==` is equal by value too and is
skipped without the field walk, which runs only for the pairs `==` tells apart (and finds
nothing where only a quantity's spelling differs). `==` is the reconciler's comparison but
for one case, a boolean against a number (`True == 1`), and both sides are valid: every
field's schema makes it a boolean on both sides or on neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from gitops_sched.cluster.diff import compared, differences
from gitops_sched.cluster.replace import immutable_fields, stops_pods
from gitops_sched.config.model import Repo
from gitops_sched.contract.labels import PROJECT_LABEL

ObjectKey = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name
ACTIONS = ("added", "changed", "replaced", "removed")


@dataclass(frozen=True)
class FieldChange:
    path: str  # dotted, list items by index: spec.template.spec.containers.0.resources
    before: Any  # None where the field is new
    after: Any  # None where the field is gone


@dataclass(frozen=True)
class ObjectChange:
    action: str  # added | changed | replaced | removed
    kind: str
    namespace: str
    name: str
    project: str  # the project it belongs to, "" for cluster-wide objects
    fields: tuple[FieldChange, ...] = ()  # changed and replaced objects only
    restarts: bool = False  # replaced, its running pods stop (a Job's, a Deployment's)


def _key(obj: dict[str, Any]) -> ObjectKey:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace") or "", meta["name"]


def _project(obj: dict[str, Any], namespaces: dict[str, str]) -> str:
    meta = obj["metadata"]
    if project := meta.get("labels", {}).get(PROJECT_LABEL):
        return project
    if obj["kind"] == "Project":
        return meta["name"]
    namespace = meta["name"] if obj["kind"] == "Namespace" else meta.get("namespace")
    return namespaces.get(namespace or "", "")


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def field_changes(
    before: dict[str, Any], after: dict[str, Any], written: Mapping[str, Any] = MappingProxyType({})
) -> tuple[FieldChange, ...]:
    """The fields whose value differs, both ways (a field removed is a change too).

    `written`: YAML documents the compiler wrote into strings, by text, as data."""
    return tuple(_changes(compared(before), compared(after), "", written))


def _changes(old: Any, new: Any, prefix: str, written: Mapping[str, Any]) -> list[FieldChange]:
    paths = set(differences(new, old)) | set(differences(old, new))
    changes = []
    for path in sorted(paths):
        was, now = _at(old, path), _at(new, path)
        name = prefix + ".".join(path)
        embedded = _embedded(was, written), _embedded(now, written)
        if None not in embedded:  # a YAML document in a string: compare what it says
            changes += _changes(*embedded, f"{name}:", written)
        else:
            changes.append(FieldChange(name, was, now))
    return changes


def _embedded(value: Any, written: Mapping[str, Any]) -> dict | list | None:
    """The mapping or list a YAML document the compiler wrote into a string holds (a
    ConfigMap's policy.yaml), from `written`. Any other string, a user's included (an env
    value may hold an alias bomb or a number too long to print), is never parsed: it
    compares as the string it is."""
    if not isinstance(value, str) or "\n" not in value:
        return None
    data = written.get(value)
    return data if isinstance(data, dict | list) else None


def _namespaces(*repos: Repo) -> dict[str, str]:
    return {
        repo.project_namespace(project.name): project.name
        for repo in repos
        for project in repo.projects
    }


def object_changes(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    base: Repo,
    head: Repo,
    written: Mapping[str, Any] = MappingProxyType({}),
) -> tuple[ObjectChange, ...]:
    """Added, changed and removed objects, sorted by kind, project, namespace and name;
    `written` as for `field_changes`."""
    old = {_key(obj): obj for obj in before}
    new = {_key(obj): obj for obj in after}
    namespaces = _namespaces(base, head)
    changes = []
    fields: tuple[FieldChange, ...]
    for key in old.keys() | new.keys():
        was, now = old.get(key), new.get(key)
        restarts = False
        if was is None:
            action, fields = "added", ()
        elif now is None:
            action, fields = "removed", ()
        elif was == now:
            continue
        else:
            fields = field_changes(was, now, written)
            if not fields:
                continue
            action = "changed"
            if immutable_fields(now, [f.path for f in fields]):
                action, restarts = "replaced", stops_pods(now)
        project = _project(now or was or {}, namespaces)  # one of the two is an object
        changes.append(ObjectChange(action, key[0], key[1], key[2], project, fields, restarts))
    return tuple(sorted(changes, key=lambda c: (c.kind, c.project, c.namespace, c.name)))
