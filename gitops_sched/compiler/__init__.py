"""The compiler: a checked config repo to the Kubernetes objects that run it.

Every module is a pure function of the model to plain dicts; `render.render_repo` puts them
in apply order, so equal repos give byte-identical output. Importing the package loads none
of them: `render_repo`, `apply_order` and `unchanged_workloads` load their module when first
used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitops_sched.lazy import exports

if TYPE_CHECKING:
    from gitops_sched.compiler.render import apply_order, render_repo
    from gitops_sched.compiler.unchanged import unchanged_workloads

_MODULES = {"apply_order": "render", "render_repo": "render", "unchanged_workloads": "unchanged"}

__all__ = ["apply_order", "render_repo", "unchanged_workloads"]

__getattr__ = exports(__name__, _MODULES)
