"""Policy checks: scheduler settings of the Cluster that work against each other.

A stale-gang grace period shorter than the cycle period leaves a gang in flight (some
pods running, fewer than `minAvailable`) a single cycle to start its missing pods before
it is evicted whole: almost certainly not what was meant, so it is a warning. A grace of
0 says "no gangs in flight" on purpose and is not reported.
"""

from __future__ import annotations

from collections.abc import Iterator

from gitops_sched.config import codes
from gitops_sched.config.checks.common import diagnostic_at
from gitops_sched.config.diagnostics import Diagnostic, Severity
from gitops_sched.config.model import Repo


def check_stale_gang_grace(repo: Repo) -> Iterator[Diagnostic]:
    cluster = repo.cluster
    if cluster is None:
        return
    grace, period = cluster.policy.stale_gang_grace_s, cluster.policy.cycle_period_s
    if 0 < grace < period:
        yield diagnostic_at(
            cluster.doc,
            ("spec", "policy", "staleGangGrace"),
            codes.STALE_GANG_GRACE,
            f"staleGangGrace ({grace}s) is shorter than cyclePeriod ({period}s): a gang in "
            "flight gets one cycle to start its missing pods before it is evicted whole "
            "(0s evicts at once without this warning)",
            Severity.WARNING,
        )
