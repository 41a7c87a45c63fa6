"""Chaos: the reconciler and the scheduler together, as the processes a cluster runs
(`gitops-sched reconcile` and `gitops-sched scheduler`, each as its ServiceAccount from the
shipped manifests), on the real control plane behind the fault proxy
(`testkit/control_plane/faultproxy.py`: random 429 with Retry-After, 5xx, dropped
connections, writes whose answer is lost, answers cut short, watches gone silent; and
outages of up to two seconds, when most requests fail and the retries run out), each
process killed with SIGKILL at random moments (the scheduler after a random number of its
writes to pods: in the middle of binding) and started again.

The example repo (netapp-dgx) arrives with its GPU nodes cordoned, so the scheduler meets
faults and kills while it can only tell pods why they wait; once every workload's pods
exist the nodes are uncordoned (the scheduler killed just before, so it sees them all at
once, as `simulate` does) and the faults and kills go on while it binds. Someone else's
objects are there all along: a pod of another scheduler holding the 8 GPUs of a third node
of the group, a Secret and a ConfigMap in a project's namespace. Then the faults stop, and
the test checks:

- no node was ever asked for more GPUs than it has (looked at all through the run);
- the cluster equals Git and the reconciler's inventory lists exactly what it manages;
- nothing someone else made was written or deleted;
- the cluster runs what `simulate` predicts for the workloads in the order they arrived,
  pod for pod and GPU for GPU, the projects' status with it, and nothing was evicted;
- a restarted reconciler and scheduler find nothing to do.

Bounded and seeded: `CHAOS_SEEDS` (default `19`) and `CHAOS_KILLS` (kills per run,
default 2) go deeper, as `make chaos` does; a failing seed reruns the same kill moments
and the same faults in the same order of requests (the processes' timing may still vary).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.config.model import Repo
from gitops_sched.contract.labels import WORKLOAD_LABEL
from gitops_sched.sim.run import simulate
from gitops_sched.validate import check_repo
from testkit.control_plane.accounts import RECONCILER, SCHEDULER, account_client, token
from testkit.control_plane.cluster import ControlPlane, end
from testkit.control_plane.faultproxy import FaultProxy, Rates
from testkit.control_plane.nodes import repo_nodes
from testkit.control_plane.waiting import wait
from testkit.reconciler_harness import Harness
from tests.test_reconciler_reliability import fingerprint, ours, rendered, secret
from tests.test_scheduler_e2e import (
    EXAMPLE,
    Cluster,
    assert_restarts_change_nothing,
    foreign_pod,
    labels,
    simulated,
)

CLI = str(Path(sys.executable).with_name("gitops-sched"))
SEEDS = [int(s) for s in os.environ.get("CHAOS_SEEDS", "19").split(",")]
KILLS = int(os.environ.get("CHAOS_KILLS", "2"))
# about one request in eight meets a fault; one watch in ten stays silent
FAULTS = Rates(throttle=0.03, error=0.03, drop=0.02, swallow=0.02, garble=0.02, silent=0.1)
# now and then, for up to two seconds, most requests fail: more than the retries absorb
OUTAGE = Rates(throttle=0.2, error=0.4, drop=0.15, swallow=0.1, garble=0.05, silent=0.3)
POD_WRITE = re.compile(
    r"(POST|DELETE) /api/v1/namespaces/[^/]+/pods(/[^/?]+(/binding|/eviction)?)?(\?|$)"
)
# how often the test looks at the cluster through the run (pods listed, devices handed out,
# GPUs counted): a kubelet's pace; kills and outages are checked every TICK_S (cheap)
LOOK_S, TICK_S = 0.25, 0.05
FOREIGN = "dgx1-2"  # a node of the group the repo does not count, another scheduler's
PROJECT = "project-team-a"  # where someone else keeps a Secret and a ConfigMap


class Part:
    """One part of the product run as its process, through the proxy: killed with SIGKILL
    and started again; what it says goes to `log`."""

    def __init__(self, name: str, args: list[str], log: Path):
        self.name, self.args, self.log = name, args, log
        self.process: subprocess.Popen[bytes] | None = None
        self._out: IO[bytes] | None = None

    def start(self) -> None:
        self._out = self._out or self.log.open("ab")
        self.process = subprocess.Popen(self.args, stdout=self._out, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        assert self.process is not None
        self.alive()
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None:
            end(self.process)
        if self._out is not None:
            self._out.close()

    def alive(self) -> None:
        """A loop that ended by itself (any failure must leave it running) fails the test."""
        assert self.process is not None
        code = self.process.poll()
        if code is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"{self.name} exited by itself ({code}):\n{tail}")


class Chaos:
    """The cluster, the proxy, both parts and what the test watches through the run."""

    def __init__(self, plane: ControlPlane, repo: Repo, proxy: FaultProxy, tmp: Path):
        self.cluster = Cluster(plane, repo)
        self.git = rendered(EXAMPLE)  # what the reconciler must leave, once
        self.repo, self.proxy = repo, proxy
        self.change = 0.0  # when the faults change next (`weather`), or after how many
        self.outage_writes = 0  # writes to pods an outage starts
        self.client = self.cluster.client
        self.overbooked: list[str] = []
        self.counted = self.writes_seen = 0  # requests of `proxy.seen` counted; pod writes
        self.looked = 0.0  # when the test last looked at the cluster
        reconciler = proxy.write_kubeconfig(tmp / "reconciler", token(plane, *RECONCILER))
        scheduler = proxy.write_kubeconfig(tmp / "scheduler", token(plane, *SCHEDULER))
        quiet = ["--no-leader-elect", "--listen="]  # one replica each; no port to share
        self.parts = {
            "reconciler": Part(
                "reconciler",
                [CLI, "reconcile", "--repo", str(EXAMPLE), "--kubeconfig", str(reconciler)]
                + ["--namespace", RECONCILER[0], "--interval", "1s", *quiet],
                tmp / "reconciler.log",
            ),
            "scheduler": Part(
                "scheduler",
                [CLI, "scheduler", "--kubeconfig", str(scheduler), "--cycle-period", "0.5s"]
                + ["--namespace", repo.cluster.system_namespace, *quiet],
                tmp / "scheduler.log",
            ),
        }

    def next_kill(self, rng: random.Random) -> None:
        """Which part is killed next, and when: the reconciler after a random while, the
        scheduler after a random number of its writes to pods (binds, reservation pods,
        evictions), or a while when it writes none."""
        self.victim = self.parts[rng.choice(sorted(self.parts))]
        self.moment = time.monotonic() + rng.uniform(0.5, 4)
        self.writes = self.pod_writes() + rng.randint(1, 6)
        if self.victim.name == "scheduler":
            self.moment += 4

    def kill_due(self) -> bool:
        return time.monotonic() >= self.moment or (
            self.victim.name == "scheduler" and self.pod_writes() >= self.writes
        )

    def kill(self) -> str:
        """SIGKILL the part due, and start it again."""
        self.victim.kill()
        self.victim.start()
        return self.victim.name

    def weather(self, rng: random.Random) -> None:
        """Switch between the usual faults and an outage: one starts after a random while
        or a random number of the scheduler's writes to pods, whichever comes first."""
        now = time.monotonic()
        if self.proxy.rates == OUTAGE:
            if now >= self.change:
                self.proxy.rates = FAULTS
                self.change = now + rng.uniform(2, 6)
                self.outage_writes = self.pod_writes() + rng.randint(1, 6)
        elif now >= self.change or self.pod_writes() >= self.outage_writes:
            self.proxy.rates = OUTAGE
            self.change = now + rng.uniform(0.5, 2)

    def pod_writes(self) -> int:
        """The scheduler's writes to pods so far (no other client writes pods through the
        proxy), whatever their fate; counted as the requests arrive, each one once."""
        new = self.proxy.seen_since(self.counted)
        self.counted += len(new)
        self.writes_seen += sum(1 for request in new if POD_WRITE.match(request))
        return self.writes_seen

    def close(self) -> None:
        for part in self.parts.values():
            part.stop()
        self.cluster.close()

    def nodes(self, cordoned: bool) -> None:
        for node in repo_nodes(self.repo):
            ref = ObjectRef("v1", "Node", "", node["metadata"]["name"])
            if self.client.get(ref) is None:
                self.client.create(node | {"spec": {"unschedulable": cordoned}})
            else:
                self.client.patch(ref, {"spec": {"unschedulable": cordoned or None}})

    def look(self) -> None:
        """What the node would do and see: devices handed out, and none asked twice (from
        one list of the pods)."""
        self.looked = time.monotonic()
        pods = self.cluster.all_pods()
        self.cluster.devices.step(pods)
        self.overbooked += self.cluster.devices.overbooked(pods)

    def look_due(self) -> bool:
        return time.monotonic() - self.looked >= LOOK_S

    def all_pods_made(self) -> bool:
        pods = self.cluster.all_pods()
        made = {labels(p).get(WORKLOAD_LABEL) for p in pods}
        wanted = {w.name for w in self.repo.workloads}
        return made >= wanted and self.cluster.controllers_done(pods)

    def unsettled(self, h: Harness, placements: dict[str, Any]) -> list[str]:
        """What still differs from Git and from `placements` (simulate's)."""
        left = []
        if not self.cluster.quiet():
            left.append("pods bound but not started, or controllers not done")
        placed = self.cluster.placements()
        if placed != placements:
            left += [
                f"{name}: {placed.get(name)} (simulate: {placements.get(name)})"
                for name in sorted(set(placed) | set(placements))
                if placed.get(name) != placements.get(name)
            ]
        live, listed, git = ours_only(h), h.listed(), self.git
        if not live == listed == git:
            left.append(f"ours-Git {live - git}, Git-ours {git - live}, listed^Git {listed ^ git}")
        return left

    def foreign_node(self) -> None:
        """A third node of the example's group, all its GPUs held by another scheduler's
        pod: nothing of ours may go there, and `simulate`, which knows two nodes, still
        predicts the rest (a GPU held on a node of ours would change where the engine packs)."""
        node = copy.deepcopy(repo_nodes(self.repo)[-1])
        node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = FOREIGN
        self.client.create(node)

    def arrival(self) -> Repo:
        """The repo with its workloads in the order the scheduler queues them: by their
        first pod's creation (to the second), then namespace and name."""
        created: dict[str, str] = {}
        for pod in self.cluster.pods():
            name, stamp = labels(pod)[WORKLOAD_LABEL], pod["metadata"]["creationTimestamp"]
            created[name] = min(created.get(name, stamp), stamp)

        def key(workload: Any) -> tuple[str, str, str]:
            namespace = self.repo.project_namespace(workload.project)
            return created[workload.name], namespace, workload.name

        return dataclasses.replace(self.repo, workloads=tuple(sorted(self.repo.workloads, key=key)))


