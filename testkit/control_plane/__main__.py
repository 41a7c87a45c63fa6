"""`make dev-cluster` / `make dev-cluster-down`: the test control plane outside pytest.

    python -m testkit.control_plane up [--repo DIR] [--dir .dev-cluster]
    python -m testkit.control_plane down [--dir .dev-cluster]

`up` builds what is missing, starts etcd, kube-apiserver, kube-controller-manager and kwok
in the background, creates a kwok node for every node of the repo's worker NodeGroups
(labelled as GPU Feature Discovery labels them), writes `DIR/kubeconfig` and says how to use
it. `down` stops them and removes `DIR`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from gitops_sched.validate import check_repo
from testkit.control_plane import binaries
from testkit.control_plane.client import connect
from testkit.control_plane.cluster import ControlPlane, StartFailed
from testkit.control_plane.nodes import names, repo_nodes


def up(repo: Path, folder: Path) -> int:
    if (folder / "pids.json").exists():
        print(f"a dev cluster already runs in {folder}: `make dev-cluster-down` first")
        return 1
    loaded, diagnostics = check_repo(repo)
    if loaded is None:
        print(f"{repo} is not a valid config repo:\n{diagnostics}", file=sys.stderr)
        return 1
    started = time.monotonic()
    print(f"control plane binaries: {binaries.folder()}")
    plane = ControlPlane(folder.resolve(), die_with_parent=False)
    try:
        plane.start()
    except StartFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    pids = {name: p.pid for name, p in plane.processes.items()}
    (folder / "pids.json").write_text(json.dumps(pids))
    client = connect(plane)
    nodes = repo_nodes(loaded)
    for node in nodes:
        client.create(node)
    client.close()
    kubeconfig = plane.kubeconfig
    print(
        f"dev cluster up in {time.monotonic() - started:.0f}s: kube-apiserver {plane.version} "
        f"at {plane.server}\n"
        f"nodes (kwok, GFD labels): {', '.join(names(nodes))}\n\n"
        f"  export KUBECONFIG={kubeconfig}\n"
        f"  alias kubectl={binaries.path('kubectl')}\n"
        "  kubectl get nodes -L nvidia.com/gpu.product,nvidia.com/gpu.count\n"
        f"  gitops-sched reconcile --repo {repo} --once\n"
        "  gitops-sched scheduler --once\n\n"
        "stop it with `make dev-cluster-down`"
    )
    return 0


def down(folder: Path) -> int:
    pids_file = folder / "pids.json"
    if pids_file.exists():
        for pid in reversed(list(json.loads(pids_file.read_text()).values())):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        time.sleep(1)
    shutil.rmtree(folder, ignore_errors=True)
    print(f"dev cluster stopped; {folder} removed")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.control_plane")
    parser.add_argument("action", choices=("up", "down"))
    parser.add_argument("--repo", type=Path, default=Path("examples/clusters/netapp-dgx"))
    parser.add_argument("--dir", type=Path, default=Path(".dev-cluster"))
    args = parser.parse_args()
    return up(args.repo, args.dir) if args.action == "up" else down(args.dir)


if __name__ == "__main__":
    sys.exit(main())
