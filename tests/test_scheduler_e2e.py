"""The in-cluster scheduler end to end, against the API emulator over HTTP: the example repo
rendered and installed as the reconciler would, nodes as GPU Feature Discovery labels them,
Jobs turned into pods by a Job-controller stand-in, pods started and stopped by a kubelet
stand-in (which rejects a pod its node has no device for: a double-booked GPU fails there).

What the cluster ends up running must be what `simulate` predicts, pod for pod and GPU for
GPU, and a later submission must evict exactly the victims `simulate` names.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_sched.bridge.build import nodes_from_repo
from gitops_sched.cluster import ObjectRef
from gitops_sched.cluster.leader import LeaderElector, NotLeader
from gitops_sched.compiler import render_repo
from gitops_sched.compiler.contract import GPU_UUID, IDLE_SINCE, PLACEMENT, RESERVATION_LABEL
from gitops_sched.compiler.meta import WORKLOAD_LABEL
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.model import Repo
from gitops_sched.config.validate import check_repo
from gitops_sched.engine.codec import pod_from_dict
from gitops_sched.engine.types import Node
from gitops_sched.reconciler.sync import Syncer
from gitops_sched.scheduler.loop import Scheduler, Settings
from gitops_sched.sim.events import load_simulation
from gitops_sched.sim.report import to_json
from gitops_sched.sim.run import simulate
from tests.cluster_standins import JobController, Kubelet
from tests.kube_emulator import fields
from tests.kube_emulator.fixtures import connect
from tests.kube_emulator.server import KubeEmulator

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "netapp-dgx"
WORKLOAD_KINDS = ("Job", "Deployment")
START = 1_790_000_000.0


def gfd_node(node: Node) -> dict[str, Any]:
    """A node as GPU Feature Discovery and the kubelet describe it (no node agent)."""
    gpu = node.gpus[0]
    labels = dict(node.labels) | {
        "nvidia.com/gpu.count": str(len(node.gpus)),
        "nvidia.com/gpu.memory": str(gpu.memory_mib),
        "nvidia.com/gpu.present": "true",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": labels},
    }


def node_status(node: Node) -> dict[str, Any]:
    amounts = {"cpu": "80", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(len(node.gpus))}
    return {
        "capacity": amounts,
        "allocatable": amounts,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }


class Cluster:
    """The emulator with the repo installed, its nodes, the stand-ins and the scheduler."""

    def __init__(self, kube: KubeEmulator, repo: Repo, monkeypatch: pytest.MonkeyPatch):
        self.kube, self.repo = kube, repo
        self.clock = START
        monkeypatch.setattr(fields, "now", self.stamp)  # creation times the test decides
        self.client = connect(kube)
        self.rendered = render_repo(repo)
        self.jobs = JobController(kube.api, seed=1)
        self.kubelet = Kubelet(kube.api, on_start=self.reserve)
        self.system = repo.cluster.system_namespace
        self.scheduler = self.new_scheduler()

    def stamp(self) -> str:
        return fields_stamp(self.clock)

    def new_scheduler(self, elector: LeaderElector | None = None) -> Scheduler:
        client = connect(self.kube)
        return Scheduler(
            client, Settings(namespace=self.system), elector=elector, clock=lambda: self.clock
        )

    def install(self) -> None:
        """Everything but the workloads, as the reconciler applies it; then the nodes."""
        self.client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gitops-sched"}}
        )
        rest = [o for o in self.rendered if o["kind"] not in WORKLOAD_KINDS]
        result = Syncer(self.client, "e2e", "gitops-sched", "test").sync(rest, "r1")
        assert not result.errors, result.errors
        for node in nodes_from_repo(self.repo):
            self.client.create(gfd_node(node))
            ref = ObjectRef("v1", "Node", "", node.name)
            self.client.patch(ref, {"status": node_status(node)}, subresource="status")

    def submit_repo_workloads(self) -> None:
        """The workloads in repo order, a second apart (the order `simulate` submits them)."""
        controllers = {
            o["metadata"]["name"]: o for o in self.rendered if o["kind"] in WORKLOAD_KINDS
        }
        for workload in self.repo.workloads:
            self.submit(controllers[workload.name])

    def submit(self, obj: dict[str, Any]) -> None:
        self.client.create(obj)
        self.jobs.step()
        self.clock += 1

    def reserve(self, pod: dict[str, Any], node: dict[str, Any]) -> None:
        """A reservation pod starting: it writes the UUID of the GPU the device plugin gave
        it, as `gitops-sched reserve` does."""
        meta = pod["metadata"]
        if RESERVATION_LABEL not in (meta.get("labels") or {}):
            return
        uuid = f"GPU-{node['metadata']['name']}-{meta['labels'][RESERVATION_LABEL]}"
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        self.kube.api.call("PATCH", path, {"metadata": {"annotations": {GPU_UUID: uuid}}})

    def settle(self, scheduler: Scheduler | None = None, limit: int = 20) -> int:
        """Cycles, with the controllers and kubelets acting between them, until a cycle
        and the stand-ins change nothing; the number of cycles."""
        scheduler = scheduler or self.scheduler
        for cycles in range(1, limit + 1):
            report = scheduler.sync_once()
            assert report is not None and not report.outcome.errors, report.outcome.errors
            acted = report.outcome.bound or report.outcome.evicted
            moved = self.kubelet.step() | self.jobs.step() | self.kubelet.step()
            self.clock += 1
            if not acted and not moved and not report.outcome.waiting:
                return cycles
        raise AssertionError(f"the cluster still changes after {limit} cycles")

    def pods(self) -> list[dict[str, Any]]:
        return [p for p in self.kube.api.objects("v1", "Pod") if WORKLOAD_LABEL in labels(p)]

    def placements(self) -> dict[str, list[tuple[str, tuple[int, ...], float]]]:
        """Each workload's bound pods as (node, GPUs, fraction), sorted."""
        out: dict[str, list[tuple[str, tuple[int, ...], float]]] = {}
        for pod in self.pods():
            if not pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            placed = pod_from_dict(json.loads(pod["metadata"]["annotations"][PLACEMENT]))
            assert placed.node == pod["spec"]["nodeName"]
            entry = (placed.node, placed.gpus, round(placed.fraction, 6))
            out.setdefault(labels(pod)[WORKLOAD_LABEL], []).append(entry)
        return {name: sorted(pods) for name, pods in out.items()}

    def failed(self) -> list[str]:
        """Pods a kubelet refused (a GPU given twice would be one)."""
        return [
            f"{p['metadata']['name']}: {p['status'].get('reason')}"
            for p in self.kube.api.objects("v1", "Pod")
            if p.get("status", {}).get("phase") == "Failed"
            and not any(
                c.get("type") == "DisruptionTarget" for c in p["status"].get("conditions", [])
            )
        ]

    def evicted(self, since: int = 0) -> list[str]:
        """Names of the pods the scheduler asked to evict, from request `since` on."""
        return [
            r.path.split("/")[-2]
            for r in self.kube.api.requests[since:]
            if r.method == "POST" and r.path.endswith("/eviction")
        ]


