"""A namespace per project, and a NetworkPolicy that keeps other projects out of it.

Pods of a project accept traffic from their own namespace, from the system namespace
(the scheduler and node agents' probes) and from the namespaces the repo allows
(`spec.network.allowedNamespaces` of the Cluster, for every project, and of the Project:
an ingress controller, a monitoring stack) only; egress stays open, so workloads can still
pull data and images. GPU quotas are the scheduler's job, so there is no ResourceQuota.
"""

from __future__ import annotations

from typing import Any

from gitops_sched.compiler.meta import object_meta
from gitops_sched.config.model import Cluster, Project, Repo
from gitops_sched.contract.labels import DEPARTMENT_LABEL, PROJECT_LABEL

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
ISOLATION_POLICY = "gitops-sched-isolation"


def render_tenancy(repo: Repo) -> list[dict[str, Any]]:
    cluster = repo.required_cluster
    objects: list[dict[str, Any]] = []
    for project in repo.projects:
        objects += [project_namespace_object(cluster, project), isolation(cluster, project)]
    return objects


def project_namespace_object(cluster: Cluster, project: Project) -> dict[str, Any]:
    labels = {PROJECT_LABEL: project.name, DEPARTMENT_LABEL: project.department}
    name = cluster.project_namespace(project.name)
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": object_meta(name, labels=labels, source=project.doc),
    }


def isolation(cluster: Cluster, project: Project) -> dict[str, Any]:
    namespace = cluster.project_namespace(project.name)
    allowed = sorted(
        set(cluster.allowed_namespaces + project.allowed_namespaces)
        - {cluster.system_namespace, namespace}  # admitted already
    )
    peers = [
        {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}
        for name in (cluster.system_namespace, *allowed)
    ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(ISOLATION_POLICY, namespace, {PROJECT_LABEL: project.name}),
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}, *peers]}],
        },
    }
