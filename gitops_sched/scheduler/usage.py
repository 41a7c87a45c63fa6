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
from gitops_sched.engine.history import record, with_buckets
from gitops_sched.engine.types import Decisions, Fairness, Snapshot, UsageHistory

log = logging.getLogger(__name__)


class UsageKeeper:
    """The history between cycles: read from the Projects once, then added to. A
    scheduler that stops leading starts a new keeper: it reads the history again."""

    def __init__(self) -> None:
        self.history: UsageHistory | None = None  # None: not read from the cluster yet
        self._held: tuple[float, dict[str, float]] | None = None  # (since, project -> GPUs)

    def history_at(self, client: ClusterClient, fairness: Fairness, now: float) -> UsageHistory:
        """The history up to `now`: what the Projects say (first time), plus what each
        project held since the last cycle. Where the Projects cannot be read, this cycle
        goes without past usage and the next tries again."""
        if self.history is None:
            self.history = read_history(client)
            if self.history is None:
                return UsageHistory()
        if self._held is not None:
            since, held = self._held
            self.history = record(self.history, fairness, since, now, held)
        return self.history

    def status(self, snapshot: Snapshot) -> dict[str, dict[str, Any]]:
        """The `status.usage` of each project to write (usage_status); none before the
        history has been read, so a failed read never overwrites what the Projects keep."""
        return usage_status(snapshot) if self.history is not None else {}

    def held(self, now: float, decisions: Decisions) -> None:
        """What each project holds after this cycle, from `now` until the next."""
        self._held = (now, {status.name: status.allocated for status in decisions.projects})


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
        buckets = []
        for entry in usage.get("buckets") or ():
            start, used = entry.get("start"), entry.get("gpuSeconds")
            if isinstance(start, int | float) and isinstance(used, int | float):
                buckets.append((float(start), float(used)))
        history = with_buckets(history, obj["metadata"]["name"], tuple(buckets))
    return history


def usage_status(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    """Each project's `status.usage`: its closed buckets (start, GPU-seconds); none where
    fairness over time is not configured."""
    fairness = snapshot.policy.fairness
    if fairness is None:
        return {}
    closed = snapshot.now - fairness.bucket_s
    by_project = dict(snapshot.history.projects)
    return {
        project.name: {
            "buckets": [
                {"start": start, "gpuSeconds": round(used, 3)}
                for start, used in by_project.get(project.name, ())
                if start <= closed
            ]
        }
        for project in snapshot.policy.projects
    }
