"""The scheduling engine: a pure function from a cluster snapshot to decisions.

`cycle.schedule` runs one cycle; `apply.apply_decisions` folds decisions into the next
snapshot; `apply.settle` repeats both until a cycle changes nothing (what `simulate` shows).
Importing the package loads none of them (`engine.types` alone stays light): the three
names below load their module when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitops_sched.lazy import exports

if TYPE_CHECKING:
    from gitops_sched.engine.apply import apply_decisions, settle
    from gitops_sched.engine.cycle import schedule

_MODULES = {"apply_decisions": "apply", "schedule": "cycle", "settle": "apply"}

__all__ = ["apply_decisions", "schedule", "settle"]

__getattr__ = exports(__name__, _MODULES)
