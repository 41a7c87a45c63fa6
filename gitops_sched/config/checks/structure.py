"""Structure checks: the shape of the repo as a whole and of each object on its own.

A repo has exactly one Cluster (everything cluster-wide comes from it), no two objects of
a kind share a name (names are the keys references and rendered objects use), at most one
Template is the default (it applies to every workload), and no workload's gang
(`minAvailable`) is larger than its replicas. Each would otherwise make the compiled
cluster ambiguous or a workload impossible to start.
"""

from __future__ import annotations

from collections.abc import Iterator

from gitops_sched.config import codes
from gitops_sched.config.checks.common import _error
from gitops_sched.config.diagnostics import Diagnostic, Location
from gitops_sched.config.loader import KINDS, SIMULATION, Document
from gitops_sched.config.model import Repo


def check_cluster_count(documents: list[Document]) -> Iterator[Diagnostic]:
    """Everything cluster-wide (namespaces, scheduler policy) comes from exactly one Cluster."""
    clusters = [doc for doc in documents if doc.kind == "Cluster"]
    if not clusters:
        # the repo's first file, or the repo itself (".") when it holds no document at all
        where = Location(documents[0].file) if documents else Location(".")
        message = "no Cluster document; a repo declares exactly one"
        yield Diagnostic(where, message, code=codes.NO_CLUSTER)
    for doc in clusters[1:]:
        first = clusters[0].location()
        yield _error(
            doc, ("kind",), codes.TWO_CLUSTERS, f"more than one Cluster (first defined at {first})"
        )


def check_duplicate_names(documents: list[Document]) -> Iterator[Diagnostic]:
    """Names are the keys references and rendered objects use; a second one would shadow."""
    first: dict[tuple[str, str], Document] = {}
    for doc in documents:
        if doc.kind not in (*KINDS, SIMULATION) or doc.kind == "Cluster" or not doc.name:
            continue
        key = (doc.kind, doc.name)
        if key in first:
            yield _error(
                doc,
                ("metadata", "name"),
                codes.DUPLICATE_NAME,
                f"duplicate {doc.kind} '{doc.name}' (also defined at {first[key].location()})",
            )
        else:
            first[key] = doc


def check_default_templates(repo: Repo) -> Iterator[Diagnostic]:
    """The default template applies to every workload, so there can be only one."""
    defaults = [t for t in repo.templates if t.default]
    for template in defaults[1:]:
        first = defaults[0]
        yield _error(
            template.doc,
            ("spec", "default"),
            codes.TWO_DEFAULT_TEMPLATES,
            f"more than one default Template (the first is '{first.name}' "
            f"at {first.doc.location()})",
        )


def check_gang_sizes(repo: Repo) -> Iterator[Diagnostic]:
    """A gang larger than the workload's pods could never start."""
    for workload in repo.workloads:
        if workload.min_available > workload.replicas:
            yield _error(
                workload.doc,
                ("spec", "minAvailable"),
                codes.GANG_TOO_LARGE,
                f"minAvailable {workload.min_available} is more than replicas "
                f"({workload.replicas}); the gang could never start",
            )
