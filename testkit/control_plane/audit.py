"""What a ServiceAccount asked the API server for, read from the server's audit log: the
honest record of the calls a part of the product makes (the server writes it, whatever
client library, retry or subresource the code went through).

`POLICY` is the audit policy `ControlPlane` starts kube-apiserver with: every request of a
ServiceAccount at the Metadata level (verb, resource, subresource, namespace, name, answer),
and the RBAC roles it writes with their body, since to grant a rule Kubernetes makes the
writer hold it (RBAC's escalation check, which no request of its own shows). Nothing is
recorded for other users, so the log stays small over a whole test session.

`calls(log, user, since)` turns the events into `Call`s: a server-side apply that created
its object (201) is also a `create` (the server checks that verb for it), and the rules of a
role written are calls the writer must be allowed to make.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROLES = ("roles", "clusterroles")
POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Request",
            "userGroups": ["system:serviceaccounts"],
            "resources": [{"group": "rbac.authorization.k8s.io", "resources": list(ROLES)}],
        },
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {"level": "None"},
    ],
}
WRITES = ("create", "update", "patch")


@dataclass(frozen=True, order=True)
class Call:
    """One kind of request: `resource` with its subresource (`pods/eviction`), `namespace`
    "" for a cluster-scoped object or a request across every namespace, `name` "" when the
    request names no object (a list, a create)."""

    verb: str
    group: str
    resource: str
    namespace: str = ""
    name: str = ""


@dataclass(frozen=True)
class Audit:
    """The calls of one user, and the requests the server refused them (as `Call`s)."""

    calls: frozenset[Call]
    forbidden: frozenset[Call]


def service_account(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def size(log: Path) -> int:
    """Where the log ends now: read from here to see only what comes after."""
    return log.stat().st_size if log.exists() else 0


def events(log: Path, user: str, since: int = 0) -> list[dict[str, Any]]:
    """The user's requests after byte `since`, one event each (the last stage written: a
    watch also has one when it starts)."""
    by_id: dict[str, dict[str, Any]] = {}
    with log.open("rb") as f:
        f.seek(since)
        for line in f:
            event = json.loads(line)
            if event.get("user", {}).get("username") == user:
                by_id[event["auditID"]] = event
    return list(by_id.values())


def read(log: Path, user: str, since: int = 0) -> Audit:
    calls: set[Call] = set()
    forbidden: set[Call] = set()
    for event in events(log, user, since):
        ref = event.get("objectRef")
        if not ref:
            continue  # a non-resource URL (discovery), which every authenticated user may read
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        call = Call(
            event["verb"],
            ref.get("apiGroup", ""),
            resource,
            ref.get("namespace", ""),
            ref.get("name", ""),
        )
        code = event.get("responseStatus", {}).get("code", 0)
        if code == 403:
            forbidden.add(call)
            continue
        calls.add(call)
        if call.verb == "patch" and code == 201:  # server-side apply that created the object
            calls.add(Call("create", call.group, call.resource, call.namespace))
        if call.resource in ROLES and call.verb in WRITES and code < 400:
            calls |= granted(event.get("requestObject") or {}, call.namespace)
    return Audit(frozenset(calls), frozenset(forbidden))


def granted(role: dict[str, Any], namespace: str) -> set[Call]:
    """The calls a role's rules allow, which whoever writes the role must be allowed too."""
    out = set()
    for rule in role.get("rules") or ():
        for group in rule.get("apiGroups") or ():
            for resource in rule.get("resources") or ():
                for verb in rule.get("verbs") or ():
                    for name in rule.get("resourceNames") or [""]:
                        out.add(Call(verb, group, resource, namespace, name))
    return out
