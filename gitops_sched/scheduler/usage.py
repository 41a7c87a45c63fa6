"""Fairness over time in the cluster: each project's past usage, kept where it survives a
restart without a server of its own: in the Project's status (`status.usage.buckets`).

Between two cycles each project held what the earlier cycle left it (its allocated GPUs);
that is added to the window's buckets (engine.history.record), and the snapshot carries
the history into the engine. A bucket is written to the Project once it has closed, so a
status changes at most once a bucket (a twelfth of the window), not every cycle. A
restarted (or newly elected) scheduler reads the buckets back on its first cycle: what it
loses is the bucket that was still open and the time it was down.
"""

from __future__ import annotations

import logging
from typing import Any

from gitops_sched.cluster.client import ClusterClient
from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.contract.labels import API_VERSION
from gitops_sched.engine.history import record, with_buckets, with_group_buckets
from gitops_sched.engine.types import Decisions, Fairness, Snapshot, UsageHistory

log = logging.getLogger(__name__)


class UsageKeeper:
    """The history between cycles: read from the Projects once, then added to. A
    scheduler that stops leading starts a new keeper: it reads the history again."""

    def __init__(self) -> None:
        self.history: UsageHistory | None = None  # None: not read from the cluster yet
        # (since, project -> GPUs, (project, node group) -> GPUs for per-group quotas)
        self._held: tuple[float, dict[str, float], dict[tuple[str, str], float]] | None = None

    def history_at(self, client: ClusterClient, fairness: Fairness, now: float) -> UsageHistory:
        """The history up to `now`: what the Projects say (first time), plus what each
        project held since the last cycle. Where the Projects cannot be read, this cycle
        goes without past usage and the next tries again."""
        if self.history is None:
            self.history = read_history(client)
            if self.history is None:
                return UsageHistory()
        if self._held is not None:
            since, held, by_group = self._held
            self.history = record(self.history, fairness, since, now, held, by_group)
        return self.history

    def status(self, snapshot: Snapshot) -> dict[str, dict[str, Any]]:
        """The `status.usage` of each project to write (usage_status); none before the
        history has been read, so a failed read never overwrites what the Projects keep."""
        return usage_status(snapshot) if self.history is not None else {}

    def held(self, now: float, decisions: Decisions) -> None:
        """What each project (and per node group, each with per-group quotas) holds after
        this cycle, from `now` until the next."""
        by_group = {
            (status.name, pool.name): pool.allocated
            for status in decisions.projects
            for pool in status.pools
        }
        self._held = (
            now,
            {status.name: status.allocated for status in decisions.projects},
            by_group,
        )


def read_history(client: ClusterClient) -> UsageHistory | None:
    """The buckets every Project's status holds (a malformed entry left out); None where
    they cannot be read."""
    history = UsageHistory()
    try:
        projects = client.list(API_VERSION, "Project") or ()
    except ApiFailure as exc:
        log.warning("reading past usage from the Projects: %s", exc)
        return None
    for obj in projects:
        usage = (obj.get("status") or {}).get("usage") or {}
        name = obj["metadata"]["name"]
        history = with_buckets(history, name, _buckets(usage))
        groups = usage.get("nodeGroups")
        for group, entry in sorted(groups.items() if isinstance(groups, dict) else ()):
            if isinstance(entry, dict):
                history = with_group_buckets(history, (name, str(group)), _buckets(entry))
    return history


def _buckets(usage: dict[str, Any]) -> tuple[tuple[float, float], ...]:
    """The well-formed (start, GPU-seconds) of a `buckets` list in status."""
    buckets = []
    for entry in usage.get("buckets") or ():
        start, used = entry.get("start"), entry.get("gpuSeconds")
        if isinstance(start, int | float) and isinstance(used, int | float):
            buckets.append((float(start), float(used)))
    return tuple(buckets)


def usage_status(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    """Each project's `status.usage`: its closed buckets (start, GPU-seconds); none where
    fairness over time is not configured."""
    fairness = snapshot.policy.fairness
    if fairness is None:
        return {}
    closed = snapshot.now - fairness.bucket_s
    by_project = dict(snapshot.history.projects)
    by_group: dict[str, dict[str, Any]] = {}  # project -> group -> its usage there
    for (project, group), buckets in snapshot.history.node_groups:
        by_group.setdefault(project, {})[group] = {"buckets": _closed(buckets, closed)}
    return {
        project.name: {
            "buckets": _closed(by_project.get(project.name, ()), closed),
            **({"nodeGroups": by_group[project.name]} if project.name in by_group else {}),
        }
        for project in snapshot.policy.projects
    }


def _closed(buckets: tuple[tuple[float, float], ...], closed: float) -> list[dict[str, float]]:
    """The buckets that started by `closed` (closed ones), as status keeps them."""
    return [
        {"start": start, "gpuSeconds": round(used, 3)} for start, used in buckets if start <= closed
    ]