def fields_stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def labels(pod: dict[str, Any]) -> dict[str, str]:
    return pod["metadata"].get("labels") or {}


def simulated(result) -> dict[str, list[tuple[str, tuple[int, ...], float]]]:
    return {
        state.workload.name: sorted(
            (pod.node, pod.gpus, round(pod.fraction, 6)) for pod in state.pods
        )
        for state in result.workloads
        if state.pods
    }


@pytest.fixture
def repo() -> Repo:
    loaded, diagnostics = check_repo(EXAMPLE)
    assert loaded is not None, diagnostics
    return loaded


@pytest.fixture
def cluster(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with KubeEmulator(crd_establish_delay=0.0, pod_termination="graceful") as kube:
        made = Cluster(kube, repo, monkeypatch)
        made.install()
        yield made
        made.client.close()


def test_the_example_runs_in_the_cluster_as_simulate_predicts(cluster: Cluster, repo: Repo):
    cluster.submit_repo_workloads()
    cluster.settle()

    assert cluster.placements() == simulated(simulate(repo))
    assert cluster.failed() == []
    # fractions share the GPUs their reservation pods hold, and see them by UUID
    for pod in cluster.pods():
        annotations = pod["metadata"].get("annotations", {})
        if pod["spec"].get("nodeName") and "gitops-sched.io/gpu-fraction" in annotations:
            placed = pod_from_dict(json.loads(annotations[PLACEMENT]))
            assert annotations[GPU_UUID] == f"GPU-{placed.node}-{placed.gpus[0]}"
    reservations = [
        p for p in cluster.kube.api.objects("v1", "Pod") if RESERVATION_LABEL in labels(p)
    ]
    assert len(reservations) == 2  # gpu0 and gpu1 of dgx1-0 are shared
    # the projects' status says what simulate says
    statuses = {
        p["metadata"]["name"]: p.get("status", {})
        for p in cluster.kube.api.objects("gitops-sched.io/v1alpha1", "Project")
    }
    for queue in simulate(repo).projects:
        assert statuses[queue.name]["allocated"] == pytest.approx(queue.allocated, abs=1e-4)
        assert statuses[queue.name]["fairShare"] == pytest.approx(queue.fair_share, abs=1e-4)


def claim_simulation(repo: Repo, tmp_path: Path, workload: dict[str, Any]):
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
    claim = {
        "apiVersion": "gitops-sched.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "d-train"},
        "spec": {"project": "team-d", "type": "train", "gpu": 4},
    }
    predicted = claim_simulation(repo, tmp_path, claim)
    victims = sorted({e.workload for e in predicted.log if e.action == "evict"})
    assert victims  # the scenario is one of reclaim

    job = next(o for o in render_claim(claim, tmp_path) if o["kind"] == "Job")
    before = len(cluster.kube.api.requests)
    cluster.submit(job)
    cluster.settle()

    evicted_pods = cluster.evicted(since=before)
    evicted_workloads = sorted({name.rsplit("-", 2)[0] for name in evicted_pods})
    assert evicted_workloads == victims
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

    # the victims' Job pods came back pending; when the claim goes, they run again
    cluster.client.delete(ObjectRef("batch/v1", "Job", job["metadata"]["namespace"], "d-train"))
    for pod in cluster.pods():  # no garbage collector here: the Job's pods go by hand
        meta = pod["metadata"]
        if labels(pod)[WORKLOAD_LABEL] == "d-train":
            cluster.client.delete(ObjectRef("v1", "Pod", meta["namespace"], meta["name"]))
    cluster.settle()
    running = cluster.placements()
    assert all(victim in running for victim in victims)
    assert "d-train" not in running


def render_claim(workload: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    """The claim's Job as the compiler renders it: the example repo with the workload added."""
    copy = tmp_path / "repo"
    shutil.copytree(EXAMPLE, copy)
    (copy / "workloads" / "claim.yaml").write_text(yaml.safe_dump(workload), encoding="utf-8")
    loaded, diagnostics = check_repo(copy)
    assert loaded is not None, diagnostics
    return [o for o in render_repo(loaded) if o["metadata"]["name"] == workload["metadata"]["name"]]


def foreign_pod(node: str, gpus: int) -> dict[str, Any]:
    """A pod another scheduler placed, holding GPUs the device plugin gave it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "render-farm", "namespace": "gitops-sched"},
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
    cluster.kubelet.step()
    node = ObjectRef("v1", "Node", "", "dgx1-1")
    cluster.client.patch(node, {"spec": {"unschedulable": True}})
    cluster.submit_repo_workloads()
    cluster.settle()

    placed = cluster.placements()
    assert placed  # the free GPUs of dgx1-0 are used
    assert all(pod[0] == "dgx1-0" for pods in placed.values() for pod in pods)
    held = {gpu for pods in placed.values() for _, gpus, _ in pods for gpu in gpus}
    assert len(held) <= 5  # 8 GPUs, 3 of them another scheduler's
    assert cluster.failed() == []  # no pod was refused a device by the kubelet


def test_of_two_schedulers_only_the_leader_writes(cluster: Cluster):
    def elector(identity: str) -> LeaderElector:
        return LeaderElector(
            connect(cluster.kube),
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
    cluster.submit_repo_workloads()
    for _ in range(6):
        for scheduler in (follower, leader):
            if scheduler.leading():
                scheduler.sync_once()
        cluster.kubelet.step()
        cluster.jobs.step()
        cluster.clock += 1

    assert follower.client.requests["write"] == 0
    assert leader.client.requests["write"] > 0
    assert cluster.placements()  # the leader bound them
    # a replica without the Lease that runs a cycle anyway is stopped at its first write
    cluster.client.create(hand_made_pod(cluster.repo.project_namespace("team-d"), gpus=1))
    with pytest.raises(NotLeader):
        follower.sync_once()
    assert follower.client.requests["write"] == 0


def hand_made_pod(namespace: str, gpus: int) -> dict[str, Any]:
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


def test_an_idle_notebook_is_stopped_after_its_projects_idle_timeout(cluster: Cluster):
    """team-c stops interactive work idle for an hour: the node agent's IDLE_SINCE on the pod
    is what the scheduler goes by; its Job is suspended, not re-queued."""
    cluster.submit_repo_workloads()
    cluster.settle()
    (notebook,) = [p for p in cluster.pods() if labels(p)[WORKLOAD_LABEL] == "notebook-2"]
    meta = notebook["metadata"]
    idle_since = fields_stamp(cluster.clock - 1800)
    ref = ObjectRef("v1", "Pod", meta["namespace"], meta["name"])
    cluster.client.patch(ref, {"metadata": {"annotations": {IDLE_SINCE: idle_since}}})
    cluster.settle()
    assert "notebook-2" in cluster.placements()  # idle for half an hour: it keeps running

    cluster.clock += 1801
    cluster.settle()
    job = cluster.kube.api.find("batch/v1", "Job", "notebook-2", meta["namespace"])
    assert job["spec"]["suspend"] is True
    assert "notebook-2" not in cluster.placements()
    assert cluster.evicted() == []  # stopped through its Job, never evicted to come back
    assert "notebook-4" in cluster.placements()  # its busy neighbour stays


def test_a_changed_policy_is_read_again_and_an_unchanged_one_is_not(cluster: Cluster):
    cluster.submit_repo_workloads()
    cluster.settle()
    first = cluster.scheduler.read_policy()
    assert cluster.scheduler.read_policy() is first  # parsed once per version, not per cycle
    ref = ObjectRef("v1", "ConfigMap", cluster.system, "gitops-sched-policy")
    config_map = cluster.client.get(ref)
    document = yaml.safe_load(config_map["data"]["policy.yaml"])
    team_d = next(
        p for d in document["departments"] for p in d["projects"] if p["name"] == "team-d"
    )
    team_d["quota"]["gpu"] = 6
    config_map["data"]["policy.yaml"] = yaml.safe_dump(document)
    cluster.client.replace(config_map)
    cluster.scheduler.sync_once()
    status = cluster.kube.api.find("gitops-sched.io/v1alpha1", "Project", "team-d")["status"]
    assert status["deserved"] == 6
