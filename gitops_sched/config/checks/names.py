"""Name checks: names Kubernetes derives from the repo must still be valid Kubernetes names,
and a project's namespace must be its own.

A project's namespace (the cluster's prefix and the project's name) is a DNS-1123 label,
a workload's name becomes its Job's name and so a pod label value, and a node group's
selector labels are matched against nodes and written into its workloads' node affinity.
Kubernetes would reject the rendered objects otherwise, so these are caught before anything
is applied. A group's selector must also name a label at all, or it would take every node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from gitops_sched.config import codes
from gitops_sched.config.checks.common import error_at, key_error_at
from gitops_sched.config.codes import Code
from gitops_sched.config.diagnostics import Diagnostic
from gitops_sched.config.document import Document, Path_
from gitops_sched.config.kubernetes_names import (
    LABEL_NAME_RULE,
    label_key_problem,
    valid_label_value,
)
from gitops_sched.config.model import Cluster, Project, Repo
from gitops_sched.config.templating import is_templated
from gitops_sched.hardware.gfd import GFD_PRODUCT, gfd_product

MAX_NAMESPACE_LENGTH = 63  # a namespace is a DNS-1123 label
# A Job's name becomes the `job-name` label value of its pods (63 characters at most) and
# Kubernetes appends suffixes to it, so workloads keep the margin CronJobs use.
MAX_WORKLOAD_NAME_LENGTH = 52
KUBERNETES_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# The folder `render -o` writes the CRDs to (compiler/output.py): a namespace of that name
# would put its objects in the CRDs' kustomization, applied before the CRDs exist.
CRD_FOLDER = "crds"
# Where the schedulers `render --target` compiles for run (their installs' defaults): a
# project there would grant its members exec into the scheduler, as in our system namespace
SCHEDULER_NAMESPACES = {"kueue-system": "Kueue", "kai-scheduler": "KAI Scheduler"}
Locate = Callable[[Document, Path_, Code, str], Diagnostic]  # error_at or key_error_at


def check_derived_names(repo: Repo) -> Iterator[Diagnostic]:
    """Names the compiler derives must still be valid Kubernetes names."""
    if repo.cluster is not None:
        yield from _namespaces_taken(repo.cluster, repo.projects)
        for project in repo.projects:
            namespace = repo.cluster.project_namespace(project.name)
            if len(namespace) > MAX_NAMESPACE_LENGTH:
                yield error_at(
                    project.doc,
                    ("metadata", "name"),
                    codes.NAME_TOO_LONG,
                    f"namespace '{namespace}' is {len(namespace)} characters, more than the "
                    f"{MAX_NAMESPACE_LENGTH} Kubernetes allows",
                )
    for workload in repo.workloads:
        if len(workload.name) > MAX_WORKLOAD_NAME_LENGTH:
            yield error_at(
                workload.doc,
                ("metadata", "name"),
                codes.NAME_TOO_LONG,
                f"workload name is {len(workload.name)} characters, more than "
                f"{MAX_WORKLOAD_NAME_LENGTH} (its Job name becomes a pod label value)",
            )


def _namespaces_taken(cluster: Cluster, projects: Iterable[Project]) -> Iterator[Diagnostic]:
    """A project's namespace is its own: not the system namespace (where its members' Role
    would grant exec into the scheduler), not one of Kubernetes' (`default`, `kube-*`), not
    render's CRD folder, and not another project's. The system namespace is none of
    Kubernetes' either (render would own, and may prune, `kube-system`)."""
    if taken := _reserved(cluster.system_namespace):
        yield error_at(
            cluster.doc,
            ("spec", "systemNamespace"),
            codes.RESERVED_NAMESPACE,
            f"the system namespace '{cluster.system_namespace}' is {taken}",
        )
    owners: dict[str, str] = {}
    for project in projects:
        namespace = cluster.project_namespace(project.name)
        if namespace == cluster.system_namespace:
            taken = "the system namespace (spec.systemNamespace), where the scheduler runs"
        elif reserved := _reserved(namespace):
            taken = reserved
        elif namespace in owners:
            taken = f"Project/{owners[namespace]}'s namespace too"
        else:
            owners[namespace] = project.name
            continue
        yield error_at(
            project.doc,
            ("metadata", "name"),
            codes.RESERVED_NAMESPACE,
            f"the project's namespace '{namespace}' (namespacePrefix + name) is {taken}",
        )


