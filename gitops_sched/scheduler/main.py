"""The `gitops-sched scheduler` process: connect, elect, serve probes and metrics, loop.

`--once` lists the cluster, runs one cycle, prints what it did and exits; with `--dry-run`
it prints what that cycle would do and writes nothing. The report, one line each:

    evict JOB (N pods): REASON[ for JOB]
    bind JOB (N pods) on NODE[, NODE...][ (waits for GPUs being freed)]
    pending JOB: WHY
    ignored NAMESPACE/NAME[ (bound)]: WHY      (the first `loop.SHOWN_IGNORED`)
    ... and N more ignored pods
    skipped node NAME: WHY                      (annotations it cannot read)
    N bound, N evicted, N evictions refused, N waiting, N ignored, N errors

"ignored" pods have our schedulerName but the cycle could not take them at all (a namespace
of no project, a label or annotation it cannot read, no node group it may use admits them);
"pending" and "waiting" ones (binds not carried out yet) are the engine's.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading

from gitops_sched.cluster.client import ClusterClient
from gitops_sched.cluster.config import load_configuration
from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.cluster.leader import LeaderElector, default_identity
from gitops_sched.cluster.serving import Health, serve
from gitops_sched.scheduler.loop import CycleReport, Scheduler, Settings, ignored_lines
from gitops_sched.scheduler.metrics import SchedulerMetrics

log = logging.getLogger("gitops_sched.scheduler")
LEASE_NAME = "gitops-sched-scheduler"


def run_scheduler(
    settings: Settings,
    kubeconfig: str | None,
    once: bool,
    leader_elect: bool,
    listen: str,
) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    client = ClusterClient(load_configuration(kubeconfig), user_agent="gitops-sched-scheduler")
    metrics = SchedulerMetrics()
    health = Health(stale_after=max(60.0, settings.cycle_period * 20))
    elector = None
    if leader_elect:
        elector = LeaderElector(
            ClusterClient(load_configuration(kubeconfig)),
            settings.namespace,
            LEASE_NAME,
            default_identity(),
            on_change=lambda leading: log.info("leader: %s", leading),
        )
    scheduler = Scheduler(client, settings, metrics, health, elector)
    try:
        if once:
            return _run_once(scheduler)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        if listen:
            host, _, port = listen.rpartition(":")
            serve(metrics.registry, health, host or "0.0.0.0", int(port))
        if elector is not None:
            elector.start()
        try:
            scheduler.run(stop)
        finally:
            if elector is not None:
                elector.stop(release=True)
        return 0
    finally:
        client.close()


def _run_once(scheduler: Scheduler) -> int:
    try:
        report = scheduler.sync_once()
    except ApiFailure as exc:
        print(f"scheduler: {exc}", file=sys.stderr)
        return 1
    if report is None:
        print("scheduler: no policy ConfigMap: is the reconciler running?", file=sys.stderr)
        return 1
    _print_report(report)
    return 1 if report.outcome.errors else 0


def _print_report(report: CycleReport) -> None:
    decisions, outcome = report.decisions, report.outcome
    for evict in decisions.evictions:
        by = f" for {evict.by}" if evict.by else ""
        print(f"evict {evict.job} ({len(evict.pods)} pods): {evict.reason}{by}")
    for bind in decisions.binds:
        where = ", ".join(sorted({pod.node for pod in bind.pods}))
        wait = " (waits for GPUs being freed)" if bind.pipelined else ""
        print(f"bind {bind.job} ({len(bind.pods)} pods) on {where}{wait}")
    for job, why in decisions.pending_reasons:
        print(f"pending {job}: {why}")
    for line in ignored_lines(report.ignored):
        print(line)
    for node in report.view.skipped:
        print(f"skipped node {node.name}: {node.why}")
    print(report.summary())
    for error in outcome.errors:
        print(f"error: {error}", file=sys.stderr)
