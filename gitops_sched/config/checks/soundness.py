"""Soundness: what the checks that follow references or add up over the repo may trust.

One broken document must be reported once, not again by every check that reads through
it. A document that fails its schema is missing from the model, and a later duplicate is
left out of it; an object that refers to a name no document of the model defines has its
reference reported once, by the reference checks. So the checks come in two kinds (see
`gitops_sched.config.checks`): those of an object's own fields run over every object of
the model; the derived ones (quotas, capacity, fit, MIG, volumes, rendering) run over its
sound part, without the workloads that reach a missing object, and each only while the
kinds it adds up are complete (a NodeGroup that fails its schema is missing from the
cluster's capacity: "departments over capacity" would be its follow-on).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace

from gitops_sched.config.checks.references import project_references, workload_references
from gitops_sched.config.document import KINDS, Document
from gitops_sched.config.model import Project, Repo, Workload
from gitops_sched.config.unread import NOTHING_UNREAD, Unread


def _is_default_template(doc: Document) -> bool:
    spec = doc.data.get("spec")
    return doc.kind == "Template" and isinstance(spec, dict) and spec.get("default") is True


@dataclass(frozen=True)
class Soundness:
    """Which names the model defines, and which kinds miss a document of the repo."""

    defined: dict[str, set[str]]
    # kinds with a document the model lacks ("Cluster": none), or maybe in a broken file
    incomplete: frozenset[str]
    broken_default: bool  # a default Template is missing: every workload's fields are unsure

    @staticmethod
    def of(repo: Repo, documents: Iterable[Document], unread: Unread = NOTHING_UNREAD) -> Soundness:
        """`unread`: a kind a file that did not load may hold is incomplete too."""
        modelled = {id(doc) for doc in repo.documents()}
        missing = [d for d in documents if d.kind in KINDS and id(d) not in modelled]
        defined: dict[str, set[str]] = defaultdict(set)
        for doc in repo.documents():
            defined[doc.kind].add(doc.name)
        incomplete = (
            {doc.kind for doc in missing}
            | ({"Cluster"} if repo.cluster is None else set())
            | {kind for kind in KINDS if unread.may_define(kind)}
        )
        return Soundness(
            defined, frozenset(incomplete), any(_is_default_template(d) for d in missing)
        )

    def complete(self, kinds: Iterable[str]) -> bool:
        return not self.incomplete.intersection(kinds)

    def _project_sound(self, project: Project) -> bool:
        return all(name in self.defined[kind] for _, kind, name in project_references(project))

    def _workload_sound(self, repo: Repo, workload: Workload) -> bool:
        if self.broken_default or not all(
            name in self.defined[kind] for _, kind, name in workload_references(workload)
        ):
            return False
        project = repo.project(workload.project)
        if project is None or not self._project_sound(project):
            return False
        # a workload that may use every node group misses the broken ones
        chosen = workload.node_group or project.allowed_node_groups(workload.type)
        return bool(chosen) or self.complete(("NodeGroup",))

    def sound_part(self, repo: Repo) -> Repo:
        """The model without the workloads that reach a missing or unknown object."""
        workloads = [w for w in repo.workloads if self._workload_sound(repo, w)]
        return repo if len(workloads) == len(repo.workloads) else replace(repo, workloads=workloads)


def without(repo: Repo, documents: Iterable[Document]) -> Repo:
    """The model without the objects of `documents` (later duplicates: the first one wins)."""
    left_out = {id(doc) for doc in documents}
    if not left_out:
        return repo

    def kept(objects: list) -> list:
        return [o for o in objects if id(o.doc) not in left_out]

    return replace(
        repo,
        node_groups=kept(repo.node_groups),
        departments=kept(repo.departments),
        projects=kept(repo.projects),
        templates=kept(repo.templates),
        workloads=kept(repo.workloads),
    )
