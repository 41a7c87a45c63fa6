"""The in-cluster scheduler end to end on a real control plane (kube-apiserver, etcd,
kube-controller-manager, kwok nodes labelled as GPU Feature Discovery labels them): the
example repo installed with the shipped manifests and the reconciler, each part (and each
reservation pod) running as its ServiceAccount with the RBAC they ship, the workloads created
as batch/v1 Jobs whose pods kube-controller-manager makes, bound by our scheduler, started
by kwok; the device plugin's part (GPUs by UUID, the reservation pod's command) played by
`testkit.control_plane.devices`.

What the cluster ends up running must be what `simulate` predicts, pod for pod and GPU for
GPU; a later submission must evict, through the Eviction API, exactly the victims
`simulate` names; no node is ever asked for more GPUs than it has.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.cluster.errors import NotFound
from gitops_sched.cluster.leader import LeaderElector, NotLeader
from gitops_sched.compiler import render_repo
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.model import Repo
from gitops_sched.contract.labels import WORKLOAD_LABEL
from gitops_sched.contract.pods import GPU_UUID, IDLE_SINCE, PLACEMENT, RESERVATION_LABEL
from gitops_sched.engine.codec import pod_from_dict
from gitops_sched.reconciler.sync import Syncer
from gitops_sched.scheduler.loop import Scheduler, Settings
from gitops_sched.sim.events import load_simulation
from gitops_sched.sim.report import to_json
from gitops_sched.sim.run import simulate
from gitops_sched.validate import check_repo
from testkit.control_plane.accounts import (
    RECONCILER,
    RESERVATION,
    SCHEDULER,
    account_client,
    account_kubeconfig,
)
from testkit.control_plane.client import connect
from testkit.control_plane.cluster import ControlPlane, end, free_port
from testkit.control_plane.devices import DevicePlugin, PodLog
from testkit.control_plane.fixtures import wipe
from testkit.control_plane.install import apply_kustomization
from testkit.control_plane.nodes import repo_nodes
from testkit.control_plane.waiting import wait

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "netapp-dgx"
CLI = str(Path(sys.executable).with_name("gitops-sched"))
# team-d claiming its quota once the example runs: a reclaim, its victims' pods pending
CLAIM = {
    "apiVersion": "gitops-sched.io/v1alpha1",
    "kind": "Workload",
    "metadata": {"name": "d-train"},
    "spec": {"project": "team-d", "type": "train", "gpu": 4},
}
WORKLOAD_KINDS = ("Job", "Deployment")
Obj = dict[str, Any]


class Cluster:
    """The control plane with the repo installed, its nodes, the device plugin's stand-in,
    a pod log and the scheduler (on a clock the test may move ahead of the wall clock).
    `manifests=False`: the shipped manifests are applied already."""

    def __init__(self, plane: ControlPlane, repo: Repo, manifests: bool = True):
        self.plane, self.repo = plane, repo
        self.offset = 0.0
        self.quiet_pods: list[Obj] = []  # the pods `quiet()` last listed
        self.client = connect(plane)
        self.rendered = render_repo(repo)
        self.system = repo.cluster.system_namespace
        if manifests:  # each part runs as its ServiceAccount, reservation pods too
            apply_kustomization(plane, "reconciler")
            apply_kustomization(plane, "scheduler")
        reservation = account_kubeconfig(plane, *RESERVATION)
        self.devices = DevicePlugin(self.client, reservation)
        self.log = PodLog(connect(plane)).start()
        self.scheduler = self.new_scheduler()

    def clock(self) -> float:
        return time.time() + self.offset

    def close(self) -> None:
        self.devices.close()
        self.log.stop()
        self.scheduler.client.close()
        self.client.close()

    def scheduler_client(self) -> ClusterClient:
        return account_client(self.plane, *SCHEDULER)

    def new_scheduler(self, elector: LeaderElector | None = None) -> Scheduler:
        settings = Settings(namespace=self.system)
        return Scheduler(self.scheduler_client(), settings, elector=elector, clock=self.clock)

    def install(self) -> None:
        """Everything the repo renders but the workloads (as the reconciler applies it), then
        the nodes, Ready."""
        rest = [o for o in self.rendered if o["kind"] not in WORKLOAD_KINDS]
        # the scheduler's kustomization made the system namespace, annotated to be adopted
        reconciler = account_client(self.plane, *RECONCILER)
        try:
            result = Syncer(reconciler, "gitops-sched", RECONCILER[0], "test").sync(rest, "r1")
        finally:
            reconciler.close()
        assert not result.errors, result.errors
        for node in repo_nodes(self.repo):
            self.client.create(node)
        self.wait("nodes Ready", lambda: all(ready(n) for n in self.client.list("v1", "Node")))

    def wait(self, what: str, done: Any) -> None:
        wait(what, done, seconds=60)

    def submit_repo_workloads(self, first: int | None = None) -> None:
        """The (`first`) workloads in repo order, each in a later second than the last (the
        order `simulate` submits them, which creation times then say to the scheduler)."""
        controllers = {
            o["metadata"]["name"]: o for o in self.rendered if o["kind"] in WORKLOAD_KINDS
        }
        for workload in self.repo.workloads[:first]:
            self.submit(controllers[workload.name])

    def submit(self, obj: Obj) -> None:
        self.client.create(obj)
        self.wait(f"the pods of {obj['metadata']['name']}", self.controllers_done)
        time.sleep(1.05 - time.time() % 1)  # the next object is created in a later second

    def all_pods(self) -> list[Obj]:
        return self.client.list("v1", "Pod") or []

    def pods(self) -> list[Obj]:
        return [p for p in self.all_pods() if WORKLOAD_LABEL in labels(p)]

    def controllers_done(self, pods: list[Obj] | None = None) -> bool:
        """Every unsuspended Job and Deployment has its pods, none of them going (`pods`:
        the pods as just listed, else listed here)."""
        pods = self.all_pods() if pods is None else pods
        live: dict[str, int] = {}
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                return False
            if phase(pod) not in ("Succeeded", "Failed"):
                key = f"{pod['metadata']['namespace']}/{labels(pod).get(WORKLOAD_LABEL)}"
                live[key] = live.get(key, 0) + 1
        for kind, api in (("Job", "batch/v1"), ("Deployment", "apps/v1")):
            for owner in self.client.list(api, kind) or ():
                spec = owner["spec"]
                if kind == "Job" and (spec.get("suspend") or finished(owner)):
                    continue
                want = spec.get("parallelism", 1) if kind == "Job" else spec.get("replicas", 1)
                key = f"{owner['metadata']['namespace']}/{owner['metadata']['name']}"
                if live.get(key, 0) < want:
                    return False
        return True

    def quiet(self) -> bool:
        """Nothing in flight: bound pods started, devices handed out, their commands started
        (a reservation pod's `reserve` says its line once it has published its GPU's UUID),
        controllers done."""
        pods = self.quiet_pods = self.all_pods()  # one list a poll, read by each check
        self.devices.step(pods)
        started = all(phase(p) != "Pending" for p in pods if p["spec"].get("nodeName"))
        return started and self.devices.started() and self.controllers_done(pods)

    def fingerprint(self, pods: list[Obj] | None = None) -> list[tuple[str, ...]]:
        """Each pod's uid, node, phase and GPU (`pods`: as just listed, else listed here)."""
        return sorted(
            (
                p["metadata"]["uid"],
                p["spec"].get("nodeName", ""),
                phase(p),
                (p["metadata"].get("annotations") or {}).get(GPU_UUID, ""),
            )
            for p in (self.all_pods() if pods is None else pods)
        )

    def settle(self, scheduler: Scheduler | None = None, limit: int = 20) -> int:
        """Cycles, the cluster reacting between them, until a cycle and the cluster change
        nothing; the number of cycles."""
        scheduler = scheduler or self.scheduler
        before = self.fingerprint()
        for cycles in range(1, limit + 1):
            report = scheduler.sync_once()
            assert report is not None and not report.outcome.errors, report.outcome.errors
            acted = report.outcome.bound or report.outcome.evicted
            self.wait("the cluster to act on the cycle", self.quiet)
            # the pods the last look of `quiet` found it quiet with: the state after the cycle
            after = self.fingerprint(self.quiet_pods)
            assert self.devices.overbooked(self.quiet_pods) == []
            assert self.devices.failures() == []
            if not acted and not report.outcome.waiting and after == before:
                return cycles
            before = after
        raise AssertionError(f"the cluster still changes after {limit} cycles")

    def placements(self) -> dict[str, list[tuple[str, tuple[int, ...], float]]]:
        """Each workload's bound pods as (node, GPUs, fraction), sorted."""
        out: dict[str, list[tuple[str, tuple[int, ...], float]]] = {}
        for pod in self.pods():
            if not pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            if phase(pod) in ("Succeeded", "Failed"):
                continue
            placed = pod_from_dict(json.loads(pod["metadata"]["annotations"][PLACEMENT]))
            assert placed.node == pod["spec"]["nodeName"]
            entry = (placed.node, placed.gpus, round(placed.fraction, 6))
            out.setdefault(labels(pod)[WORKLOAD_LABEL], []).append(entry)
        return {name: sorted(pods) for name, pods in out.items()}

    def failed(self) -> list[str]:
        """Pods that failed other than by eviction."""
        return [
            f"{p['metadata']['name']}: {p['status'].get('reason')}"
            for p in self.all_pods()
            if phase(p) == "Failed"
            and not any(
                c.get("type") == "DisruptionTarget" for c in p["status"].get("conditions", [])
            )
        ]

    def evicted_workloads(self) -> list[str]:
        return sorted({labels(p).get(WORKLOAD_LABEL, "") for p in self.log.evicted_pods()})


