"""How the suite's tests are spread over the xdist workers (`-n 4`): only speed, never what
a test sees.

- A module whose tests share a module-scoped cluster fixture (an installed example, an
  audited scenario, Kueue started) runs whole on one worker; spread like the others, each
  worker that got one of its tests paid the fixture again (20-40 s of CPU each time).
  `--dist loadgroup` would say so with marks, but it groups nothing under pytest 9.2
  (pytest-xdist#1386), so the grouping is made here, from the module's path.
- The modules holding the suite's longest tests go out first, so the run does not end with
  the other workers idle while one finishes a minute-long test it started last.
- With four workers or more, one of them never runs an `IN_CLUSTER` module: the tests on a
  control plane spend half their time waiting for it (kwok, the controllers, a Lease), and
  three workers running only those kept two cores 75% busy for the run's first three
  minutes; the fourth runs the CPU-bound tests meanwhile, without a control plane of its
  own to start and feed. A test that uses the control plane from a module not listed
  fails at collection (`check_in_cluster`).
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


# modules with tests on a control plane (the session's, through the `control_plane`
# fixture, or one of their own: Kueue's)
IN_CLUSTER = frozenset(
    f"tests/{name}.py"
    for name in (
        "test_agent_cli",
        "test_agent_cluster",
        "test_chaos",
        "test_cluster_resilience",
        "test_dry_runs",
        "test_kubernetes_rules_apiserver",
        "test_kueue_admission",
        "test_least_privilege",
        "test_mig_e2e",
        "test_node_pools_e2e",
        "test_reconciler",
        "test_reconciler_reliability",
        "test_scheduler_actuate",
        "test_scheduler_e2e",
        "test_scheduler_faults",
        "test_scheduler_loop",
        "test_target_crds",
        "test_tenancy",
    )
)
# the fewest workers for one to keep off the control plane (with fewer, all are needed
# for the tests on it)
SPARED_FROM = 4


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class ModulesWhole(LoadScopeScheduling):
    """`--dist load`, but the tests of a `WHOLE` module are one unit of work, and with
    `SPARED_FROM` workers or more the last to come up gets no `IN_CLUSTER` unit (it waits
    for the end when only those are left)."""

    spared: Any = None  # the worker kept off the control plane

    def _split_scope(self, nodeid: str) -> str:
        module = module_of(nodeid)
        return module if module in WHOLE else nodeid

    def schedule(self) -> None:
        if self.collection is None:  # the first distribution: every worker is up
            nodes = self.nodes
            self.spared = nodes[-1] if len(nodes) >= SPARED_FROM else None
        super().schedule()

    def _assign_work_unit(self, node: Any) -> None:
        if node is self.spared:
            scope = next((s for s in self.workqueue if module_of(s) not in IN_CLUSTER), None)
            if scope is None:
                return
            self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)


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


def check_in_cluster(items: list[pytest.Item]) -> None:
    """Every module with a test on the session's control plane is in `IN_CLUSTER` (a test
    that asks for it by `request.getfixturevalue` names `control_plane` among its
    arguments, so its fixtures say so)."""
    unlisted = sorted(
        {module_of(i.nodeid) for i in items if "control_plane" in getattr(i, "fixturenames", ())}
        - IN_CLUSTER
    )
    if unlisted:
        raise pytest.UsageError(
            f"{', '.join(unlisted)}: tests on the control plane; add to IN_CLUSTER in "
            "tests/scheduling.py"
        )
