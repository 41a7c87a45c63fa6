"""What a part's shipped RBAC grants its ServiceAccount, compared both ways with the calls
it was seen to make (`audit`), and written as the README's table.

A grant is one verb on one resource, everywhere (a ClusterRole bound by a
ClusterRoleBinding: `namespace` "") or in one namespace (a Role bound there), maybe limited
to some names. The part's *own* namespaces are those its manifests put Roles in (the system
namespace, the device plugin's): a call there is served by a Role, so a ClusterRole grant
used only there is broader than the code needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from testkit.control_plane.audit import Call

Obj = dict[str, Any]


@dataclass(frozen=True, order=True)
class Grant:
    verb: str
    group: str
    resource: str
    namespace: str = ""  # "" everywhere
    name: str = ""  # "" any name

    def covers(self, call: Call) -> bool:
        """As RBAC matches a rule: `*` stands for any verb, group or resource."""
        return (
            self.verb in ("*", call.verb)
            and self.group in ("*", call.group)
            and self.resource in ("*", call.resource)
            and self.namespace in ("", call.namespace)
            and self.name in ("", call.name)
        )


def grants(objects: list[Obj], namespace: str, account: str) -> set[Grant]:
    """What the RoleBindings and ClusterRoleBindings in `objects` give the ServiceAccount."""
    roles = {(o["kind"], _namespace(o), o["metadata"]["name"]): o for o in objects}
    out: set[Grant] = set()
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        if subject not in [{k: s.get(k) for k in subject} for s in binding["subjects"]]:
            continue
        where = _namespace(binding)
        ref = binding["roleRef"]
        role = roles[(ref["kind"], where if ref["kind"] == "Role" else "", ref["name"])]
        for rule in role["rules"]:
            out |= {
                Grant(verb, group, resource, where, name)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
                for name in rule.get("resourceNames") or [""]
            }
    return out


def own_namespaces(grants: Iterable[Grant]) -> set[str]:
    return {g.namespace for g in grants if g.namespace}


def missing(calls: Iterable[Call], granted: set[Grant]) -> list[Call]:
    """Calls no grant allows."""
    return sorted(c for c in calls if not any(g.covers(c) for g in granted))


def unused(granted: set[Grant], calls: Iterable[Call]) -> list[str]:
    """Grants no call needs, each with why: never used, used only in an own namespace
    (where a Role would do), or used only where a ClusterRole already allows it."""
    calls = list(calls)
    own = own_namespaces(granted)
    everywhere = [g for g in granted if not g.namespace]
    out = []
    for grant in sorted(granted):
        used = [c for c in calls if grant.covers(c)]
        if not grant.namespace:
            needed = [c for c in used if not c.namespace or c.namespace not in own]
            if used and not needed:
                where = ", ".join(sorted({c.namespace for c in used}))
                out.append(f"{show(grant)}: used only in namespace {where} (a Role there)")
                continue
        else:
            needed = [c for c in used if not any(g.covers(c) for g in everywhere)]
        if not needed:
            out.append(f"{show(grant)}: never used")
    return out


def show(grant: Grant) -> str:
    where = f" in {grant.namespace}" if grant.namespace else ""
    named = f" named {grant.name}" if grant.name else ""
    return f"{grant.verb} {grant.group or 'core'}/{grant.resource}{named}{where}"


def table(granted: set[Grant]) -> str:
    """A Markdown table: one row per API group, resource and scope, its verbs."""
    rows: dict[tuple[str, str, str], set[str]] = {}
    for g in granted:
        scope = f"`{g.namespace}` only" if g.namespace else "cluster"
        if g.name:
            scope += f", named `{g.name}`"
        rows.setdefault((g.group or "core", g.resource, scope), set()).add(g.verb)
    lines = ["| API group | resource | verbs | where |", "|---|---|---|---|"]
    for (group, resource, scope), verbs in sorted(rows.items(), key=_row_order):
        shown = ", ".join(sorted(verbs, key=_verb_order))
        lines.append(f"| {group} | {resource} | {shown} | {scope} |")
    return "\n".join(lines) + "\n"


VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")


def _verb_order(verb: str) -> tuple[int, str]:
    return (VERBS.index(verb) if verb in VERBS else len(VERBS), verb)


def _row_order(item: tuple[tuple[str, str, str], set[str]]) -> tuple[bool, str, str, str]:
    (group, resource, scope), _ = item
    return (scope != "cluster", group, resource, scope)


def _namespace(obj: Obj) -> str:
    return str(obj["metadata"].get("namespace") or "")
