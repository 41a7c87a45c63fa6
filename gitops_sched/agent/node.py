"""One node agent tick: MIG requests, inventory, fraction shares and idleness, in that order.

Each tick reads the node and the pods bound to it, then:
1. converges the GPUs a new (or still pending) MIG request lists and answers it; after a
   change, restarts the device plugin's pod on the node so it advertises the new layout;
2. publishes the GPU inventory when it differs from the node's annotation (so after a MIG
   change, in the same tick), never otherwise;
3. warns (then, under the evict policy and after the grace period, evicts) fraction pods
   using more of their GPU's memory than their share;
4. marks interactive pods idle for a whole window with IDLE_SINCE, and clears it when they
   are busy again; writes only on those changes.

The decisions are the pure modules' (mig, fractions, idle, pods); this module only feeds
them what the backend and the API report and hands their results to `NodeApi`.
"""

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gitops_sched.agent import fractions, idle
from gitops_sched.agent.cgroups import pod_uid_for_pid
from gitops_sched.agent.cluster import NodeApi
from gitops_sched.agent.gpus import DeviceGpu, GpuBackend, GpuProcess
from gitops_sched.agent.inventory import node_inventory
from gitops_sched.agent.mig import MigPlan, apply_plan, beyond_node, plan_gpu
from gitops_sched.agent.pods import (
    PodKey,
    format_time,
    fraction_pods,
    idle_watched,
    pod_key,
    published_idle_since,
)
from gitops_sched.cluster import ApiFailure
from gitops_sched.contract.inventory import encode_inventory, inventory_changed
from gitops_sched.contract.mig import (
    GpuAnswer,
    encode_status,
    needs_work,
    parse_request,
    request_digest,
)
from gitops_sched.contract.pods import (
    IDLE_SINCE,
    MIG_STATIC_LABEL,
    NODE_GPUS,
    NODE_MIG_REQUEST,
    NODE_MIG_STATUS,
)

OVER_SHARE_REASON = "GpuMemoryOverShare"


@dataclass(frozen=True)
class AgentPolicy:
    """How the agent acts: fraction policy and grace, idle window and threshold, MIG."""

    fraction_policy: fractions.Policy = "warn"
    grace: float = 60.0  # seconds over its share before an evict-policy pod is evicted
    idle_window: float = 300.0  # seconds without GPU use before a pod is published idle
    idle_threshold: float = 1.0  # percent SM utilisation at or above which a pod is busy
    mig_static: bool = False  # every GPU of this node has a static MIG layout


DEFAULT_POLICY = AgentPolicy()


