"""Config documents for tests, as the loader would read them from YAML."""

from __future__ import annotations

from typing import Any

from gitops_sched.config.diagnostics import Diagnostic, Severity
from gitops_sched.contract.labels import API_VERSION as API


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def node_group(name: str, **spec: Any) -> dict[str, Any]:
    """A NodeGroup; without a `nodeSelector` in `spec`, one an admin's label would give it
    (`pool: <name>`), since a group finds its nodes by its selector alone."""
    spec.setdefault("nodeSelector", {"matchLabels": {"pool": name}})
    return doc("NodeGroup", name, **spec)


def diagnostic_line(diagnostic: Diagnostic) -> str:
    """`FILE:LINE:COL: [Kind/name: ][warning: ]message`: where and what, for the loader's and
    the schema's tests (tests/test_diagnostic_codes.py checks the codes)."""
    obj = f"{diagnostic.obj}: " if diagnostic.obj else ""
    severity = "warning: " if diagnostic.severity is Severity.WARNING else ""
    return f"{diagnostic.location}: {obj}{severity}{diagnostic.message}"


__all__ = ["API", "diagnostic_line", "doc", "node_group"]
