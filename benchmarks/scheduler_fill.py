"""KAI Scheduler's published fill on the real control plane: 500 kwok nodes x 8 GPUs and
4,000 one-GPU train workloads in 4 projects, created through the API as the batch/v1 Jobs the
compiler renders, their pods made by kube-controller-manager, bound by our scheduler, and
started (Running) by kwok.

The control plane (etcd, kube-apiserver, kube-controller-manager, kwok; `testkit/control_plane`)
runs as local processes on 127.0.0.1; the scheduler runs as in a cluster (`Scheduler.run`:
informers listing and watching, cycles on change) in this process; the Running pods are
counted by a second process so the counting takes nothing from the scheduler. It reports, as
JSON: the time from the scheduler's start to the last pod Running and to the last bind, as
pods per second (KAI's published figure is about 10/s), the time kube-controller-manager took
to make the 4,000 pods, the cycles, the scheduler's requests, and where the scheduler's time
went: the engine, reading the cluster into the engine's input (the informers' view), carrying
out the decisions (binding: API calls) and writing status.

    .venv/bin/python benchmarks/scheduler_fill.py [--nodes 500] [--gpus-per-node 8]
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
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitops_sched.cluster import Backoff, ClusterClient
from gitops_sched.compiler import render_repo
from gitops_sched.hardware.gfd import gfd_product
from gitops_sched.reconciler.sync import Syncer
from gitops_sched.scheduler import loop
from gitops_sched.scheduler.actuate import Actuator
from gitops_sched.scheduler.status import StatusWriter
from gitops_sched.validate import check_repo
from testkit.config_builders import doc
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.nodes import gpu_node

SYSTEM = "gitops-sched-system"
MODEL = "A100-SXM4-80GB"


def write_repo(folder: Path, nodes: int, gpus: int, projects: int, pods: int) -> None:
    """One A100 group found by GFD's product label, one department, `projects` projects
    sharing it, `pods` one-GPU train workloads spread over them."""
    quota = nodes * gpus // projects
    docs = [
        doc("Cluster", "fill", kubernetesVersion="1.35", systemNamespace=SYSTEM),
        doc(
            "NodeGroup",
            "a100",
            role="gpu-worker",
            nodeSelector={"matchLabels": {"nvidia.com/gpu.product": gfd_product(MODEL)}},
            nodeCount=nodes,
            gpusPerNode=gpus,
            gpu={"model": MODEL, "memory": "80Gi"},
        ),
        doc("Department", "research", quota={"gpu": nodes * gpus}),
        *(
            doc("Project", f"p{i}", department="research", quota={"gpu": quota})
            for i in range(projects)
        ),
        *(
            doc(
                "Workload",
                f"job-{n}",
                project=f"p{n % projects}",
                type="train",
                gpu=1,
                image="trainer:1",
            )
            for n in range(pods)
        ),
    ]
    (folder / "repo.yaml").write_text(yaml.safe_dump_all(docs), encoding="utf-8")


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


def count_pods(root: str, token: str, server: str, conn: Connection) -> None:
    """In a process of its own: on each ask, (pods, bound, Running) in the cluster."""
    plane = ControlPlane(Path(root))
    plane.token, plane.api_port = token, int(server.rsplit(":", 1)[1])
    client = ClusterClient(plane.configuration(), timeout=120)
    while conn.recv() == "count":
        pods = client.list("v1", "Pod") or []
        bound = sum(1 for p in pods if p["spec"].get("nodeName"))
        running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
        conn.send((len(pods), bound, running))
    client.close()


def parallel(client: ClusterClient, objects: list[dict[str, Any]]) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(client.create, objects))


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder, ControlPlane(Path(folder) / "cp") as plane:
        write_repo(Path(folder), args.nodes, args.gpus_per_node, args.projects, args.pods)
        repo, diagnostics = check_repo(Path(folder) / "repo.yaml")
        assert repo is not None, [d.text() for d in diagnostics.sorted()]
        client = ClusterClient(plane.configuration(), backoff=Backoff(base=0.05), timeout=120)
        client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gitops-sched"}}
        )
        rendered = render_repo(repo)
        jobs = [o for o in rendered if o["kind"] == "Job"]
        rest = [o for o in rendered if o["kind"] not in ("Job", "Deployment")]
        assert not Syncer(client, "bench", "gitops-sched", "bench").sync(rest, "r1").errors
        parallel(
            client, [gpu_node(f"a100-{n}", MODEL, args.gpus_per_node) for n in range(args.nodes)]
        )

        ours, theirs = multiprocessing.Pipe()
        counter = multiprocessing.Process(
            target=count_pods, args=(str(plane.root), plane.token, plane.server, theirs)
        )
        counter.start()

        def counts() -> tuple[int, int, int]:
            ours.send("count")
            return ours.recv()

        created = time.perf_counter()
        parallel(client, jobs)
        jobs_created = time.perf_counter() - created
        while counts()[0] < args.pods and time.perf_counter() - created < args.timeout:
            time.sleep(1)
        pods_made = time.perf_counter() - created

        timed = Timed()
        timed.wrap(loop, "schedule", "engine")
        timed.wrap(loop, "build_view", "read cluster")
        timed.wrap(Actuator, "carry_out", "carry out (bind)")
        timed.wrap(StatusWriter, "write", "status")
        scheduler = loop.Scheduler(
            ClusterClient(plane.configuration(), backoff=Backoff(base=0.05), timeout=120),
            loop.Settings(namespace=SYSTEM, cycle_period=0.5),
        )
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
        last_bind = None
        bound = running = 0
        while time.perf_counter() - started < args.timeout:
            _, bound, running = counts()
            if bound >= args.pods and last_bind is None:
                last_bind = time.perf_counter() - started
            if running >= args.pods:
                break
            time.sleep(0.5)
        seconds = time.perf_counter() - started
        stop.set()
        thread.join(timeout=60)
        ours.send("stop")
        counter.join(timeout=30)
        requests = dict(scheduler.client.requests)
        scheduler.client.close()
        client.close()
        spent = dict(timed.seconds)
        inside = sum(spent.values())
        return {
            "control_plane": f"kube-apiserver {plane.version}, etcd, kube-controller-manager, kwok",
            "nodes": args.nodes,
            "gpus": args.nodes * args.gpus_per_node,
            "pods": args.pods,
            "jobs_created_seconds": round(jobs_created, 1),
            "pods_made_by_controller_manager_seconds": round(pods_made, 1),
            "bound": bound,
            "running": running,
            "seconds_to_last_bind": last_bind and round(last_bind, 1),
            "seconds_to_last_running": round(seconds, 1),
            "pods_per_second": round(running / seconds, 1),
            "kai_published_pods_per_second": 10,
            "cycles": cycles["cycles"],
            "scheduler_requests": requests,
            "seconds_by_part": {k: round(v, 2) for k, v in sorted(spent.items())},
            "share_of_scheduler_time": {k: round(v / inside, 3) for k, v in sorted(spent.items())},
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pods", type=int, default=4000)
    parser.add_argument("--projects", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=900.0)
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
