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

from gitops_sched.config import codes
from gitops_sched.config.checks.common import error_at
from gitops_sched.config.diagnostics import Diagnostic
from gitops_sched.config.document import Document, Path_
from gitops_sched.config.model import Project, Repo, Workload
from gitops_sched.config.unread import NOTHING_UNREAD, Unread


def names_by_kind(documents: list[Document]) -> dict[str, set[str]]:
    names: dict[str, set[str]] = defaultdict(set)
    for doc in documents:
        names[doc.kind].add(doc.name)
    return names


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
    repo: Repo, names: dict[str, set[str]], unread: Unread = NOTHING_UNREAD
) -> Iterator[Diagnostic]:
    """Every name a project or workload refers to must be defined somewhere in the repo, or
    may be in a file that did not load (`unread`: that file's error is the one to fix)."""
    owners = [(p.doc, project_references(p)) for p in repo.projects] + [
        (w.doc, workload_references(w)) for w in repo.workloads
    ]
    for doc, references in owners:
        for path, kind, name in references:
            if name not in names[kind] and not unread.may_define(name):
                defined = sorted(names[kind])
                known = f"defined: {', '.join(defined)}" if defined else f"no {kind} is defined"
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
