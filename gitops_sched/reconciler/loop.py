"""The reconciler: fetch, compile, sync, report; on an interval, as the Lease's holder.

A commit that does not compile applies nothing: the cluster keeps the last good state and
the errors go to the Cluster status and an Event. A compiled commit is kept, so the syncs
between two commits (which repair drift) do not compile again.

A sync cut off by anything (an API failure the client's retries did not absorb, an answer
that does not decode, a bug) is logged and the loop goes on: the next sync comes after a
backoff that doubles with each failure in a row, up to the interval. A sync cut off at any
request is finished by the next one (see `sync`). `--once` tries a cut-off sync again, up
to `ONCE_ATTEMPTS` times in all.
"""

from __future__ import annotations

import logging
import random
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitops_sched.cluster.client import ClusterClient
from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.cluster.leader import LeaderElector, NotLeader, default_identity
from gitops_sched.cluster.serving import Health
from gitops_sched.compiler.render import render_repo
from gitops_sched.config.diagnostics import Severity
from gitops_sched.contract.labels import API_VERSION
from gitops_sched.reconciler.metrics import Metrics
from gitops_sched.reconciler.report import Reporter, cluster_ref
from gitops_sched.reconciler.source import Checkout, SourceError, open_source
from gitops_sched.reconciler.sync import SourceConflict, Syncer, SyncResult
from gitops_sched.validate import check_repo

log = logging.getLogger(__name__)
ONCE_ATTEMPTS = 3
RETRY_BASE_S = 1.0  # the wait after a first cut-off sync; it doubles, up to the interval


@dataclass(frozen=True)
class Settings:
    repo: str
    ref: str | None = None
    path: str | None = None
    interval: float = 60.0
    name: str = "gitops-sched"
    namespace: str = "gitops-sched"
    dry_run: bool = False
    prune_namespaces: str = "empty"
    adopt: bool = False
    identity: str = ""
    workdir: Path | None = None

    @property
    def source_id(self) -> str:
        return f"{self.repo}#{self.path or ''}"


@dataclass
class Outcome:
    revision: str
    result: SyncResult | None = None  # None when the commit was invalid or not fetched
    errors: tuple[str, ...] = ()
    cut_off: bool = False  # by a failure worth trying again soon (not an invalid commit)

    @property
    def ok(self) -> bool:
        """Synced: nothing failed, and no replacement still waits for its old object."""
        result = self.result
        return result is not None and not result.errors and not result.waiting and not self.errors


