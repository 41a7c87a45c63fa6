"""The scheduler's loop: informers keep pods, nodes and the policy current; a cycle runs every
`cycle_period` and soon after a change (debounced), while this replica leads.

One cycle: the cached objects (with the scheduler's own unseen writes laid over them) ->
`snapshot.build_view` -> the engine's `schedule` -> `Actuator.carry_out` (evictions, binds,
reservation pods, MIG requests) -> queue status and pending reasons -> metrics.

The pods with our schedulerName that `build_view` could not take (`ClusterView.ignored`:
a namespace of no project, labels or annotations it cannot read, no node group admits
them...) are counted in every report and listed with why, `ignored NAMESPACE/NAME: why`,
the first `SHOWN_IGNORED` by name and the rest as `... and N more ignored pods`: `--once`
prints them all so, the loop logs (at most once a reason) those newly ignored, or ignored
for another reason than last cycle's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from gitops_sched.bridge.policy import ClusterPolicy, policy_from_configmap
from gitops_sched.cluster.client import ClusterClient, ObjectRef
from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.cluster.informer import Informer
from gitops_sched.cluster.leader import LeaderElector, NotLeader
from gitops_sched.cluster.serving import Health
from gitops_sched.contract.policy import POLICY_CONFIGMAP
from gitops_sched.engine.cycle import schedule
from gitops_sched.engine.types import Decisions
from gitops_sched.engine.why import in_words
from gitops_sched.scheduler.actuate import Actuator, Outcome
from gitops_sched.scheduler.assumed import Assumed
from gitops_sched.scheduler.metrics import SchedulerMetrics
from gitops_sched.scheduler.snapshot import CycleMemory, build_view
from gitops_sched.scheduler.status import StatusWriter
from gitops_sched.scheduler.usage import UsageKeeper
from gitops_sched.scheduler.view import ClusterView, Ignored

log = logging.getLogger(__name__)
DEFAULT_NAMESPACE = "gitops-sched-system"
SHOWN_IGNORED = 20  # ignored pods a report lists by name; the rest are only counted
MAX_PAUSE_S = 30.0  # the longest pause after cycles that failed in a row
MAX_CHECKS = 50  # pods read a cycle to learn how an unconfirmed write of ours turned out
# pods that hold or wait for GPUs: finished pods are neither
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True)
class Settings:
    namespace: str = DEFAULT_NAMESPACE  # the system namespace: policy, Lease, reservation pods
    cycle_period: float = 1.0
    debounce: float = 0.05  # after a change, wait this long for the changes that follow it
    dry_run: bool = False
    reservation_image: str = "ghcr.io/gitops-sched/gitops-sched:latest"


@dataclass
class CycleReport:
    """What one cycle decided and did, for logs, `--once` and tests."""

    decisions: Decisions
    outcome: Outcome
    view: ClusterView
    seconds: float
    engine_seconds: float

    @property
    def ignored(self) -> tuple[Ignored, ...]:
        """The pods with our schedulerName the cycle could not take, by namespace and name."""
        return self.view.ignored

    def summary(self) -> str:
        """`N bound, N evicted, N evictions refused, N waiting, N ignored, N errors` (and
        reservation pods and MIG requests when there were some)."""
        return self.outcome.summary(ignored=len(self.ignored))


def ignored_lines(ignored: Sequence[Ignored], shown: int = SHOWN_IGNORED) -> list[str]:
    """`ignored NAMESPACE/NAME: why` (`NAMESPACE/NAME (bound)` for a pod bound already) for
    the first `shown` pods, then `... and N more ignored pods` for the rest."""
    lines = [
        f"ignored {pod.namespace}/{pod.name}{' (bound)' if pod.bound else ''}: {pod.why}"
        for pod in ignored[:shown]
    ]
    if len(ignored) > shown:
        lines.append(f"... and {len(ignored) - shown} more ignored pods")
    return lines


class Scheduler:
    def __init__(
        self,
        client: ClusterClient,
        settings: Settings,
        metrics: SchedulerMetrics | None = None,
        health: Health | None = None,
        elector: LeaderElector | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.client = client
        self.settings = settings
        self.metrics = metrics or SchedulerMetrics()
        self.health = health or Health(stale_after=max(60.0, settings.cycle_period * 20))
        self.elector = elector
        if elector is not None:
            elector.guard_writes(client)
        self.clock = clock
        self.memory = CycleMemory()
        self.usage = UsageKeeper()  # fairness over time: past usage, kept in Project status
        self.assumed = Assumed()
        self._wake = threading.Event()
        self.pods = Informer(client, "v1", "Pod", LIVE_PODS, on_change=self._wake.set)
        self.nodes = Informer(client, "v1", "Node", on_change=self._wake.set)
        self.policy = Informer(
            client,
            "v1",
            "ConfigMap",
            f"metadata.name={POLICY_CONFIGMAP}",
            namespace=settings.namespace,
            on_change=self._wake.set,
        )
        self.informers = (self.pods, self.nodes, self.policy)
        self._actuator: Actuator | None = None
        self._policy: tuple[str, ClusterPolicy] | None = None  # read at this resourceVersion
        # the ignored pods the loop has logged, with the reason it logged: said once each
        self._ignored_logged: dict[tuple[str, str, str], str] = {}
        self.status = StatusWriter(client, settings.dry_run)

    # --- one cycle -------------------------------------------------------------------

    def read_policy(self) -> ClusterPolicy | None:
        maps = self.policy.items()
        if not maps:
            log.warning(
                "no ConfigMap %s/%s: is the reconciler running?",
                self.settings.namespace,
                POLICY_CONFIGMAP,
            )
            return None
        version = maps[0]["metadata"].get("resourceVersion", "")
        if self._policy is not None and self._policy[0] == version:
            return self._policy[1]  # parsed once per change, not once per cycle
        try:
            policy = policy_from_configmap(maps[0])
        except ValueError as exc:
            log.error("ConfigMap %s/%s: %s", self.settings.namespace, POLICY_CONFIGMAP, exc)
            return None
        self._policy = (version, policy)
        return policy

    def cycle(self) -> CycleReport | None:
        """Decide and carry out one cycle from the cached objects; None without a policy."""
        started = time.perf_counter()
        policy = self.read_policy()
        if policy is None:
            self.health.ready = False
            return None
        self.health.ready = True
        now = self.clock()
        self._check_assumed(now)
        pods = self.assumed.overlay(self.pods.items(), now)
        view = build_view(pods, self.nodes.items(), policy, now, self.memory)
        if (fairness := policy.policy.fairness) is not None:
            history = self.usage.history_at(self.client, fairness, now)
            view = replace(view, snapshot=replace(view.snapshot, history=history))
        engine_started = time.perf_counter()
        decisions = in_words(view.snapshot, schedule(view.snapshot))
        engine_seconds = time.perf_counter() - engine_started
        self.memory.update(view.snapshot)
        self.usage.held(now, decisions)
        outcome = self._actuator_for(policy).carry_out(view, decisions, now)
        # the status writes' failures are the cycle's errors too: a dry run meets them as
        # the real cycle would (see StatusWriter)
        usage = self.usage.status(view.snapshot)
        outcome.errors += self.status.write(view, decisions, outcome, usage).errors
        seconds = time.perf_counter() - started
        self.metrics.record_cycle(seconds, view, decisions, outcome)
        return CycleReport(decisions, outcome, view, seconds, engine_seconds)

    def _check_assumed(self, now: float) -> None:
        """Read the pods whose write had an unknown outcome, or that the cache has not
        shown for long (a silent watch): what the server says is believed over the cache.
        At most `MAX_CHECKS` a cycle; one that fails is tried again next cycle."""
        for namespace, name in self.assumed.to_check(now)[:MAX_CHECKS]:
            try:
                pod = self.client.get(ObjectRef("v1", "Pod", namespace, name))
            except ApiFailure as exc:
                log.info("checking pod %s/%s: %s", namespace, name, exc)
                continue
            self.assumed.read((namespace, name), pod, now)

    def _actuator_for(self, policy: ClusterPolicy) -> Actuator:
        if self._actuator is None or self._actuator.policy is not policy:
            self._actuator = Actuator(
                self.client,
                policy,
                self.settings.reservation_image,
                self.settings.dry_run,
                self.assumed,
            )
        return self._actuator

    # --- running ---------------------------------------------------------------------

    def sync_once(self) -> CycleReport | None:
        """List everything afresh and run one cycle (`--once`, and tests)."""
        for informer in self.informers:
            informer.relist()
        return self.cycle()

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def run(self, stop: threading.Event) -> None:
        """Cycle every period, and soon after changes, while leading; until `stop`. A cycle
        that fails (whatever it raises) is said, and the next waits a pause that doubles
        with each failure in a row, up to `MAX_PAUSE_S`: the loop itself never stops."""
        for informer in self.informers:
            informer.start(stop)
        for informer in self.informers:
            while not stop.is_set() and not informer.wait_synced(1.0):
                self.health.beat()
        failures = 0
        while not stop.is_set():
            self.health.beat()
            leading = self.leading()
            self.metrics.set_leader(leading)
            if leading:
                self._wake.clear()
                failures = 0 if self._cycle_logged() else failures + 1
            else:
                self.health.ready = True  # a standby replica is ready: it waits for the Lease
                self.usage = UsageKeeper()  # past usage is read again once it leads
                failures = 0
            if failures:
                stop.wait(min(MAX_PAUSE_S, self.settings.cycle_period * 2**failures))
            else:
                self._wake.wait(self.settings.cycle_period)
            stop.wait(self.settings.debounce)

    def _cycle_logged(self) -> bool:
        """One cycle, its report logged; False when it failed (said, never raised)."""
        try:
            report = self.cycle()
        except NotLeader as exc:
            log.info("%s", exc)
        except ApiFailure as exc:  # the next cycle starts from the cluster again
            log.warning("cycle stopped: %s", exc)
            return False
        except Exception:  # a bug, or a client failing outside its API errors
            log.exception("cycle failed")
            return False
        else:
            if report is not None:
                _log_report(report, self._newly_ignored(report.ignored))
        return True

    def _newly_ignored(self, ignored: Sequence[Ignored]) -> list[Ignored]:
        """The ignored pods not logged yet, or logged with another reason; a pod no longer
        ignored is forgotten (logged again should it be ignored again)."""
        logged, self._ignored_logged = self._ignored_logged, {}
        fresh = []
        for pod in ignored:
            key = (pod.namespace, pod.name, pod.uid)
            if logged.get(key) != pod.why:
                fresh.append(pod)
            self._ignored_logged[key] = pod.why
        return fresh


def _log_report(report: CycleReport, newly_ignored: Sequence[Ignored] = ()) -> None:
    """The cycle's summary when it changed something, failed somewhere or ignored pods it
    had not ignored (for that reason) before; then its errors and those pods."""
    outcome = report.outcome
    if not (report.decisions.changed or outcome.errors or newly_ignored):
        return
    log.info(
        "cycle %.3fs (engine %.3fs): %s",
        report.seconds,
        report.engine_seconds,
        report.summary(),
    )
    for error in outcome.errors:
        log.error("%s", error)
    for line in ignored_lines(newly_ignored):
        log.warning("%s", line)
