"""Reconcile at scale: a repo rendering about 10,000 objects, synced into the real control
plane (kube-apiserver, etcd, kube-controller-manager and kwok from `testkit/control_plane`,
local processes on 127.0.0.1; no nodes, so the Jobs' pods stay pending).

Reports, as JSON: the first sync (everything created), a no-op sync (the reconciler's
requests, reads and writes apart, and its time), a sync after a commit that changes one
project's quota, and one after a commit that changes 1% of the workloads (their Jobs'
pod templates: each such Job is replaced, as Kubernetes will not change a Job's template).

    .venv/bin/python benchmarks/reconcile_scale.py [--projects 1000] [--workloads 2500]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitops_sched.cluster import Backoff, ClusterClient
from gitops_sched.reconciler import Reconciler, Settings
from testkit.control_plane.cluster import ControlPlane
from testkit.reconciler_harness import doc


def repo_files(
    projects: int, workloads: int, changed: int = 0, lowered: int = 0
) -> dict[str, list[dict]]:
    """Departments of 50 projects (1 GPU each, one member), `workloads` train jobs spread
    over the projects; the first `changed` workloads get another command, and the first
    `lowered` projects a quota of 0."""
    departments = (projects + 49) // 50
    files: dict[str, list[dict]] = {
        "cluster.yaml": [
            doc(
                "Cluster",
                "scale",
                {
                    "kubernetesVersion": "1.32",
                    "systemNamespace": "gitops-sched-system",
                    "namespacePrefix": "p-",
                },
            )
        ],
        "node-groups.yaml": [
            doc(
                "NodeGroup",
                "a100",
                {
                    "role": "gpu-worker",
                    "nodeSelector": {"matchLabels": {"pool": "a100"}},
                    "nodeCount": (projects + 7) // 8 + 1,
                    "gpusPerNode": 8,
                    "gpu": {"model": "A100-80GB", "memory": "80Gi"},
                },
            )
        ],
        "templates.yaml": [
            doc(
                "Template",
                "train",
                {"image": "pytorch:2.3", "resources": {"cpu": "8000m", "memory": "65536Mi"}},
            )
        ],
    }
    files["departments.yaml"] = [
        doc("Department", f"d{d}", {"quota": {"gpu": 50}}) for d in range(departments)
    ]
    files["projects.yaml"] = [
        doc(
            "Project",
            f"p{p}",
            {
                "department": f"d{p // 50}",
                "quota": {"gpu": 0 if p < lowered else 1},
                "members": {"users": [f"user{p}@example.com"]},
            },
        )
        for p in range(projects)
    ]
    files["workloads.yaml"] = [
        doc(
            "Workload",
            f"w{w}",
            {
                "project": f"p{w % projects}",
                "type": "train",
                "template": "train",
                "gpu": 1,
                "command": ["python", "train.py", *(["--resume"] if w < changed else [])],
            },
        )
        for w in range(workloads)
    ]
    return files


def commit(repo: Path, files: dict[str, list[dict]]) -> None:
    repo.mkdir(exist_ok=True)

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@example.com", *args],
            cwd=repo,
            check=True,
            capture_output=True,
        )

    if not (repo / ".git").exists():
        git("init", "-q")
    for name, docs in files.items():
        (repo / name).write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    git("add", "-A")
    git("commit", "-q", "-m", "change")


def timed_sync(client: ClusterClient, reconciler: Reconciler) -> dict[str, Any]:
    """One sync and the requests the reconciler's client sent for it (retries too)."""
    before = dict(client.requests)
    start = time.perf_counter()
    outcome = reconciler.sync_once()
    seconds = time.perf_counter() - start
    assert outcome.ok, (outcome.errors, outcome.result and outcome.result.errors[:5])
    result = outcome.result
    return {
        "seconds": round(seconds, 2),
        "reads": client.requests["read"] - before.get("read", 0),
        "writes": client.requests["write"] - before.get("write", 0),
        "created": len(result.created),
        "updated": len(result.updated),
        "replaced": len(result.replaced),
        "pruned": len(result.pruned),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=2500)
    parser.add_argument("--repeat", type=int, default=3, help="no-op syncs; the best is kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(Path(tmp) / "cp") as plane:
        repo = Path(tmp) / "repo"
        commit(repo, repo_files(args.projects, args.workloads))
        client = ClusterClient(plane.configuration(), backoff=Backoff(base=0.05), timeout=300)
        reconciler = Reconciler(Settings(repo=str(repo), identity="bench"), client)
        first = timed_sync(client, reconciler)
        managed = reconciler.syncer.read_inventory().entries
        noop = min(
            (timed_sync(client, reconciler) for _ in range(args.repeat)),
            key=lambda r: r["seconds"],
        )
        commit(repo, repo_files(args.projects, args.workloads, lowered=1))
        quota = timed_sync(client, reconciler)
        changed = len(managed) // 100 // 2  # each changed workload is a Workload and a Job
        commit(repo, repo_files(args.projects, args.workloads, changed=changed, lowered=1))
        one_percent = timed_sync(client, reconciler)
        client.close()
    print(
        json.dumps(
            {
                "managed_objects": len(managed),
                "first_sync": first,
                "noop_sync": noop,
                "one_quota_changed_sync": quota,
                "one_percent_sync": {"changed_objects": 2 * changed, **one_percent},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
