"""The config documents themselves as custom resources, so the scheduler reads the repo's
quotas and tree from the cluster and writes each object's status next to its spec.

The spec is the document's own, as written (Jinja2 expressions in templates unrendered):
the objects are the repo, not an interpretation of it.
"""

from __future__ import annotations

from typing import Any

from gitops_sched.compiler.meta import object_meta
from gitops_sched.config.document import Document
from gitops_sched.config.model import Repo
from gitops_sched.contract.labels import API_VERSION


def render_custom_resources(repo: Repo) -> list[dict[str, Any]]:
    cluster = repo.required_cluster
    cluster_scoped = [
        custom_resource(item.doc)
        for items in ([cluster], repo.node_groups, repo.departments, repo.projects, repo.templates)
        for item in items
    ]
    workloads = [
        custom_resource(w.doc, cluster.project_namespace(w.project)) for w in repo.workloads
    ]
    return cluster_scoped + workloads


def custom_resource(doc: Document, namespace: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": doc.kind,
        "metadata": object_meta(doc.name, namespace, source=doc),
        "spec": doc.data.get("spec", {}),
    }
