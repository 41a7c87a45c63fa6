"""Reference checks: every name a project or workload refers to must lead somewhere.

Projects name their department and node groups, workloads their project, template and
node group. A name no document defines is a dangling reference; the raw documents (not
only the schema-valid ones) tell which names exist, so an object that failed its schema
is not reported a second time here. A workload pinned to a node group its project may
not use for its type is reported too, since it could never be placed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from gitops_sched.config import codes
from gitops_sched.config.checks.common import error_at
from gitops_sched.config.diagnostics import Diagnostic
from gitops_sched.config.document import KINDS, SIMULATION, Document, Path_
from gitops_sched.config.model import Project, Repo, Workload
from gitops_sched.config.unread import NOTHING_UNREAD, Unread


@dataclass(frozen=True)
class Defined:
    """The names the documents define per kind, and what broken documents may define: a
    document of no known kind (`kind: Projet`, or none) any name it carries, a document
    with no name any name of its kind. A reference to those is no error of its own: the
    broken document's error is the one to fix."""

    names: dict[str, set[str]]
    stray: set[str]  # names of documents of no known kind
    nameless: set[str]  # kinds with a document that has no name

    @classmethod
    def of(cls, documents: list[Document]) -> Defined:
        names: dict[str, set[str]] = defaultdict(set)
        stray, nameless = set(), set()
        for doc in documents:
            if doc.kind not in KINDS and doc.kind != SIMULATION:
                if not doc.foreign:  # a Deployment left in the folder defines none of ours
                    stray.add(doc.name)
            elif not doc.name:
                nameless.add(doc.kind)
            else:
                names[doc.kind].add(doc.name)
        return cls(names, stray, nameless)

    def may_define(self, kind: str, name: str) -> bool:
        return name in self.names[kind] or name in self.stray or kind in self.nameless


Reference = tuple[Path_, str, str]  # where, the kind referred to, the name


def project_references(project: Project) -> Iterator[Reference]:
    yield ("spec", "department"), "Department", project.department
    for i, group in enumerate(project.node_groups):
        yield ("spec", "nodeGroups", "allowed", i), "NodeGroup", group
    for wtype, groups in project.node_groups_by_type.items():
        for i, group in enumerate(groups):
            yield ("spec", "nodeGroups", "byType", wtype, i), "NodeGroup", group
    for group in project.node_group_quotas:
        yield ("spec", "nodeGroupQuotas", group), "NodeGroup", group


def workload_references(workload: Workload) -> Iterator[Reference]:
    yield ("spec", "project"), "Project", workload.project
    if workload.template:
        yield ("spec", "template"), "Template", workload.template
    if workload.node_group:
        yield ("spec", "nodeGroup"), "NodeGroup", workload.node_group


def check_references(
    repo: Repo, defined: Defined, unread: Unread = NOTHING_UNREAD
) -> Iterator[Diagnostic]:
    """Every name a project or workload refers to must be defined somewhere in the repo, or
    may be in a broken document (see Defined) or a file that did not load (`unread`): that
    document's or file's error is the one to fix."""
    owners = [(p.doc, project_references(p)) for p in repo.projects] + [
        (w.doc, workload_references(w)) for w in repo.workloads
    ]
    for doc, references in owners:
        for path, kind, name in references:
            if not defined.may_define(kind, name) and not unread.may_define(name):
                names = sorted(defined.names[kind])
                known = f"defined: {', '.join(names)}" if names else f"no {kind} is defined"
                yield error_at(
                    doc, path, codes.UNKNOWN_REFERENCE, f"unknown {kind} '{name}' ({known})"
                )


def check_workload_node_group_allowed(repo: Repo) -> Iterator[Diagnostic]:
    """A workload pinned to a node group its project may not use could never be placed."""
    for workload in repo.workloads:
        project = repo.project(workload.project)
        if not workload.node_group or project is None:
            continue
        allowed = project.allowed_node_groups(workload.type)
        if allowed and workload.node_group not in allowed:
            yield error_at(
                workload.doc,
                ("spec", "nodeGroup"),
                codes.NODE_GROUP_NOT_ALLOWED,
                f"node group '{workload.node_group}' is not allowed for {workload.type} "
                f"workloads of project '{project.name}' (allowed: {', '.join(allowed)})",
            )
