"""What NVIDIA's device plugin and GPU Feature Discovery do on a MIG node when its MIG
instances change, where kwok runs no containers; only that.

- The plugin's pod: one per node, in `gpu-operator`, named and labelled as the GPU
  Operator's `nvidia-device-plugin-daemonset` DaemonSet makes them. Made with `spec.nodeName`,
  as the DaemonSet controller's pods would end up (they need a kube-scheduler to be bound,
  which this control plane does not run).
- Its DaemonSet: when the pod is gone (the node agent deletes it after a MIG change, as
  NVIDIA's mig-manager does), a new one is made.
- The plugin, once its pod runs: it finds the MIG devices the node's GPUs have (read from
  the GPU backend the agent changes: the hardware) and the kubelet reports them, under the
  mixed strategy, as `nvidia.com/mig-<profile>` capacity and allocatable on the node's
  status; GFD labels the node `nvidia.com/mig-<profile>.count`. A profile no GPU has any
  more is left at 0 (the kubelet keeps a resource whose plugin stopped serving it) and its
  label is removed.

Nothing is allocated to pods, and no other label or resource is touched. Nothing happens
between calls: the test says when the DaemonSet and the plugin act (`step()`), so it can
look at the cluster before the node advertises a new instance.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from gitops_sched.agent.gpus import GpuBackend
from gitops_sched.cluster import ClusterClient, ObjectRef

Obj = dict[str, Any]
NAMESPACE = "gpu-operator"
# the GPU Operator's device plugin DaemonSet: its name, its pods' label, the plugin's image
DAEMONSET = "nvidia-device-plugin-daemonset"
POD_LABELS = {"app": DAEMONSET}
IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
MIG_PREFIX = "nvidia.com/mig-"  # + profile: the resource; + profile + ".count": GFD's label
COUNT_SUFFIX = ".count"


class MigDevicePlugin:
    """The device plugin of node `node`, whose GPUs are `backend`'s."""

    def __init__(
        self, client: ClusterClient, node: str, backend: GpuBackend, namespace: str = NAMESPACE
    ):
        self.client = client
        self.node = node
        self.backend = backend
        self.namespace = namespace
        self.serving: str | None = None  # uid of the pod whose devices the node shows

    def pods(self) -> list[Obj]:
        """The plugin's pods on the node, those being deleted too."""
        selector = ",".join(f"{k}={v}" for k, v in POD_LABELS.items())
        pods = self.client.list("v1", "Pod", label_selector=selector, namespace=self.namespace)
        return [p for p in pods or () if p["spec"].get("nodeName") == self.node]

    def start(self) -> Obj:
        """The DaemonSet's pod for the node (the pod, as created)."""
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{DAEMONSET}-",
                "namespace": self.namespace,
                "labels": dict(POD_LABELS),
            },
            "spec": {
                "nodeName": self.node,
                "containers": [{"name": "nvidia-device-plugin", "image": IMAGE}],
            },
        }
        return self.client.create(pod)

    def step(self) -> str | None:
        """What the DaemonSet and the plugin do next: a new pod when the node has none left,
        the devices reported once a new pod runs. The uid of the pod serving, if any."""
        pods = self.pods()
        if not pods:
            self.start()
            return None
        running = [
            p
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"
        ]
        if running and running[0]["metadata"]["uid"] != self.serving:
            self._advertise()
            self.serving = running[0]["metadata"]["uid"]
        return self.serving if any(p["metadata"]["uid"] == self.serving for p in running) else None

    def restarted(self, before: str | None) -> str | None:
        """`step()`, and the serving pod's uid once it is another than `before`."""
        serving = self.step()
        return serving if serving not in (None, before) else None

    def _advertise(self) -> None:
        found = Counter(
            instance.profile
            for gpu in self.backend.gpus()
            if gpu.mig_mode == "enabled"
            for instance in gpu.instances
        )
        ref = ObjectRef("v1", "Node", "", self.node)
        node = self.client.get(ref) or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        labels = node.get("metadata", {}).get("labels") or {}
        served = {r.removeprefix(MIG_PREFIX) for r in allocatable if r.startswith(MIG_PREFIX)}
        counted = {
            k.removeprefix(MIG_PREFIX).removesuffix(COUNT_SUFFIX)
            for k in labels
            if k.startswith(MIG_PREFIX) and k.endswith(COUNT_SUFFIX)
        }
        amounts = {f"{MIG_PREFIX}{p}": str(found[p]) for p in sorted(served | set(found))}
        counts = {
            f"{MIG_PREFIX}{p}{COUNT_SUFFIX}": str(found[p]) if p in found else None
            for p in sorted(counted | set(found))
        }
        if amounts:  # the kubelet's report of the plugin's devices
            status = {"capacity": amounts, "allocatable": amounts}
            self.client.patch(ref, {"status": status}, subresource="status")
        if counts:  # GFD's labels
            self.client.patch(ref, {"metadata": {"labels": counts}})