class NodeAgent:
    def __init__(
        self,
        backend: GpuBackend,
        api: NodeApi,
        policy: AgentPolicy = DEFAULT_POLICY,
        *,
        pod_of: Callable[[int], str | None] = pod_uid_for_pid,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.backend = backend
        self.api = api
        self.policy = policy
        self.pod_of = pod_of
        self.clock = clock
        self.over_share: dict[str, fractions.OverShare] = {}
        self.activity: dict[str, idle.Activity] = {}

    def tick(self) -> tuple[DeviceGpu, ...]:
        """One round; the GPUs as they are at its end. A node the API does not know is
        said, and nothing is written."""
        node = self.api.node()
        if node is None:
            self.api.say(f"node {self.api.node_name} not found; nothing published")
            return self.backend.gpus()
        annotations = node["metadata"].get("annotations") or {}
        gpus = self.backend.gpus()
        # asked once a tick: NVML's utilisation samples are those since the previous call
        processes = [p for gpu in gpus for p in self.backend.processes(gpu.index)]
        if self._converge_mig(node, annotations, gpus, processes):
            gpus = self.backend.gpus()
        inventory = node_inventory(gpus)
        if inventory_changed(annotations.get(NODE_GPUS), inventory):
            self.api.annotate_node({NODE_GPUS: encode_inventory(inventory)})
        pods = self.api.pods()
        owners = {p.pid: self.pod_of(p.pid) for p in processes}  # PID -> pod UID
        self._enforce_fractions(pods, gpus, processes, owners)
        self._publish_idle(pods, processes, owners)
        return gpus

    # --- MIG -----------------------------------------------------------------------------

    def _converge_mig(
        self,
        node: Mapping[str, Any],
        annotations: Mapping[str, str],
        gpus: tuple[DeviceGpu, ...],
        processes: list[GpuProcess],
    ) -> bool:
        """Answer the node's MIG request if it needs it; True when instances changed."""
        request = annotations.get(NODE_MIG_REQUEST)
        if request is None or not needs_work(request, annotations.get(NODE_MIG_STATUS)):
            return False
        digest = request_digest(request)
        try:
            layouts = parse_request(request)
        except ValueError as exc:
            self._answer(annotations, encode_status(digest, (), error=f"unreadable: {exc}"))
            return False
        by_index = {gpu.index: gpu for gpu in gpus}
        refused = beyond_node(layouts, by_index)
        if refused is not None:
            self._answer(annotations, encode_status(digest, (), error=refused))
            return False
        labels = node["metadata"].get("labels") or {}
        static = self.policy.mig_static or labels.get(MIG_STATIC_LABEL) == "true"
        answers: list[GpuAnswer] = []
        for wanted in layouts:
            busy = {
                p.instance_start
                for p in processes
                if p.gpu_index == wanted.index and p.instance_start is not None
            }
            plan = plan_gpu(by_index[wanted.index], wanted, busy, static)
            answers.append(self._carry_out(plan) if isinstance(plan, MigPlan) else plan)
        changed = any(answer.changed for answer in answers)
        if changed:
            self.api.restart_device_plugin()
        self._answer(annotations, encode_status(digest, answers))
        return changed

    def _carry_out(self, plan: MigPlan) -> GpuAnswer:
        if self.api.dry_run:
            self.api.would(f"change MIG instances: {plan.describe()}")
            return GpuAnswer(plan.index, "done", plan.describe(), bool(plan.destroy or plan.create))
        self.api.say(f"changing MIG instances: {plan.describe()}")
        return apply_plan(self.backend, plan)

    def _answer(self, annotations: Mapping[str, str], status: str) -> None:
        if annotations.get(NODE_MIG_STATUS) != status:
            self.api.annotate_node({NODE_MIG_STATUS: status})

    # --- fractions -------------------------------------------------------------------------

    def _enforce_fractions(
        self,
        pods: list[dict[str, Any]],
        gpus: tuple[DeviceGpu, ...],
        processes: list[GpuProcess],
        owners: Mapping[int, str | None],
    ) -> None:
        uuids = {gpu.index: gpu.uuid for gpu in gpus}
        memory = {gpu.uuid: gpu.memory_total for gpu in gpus}
        watched = fraction_pods(pods, memory, self.policy.fraction_policy)
        usage = fractions.memory_by_pod(
            (owners[p.pid], uuids[p.gpu_index], p.used_memory) for p in processes
        )
        actions, self.over_share = fractions.enforce(
            watched, usage, self.clock(), self.over_share, self.policy.grace
        )
        for action in actions:
            pod = action.pod
            key = PodKey(pod.namespace, pod.name, pod.uid)
            if action.kind == "warn":
                self.api.warn(key, OVER_SHARE_REASON, action.message)
                continue
            try:
                self.api.evict(key, action.message)
            except ApiFailure as exc:  # e.g. its disruption budget: try again next tick
                self.api.say(f"eviction of pod/{key.namespace}/{key.name} failed: {exc}")
                self.over_share[pod.uid] = replace(self.over_share[pod.uid], evicted=False)

    # --- idleness --------------------------------------------------------------------------

    def _publish_idle(
        self,
        pods: list[dict[str, Any]],
        processes: list[GpuProcess],
        owners: Mapping[int, str | None],
    ) -> None:
        now = self.clock()
        watched = idle_watched(pods)
        for pod in watched:
            uid = pod_key(pod).uid
            since = published_idle_since(pod)
            if uid not in self.activity and since is not None:
                # published before this agent started: idle since then, not since now
                self.activity[uid] = idle.Activity(first_seen=since)
        utilisation = idle.utilisation_by_pod(
            ((owners[p.pid], p.sm_util) for p in processes),
            (pod_key(pod).uid for pod in watched),
        )
        self.activity = idle.observe(self.activity, utilisation, now, self.policy.idle_threshold)
        for pod in watched:
            key = pod_key(pod)
            since = idle.idle_since(self.activity[key.uid], now, self.policy.idle_window)
            published = published_idle_since(pod)
            if since is not None and published is None:
                self.api.annotate_pod(key, {IDLE_SINCE: format_time(since)})
            elif since is None and published is not None:
                self.api.annotate_pod(key, {IDLE_SINCE: None})
