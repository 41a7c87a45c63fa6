"""How the suite's tests are spread over the xdist workers (`-n 3`): only speed, never what
a test sees.

- A module whose tests share a module-scoped cluster fixture (an installed example, an
  audited scenario, Kueue started) runs whole on one worker; spread like the others, each
  worker that got one of its tests paid the fixture again (20-40 s of CPU each time).
  `--dist loadgroup` would say so with marks, but it groups nothing under pytest 9.2
  (pytest-xdist#1386), so the grouping is made here, from the module's path.
- The modules holding the suite's longest tests go out first, so the run does not end with
  the other workers idle while one finishes a minute-long test it started last.
Everything else goes out one test at a time, in the order collected, as `--dist load` does.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

# modules with a module-scoped fixture on the real control plane
WHOLE = frozenset(
    f"tests/{name}.py"
    for name in (
        "test_agent_cluster",
        "test_kueue_admission",
        "test_least_privilege",
        "test_scheduler_e2e",
        "test_tenancy",
    )
)
# the modules of the longest tests (`pytest --durations=40`), longest first
LONGEST = tuple(
    f"tests/{name}.py"
    for name in (
        "test_least_privilege",
        "test_chaos",
        "test_kueue_admission",
        "test_scheduler_e2e",
        "test_action",
        "test_reconciler_reliability",
        "test_agent_cluster",
        "test_node_pools_e2e",
        "test_dry_runs",
        "test_fuzz",
        "test_settled_state",
        "test_engine_properties",
        "test_scheduler_actuate",
        "test_reconciler",
        "test_mig_e2e",
        "test_agent_cli",
    )
)


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class ModulesWhole(LoadScopeScheduling):
    """`--dist load`, but the tests of a `WHOLE` module are one unit of work."""

    def _split_scope(self, nodeid: str) -> str:
        module = module_of(nodeid)
        return module if module in WHOLE else nodeid


def make_scheduling(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    """Our scheduling for the default `--dist load`; xdist's own for any other asked."""
    if config.getoption("dist", None) != "load":
        return None
    config.option.loadscopereorder = False  # the units go out in collection order (below)
    return ModulesWhole(config, log)


def longest_first(items: list[pytest.Item]) -> None:
    """Put the `LONGEST` modules' tests first, in that order; the rest keep theirs."""
    rank = {module: i for i, module in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(module_of(item.nodeid), len(rank)))
