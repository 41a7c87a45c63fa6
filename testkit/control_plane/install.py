"""Installing the shipped manifests on the test control plane, as the README tells an admin to
(`kubectl apply -k reconciler/`, `scheduler/`, `scheduler/agent/`), less the Deployments and
DaemonSets: the tests run those parts in-process instead of as images no kubelet here could
start.

`kubectl_apply_kustomization` runs the real kubectl. `apply_kustomization`, which the tests
that only need the parts installed use, sends the API server the requests
`kubectl apply --server-side` sends for the same objects (one server-side apply each, in
kustomize's order, as the field manager `kubectl`, no force) from this process: a kubectl
process cost each test about 0.9 CPU-s, more than the API server spent on the objects."""

from __future__ import annotations

import copy
import functools
import io
import subprocess
from pathlib import Path
from typing import Any

import yaml

from gitops_sched.compiler.output import write_stream
from testkit.control_plane import binaries
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.fixtures import connect

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
    objects = yaml.load_all(done.stdout, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return [o for o in objects if o and o["kind"] not in RUNS_IMAGES]


def apply_kustomization(plane: ControlPlane, folder: str) -> list[dict]:
    """`kubectl apply --server-side -k` of a folder of this repository, without what runs an
    image, as the requests kubectl sends (see the module's docstring); the objects applied."""
    objects = kustomization(folder)
    client = connect(plane)
    try:
        for obj in objects:
            client.apply(obj, "kubectl", force=False)
    finally:
        client.close()
    return objects


def kubectl_apply_kustomization(plane: ControlPlane, folder: str) -> list[dict]:
    """`kubectl apply --server-side` of a folder of this repository, without what runs an
    image, by the real kubectl; the objects applied."""
    objects = kustomization(folder)
    kubectl(plane, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))
    return objects


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
