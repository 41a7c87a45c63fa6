"""The control plane's binaries: built once per version into a cache outside the repository
by `hack/control-plane.sh` (which also takes envtest's `KUBEBUILDER_ASSETS`), or taken from
`GITOPS_SCHED_CONTROL_PLANE_BIN` when that names a folder that has them all."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "kwok")
SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "control-plane.sh"


class BuildFailed(RuntimeError):
    """The control plane could not be built (no Go, no module proxy, a compile error)."""


@functools.cache
def folder() -> Path:
    """The folder holding every binary of `NAMES`, building what is missing."""
    given = os.environ.get("GITOPS_SCHED_CONTROL_PLANE_BIN")
    if given and all((Path(given) / n).is_file() for n in NAMES):
        return Path(given)
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildFailed(f"{SCRIPT} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def path(name: str) -> str:
    return str(folder() / name)
