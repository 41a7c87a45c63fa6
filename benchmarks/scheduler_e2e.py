"""The in-cluster scheduler end to end: KAI Scheduler's fill (500 nodes x 8 GPUs, 4,000
pending one-GPU pods in 4 projects) bound through the API emulator over HTTP.

The scheduler runs as in a cluster (`Scheduler.run`: informers listing and watching, cycles
on change), talking through the official client to the emulator, which runs in a process of
its own on 127.0.0.1 as an API server would; the emulator skips the OpenAPI validation of
built-in kinds (a test-only cost). It reports, as JSON: pods bound per second from start to
the last bind (KAI's published figure is about 10/s; the goal is >= 100/s), the cycles it
took, and where the scheduler's time went: the engine, reading the cluster into the
engine's input, carrying out the decisions (binding: API calls) and writing status.

    .venv/bin/python benchmarks/scheduler_e2e.py [--nodes 500] [--gpus-per-node 8]
        [--pods 4000] [--projects 4]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import kubernetes
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitops_sched.cluster import Backoff, ClusterClient
from gitops_sched.compiler import render_repo
from gitops_sched.config.validate import check_repo
from gitops_sched.reconciler.sync import Syncer
from gitops_sched.scheduler import loop
from gitops_sched.scheduler.actuate import Actuator
from gitops_sched.scheduler.status import StatusWriter
from tests.config_builders import doc
from tests.kube_emulator import KubeEmulator

SYSTEM = "gitops-sched-system"
SCHEDULED = ("Namespace", "ConfigMap", "PriorityClass", "CustomResourceDefinition")


def write_repo(folder: Path, nodes: int, gpus: int, projects: int) -> None:
    """One A100 group of `nodes` nodes, one department, `projects` projects sharing it."""
    quota = nodes * gpus // projects
    docs = [
        doc("Cluster", "fill", kubernetesVersion="1.32", systemNamespace=SYSTEM),
        doc(
            "NodeGroup",
            "a100",
            role="gpu-worker",
            nodeSelector={"matchLabels": {"pool": "a100"}},
            nodeCount=nodes,
            gpusPerNode=gpus,
            gpu={"model": "A100-80GB", "memory": "80Gi"},
        ),
        doc("Department", "research", quota={"gpu": nodes * gpus}),
        *(
            doc("Project", f"p{i}", department="research", quota={"gpu": quota})
            for i in range(projects)
        ),
    ]
    (folder / "repo.yaml").write_text(yaml.safe_dump_all(docs), encoding="utf-8")


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"pool": "a100"},
        },
    }


def node_status(gpus: int) -> dict[str, Any]:
    amounts = {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "status": {
            "capacity": amounts,
            "allocatable": amounts,
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    }


def pod(name: str, namespace: str) -> dict[str, Any]:
    """A pod a user submits by hand: our scheduler, one whole GPU."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "gitops-sched",
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "c:1", "resources": {"limits": {"nvidia.com/gpu": 1}}}
            ],
        },
    }


class Timed:
    """Seconds spent in each wrapped function, summed over the run."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()

    def wrap(self, owner: Any, attribute: str, label: str) -> None:
        inner: Callable[..., Any] = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started

        setattr(owner, attribute, timed)


def bound(kube: KubeEmulator) -> int:
    return sum(1 for p in kube.api.objects("v1", "Pod") if p["spec"].get("nodeName"))


def serve_cluster(args: argparse.Namespace, folder: str, conn: Connection) -> None:
    """The API server's side, in a process of its own as in a cluster (one process would
    have the emulator and the scheduler take turns on the interpreter's lock): the repo
    installed, the nodes and the pending pods; then it answers how many pods are bound."""
    with KubeEmulator(validate_builtins=False) as kube:
        write_repo(Path(folder), args.nodes, args.gpus_per_node, args.projects)
        repo, diagnostics = check_repo(Path(folder))
        assert repo is not None, [d.text() for d in diagnostics.sorted()]
        client = ClusterClient(kube.configuration(), backoff=Backoff(attempts=6, base=0.01))
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gitops-sched"}}
        kube.api.call("POST", "/api/v1/namespaces", namespace)
        rendered = [o for o in render_repo(repo) if o["kind"] not in ("Job", "Deployment")]
        result = Syncer(client, "bench", "gitops-sched", "bench").sync(rendered, "r1")
        assert not result.errors, result.errors
        client.close()
        for n in range(args.nodes):
            name = f"a100-{n}"
            kube.api.call("POST", "/api/v1/nodes", node(name))
            kube.api.call("PATCH", f"/api/v1/nodes/{name}/status", node_status(args.gpus_per_node))
        namespaces = [repo.project_namespace(f"p{i}") for i in range(args.projects)]
        for n in range(args.pods):
            namespace = namespaces[n % len(namespaces)]
            path = f"/api/v1/namespaces/{namespace}/pods"
            kube.api.call("POST", path, pod(f"job-{n}", namespace))
        kube.api.reset_counts()
        conn.send(kube.url)
        while (ask := conn.recv()) != "stop":
            counts = kube.api.counts()
            conn.send((bound(kube), counts["read"], counts["write"]) if ask == "bound" else None)


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        ours, theirs = multiprocessing.Pipe()
        server = multiprocessing.Process(target=serve_cluster, args=(args, folder, theirs))
        server.start()
        url = ours.recv()
        configuration = kubernetes.client.Configuration()
        configuration.host = url
        client = ClusterClient(configuration, backoff=Backoff(attempts=6, base=0.01))

        timed = Timed()
        timed.wrap(loop, "schedule", "engine")
        timed.wrap(loop, "build_view", "read cluster")
        timed.wrap(Actuator, "carry_out", "carry out (bind)")
        timed.wrap(StatusWriter, "write", "status")
        scheduler = loop.Scheduler(client, loop.Settings(namespace=SYSTEM, cycle_period=0.5))
        cycles = Counter[str]()
        inner_cycle = scheduler.cycle

        def counted() -> Any:
            cycles["cycles"] += 1
            return inner_cycle()

        scheduler.cycle = counted  # type: ignore[method-assign]
        stop = threading.Event()
        started = time.perf_counter()
        thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
        thread.start()
        done = reads = writes = 0
        while time.perf_counter() - started < args.timeout:
            ours.send("bound")
            done, reads, writes = ours.recv()
            if done >= args.pods:
                break
            time.sleep(0.1)
        seconds = time.perf_counter() - started
        stop.set()
        thread.join(timeout=30)
        client.close()
        ours.send("stop")
        server.join(timeout=30)
        spent = dict(timed.seconds)
        inside = sum(spent.values())
        return {
            "nodes": args.nodes,
            "gpus": args.nodes * args.gpus_per_node,
            "pods": args.pods,
            "bound": done,
            "seconds": round(seconds, 2),
            "pods_per_second": round(done / seconds, 1),
            "goal_pods_per_second": 100,
            "kai_published_pods_per_second": 10,
            "cycles": cycles["cycles"],
            "requests": {"read": reads, "write": writes},
            "seconds_by_part": {k: round(v, 2) for k, v in sorted(spent.items())},
            "share_of_scheduler_time": {k: round(v / inside, 3) for k, v in sorted(spent.items())},
            "engine_over_api": round(
                spent.get("engine", 0.0) / max(spent.get("carry out (bind)", 0.0), 1e-9), 3
            ),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pods", type=int, default=4000)
    parser.add_argument("--projects", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=600.0)
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
