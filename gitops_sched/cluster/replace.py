"""Changes the API server refuses to make in place, and which objects are replaced for them.

Some fields are fixed when an object is created: most of a Job's spec (its pod template,
completions, selector, completion mode, pod failure policy), a Deployment's selector, a
binding's roleRef, a PriorityClass's value. An apply that changes one is answered 422
("field is immutable"); the only way to the repo's state is to delete the object and create
it again. The reconciler does that for the kinds below, whose objects hold nothing the repo
does not declare and whose absence for a moment opens nothing; never for a namespace, a
CRD, a claim or a custom resource (their deletion takes data with it), a NetworkPolicy (its
absence opens the network) or a Service (a new clusterIP): there the refusal is reported
and a person decides.

The known immutable fields are checked before applying (by value, over the fields we render,
as `diff` compares: what the server added is no difference), so a change is replaced in one
step; a 422 that names an immutable field we do not know of is replaced the same way, so a
new rule of a later Kubernetes version never makes a sync fail for ever.

A replaced Job or Deployment is deleted in the foreground: it stays, marked, until its pods
are gone, and is created again only then. The pods stop (their grace period), a Job starts
over (a finished one runs again); the two generations never run side by side, so their GPUs
are never counted twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gitops_sched.cluster.errors import ApiFailure

# (group, kind) -> the fields fixed at creation (dotted; a change anywhere inside counts)
IMMUTABLE: dict[tuple[str, str], tuple[str, ...]] = {
    ("batch", "Job"): (
        "spec.selector",
        "spec.template",
        "spec.completions",
        "spec.completionMode",
        "spec.podFailurePolicy",
        "spec.backoffLimitPerIndex",
        "spec.managedBy",
        "spec.successPolicy",
    ),
    ("apps", "Deployment"): ("spec.selector",),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("roleRef",),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ("roleRef",),
    ("scheduling.k8s.io", "PriorityClass"): ("value", "preemptionPolicy"),
}
REPLACEABLE = frozenset(IMMUTABLE)
# what the server says of a field it will not change (ValidateImmutableField, roleRef's and
# PriorityClass's own wording)
REFUSALS = ("field is immutable", "cannot change roleRef", "may not be changed in an update")
# the kinds whose replacement stops running pods
WORKLOADS = frozenset({("batch", "Job"), ("apps", "Deployment")})
FOREGROUND = "Foreground"


def _kind(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["apiVersion"].rpartition("/")[0], obj["kind"]


def replaceable(obj: dict[str, Any]) -> bool:
    return _kind(obj) in REPLACEABLE


def stops_pods(obj: dict[str, Any]) -> bool:
    """Whether replacing `obj` stops running pods (a Job's or a Deployment's)."""
    return _kind(obj) in WORKLOADS


def immutable_fields(want: dict[str, Any], changed: Iterable[str]) -> list[str]:
    """Of the dotted paths that differ between `want` and the object it would update, the
    immutable fields they fall in, sorted; [] when an in-place update will do.

    A Job's completions may change with its parallelism when it is Indexed (elastic
    Indexed Jobs, Kubernetes 1.31 and later)."""
    fields = IMMUTABLE.get(_kind(want), ())
    hit = {f for path in changed for f in fields if path == f or path.startswith(f + ".")}
    spec = want.get("spec") or {}
    elastic = spec.get("completionMode") == "Indexed" and (
        spec.get("completions") == spec.get("parallelism")
    )
    if _kind(want) == ("batch", "Job") and elastic:
        hit.discard("spec.completions")
    return sorted(hit)


def refused_as_immutable(error: ApiFailure) -> list[str]:
    """The fields a 422 says cannot change in place ([] for any other error); "?" when the
    answer says so without naming one."""
    if error.status != 422:
        return []
    causes = (error.body.get("details") or {}).get("causes") or []
    fields = sorted(
        {
            c.get("field") or "?"
            for c in causes
            if any(r in (c.get("message") or "") for r in REFUSALS)
        }
    )
    if not fields and any(r in error.message for r in REFUSALS):
        fields = ["?"]
    return fields


def terminating(obj: dict[str, Any] | None) -> bool:
    return bool(obj and obj.get("metadata", {}).get("deletionTimestamp"))