def ready(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def finished(job: Obj) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or ()
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def labels(pod: Obj) -> dict[str, str]:
    return pod["metadata"].get("labels") or {}


def simulated(result) -> dict[str, list[tuple[str, tuple[int, ...], float]]]:
    return {
        state.workload.name: sorted(
            (pod.node, pod.gpus, round(pod.fraction, 6)) for pod in state.pods
        )
        for state in result.workloads
        if state.pods
    }


@contextlib.contextmanager
def installed_repo(plane: ControlPlane, folder: Path) -> Iterator[Cluster]:
    """`folder`'s repo checked and installed (the shipped manifests, all it renders but the
    workloads, its nodes Ready); the Cluster's clients closed after."""
    loaded, diagnostics = check_repo(folder)
    assert loaded is not None, diagnostics
    made = Cluster(plane, loaded)
    try:
        made.install()
        yield made
    finally:
        made.close()


@pytest.fixture
def repo() -> Repo:
    loaded, diagnostics = check_repo(EXAMPLE)
    assert loaded is not None, diagnostics
    return loaded


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The example installed once for the module's tests (they run on one xdist worker:
    tests/scheduling.py): the shipped manifests, all the repo renders but the workloads, its
    nodes Ready. Each test's workloads go after it (`reinstalled`); wiped after the module."""
    with installed_repo(control_plane, EXAMPLE):
        pass
    yield control_plane
    wipe(control_plane)


