"""The scheduling engine: a pure function from a cluster snapshot to decisions.

`schedule` runs one cycle; `apply_decisions` folds decisions into the next snapshot;
`settle` repeats both until a cycle changes nothing (what `simulate` shows).
"""

from gitops_sched.engine.apply import apply_decisions, settle
from gitops_sched.engine.cycle import schedule

__all__ = ["apply_decisions", "schedule", "settle"]