def ours_only(h: Harness) -> set[str]:
    """Objects labelled ours, less the Endpoints and EndpointSlices the control plane makes
    for our Services (copying their labels)."""
    return {ref for ref in ours(h) if not ref.startswith(("Endpoints/", "EndpointSlice/"))}


@pytest.fixture
def proxy(real_cluster: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy(real_cluster.server, real_cluster.root / "ca.crt") as p:
        yield p


@pytest.fixture
def repo() -> Repo:
    loaded, diagnostics = check_repo(EXAMPLE)
    assert loaded is not None, diagnostics
    return loaded


@pytest.mark.parametrize("seed", SEEDS)
def test_reconciler_and_scheduler_killed_at_random_through_random_faults_end_as_git_and_simulate(
    real_cluster: ControlPlane, proxy: FaultProxy, repo: Repo, tmp_path: Path, seed: int
):
    rng, weather = random.Random(seed), random.Random(-seed)  # kills; outages
    proxy.state.rng.seed(seed)
    chaos = Chaos(real_cluster, repo, proxy, tmp_path)
    h = Harness(  # the test looks as an admin; its last sync runs as the reconciler's account
        lambda: ClusterClient(real_cluster.configuration()),
        EXAMPLE,
        reconciler=lambda: account_client(real_cluster, *RECONCILER),
    )
    try:
        client, cluster = chaos.client, chaos.cluster
        chaos.nodes(cordoned=True)
        chaos.foreign_node()
        theirs = [client.create(foreign_pod(FOREIGN, gpus=8))]
        cluster.wait("the other scheduler's pod running", cluster.quiet)
        before = fingerprint(client, theirs)
        proxy.rates = FAULTS
        for part in chaos.parts.values():
            part.start()

        kills: list[str] = []
        uncordoned = False
        chaos.next_kill(rng)
        deadline = time.monotonic() + 300
        # half the kills while the nodes are cordoned, one before they are uncordoned, the
        # rest while the scheduler binds
        while not uncordoned or len(kills) < KILLS + 1:
            assert time.monotonic() < deadline, f"still in chaos after 300s: {kills}"
            chaos.weather(weather)
            for part in chaos.parts.values():
                part.alive()
            looking = chaos.look_due()
            if looking:
                chaos.look()
            if (
                looking
                and len(theirs) == 1
                and client.get(ObjectRef("v1", "Namespace", "", PROJECT))
            ):
                config_map = {"apiVersion": "v1", "kind": "ConfigMap"}
                config_map["metadata"] = {"name": "hand-made", "namespace": PROJECT}
                theirs += [client.create(secret(PROJECT)), client.create(config_map)]
                before |= fingerprint(client, theirs[1:])
            if looking and not uncordoned and len(kills) >= KILLS // 2 and chaos.all_pods_made():
                scheduler = chaos.parts["scheduler"]
                scheduler.kill()  # so that its next life sees every pod and node at once
                kills.append("scheduler, then the nodes uncordoned")
                chaos.nodes(cordoned=False)
                scheduler.start()
                uncordoned = True
                chaos.next_kill(rng)
            elif chaos.kill_due() and (uncordoned or len(kills) < KILLS // 2):
                kills.append(chaos.kill())
                chaos.next_kill(rng)
            time.sleep(TICK_S)
        faults = len(proxy.injected)
        proxy.clear()

        predicted = simulate(chaos.arrival())

        left: list[str] = []

        def settled() -> bool:
            chaos.look()
            for part in chaos.parts.values():
                part.alive()
            left[:] = chaos.unsettled(h, simulated(predicted))
            return not left

        try:
            # each look lists every kind the reconciler may own: once a second is enough
            wait("the cluster to equal Git and simulate", settled, seconds=180, most=1.0)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {left}") from None
        for part in chaos.parts.values():
            part.stop()

        print(f"seed {seed}: killed {kills}; {faults} faults injected")
        assert faults >= 10, proxy.injected
        assert chaos.overbooked == []
        assert fingerprint(client, theirs) == before
        assert len(before) == 3  # the pod, the Secret and the ConfigMap
        assert cluster.failed() == [] and cluster.evicted_workloads() == []
        statuses = {
            p["metadata"]["name"]: p.get("status", {})
            for p in client.list("gitops-sched.io/v1alpha1", "Project") or ()
        }
        for queue in predicted.projects:
            assert statuses[queue.name]["allocated"] == pytest.approx(queue.allocated, abs=1e-4)
        h.reset()
        assert not h.sync().result.changed and h.writes == 0
        assert_restarts_change_nothing(cluster)
    finally:
        h.close()
        chaos.close()