@pytest.fixture
def cluster(repo: Repo, installed: ControlPlane) -> Iterator[Cluster]:
    made = Cluster(installed, repo, manifests=False)
    try:
        yield made
    finally:
        made.close()
        reinstalled(made)


def reinstalled(cluster: Cluster) -> None:
    """Back to the module's install: the test's workloads and every pod gone (reservation
    pods and a pod of another scheduler too), no Lease, no node cordoned, the policy as the
    repo renders it."""
    client = cluster.client
    namespaces = {cluster.repo.project_namespace(p.name) for p in cluster.repo.projects}
    for api, kind in (("batch/v1", "Job"), ("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet")):
        for obj in client.list(api, kind) or ():
            if obj["metadata"]["namespace"] in namespaces:
                client.delete(ObjectRef.of(obj))
    for lease in client.list("coordination.k8s.io/v1", "Lease", namespace=cluster.system) or ():
        client.delete(ObjectRef.of(lease))

    core = kubernetes.client.CoreV1Api(cluster.plane.api_client())

    def pods_gone() -> bool:
        left = [
            p
            for p in cluster.all_pods()
            if p["metadata"]["namespace"] in namespaces | {cluster.system, "default"}
        ]
        for pod in left:  # no kubelet here needs the time; the Job's finalizer goes too
            meta = pod["metadata"]
            if meta.get("finalizers"):
                with contextlib.suppress(NotFound):  # gone since it was listed
                    client.patch(ObjectRef.of(pod), {"metadata": {"finalizers": None}})
            with contextlib.suppress(kubernetes.client.ApiException):
                core.delete_namespaced_pod(meta["name"], meta["namespace"], grace_period_seconds=0)
        return not left

    try:
        cluster.wait("the test's pods gone", pods_gone)
    finally:
        core.api_client.close()
    for node in client.list("v1", "Node") or ():
        if node["spec"].get("unschedulable"):
            client.patch(ObjectRef.of(node), {"spec": {"unschedulable": None}})
    (policy,) = [o for o in cluster.rendered if o["kind"] == "ConfigMap"]
    client.patch(ObjectRef.of(policy), {"data": policy["data"]})


