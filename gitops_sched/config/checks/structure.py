"""Structure checks: the shape of the repo as a whole and of each object on its own.

A repo has exactly one Cluster (everything cluster-wide comes from it), no two objects of
a kind share a name (names are the keys references and rendered objects use), at most one
Template is the default (it applies to every workload), and no workload's gang
(`minAvailable`) is larger than its replicas. Each would otherwise make the compiled
cluster ambiguous or a workload impossible to start.

A second Cluster or a second definition of a name is reported on the later one in path
order, naming the first (in `plan`, on the one the change introduced: see `baseline`);
the first one is the one the other checks see.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

from gitops_sched.config import codes
from gitops_sched.config.baseline import NO_BASELINE, Baseline
from gitops_sched.config.checks.common import error_at
from gitops_sched.config.diagnostics import Diagnostic, Location
from gitops_sched.config.document import KINDS, SIMULATION, Document
from gitops_sched.config.model import Repo
from gitops_sched.config.unread import NOTHING_UNREAD, Unread


def check_cluster_count(
    documents: list[Document], baseline: Baseline = NO_BASELINE, unread: Unread = NOTHING_UNREAD
) -> Iterator[Diagnostic]:
    """Everything cluster-wide (namespaces, scheduler policy) comes from exactly one Cluster
    (it may be in a file that did not load: then that file's error is the one to fix)."""
    clusters = [doc for doc in documents if doc.kind == "Cluster"]
    if not clusters:
        if not unread.may_define("Cluster"):
            # the repo's first file, or the repo itself (".") when it holds no document at all
            where = Location(documents[0].file) if documents else Location(".")
            message = "no Cluster document; a repo declares exactly one"
            yield Diagnostic(where, message, code=codes.NO_CLUSTER)
        return
    first, *later = baseline.order(clusters)
    for doc in later:
        message = f"more than one Cluster (first defined at {first.location()})"
        yield error_at(doc, ("kind",), codes.TWO_CLUSTERS, message)


Duplicate = tuple[Document, Document]  # a later definition of a name, and the first


def duplicate_definitions(
    documents: Iterable[Document], baseline: Baseline = NO_BASELINE
) -> list[Duplicate]:
    """Every definition of a name after its first: established definitions come before
    those the change introduced, each in path order (file path, then place in the file)."""
    definitions: dict[tuple[str, str], list[Document]] = defaultdict(list)
    for doc in documents:
        if doc.kind in (*KINDS, SIMULATION) and doc.kind != "Cluster" and doc.name:
            definitions[(doc.kind, doc.name)].append(doc)
    duplicates = []
    for docs in definitions.values():
        first, *later = baseline.order(docs)
        duplicates += [(doc, first) for doc in later]
    return duplicates


def check_duplicate_names(duplicates: list[Duplicate]) -> Iterator[Diagnostic]:
    """Names are the keys references and rendered objects use; a second one would shadow."""
    for doc, first in duplicates:
        where = first.location(("metadata", "name"))
        yield error_at(
            doc,
            ("metadata", "name"),
            codes.DUPLICATE_NAME,
            f"duplicate {doc.kind} '{doc.name}' (first defined at {where})",
        )


def check_default_templates(repo: Repo) -> Iterator[Diagnostic]:
    """The default template applies to every workload, so there can be only one."""
    defaults = [t for t in repo.templates if t.default]
    for template in defaults[1:]:
        first = defaults[0]
        yield error_at(
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
            yield error_at(
                workload.doc,
                ("spec", "minAvailable"),
                codes.GANG_TOO_LARGE,
                f"minAvailable {workload.min_available} is more than replicas "
                f"({workload.replicas}); the gang could never start",
            )
