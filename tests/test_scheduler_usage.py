"""Past usage in the cluster (fairness over time, scheduler.usage) when the Projects
cannot be read: the cycle goes without it, nothing is overwritten, the next cycle reads."""

from __future__ import annotations

from dataclasses import replace

from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.engine.types import Fairness, Snapshot, UsageHistory
from gitops_sched.scheduler.usage import UsageKeeper
from tests.engine_builders import policy


class _Unreadable:
    """A client whose Projects cannot be listed (an API server down for a moment)."""

    def __init__(self) -> None:
        self.lists = 0

    def list(self, *args: object, **kw: object) -> list:
        self.lists += 1
        raise ApiFailure(503, "ServiceUnavailable", "try again")


def test_past_usage_that_cannot_be_read_is_read_next_cycle_and_never_overwritten() -> None:
    """A failed read leaves the cycle without past usage and the Projects' status as it
    is (nothing to write); the next cycle reads again."""
    fairness = Fairness(window_s=1200)
    client = _Unreadable()
    keeper = UsageKeeper()
    assert keeper.history_at(client, fairness, 100.0) == UsageHistory()  # type: ignore[arg-type]
    snapshot = Snapshot(replace(policy(), fairness=fairness), (), (), now=100.0)
    assert keeper.status(snapshot) == {}
    keeper.history_at(client, fairness, 110.0)  # type: ignore[arg-type]
    assert client.lists == 2