def test_the_example_runs_in_the_cluster_as_simulate_predicts(cluster: Cluster, repo: Repo):
    cluster.submit_repo_workloads()
    cluster.settle()

    assert cluster.placements() == simulated(simulate(repo))
    assert cluster.failed() == []
    # fractions share the GPU their reservation pod was given, and know it by UUID
    reservations = {
        (p["spec"]["nodeName"], labels(p)[RESERVATION_LABEL]): p
        for p in cluster.all_pods()
        if RESERVATION_LABEL in labels(p)
    }
    assert len(reservations) == 2  # gpu0 and gpu1 of dgx1-0 are shared
    for pod in cluster.pods():
        annotations = pod["metadata"].get("annotations", {})
        if pod["spec"].get("nodeName") and "gitops-sched.io/gpu-fraction" in annotations:
            placed = pod_from_dict(json.loads(annotations[PLACEMENT]))
            holder = reservations[(placed.node, str(placed.gpus[0]))]
            assert annotations[GPU_UUID] == holder["metadata"]["annotations"][GPU_UUID]
            assert [annotations[GPU_UUID]] == cluster.devices.given[holder["metadata"]["uid"]]
    # the projects' status says what simulate says
    statuses = {
        p["metadata"]["name"]: p.get("status", {})
        for p in cluster.client.list("gitops-sched.io/v1alpha1", "Project") or ()
    }
    for queue in simulate(repo).projects:
        assert statuses[queue.name]["allocated"] == pytest.approx(queue.allocated, abs=1e-4)
        assert statuses[queue.name]["fairShare"] == pytest.approx(queue.fair_share, abs=1e-4)
    assert_restarts_change_nothing(cluster)


def assert_restarts_change_nothing(cluster: Cluster) -> None:
    """A restarted scheduler, and a new leader taking the Lease over, each rebuild their view
    from the live pods with nothing remembered: on a settled cluster they bind and evict
    nothing."""
    settled = cluster.fingerprint()
    elector = LeaderElector(  # another replica: the same ServiceAccount
        cluster.scheduler_client(), cluster.system, "gitops-sched-scheduler", "new-leader"
    )
    assert elector.try_acquire_or_renew()
    for scheduler in (cluster.new_scheduler(), cluster.new_scheduler(elector)):
        report = scheduler.sync_once()
        assert report is not None and not report.outcome.errors, report.outcome.errors
        assert (report.decisions.evictions, report.decisions.binds) == ((), ())
        assert (report.outcome.bound, report.outcome.evicted) == ([], [])
        cluster.wait("the cluster to act on the cycle", cluster.quiet)
        assert cluster.fingerprint() == settled


