"""What a workload's pods get: their pod fields and the node groups they may run on.

Helpers, not checks, shared by the quota, GPU, volume and expression checks: the pod
fields each template and workload writes itself, the layers `Repo.pod_spec` merges and
which document's value wins for a merged field (so a problem is reported where it is
written), a workload's volumes as rendered, the node groups a workload may use, and the
GPU memory and MIG profiles those groups offer.
"""

from __future__ import annotations

from typing import Any

from gitops_sched.config.document import Document, Path_
from gitops_sched.config.model import NodeGroup, Repo, Workload
from gitops_sched.config.templating import context_for, is_templated, render_value
from gitops_sched.hardware.gpus import lookup_gpu_model
from gitops_sched.hardware.mig import MigProfile, mig_profiles


def workload_gpu_groups(repo: Repo, workload: Workload) -> list[NodeGroup]:
    """The node groups with GPUs a workload may run on (see Repo.workload_node_groups)."""
    return [g for g in repo.workload_node_groups(workload) if g.role == "gpu-worker"]


def mig_tables(groups: list[NodeGroup]) -> dict[str, dict[str, MigProfile]]:
    """MIG profiles per canonical GPU model of the MIG-enabled, MIG-capable groups."""
    tables: dict[str, dict[str, MigProfile]] = {}
    for group in groups:
        model = lookup_gpu_model(group.gpu_model) if group.gpu_model else None
        if group.mig_enabled and model is not None and model.mig_capable:
            tables[model.name] = mig_profiles(model.name)
    return tables


def own_pod_fields(repo: Repo) -> list[tuple[Document, dict[str, Any]]]:
    """The pod fields each template and workload writes itself (all under `spec`)."""
    return [(t.doc, t.spec) for t in repo.templates] + [
        (w.doc, w.overrides) for w in repo.workloads
    ]


def _layers(repo: Repo, workload: Workload) -> list[tuple[Document, dict[str, Any]]]:
    """The pod-field layers `Repo.pod_spec` merges, earliest first."""
    templates = (repo.default_template(), repo.template(workload.template))
    return [(t.doc, t.spec) for t in templates if t is not None] + [
        (workload.doc, workload.overrides)
    ]


def field_source(repo: Repo, workload: Workload, path: Path_) -> Document:
    """The document whose value for a merged pod field (e.g. `("env", "HOME")`) wins."""
    for doc, fields in reversed(_layers(repo, workload)):
        value: Any = fields
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            return doc
    return workload.doc


def rendered_volumes(
    repo: Repo, workload: Workload, volumes: list[dict[str, Any]]
) -> list[dict[str, Any]] | None:
    """The workload's `volumes` with their expressions rendered as the compiler renders
    them; None when one fails to render (the expression checks report it)."""
    if not any(is_templated(v["mountPath"]) for v in volumes):
        return volumes  # what nearly every repo writes: nothing to render
    context = context_for(repo.cluster, repo.project(workload.project), workload)
    try:
        rendered: list[dict[str, Any]] = render_value(volumes, context)
    except Exception:  # user expressions may raise anything; check_template_rendering says what
        return None
    return rendered