def _reserved(namespace: str) -> str | None:
    """Why no namespace of ours may be `namespace` (None: it may)."""
    if namespace in KUBERNETES_NAMESPACES or namespace.startswith("kube-"):
        return "reserved by Kubernetes (default and kube-*)"
    if namespace == CRD_FOLDER:
        return f"the folder `render -o` writes the CRDs to ({CRD_FOLDER}/)"
    if scheduler := SCHEDULER_NAMESPACES.get(namespace):
        return f"where {scheduler} runs (render --target)"
    return None


def check_node_selectors(repo: Repo) -> Iterator[Diagnostic]:
    """A node group's nodes are the nodes with every label of its selector, and its workloads'
    pods require those labels: an empty selector would take every node, and Kubernetes
    rejects a pod whose affinity names an invalid label key or value. The topology label
    is a key the scheduler reads off the nodes, so it must be one a node can carry."""
    for group in repo.node_groups:
        if not group.node_selector:
            yield key_error_at(
                group.doc,
                _selector_path(group.doc.data),
                codes.NO_NODE_SELECTOR,
                "spec.nodeSelector.matchLabels names no label: a node group's nodes are the "
                "nodes carrying every label of it, and its workloads' pods require them, so "
                "an empty selector would take every node (system nodes too); add labels only "
                f"the group's nodes carry, such as {_example_label(group.gpu_model)}",
            )
        yield from _label_problems(
            group.doc, ("spec", "nodeSelector", "matchLabels"), group.node_selector
        )
        if group.topology_label is not None:
            path = ("spec", "topology", "label")
            yield from _invalid_key(group.doc, path, group.topology_label, locate=error_at)


def check_labels(repo: Repo) -> Iterator[Diagnostic]:
    """A document's own labels (and annotation keys) are copied onto the objects rendered
    from it, where Kubernetes checks them as it checks any object's."""
    for doc in repo.documents():
        metadata = doc.data["metadata"]
        yield from _label_problems(doc, ("metadata", "labels"), metadata.get("labels", {}))
        for key in metadata.get("annotations", {}):
            yield from _invalid_key(doc, ("metadata", "annotations", key), key, "annotation")


def _label_problems(doc: Document, path: Path_, labels: dict[str, str]) -> Iterator[Diagnostic]:
    for key, value in labels.items():
        yield from _invalid_key(doc, (*path, key), key)
        if not valid_label_value(value):
            # labels are copied as written: one may expect `{{ project.name }}` rendered
            why = (
                "; labels are not rendered: Jinja2 is for pod fields" if is_templated(value) else ""
            )
            yield error_at(
                doc,
                (*path, key),
                codes.BAD_LABEL_VALUE,
                f"invalid label value '{value}' ({LABEL_NAME_RULE}{why})",
            )


def _invalid_key(
    doc: Document, path: Path_, key: str, what: str = "label", locate: Locate = key_error_at
) -> Iterator[Diagnostic]:
    """`key` as Kubernetes checks a label key; an annotation's in lower case (Kubernetes
    takes `Example.com/x`), reported at the key unless `locate` says otherwise."""
    if problem := label_key_problem(str(key).lower() if what == "annotation" else str(key)):
        yield locate(doc, path, codes.BAD_LABEL_KEY, f"invalid {what} key '{key}' ({problem})")


def _selector_path(data: dict[str, Any]) -> Path_:
    """The innermost of spec / nodeSelector / matchLabels the document writes."""
    path: Path_ = ("spec",)
    value = data.get("spec")
    for key in ("nodeSelector", "matchLabels"):
        if not isinstance(value, dict) or key not in value:
            break
        path, value = (*path, key), value[key]
    return path


def _example_label(model: str | None) -> str:
    """A label the group's nodes likely carry: GPU Feature Discovery's product label."""
    if model:
        return f"{GFD_PRODUCT}: {gfd_product(model)} (GPU Feature Discovery's)"
    return "a cloud node pool's label, or one an admin puts on them"