class Replica:
    """A `gitops-sched scheduler` process as the shipped Deployment runs it (leader election
    on, the shipped Lease timings), as the scheduler's ServiceAccount, its metrics and probes
    on a port of its own."""

    def __init__(self, cluster: Cluster, name: str, log: Path):
        self.name, self.port = name, free_port()
        kubeconfig = account_kubeconfig(cluster.plane, *SCHEDULER)
        args = [CLI, "scheduler", "--kubeconfig", str(kubeconfig), "--namespace", cluster.system]
        args += ["--cycle-period", "0.5s", "--listen", f"127.0.0.1:{self.port}"]
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                args, env={**os.environ, "POD_NAME": name}, stdout=out, stderr=subprocess.STDOUT
            )

    def get(self, path: str) -> str | None:
        try:
            url = f"http://127.0.0.1:{self.port}{path}"
            with urllib.request.urlopen(url, timeout=2) as answer:
                return str(answer.read().decode())
        except OSError:
            return None

    def metric(self, name: str) -> float:
        """The sum of a metric's samples (every label), 0 before the process serves."""
        text = self.get("/metrics") or ""
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith((f"{name} ", f"{name}{{"))
        )

    def led(self, cycles: int) -> bool:
        """It holds the Lease and has run `cycles` cycles as leader."""
        leading = self.metric("gitops_sched_leader") == 1
        return leading and self.metric("gitops_sched_cycle_duration_seconds_count") >= cycles

    def acted(self) -> tuple[float, float]:
        """Pods it bound and evicted."""
        binds = self.metric("gitops_sched_binds_total")
        return binds, self.metric("gitops_sched_evictions_total")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        end(self.process)


def test_a_restarted_scheduler_process_and_a_failed_over_leader_bind_and_evict_nothing(
    cluster: Cluster, tmp_path: Path
):
    # settled with work waiting: team-d's claim has reclaimed, its victims' pods pending
    cluster.submit_repo_workloads()
    cluster.settle()
    cluster.submit(next(o for o in render_claim(CLAIM, tmp_path) if o["kind"] == "Job"))
    cluster.settle()
    settled, evicted = cluster.fingerprint(), cluster.evicted_workloads()
    assert evicted and [p for p in cluster.pods() if not p["spec"].get("nodeName")]
    # the scheduler restarted: a new process, nothing remembered, its view from live pods
    first = Replica(cluster, "replica-a", tmp_path / "scheduler.log")
    second = None
    try:
        cluster.wait("replica-a to lead 3 cycles", lambda: first.led(3))
        second = Replica(cluster, "replica-b", tmp_path / "scheduler.log")
        cluster.wait("replica-b a ready standby", lambda: second.get("/readyz") is not None)
        assert second.metric("gitops_sched_leader") == 0
        assert first.acted() == (0, 0)
        # the leader killed (it gives nothing back): the standby takes the Lease over
        first.kill()
        cluster.wait("replica-b to lead 3 cycles", lambda: second.led(3))
        assert second.acted() == (0, 0)
    finally:
        for replica in (first, second):
            if replica is not None:
                replica.stop()
    assert cluster.fingerprint() == settled
    assert cluster.evicted_workloads() == evicted
    assert cluster.failed() == []


def claim_simulation(repo: Repo, tmp_path: Path, workload: Obj):
    """`simulate`'s answer to `workload` arriving once the repo's workloads run."""
    settled = to_json(simulate(repo))
    running = [{k: w[k] for k in ("name", "status", "pods")} for w in settled["workloads"]]
    doc = {
        "apiVersion": "gitops-sched.io/v1alpha1",
        "kind": "Simulation",
        "metadata": {"name": "claim"},
        "running": running,
        "steps": [{"submit": workload}],
    }
    path = tmp_path / "claim.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    diagnostics = Diagnostics()
    simulation = load_simulation(path, repo, diagnostics)
    assert simulation is not None, diagnostics.items
    return simulate(repo, simulation)


