"""Installing the shipped manifests on the test control plane, as the README tells an admin to
(`kubectl apply -k reconciler/`, `scheduler/`, `scheduler/agent/`), less the Deployments and
DaemonSets: the tests run those parts in-process instead of as images no kubelet here could
start. The kustomize output is built and parsed once a session.

(Sending kubectl's server-side applies from the test process instead saved about 0.9 CPU-s
an install, but a part started at once then met the API server's caches before they knew
the new ServiceAccounts and roles: 401s and 403s a real install, minutes before its
Deployment starts, never sees.)"""

from __future__ import annotations

import copy
import functools
import io
import subprocess
import time
from pathlib import Path
from typing import Any

from gitops_sched.compiler.output import write_stream
from testkit import fast_yaml
from testkit.control_plane import binaries
from testkit.control_plane.cluster import ControlPlane

ROOT = Path(__file__).resolve().parents[2]
RUNS_IMAGES = ("Deployment", "DaemonSet")


def kubectl(plane: ControlPlane, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [binaries.path("kubectl"), f"--kubeconfig={plane.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr}")
    return done.stdout


def wait_established(plane: ControlPlane, crds: list[dict], timeout: float = 60.0) -> None:
    """Wait until the API server serves every CRD of `crds` (condition Established).

    `kubectl wait --for=condition=...` gives up at once, instead of waiting, on an object
    with no `status.conditions` yet ("accessor error: <nil>"): a CRD just created is such an
    object until the apiextensions controller first writes its status, which on a loaded
    machine can come after kubectl's first look. That answer is asked again."""
    names = [f"crd/{c['metadata']['name']}" for c in crds]
    deadline = time.monotonic() + timeout
    while True:
        left = max(1, int(deadline - time.monotonic()))
        try:
            kubectl(plane, "wait", "--for=condition=established", f"--timeout={left}s", *names)
            return
        except AssertionError as exc:
            if "accessor error" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def kustomization(folder: str) -> list[dict]:
    """`kubectl kustomize` of a folder of this repository, without what runs an image (a new
    copy each call: callers change what they get)."""
    return copy.deepcopy(_kustomized(folder))


@functools.cache
def _kustomized(folder: str) -> list[dict]:
    """The kustomize output, built and parsed once a session: the folders do not change under
    a run."""
    done = subprocess.run(
        [binaries.path("kubectl"), "kustomize", str(ROOT / folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    objects = fast_yaml.load_all(done.stdout)
    return [o for o in objects if o and o["kind"] not in RUNS_IMAGES]


def apply_kustomization(plane: ControlPlane, folder: str) -> list[dict]:
    """`kubectl apply --server-side` of a folder of this repository, without what runs an
    image; the objects applied. A folder the control plane holds as installed is not sent
    again (`installed.py`)."""
    objects = kustomization(folder)
    if folder in plane.installed:
        return objects
    kubectl(plane, "apply", "--server-side", "-f", "-", stdin=_stream(folder))
    return objects


@functools.cache
def _stream(folder: str) -> str:
    """What `apply_kustomization` gives kubectl, written once a session."""
    return fast_yaml.dump_all(_kustomized(folder))


def apply_rendered(plane: ControlPlane, objects: list[dict[str, Any]], *extra: str) -> None:
    """`kubectl apply --server-side` of `objects` written as `render` writes them (quoting
    what YAML 1.2 would retype), as the field manager `gitops-sched`; `extra`: more flags."""
    stream = io.StringIO()
    write_stream(objects, stream)
    kubectl(
        plane,
        "apply",
        "--server-side",
        "--field-manager=gitops-sched",
        *extra,
        "-f",
        "-",
        stdin=stream.getvalue(),
    )
