"""`gitops-sched reserve`: what a reservation pod runs (see `reservations`).

The device plugin gave the pod one GPU; the NVIDIA container runtime names it in
`NVIDIA_VISIBLE_DEVICES` (its UUID, the device plugin's default `deviceIDStrategy`). The
process writes that UUID to its own pod's `GPU_UUID` annotation (the pod is found by
`POD_NAME` and `POD_NAMESPACE`, set through the downward API), where the scheduler reads
it, then holds the GPU until the pod is deleted (SIGTERM: exit 0).
"""

from __future__ import annotations

import re
import signal
import sys
import threading
from collections.abc import Mapping

from gitops_sched.cluster.client import ClusterClient, ObjectRef
from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.contract.pods import GPU_UUID, VISIBLE_DEVICES_ENV

_UUID = re.compile(r"GPU-[0-9a-fA-F-]+")


class ReserveError(Exception):
    """The pod cannot say which GPU it holds."""


def gpu_uuid(env: Mapping[str, str]) -> str:
    """The one GPU this container was given, by UUID."""
    value = env.get(VISIBLE_DEVICES_ENV, "").strip()
    if not value or value in ("all", "none", "void"):
        raise ReserveError(
            f"{VISIBLE_DEVICES_ENV} is {value or 'unset'}: the pod was given no GPU of its own "
            "(is the NVIDIA device plugin running, and the pod asking for nvidia.com/gpu: 1?)"
        )
    if not _UUID.fullmatch(value):
        raise ReserveError(
            f"{VISIBLE_DEVICES_ENV} is {value!r}, not one GPU UUID: the NVIDIA device plugin "
            "must name devices by UUID (deviceIDStrategy: uuid, its default)"
        )
    return value


def own_pod(env: Mapping[str, str]) -> ObjectRef:
    name, namespace = env.get("POD_NAME", ""), env.get("POD_NAMESPACE", "")
    if not name or not namespace:
        raise ReserveError("POD_NAME and POD_NAMESPACE must be set (the downward API)")
    return ObjectRef("v1", "Pod", namespace, name)


def publish(client: ClusterClient, env: Mapping[str, str]) -> str:
    """Write the GPU's UUID to this pod's annotation; the UUID."""
    uuid = gpu_uuid(env)
    client.patch(own_pod(env), {"metadata": {"annotations": {GPU_UUID: uuid}}})
    return uuid


def hold_until_terminated(stop: threading.Event | None = None) -> None:
    """Sleep until SIGTERM (or `stop`): the GPU stays ours while the process lives."""
    stop = stop or threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()


def run(
    env: Mapping[str, str],
    client: ClusterClient,
    once: bool = False,
    stop: threading.Event | None = None,
) -> int:
    """Publish the UUID, then hold the GPU (unless `once`); the exit code."""
    try:
        uuid = publish(client, env)
    except (ReserveError, ApiFailure) as exc:
        print(f"reserve: {exc}", file=sys.stderr)
        return 1
    print(f"reserve: holding {uuid} for {env['POD_NAMESPACE']}/{env['POD_NAME']}", flush=True)
    if not once:
        hold_until_terminated(stop)
    return 0