def test_a_higher_claim_evicts_exactly_the_victims_simulate_names(
    cluster: Cluster, repo: Repo, tmp_path: Path
):
    cluster.submit_repo_workloads()
    cluster.settle()
    claim = CLAIM
    predicted = claim_simulation(repo, tmp_path, claim)
    victims = sorted({e.workload for e in predicted.log if e.action == "evict"})
    assert victims  # the scenario is one of reclaim
    assert cluster.evicted_workloads() == []

    job = next(o for o in render_claim(claim, tmp_path) if o["kind"] == "Job")
    cluster.submit(job)
    cluster.settle()

    assert cluster.evicted_workloads() == victims  # through the Eviction API
    assert cluster.placements() == simulated(predicted)
    assert cluster.failed() == []
    # the victims' recreated pods are told why they wait, in simulate's words
    reasons = {state.workload.name: state.reason for state in predicted.workloads}
    told = {}
    for pod in cluster.pods():
        victim = labels(pod)[WORKLOAD_LABEL]
        if victim in victims and not pod["spec"].get("nodeName"):
            (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
            assert condition["reason"] == "Unschedulable"
            told[victim] = condition["message"]
    assert told == {victim: reasons[victim] for victim in victims}

    # when the claim goes (its pods with it, by the garbage collector), the victims run again
    cluster.client.delete(ObjectRef("batch/v1", "Job", job["metadata"]["namespace"], "d-train"))
    cluster.wait("d-train's pods gone", lambda: "d-train" not in cluster.placements())
    cluster.settle()
    running = cluster.placements()
    assert all(victim in running for victim in victims)
    assert "d-train" not in running


def render_claim(workload: Obj, tmp_path: Path) -> list[Obj]:
    """The claim's Job as the compiler renders it: the example repo with the workload added."""
    copy = tmp_path / "repo"
    shutil.copytree(EXAMPLE, copy)
    (copy / "workloads" / "claim.yaml").write_text(yaml.safe_dump(workload), encoding="utf-8")
    loaded, diagnostics = check_repo(copy)
    assert loaded is not None, diagnostics
    return [o for o in render_repo(loaded) if o["metadata"]["name"] == workload["metadata"]["name"]]


def foreign_pod(node: str, gpus: int) -> Obj:
    """A pod another scheduler placed, holding GPUs the device plugin gave it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "render-farm", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "r", "image": "r:1", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
            ],
        },
    }


def test_gpus_of_other_schedulers_are_respected_and_a_cordoned_node_gets_nothing(
    cluster: Cluster,
):
    cluster.client.create(foreign_pod("dgx1-0", gpus=3))
    cluster.client.patch(ObjectRef("v1", "Node", "", "dgx1-1"), {"spec": {"unschedulable": True}})
    cluster.wait("the foreign pod running", cluster.quiet)
    cluster.submit_repo_workloads()
    cluster.settle()

    placed = cluster.placements()
    assert placed  # the free GPUs of dgx1-0 are used
    assert all(pod[0] == "dgx1-0" for pods in placed.values() for pod in pods)
    held = {gpu for pods in placed.values() for _, gpus, _ in pods for gpu in gpus}
    assert len(held) <= 5  # 8 GPUs, 3 of them another scheduler's
    assert cluster.failed() == []


def test_of_two_schedulers_only_the_leader_writes(cluster: Cluster):
    def elector(identity: str) -> LeaderElector:
        return LeaderElector(
            cluster.scheduler_client(),
            cluster.system,
            "gitops-sched-scheduler",
            identity,
            lease_duration=30,
            renew_deadline=20,
            retry_period=1,
        )

    first, second = elector("first"), elector("second")
    assert first.try_acquire_or_renew() and not second.try_acquire_or_renew()
    leader, follower = cluster.new_scheduler(first), cluster.new_scheduler(second)
    cluster.submit_repo_workloads(first=3)
    for _ in range(6):
        for scheduler in (follower, leader):
            if scheduler.leading():
                scheduler.sync_once()
        cluster.wait("the cluster to act", cluster.quiet)

    assert follower.client.requests["write"] == 0
    assert leader.client.requests["write"] > 0
    assert cluster.placements()  # the leader bound them
    # a replica without the Lease that runs a cycle anyway is stopped at its first write
    cluster.client.create(hand_made_pod(cluster.repo.project_namespace("team-d"), gpus=1))
    with pytest.raises(NotLeader):
        follower.sync_once()
    assert follower.client.requests["write"] == 0


def hand_made_pod(namespace: str, gpus: int) -> Obj:
    """A pod a user submits to a project by hand: our schedulerName, whole GPUs."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "by-hand", "namespace": namespace},
        "spec": {
            "schedulerName": "gitops-sched",
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "c:1", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
            ],
        },
    }


