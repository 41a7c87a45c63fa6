"""What a GPU node's kubelet, NVIDIA device plugin and container runtime do that kwok does
not, and only that:

- `PodLog` watches pods and keeps every state each pod was seen in, so a test can tell which
  pods the Eviction API stopped (their `DisruptionTarget` condition) after they are gone.
- `DevicePlugin` gives each running pod that asks for `nvidia.com/gpu` free GPUs of its
  node (by UUID, as the fake NVML backend names them) and runs a container command of
  ours (the reservation pod's `gitops-sched reserve`) with the pod's environment and
  `NVIDIA_VISIBLE_DEVICES`, stopping it when the pod goes (`started()`: each such command
  has said its first line or exited, as a startup probe would tell; `failures()`: those that
  exited non-zero, with what they said). `overbooked()` lists the nodes
  whose running pods hold more GPUs than the node has: where a kubelet would have refused
  a pod (the double booking a scheduler must never make).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

from gitops_sched.agent.fake import fake_gpu_uuid
from gitops_sched.cluster import ApiFailure, ClusterClient
from gitops_sched.contract.pods import GPU_RESOURCE, VISIBLE_DEVICES_ENV

Obj = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")


def gpus_asked(pod: Obj) -> int:
    total = Decimal(0)
    for container in pod["spec"].get("containers") or ():
        limits = (container.get("resources") or {}).get("limits") or {}
        total += Decimal(str(limits.get(GPU_RESOURCE, 0)))
    return int(total)


def holds_devices(pod: Obj) -> bool:
    """Bound and not finished: its containers have (or are about to have) their devices."""
    return bool(pod["spec"].get("nodeName")) and pod.get("status", {}).get("phase") not in TERMINAL


class PodLog:
    """Every pod event since `start()`, kept by uid, from a watch in a thread."""

    def __init__(self, client: ClusterClient):
        self.client = client
        self.seen: dict[str, list[Obj]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()

    def start(self) -> PodLog:
        _, self._version = self.client.list_versioned("v1", "Pod")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for event in self.client.watch("v1", "Pod", self._version, timeout=1):
                    pod = event["object"]
                    self._version = pod["metadata"].get("resourceVersion", self._version)
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        with self._lock:
                            self.seen.setdefault(pod["metadata"]["uid"], []).append(pod)
                    if self._stop.is_set():
                        return
            except ApiFailure:
                _, self._version = self.client.list_versioned("v1", "Pod")

    def evicted_pods(self) -> list[Obj]:
        """Each pod the Eviction API stopped (as first seen so), in name order."""
        with self._lock:
            histories = list(self.seen.values())
        out = [
            next(p for p in history if _evicted(p))
            for history in histories
            if any(_evicted(p) for p in history)
        ]
        return sorted(out, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))


def _evicted(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == "EvictionByEvictionAPI"
        for c in conditions
    )


class Container:
    """A started container command, its output read by a thread as the runtime logs it."""

    def __init__(self, command: list[str], env: dict[str, str]):
        self.process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.spoke = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            self.spoke.set()

    def started(self) -> bool:
        return self.spoke.is_set() or self.process.poll() is not None

    def failure(self) -> str | None:
        code = self.process.poll()
        return None if code in (None, 0) else f"exit {code}: {' | '.join(self.lines)}"

    def stop(self) -> None:
        """End the command; its output pipe closes once the reader has read it to the end."""
        self.process.terminate()
        self.process.wait(10)
        self._reader.join(10)
        if not self._reader.is_alive() and self.process.stdout is not None:
            self.process.stdout.close()


class DevicePlugin:
    """Call `step()` to hand out devices and start or stop our containers; `close()` at the
    end. `kubeconfig` is what a started command uses to reach the API server (in a pod it
    would be the pod's service account)."""

    def __init__(self, client: ClusterClient, kubeconfig: Path):
        self.client = client
        self.kubeconfig = kubeconfig
        self.given: dict[str, list[str]] = {}  # pod uid -> GPU UUIDs
        self.processes: dict[str, Container] = {}

    def step(self, pods: list[Obj] | None = None) -> bool:
        """One pass over the pods (as just listed, else listed here); whether anything was
        started or stopped."""
        pods = (self.client.list("v1", "Pod") or []) if pods is None else pods
        live = {p["metadata"]["uid"]: p for p in pods if holds_devices(p)}
        changed = False
        has: dict[str, int] | None = None
        for uid in [u for u in self.given if u not in live]:
            del self.given[uid]
            changed |= self._stop(uid)
        for uid, pod in sorted(live.items(), key=lambda item: _created(item[1])):
            if uid in self.given or pod["status"].get("phase") != "Running":
                continue
            has = has if has is not None else self._node_gpus()
            self.given[uid] = self._allocate(pod, live, has)
            changed = True
            self._start(pod)
        return changed

    def _allocate(self, pod: Obj, live: dict[str, Obj], has: dict[str, int]) -> list[str]:
        node = pod["spec"]["nodeName"]
        taken = {
            u
            for uid, given in self.given.items()
            if live.get(uid, {}).get("spec", {}).get("nodeName") == node
            for u in given
        }
        count = has.get(node, 0)
        free = [fake_gpu_uuid(node, i) for i in range(count) if fake_gpu_uuid(node, i) not in taken]
        return free[: gpus_asked(pod)]

    def _node_gpus(self) -> dict[str, int]:
        """Each node's allocatable `nvidia.com/gpu`, from one list."""
        return {
            n["metadata"]["name"]: int(
                (n.get("status") or {}).get("allocatable", {}).get(GPU_RESOURCE, 0)
            )
            for n in self.client.list("v1", "Node") or ()
        }

    def _start(self, pod: Obj) -> None:
        """Run the container's command when it is ours (`gitops-sched ...`)."""
        (container,) = pod["spec"]["containers"][:1] or [{}]
        command = [*(container.get("command") or ()), *(container.get("args") or ())]
        if not command or command[0] != "gitops-sched":
            return
        executable = shutil.which("gitops-sched", path=os.path.dirname(sys.executable))
        env = {
            "PATH": os.environ.get("PATH", ""),
            "KUBECONFIG": str(self.kubeconfig),
            VISIBLE_DEVICES_ENV: ",".join(self.given[pod["metadata"]["uid"]]),
            **_container_env(pod, container),
        }
        self.processes[pod["metadata"]["uid"]] = Container(
            [executable or "gitops-sched", *command[1:]], env
        )

    def _stop(self, uid: str) -> bool:
        container = self.processes.pop(uid, None)
        if container is None:
            return False
        container.stop()
        return True

    def started(self) -> bool:
        """Every command it ran has started (said its first line) or exited."""
        return all(c.started() for c in self.processes.values())

    def failures(self) -> list[str]:
        """The commands that exited non-zero, with what they said."""
        return sorted(f for c in self.processes.values() if (f := c.failure()))

    def close(self) -> None:
        for uid in list(self.processes):
            self._stop(uid)

    def overbooked(self, pods: list[Obj] | None = None) -> list[str]:
        """Nodes whose unfinished bound pods ask for more GPUs than the node has (`pods`:
        the pods as just listed, else listed here)."""
        pods = (self.client.list("v1", "Pod") or []) if pods is None else pods
        asked: dict[str, int] = {}
        for pod in pods:
            if holds_devices(pod):
                node = pod["spec"]["nodeName"]
                asked[node] = asked.get(node, 0) + gpus_asked(pod)
        has = self._node_gpus()
        return sorted(
            f"{node}: {n} GPUs asked of {has.get(node, 0)}"
            for node, n in asked.items()
            if n > has.get(node, 0)
        )


def _created(pod: Obj) -> tuple[str, str]:
    return pod["metadata"].get("creationTimestamp", ""), pod["metadata"]["name"]


def _container_env(pod: Obj, container: Obj) -> dict[str, str]:
    """The container's plain and downward-API (metadata fields) variables."""
    fields = {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "spec.nodeName": pod["spec"].get("nodeName", ""),
    }
    env = {}
    for entry in container.get("env") or ():
        if "value" in entry:
            env[entry["name"]] = str(entry["value"])
        path = ((entry.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if path in fields:
            env[entry["name"]] = fields[path]
    return env
