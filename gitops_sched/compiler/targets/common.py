"""What every target shares with our own render: namespaces, network isolation, RBAC, volume
claims and the workloads' Jobs and Deployments, which a target then marks for its scheduler.

Our CRDs, policy ConfigMap and custom resources are for our scheduler only and are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gitops_sched.compiler.rbac import render_rbac
from gitops_sched.compiler.render import apply_order
from gitops_sched.compiler.storage import render_claims
from gitops_sched.compiler.targets.differences import Check
from gitops_sched.compiler.tenancy import render_tenancy
from gitops_sched.compiler.workloads import render_inputs, render_workload
from gitops_sched.config.diagnostics import Diagnostic, Severity
from gitops_sched.config.model import Project, Repo, Workload
from gitops_sched.contract.pods import GPU_MEMORY_LIMIT, GPU_UUID

# a workload's Job or Deployment, its workload and project: the target marks it in place
Mark = Callable[[dict[str, Any], Workload, Project], None]
WORKLOAD_KINDS = ("Job", "Deployment")
# what our scheduler writes on a fraction pod for its container to read: no target writes it
OUR_DOWNWARD_ANNOTATIONS = (GPU_UUID, GPU_MEMORY_LIMIT)


@dataclass(frozen=True)
class Rendered:
    """A target's objects in apply order, and what it cannot express: warnings, and errors
    where the repo cannot be rendered for it at all (nothing may be written then)."""

    objects: list[dict[str, Any]]
    diagnostics: list[Diagnostic]

    @property
    def failed(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.diagnostics)


def render_for(
    repo: Repo,
    own: list[dict[str, Any]],
    mark: Mark,
    checks: tuple[Check, ...],
    target: str,
    skip: Collection[tuple[str, str]] = (),
) -> Rendered:
    """The shared objects, the target's `own` ones, the workloads `mark`ed; sorted."""
    objects = [*own, *render_tenancy(repo), *render_rbac(repo), *render_claims(repo)]
    for workload, project, rendered in _workloads(repo, skip):
        for obj in rendered:
            if obj["kind"] in WORKLOAD_KINDS:
                obj["metadata"] = dict(obj["metadata"])  # shared with its Services: marked apart
                _drop_our_downward_env(obj["spec"]["template"]["spec"])
                mark(obj, workload, project)
            objects.append(obj)
    found = sorted((d for check in checks for d in check(repo, target)), key=Diagnostic.sort_key)
    return Rendered(sorted(objects, key=apply_order), found)


def _workloads(
    repo: Repo, skip: Collection[tuple[str, str]]
) -> Iterator[tuple[Workload, Project, list[dict[str, Any]]]]:
    for inputs in render_inputs(repo, skip):
        yield inputs[1], inputs[2], render_workload(*inputs)


def _drop_our_downward_env(pod_spec: dict[str, Any]) -> None:
    """Our fraction pods read their GPU and share from annotations our scheduler writes; under
    another scheduler nobody writes them (KAI sets NVIDIA_VISIBLE_DEVICES itself)."""
    for container in pod_spec["containers"]:
        env = [
            e
            for e in container.get("env", [])
            if _annotation_ref(e) not in OUR_DOWNWARD_ANNOTATIONS
        ]
        if env:
            container["env"] = env
        else:
            container.pop("env", None)


def _annotation_ref(env: dict[str, Any]) -> str | None:
    path = env.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
    prefix = "metadata.annotations['"
    return path[len(prefix) : -2] if path.startswith(prefix) else None


def pod_template(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]


def add_labels(meta: dict[str, Any], labels: dict[str, str]) -> None:
    meta["labels"] = dict(sorted({**meta.get("labels", {}), **labels}.items()))


def add_annotations(meta: dict[str, Any], annotations: dict[str, str]) -> None:
    if annotations:
        meta["annotations"] = dict(sorted({**meta.get("annotations", {}), **annotations}.items()))


def plain_number(value: Any) -> int | float:
    """A number as YAML shows it best: 4, not 4.0; 0.5 stays."""
    number = Decimal(str(value))
    return int(number) if number == number.to_integral_value() else float(number)
