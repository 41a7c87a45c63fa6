"""The agent's reads and writes on the API server, through the cluster client.

Reads: its Node, the pods bound to it, the device plugin's pod on it. Writes: merge patches
of single annotations (node, pod), Warning Events on pods, Evictions, and deleting the
device plugin's pod. Each write is printed as one line (the agent's log). Under a dry run it
is printed (once, though later ticks would make it again) and not sent; reads still are.
"""

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from gitops_sched.agent.pods import PodKey, format_time
from gitops_sched.cluster import ClusterClient, ObjectRef

COMPONENT = "gitops-sched-agent"
NODE_API = ("v1", "Node")


@dataclass(frozen=True)
class DevicePlugin:
    """Where the NVIDIA device plugin's pods are (the GPU Operator's defaults)."""

    namespace: str = "gpu-operator"
    selector: str = "app=nvidia-device-plugin-daemonset"


GPU_OPERATOR = DevicePlugin()


class NodeApi:
    def __init__(
        self,
        client: ClusterClient,
        node: str,
        *,
        dry_run: bool,
        say: Callable[[str], None],
        device_plugin: DevicePlugin = GPU_OPERATOR,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.node_name = node
        self.dry_run = dry_run
        self.say = say
        self.device_plugin = device_plugin
        self.clock = clock
        self._shown: set[str] = set()  # dry run: writes already printed

    # --- reads -------------------------------------------------------------------------

    def node(self) -> dict[str, Any] | None:
        return self.client.get(ObjectRef(*NODE_API, "", self.node_name))

    def pods(self) -> list[dict[str, Any]]:
        """Every pod bound to this node."""
        pods, _ = self.client.list_versioned(
            "v1", "Pod", field_selector=f"spec.nodeName={self.node_name}"
        )
        return pods

    # --- writes ------------------------------------------------------------------------

    def would(self, line: str) -> None:
        """Under a dry run, say what would be done, the first time only."""
        if line not in self._shown:
            self._shown.add(line)
            self.say(f"would {line}")

    def _write(self, line: str, send: Callable[[], Any]) -> None:
        if self.dry_run:
            self.would(line)
        else:
            self.say(line)
            send()

    def annotate_node(self, annotations: Mapping[str, str | None]) -> None:
        ref = ObjectRef(*NODE_API, "", self.node_name)
        self._annotate(ref, f"node/{self.node_name}", annotations)

    def annotate_pod(self, pod: PodKey, annotations: Mapping[str, str | None]) -> None:
        ref = ObjectRef("v1", "Pod", pod.namespace, pod.name)
        self._annotate(ref, f"pod/{pod.namespace}/{pod.name}", annotations)

    def _annotate(self, ref: ObjectRef, shown: str, annotations: Mapping[str, str | None]) -> None:
        changes = ", ".join(
            f"-{key}" if value is None else f"{key}={value}" for key, value in annotations.items()
        )
        patch = {"metadata": {"annotations": dict(annotations)}}
        self._write(
            f"annotate {shown} {changes}",
            lambda: self.client.patch(ref, patch),
        )

    def warn(self, pod: PodKey, reason: str, message: str) -> None:
        """A Warning Event on the pod, as `kubectl describe pod` shows it."""
        now = self.clock()
        stamp = format_time(now)
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{pod.name}.{int(now * 1e9):x}", "namespace": pod.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": pod.namespace,
                "name": pod.name,
                "uid": pod.uid,
            },
            "type": "Warning",
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT, "host": self.node_name},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.node_name,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        self._write(
            f"warn pod/{pod.namespace}/{pod.name} {reason}: {message}",
            lambda: self.client.create(event, field_manager=COMPONENT),
        )

    def evict(self, pod: PodKey, message: str) -> None:
        """An Eviction (policy/v1): the API server honours the pod's disruption budget."""
        ref = ObjectRef("v1", "Pod", pod.namespace, pod.name)
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
        }
        self._write(
            f"evict pod/{pod.namespace}/{pod.name}: {message}",
            lambda: self.client.post(ref, "eviction", body),
        )

    def restart_device_plugin(self) -> int:
        """Delete the device plugin's pod on this node so its DaemonSet starts it again and it
        advertises the node's new MIG instances (what NVIDIA's mig-manager does); how many
        pods were deleted."""
        plugin = self.device_plugin
        pods = self.client.list(
            "v1", "Pod", label_selector=plugin.selector, namespace=plugin.namespace
        )
        mine = [p for p in pods or () if (p.get("spec") or {}).get("nodeName") == self.node_name]
        if not mine:
            self.say(
                f"no device plugin pod on node {self.node_name} "
                f"(namespace {plugin.namespace}, selector {plugin.selector}): "
                "the new MIG layout is advertised once the plugin restarts"
            )
        for pod in mine:
            ref = ObjectRef("v1", "Pod", plugin.namespace, pod["metadata"]["name"])
            self._write(
                f"delete pod/{plugin.namespace}/{ref.name} (device plugin restart)",
                partial(self.client.delete, ref),
            )
        return len(mine)