class Reconciler:
    def __init__(
        self,
        settings: Settings,
        client: ClusterClient,
        elector: LeaderElector | None = None,
        metrics: Metrics | None = None,
        health: Health | None = None,
    ):
        self.settings = settings
        self.client = client
        self.elector = elector
        self.metrics = metrics or Metrics()
        self.health = health or Health(stale_after=max(300.0, settings.interval * 5))
        # a clone's folder: given, or a scratch folder of our own that `close` removes (a
        # `reconcile --once` in CI must not leave one behind per run)
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        workdir = settings.workdir
        if workdir is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="gitops-sched-reconcile-")
            workdir = Path(self._scratch.name)
        self.source = open_source(settings.repo, settings.ref, workdir)
        self.syncer = Syncer(
            client,
            settings.name,
            settings.namespace,
            settings.source_id,
            prune_namespaces=settings.prune_namespaces,
            adopt=settings.adopt,
        )
        identity = settings.identity or default_identity()
        inventory = self.syncer.inventory_store.ref
        self.reporter = Reporter(client, inventory, identity, settings.dry_run)
        self._compiled: tuple[str, list[dict[str, Any]] | tuple[str, ...]] | None = None
        if elector is not None:
            elector.guard_writes(client)

    def close(self) -> None:
        """Remove the scratch folder (a Git URL's clone), if this reconciler made one."""
        if self._scratch is not None:
            self._scratch.cleanup()

    def compile(self, checkout: Checkout) -> list[dict[str, Any]] | tuple[str, ...]:
        """The rendered objects, or the errors (cached per revision)."""
        if self._compiled is not None and self._compiled[0] == checkout.revision:
            return self._compiled[1]
        repo, diagnostics = check_repo(checkout.config_dir(self.settings.path))
        if repo is None:
            compiled: Any = tuple(
                d.text() for d in diagnostics.sorted() if d.severity is Severity.ERROR
            )
        else:
            compiled = render_repo(repo)
        self._compiled = (checkout.revision, compiled)
        return compiled

    def sync_once(self) -> Outcome:
        """Fetch, compile, sync, report; whatever cuts it off is an Outcome, never raised
        (but NotLeader: the loop stops writing)."""
        started = time.monotonic()
        revision = ""
        try:
            try:
                checkout = self.source.fetch()
            except SourceError as exc:
                self.metrics.errors.inc()
                self.metrics.syncs.labels(outcome="fetch-failed").inc()
                return Outcome("", errors=(str(exc),), cut_off=True)
            revision = checkout.revision
            self.health.ready = True
            compiled = self.compile(checkout)
            if isinstance(compiled, tuple):
                return self._invalid(revision, list(compiled))
            result = self.syncer.sync(compiled, revision, self.settings.dry_run)
            self.reporter.synced(result, cluster_ref(compiled))
        except SourceConflict as exc:
            self.metrics.errors.inc()
            self.metrics.syncs.labels(outcome="failed").inc()
            return Outcome(revision, errors=(str(exc),))
        except NotLeader:
            raise
        except Exception as exc:  # an ApiFailure past its retries, an undecodable answer, a bug
            if not isinstance(exc, ApiFailure):
                log.exception("sync of %s cut off", revision[:12] or "the repo")
            self.metrics.errors.inc()
            self.metrics.syncs.labels(outcome="failed").inc()
            return Outcome(revision, errors=(f"sync cut off: {_describe(exc)}",), cut_off=True)
        self._record(result, time.monotonic() - started)
        return Outcome(revision, result)

    def _invalid(self, revision: str, errors: list[str]) -> Outcome:
        self.metrics.errors.inc()
        self.metrics.syncs.labels(outcome="invalid").inc()
        try:
            live = self.client.list(API_VERSION, "Cluster", self.syncer.selector) or []
            self.reporter.invalid(revision, errors, live[0] if live else None)
        except ApiFailure as exc:
            log.warning("could not report the invalid commit: %s", exc)
        return Outcome(revision, errors=tuple(errors))

    def _record(self, result: SyncResult, seconds: float) -> None:
        m = self.metrics
        m.sync_duration.observe(seconds)
        m.applied.inc(result.applied)
        m.replaced.inc(len(result.replaced))
        m.replacing.set(len(result.waiting))
        m.pruned.inc(len(result.pruned))
        m.drift.set(len(result.drift))
        m.errors.inc(len(result.errors))
        m.adopted.inc(len(result.adopted))
        m.warnings.set(len(result.warnings))
        m.managed.set(result.objects)
        outcome = "failed" if result.errors else "replacing" if result.waiting else "synced"
        m.syncs.labels(outcome=outcome).inc()
        if outcome == "synced" and not self.settings.dry_run:
            m.last_sync.set(time.time())
            m.synced_commit(result.revision)

    def run(self, stop: threading.Event, once: bool = False) -> Outcome | None:
        """Sync every interval while leading, until `stop` is set (or once with `once`: a
        sync cut off is tried again, `ONCE_ATTEMPTS` in all)."""
        outcome = None
        failures = 0  # syncs cut off in a row
        while not stop.is_set():
            self.health.beat()
            leading = self.elector is None or self.elector.is_leader()
            if self.elector is not None:
                self.metrics.leader.set(1 if leading else 0)
            wait = min(self.settings.interval, 1.0)
            if leading:
                try:
                    outcome = self.sync_once()
                except NotLeader as exc:
                    log.info("%s", exc)
                else:
                    _log_outcome(outcome)
                    failures = failures + 1 if outcome.cut_off else 0
                    if once and (not outcome.cut_off or failures >= ONCE_ATTEMPTS):
                        return outcome
                    wait = next_sync_wait(failures, self.settings.interval)
            else:
                self.health.ready = True  # a standby replica is ready: it waits for the Lease
            stop.wait(wait)
        return outcome


def next_sync_wait(failures: int, interval: float) -> float:
    """The interval after a sync that ended; after `failures` syncs cut off in a row, a wait
    doubling from `RETRY_BASE_S`, jittered (replicas restarted together spread out), never
    over the interval."""
    if not failures:
        return interval
    return min(interval, RETRY_BASE_S * 2 ** min(failures - 1, 30)) * random.uniform(0.5, 1.0)


def _describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, ApiFailure) else f"{type(exc).__name__}: {exc}"


def _log_outcome(outcome: Outcome) -> None:
    result = outcome.result
    if result is None:
        log.error("commit %s not synced: %s", outcome.revision[:12], "; ".join(outcome.errors[:10]))
        return
    log.info(
        "commit %s: %d objects, %d created, %d updated, %d adopted, %d replaced, %d pruned, "
        "%d drifted, %d errors, %d warnings",
        outcome.revision[:12],
        result.objects,
        len(result.created),
        len(result.updated),
        len(result.adopted),
        len(result.replaced),
        len(result.pruned),
        len(result.drift),
        len(result.errors),
        len(result.warnings),
    )
    for warning in result.warnings:
        log.warning("%s", warning)
    for waiting in result.waiting:
        log.warning("%s", waiting)
    for error in result.errors:
        log.error("%s", error)
