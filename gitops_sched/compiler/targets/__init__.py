"""Compiling the repo for another scheduler: `render --target kai|kueue`.

Our own target (`gitops-sched`, the default) is `compiler.render_repo`. Another target gives
the objects its scheduler reads and the warnings for what it cannot express
(`differences`), which `render` prints and `plan` turns into its impact notes.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from gitops_sched.compiler.render import render_repo
from gitops_sched.compiler.targets.common import Rendered
from gitops_sched.compiler.targets.kai import render_kai
from gitops_sched.compiler.targets.kueue import render_kueue
from gitops_sched.config.model import Repo

OURS = "gitops-sched"
TARGETS = (OURS, "kai", "kueue")
SCHEDULERS = {OURS: "gitops-sched", "kai": "KAI Scheduler", "kueue": "Kueue"}

__all__ = ["OURS", "SCHEDULERS", "TARGETS", "Rendered", "render_target"]


def render_target(
    repo: Repo,
    target: str = OURS,
    skip: Collection[tuple[str, str]] = (),
    written: dict[str, Any] | None = None,
) -> Rendered:
    """Every object of the repo for `target`, in apply order, and what it cannot express.
    `skip` and `written` as `render_repo` takes them (for a plan's diff)."""
    if target == "kai":
        return render_kai(repo, skip)
    if target == "kueue":
        return render_kueue(repo, skip)
    if target != OURS:
        raise ValueError(f"unknown target {target!r}: one of {', '.join(TARGETS)}")
    return Rendered(render_repo(repo, skip, written), [])
