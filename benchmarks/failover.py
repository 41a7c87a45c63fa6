"""Reconciler failover on the real control plane: two `gitops-sched reconcile` processes
(leader election on, the shipped Lease timings), the Lease holder killed with SIGKILL (it
gives nothing back), and the time from the kill until the other holds the Lease and until
its first sync after that has ended (its Cluster status written). A replica killed is
started again as the next round's standby, and the next kill waits until it is ready (its
`/readyz`: it is following the Lease), as a Deployment's standby would be.

Reports, as JSON, each round's two times and their worst.

    .venv/bin/python benchmarks/failover.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitops_sched.cluster import ClusterClient, ObjectRef
from testkit.control_plane.cluster import ControlPlane, free_port
from testkit.reconciler_harness import API, commit, config

CLI = str(Path(sys.executable).with_name("gitops-sched"))
NAMESPACE = "gitops-sched"
LEASE = ObjectRef(
    "coordination.k8s.io/v1", "Lease", NAMESPACE, "gitops-sched-reconciler-gitops-sched"
)


def replica(plane: ControlPlane, repo: Path, name: str) -> subprocess.Popen[bytes]:
    """A reconcile process, once ready."""
    env = {**os.environ, "POD_NAME": name}
    port = free_port()
    args = ["reconcile", "--repo", str(repo), "--kubeconfig", str(plane.kubeconfig)]
    args += ["--namespace", NAMESPACE, "--interval", "600s", "--listen", f"127.0.0.1:{port}"]
    process = subprocess.Popen(
        [CLI, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    until(lambda: ready(port))
    return process


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def until(done: Any, seconds: float = 120) -> Any:
    deadline = time.monotonic() + seconds
    while not (value := done()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {seconds}s")
        time.sleep(0.02)
    return value


def holder(client: ClusterClient) -> str:
    lease = client.get(LEASE) or {}
    return (lease.get("spec") or {}).get("holderIdentity") or ""


def last_sync(client: ClusterClient) -> str:
    cluster = client.get(ObjectRef(API, "Cluster", "", "lab")) or {}
    return (cluster.get("status") or {}).get("lastSyncTime", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(Path(tmp) / "cp") as plane:
        client = ClusterClient(plane.configuration())
        repo = Path(tmp) / "repo"
        commit(repo, config({"vision": 8}))
        replicas = {n: replica(plane, repo, n) for n in ("a", "b")}
        try:
            for n in range(args.rounds):
                leader = until(lambda: holder(client))
                name = leader.rsplit("-", 1)[0]
                until(lambda: last_sync(client))
                commit(repo, config({"vision": 8 - n % 2}))  # news for the next leader's sync
                before = last_sync(client)
                replicas[name].send_signal(signal.SIGKILL)
                killed = time.monotonic()
                replicas[name].wait()
                until(lambda old=leader: holder(client) not in ("", old))
                took_lease = time.monotonic() - killed
                until(lambda old=before: last_sync(client) != old)
                synced = time.monotonic() - killed
                rounds.append({"lease_taken_s": round(took_lease, 2), "synced_s": round(synced, 2)})
                replicas[name] = replica(plane, repo, name)  # a new standby
        finally:
            for process in replicas.values():
                process.kill()
                process.wait()
            client.close()
    print(
        json.dumps(
            {
                "rounds": rounds,
                "worst_lease_taken_s": max(r["lease_taken_s"] for r in rounds),
                "worst_synced_s": max(r["synced_s"] for r in rounds),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
