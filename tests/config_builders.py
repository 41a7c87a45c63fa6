"""Config documents for tests, as the loader would read them from YAML."""

from __future__ import annotations

from typing import Any

from gitops_sched.config.loader import API_VERSION as API


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


__all__ = ["API", "doc"]
