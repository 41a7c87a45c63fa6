"""Names and labels every rendered object shares.

All objects carry `app.kubernetes.io/managed-by: gitops-sched`, which is how the reconciler
finds what it owns. Labels and annotations a user puts on a config document are copied onto
the objects rendered from it; ours win on a clash, so a user label cannot move a pod to
another project.
"""

from __future__ import annotations

from typing import Any

from gitops_sched.config.document import Document
from gitops_sched.contract.labels import MANAGED_BY


def object_meta(
    name: str,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    source: Document | None = None,
) -> dict[str, Any]:
    """`metadata` of an object we manage: the source document's labels and annotations, ours."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta | template_meta({**MANAGED_BY, **(labels or {})}, {}, source)


def template_meta(
    labels: dict[str, str], annotations: dict[str, str], source: Document | None
) -> dict[str, Any]:
    """Sorted labels and annotations, the source document's then ours (which win).

    Alone, the metadata of a pod template: its pods are named, and owned, by their controller,
    so they carry no managed-by label the reconciler would take for its own objects.
    """
    user = source.data.get("metadata", {}) if source is not None else {}
    meta = {"labels": _merged(user.get("labels"), labels)}
    merged_annotations = _merged(user.get("annotations"), annotations)
    if merged_annotations:
        meta["annotations"] = merged_annotations
    return meta


def _merged(user: dict[str, str] | None, ours: dict[str, str]) -> dict[str, str]:
    return dict(sorted({**(user or {}), **ours}.items()))
