"""Every object a repo renders to, in apply order.

`render_repo` puts the objects of each compiler module in apply order: CRDs, then other
cluster-scoped objects, then namespaces, then namespaced objects; within a tier by kind,
namespace and name, so equal repos give byte-identical output.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from gitops_sched.compiler.crds import render_crds
from gitops_sched.compiler.policy import render_policy
from gitops_sched.compiler.priorities import render_priority_classes
from gitops_sched.compiler.rbac import render_rbac
from gitops_sched.compiler.resources import render_custom_resources
from gitops_sched.compiler.storage import render_claims
from gitops_sched.compiler.tenancy import render_tenancy
from gitops_sched.compiler.workloads import render_workloads
from gitops_sched.config.model import Repo
from gitops_sched.gcpause import paused_gc


@paused_gc()
def render_repo(
    repo: Repo,
    skip: Collection[tuple[str, str]] = (),
    written: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every object of the repo, in apply order.

    For a plan's diff: `skip`, workloads (project, name) whose objects are left out (see
    `unchanged`); `written`, the YAML documents written into strings, added by text."""
    if repo.cluster is None:
        raise ValueError("the repo declares no Cluster; there is nothing to render for")
    objects = [
        *render_crds(),
        *render_priority_classes(),
        *render_policy(repo, written),
        *render_custom_resources(repo),
        *render_tenancy(repo),
        *render_rbac(repo),
        *render_claims(repo),
        *render_workloads(repo, skip),
    ]
    return sorted(objects, key=apply_order)


def apply_order(obj: dict[str, Any]) -> tuple[int, str, str, str]:
    """Cluster-scoped before namespaced, CRDs and namespaces before what needs them; then
    kind, namespace and name, so equal repos give byte-identical output."""
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    if obj["kind"] == "CustomResourceDefinition":
        tier = 0
    elif obj["kind"] == "Namespace":
        tier = 2
    else:
        tier = 1 if namespace is None else 3
    return tier, obj["kind"], namespace or "", meta["name"]