def test_interactive_work_is_stopped_idle_after_an_hour_and_by_all_after_eight(
    cluster: Cluster,
):
    """team-c stops interactive work idle for an hour: the node agent's IDLE_SINCE on the pod
    is what the scheduler goes by; its Job is suspended, not re-queued. team-b and team-c
    stop any interactive work at its `interactiveTimeLimit` (8h) from the pod's start, busy
    or not; train work is never stopped by either rule."""
    cluster.submit_repo_workloads()
    cluster.settle()
    (notebook,) = [p for p in cluster.pods() if labels(p)[WORKLOAD_LABEL] == "notebook-2"]
    meta = notebook["metadata"]
    ref = ObjectRef("v1", "Pod", meta["namespace"], meta["name"])
    cluster.client.patch(
        ref, {"metadata": {"annotations": {IDLE_SINCE: stamp(time.time() - 1800)}}}
    )
    cluster.settle()
    assert "notebook-2" in cluster.placements()  # idle for half an hour: it keeps running

    cluster.offset += 1801
    cluster.settle()
    job = cluster.client.get(ObjectRef("batch/v1", "Job", meta["namespace"], "notebook-2"))
    assert job is not None and job["spec"]["suspend"] is True
    assert "notebook-2" not in cluster.placements()
    assert "notebook-2" not in cluster.evicted_workloads()  # stopped through its Job
    assert "notebook-4" in cluster.placements()  # its busy neighbour stays

    trains = {w for w in cluster.placements() if "train" in w}
    cluster.offset += 8 * 3600
    cluster.settle()
    placed = cluster.placements()
    interactive = [w for w in cluster.repo.workloads if w.type == "interactive"]
    assert len(interactive) == 5
    for workload in interactive:
        namespace = cluster.repo.project_namespace(workload.project)
        job = cluster.client.get(ObjectRef("batch/v1", "Job", namespace, workload.name))
        assert job is not None and job["spec"]["suspend"] is True, workload.name
        assert workload.name not in placed
    # stopped through their Jobs, never evicted; train work runs on (it may have been moved)
    assert not {w.name for w in interactive} & set(cluster.evicted_workloads())
    assert trains and trains <= set(placed)


def test_a_changed_policy_is_read_again_and_an_unchanged_one_is_not(cluster: Cluster):
    cluster.scheduler.sync_once()
    first = cluster.scheduler.read_policy()
    assert cluster.scheduler.read_policy() is first  # parsed once per version, not per cycle
    ref = ObjectRef("v1", "ConfigMap", cluster.system, "gitops-sched-policy")
    config_map = cluster.client.get(ref)
    assert config_map is not None
    document = yaml.safe_load(config_map["data"]["policy.yaml"])
    team_d = next(
        p for d in document["departments"] for p in d["projects"] if p["name"] == "team-d"
    )
    team_d["quota"]["gpu"] = 6
    config_map["data"]["policy.yaml"] = yaml.safe_dump(document)
    cluster.client.replace(config_map)
    cluster.scheduler.sync_once()
    status = cluster.client.get(ObjectRef("gitops-sched.io/v1alpha1", "Project", "", "team-d"))
    assert status is not None and status["status"]["deserved"] == 6
