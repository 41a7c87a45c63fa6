"""The `gitops-sched reconcile` process: connect, elect, serve probes and metrics, loop."""

from __future__ import annotations

import logging
import signal
import sys
import threading

from gitops_sched.cluster.client import ClusterClient
from gitops_sched.cluster.config import load_configuration
from gitops_sched.cluster.diff import FIELD_MANAGER
from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.cluster.leader import LeaderElector, default_identity
from gitops_sched.cluster.serving import Health, serve
from gitops_sched.reconciler.inventory import InventoryStore
from gitops_sched.reconciler.loop import Reconciler, Settings
from gitops_sched.reconciler.metrics import Metrics

log = logging.getLogger("gitops_sched.reconciler")


def run_reconciler(
    repo: str,
    ref: str | None,
    path: str | None,
    interval: float,
    once: bool,
    dry_run: bool,
    name: str,
    namespace: str,
    kubeconfig: str | None,
    prune_namespaces: str,
    adopt: bool,
    leader_elect: bool,
    listen: str,
) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    identity = default_identity()
    settings = Settings(
        repo=repo,
        ref=ref,
        path=path,
        interval=interval,
        name=name,
        namespace=namespace,
        dry_run=dry_run,
        prune_namespaces=prune_namespaces,
        adopt=adopt,
        identity=identity,
    )
    configuration = load_configuration(kubeconfig)
    client = ClusterClient(configuration)
    metrics, health = Metrics(), Health(stale_after=max(300.0, interval * 5))
    elector = None
    if leader_elect:
        elector = LeaderElector(
            ClusterClient(load_configuration(kubeconfig)),
            namespace,
            f"gitops-sched-reconciler-{name}",
            identity,
            on_change=lambda leading: log.info("leader: %s", leading),
        )
    reconciler = Reconciler(settings, client, elector, metrics, health)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if not once and listen:
        host, _, port = listen.rpartition(":")
        serve(metrics.registry, health, host or "0.0.0.0", int(port))
    if elector is not None:
        # the Lease lives there: a candidate on a new cluster would wait for ever. Made
        # through the elector's client: the reconciler's own writes wait for the Lease
        store = InventoryStore(elector.client, namespace, name, FIELD_MANAGER)
        try:
            store.ensure_namespace()
        except ApiFailure as exc:
            log.warning("could not make sure namespace %s exists: %s", namespace, exc)
        elector.start()
    try:
        outcome = reconciler.run(stop, once=once)
    finally:
        if elector is not None:
            elector.stop(release=True)
        client.close()
        reconciler.close()
    if dry_run and outcome is not None and outcome.result is not None:
        for text in outcome.result.diff:
            sys.stdout.write(text)
    if outcome is None:
        return 0
    for error in outcome.errors:
        print(error, file=sys.stderr)
    return 0 if outcome.ok else 1
