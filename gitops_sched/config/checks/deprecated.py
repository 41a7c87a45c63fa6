"""Fields the schemas still accept so existing repos validate, but nothing reads any more:
a warning at each, saying what took its place, so a repo does not go on believing it works.
"""

from __future__ import annotations

from collections.abc import Iterator

from gitops_sched.config import codes
from gitops_sched.config.diagnostics import Diagnostic, Severity
from gitops_sched.config.model import Repo


def check_ignored_fields(repo: Repo) -> Iterator[Diagnostic]:
    """A NodeGroup's `nodeLabel`: nothing in a cluster puts that label on nodes, so the
    group's nodes are found, and its workloads' pods placed, by `nodeSelector` alone."""
    for group in repo.node_groups:
        spec = group.doc.data.get("spec")
        if isinstance(spec, dict) and "nodeLabel" in spec:
            yield Diagnostic(
                group.doc.key_location(("spec", "nodeLabel")),
                "spec.nodeLabel is deprecated and ignored: the scheduler finds the group's "
                "nodes, and its workloads' pods require them, by spec.nodeSelector alone "
                "(labels the nodes already carry); remove nodeLabel",
                group.doc.ref,
                Severity.WARNING,
                codes.IGNORED_FIELD,
            )
