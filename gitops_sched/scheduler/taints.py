"""Node taints against pod tolerations, matched as kube-scheduler's TaintToleration filter
matches them.

The scheduler binds pods itself, so it must keep a pod off a node with a NoSchedule taint
the pod does not tolerate (kube-scheduler would) and off one with a NoExecute taint (the
kubelet would refuse the pod). The engine knows which node groups a job may use, not which
nodes, so the snapshot says the taints in those terms (`TaintRule`):
- a job that tolerates no schedulable node of a node group loses the group; one left with
  none waits (with the taints as its reason), or, if it runs, keeps its node groups and the
  nodes it does not tolerate take no new work (its running pods stay counted);
- a node that one job of its group tolerates and another does not takes no new work (as if
  cordoned): the engine could not be told which job may use it.
So no pod is placed on a node whose taints it does not tolerate. A node kept for some teams
by a taint inside a node group others use stays idle: give such nodes a node group of their
own. PreferNoSchedule taints only steer kube-scheduler and are not read.

GPU nodes are often tainted `nvidia.com/gpu:NoSchedule` to keep pods that need no GPU off
them. A pod of ours that asks for a GPU in any form tolerates that taint, as Kubernetes'
ExtendedResourceToleration admission plugin makes pods that ask for `nvidia.com/gpu` do (a
fraction pod asks for none: its reservation pod does, and tolerates the taint).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gitops_sched.contract.pods import GPU_RESOURCE

EFFECTS = ("NoSchedule", "NoExecute")  # the effects that keep new pods off a node


@dataclass(frozen=True, order=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(frozen=True, order=True)
class Toleration:
    key: str = ""  # "" with Exists: every key
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "": every effect

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule (`Toleration.ToleratesTaint`)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("", "Equal") and self.value == taint.value


GPU_TOLERATION = Toleration(GPU_RESOURCE, "Exists", "", "NoSchedule")


def node_taints(obj: dict[str, Any]) -> tuple[Taint, ...]:
    """The node's NoSchedule and NoExecute taints, sorted."""
    found = {
        Taint(str(entry.get("key") or ""), str(entry.get("value") or ""), entry["effect"])
        for entry in (obj.get("spec") or {}).get("taints") or ()
        if isinstance(entry, dict) and entry.get("effect") in EFFECTS
    }
    return tuple(sorted(found))


def pod_tolerations(pod_spec: dict[str, Any], asks_gpu: bool) -> tuple[Toleration, ...]:
    """The pod's tolerations, sorted; with the GPU taint's when it asks for a GPU."""
    found = {
        Toleration(
            str(entry.get("key") or ""),
            str(entry.get("operator") or "Equal"),
            str(entry.get("value") or ""),
            str(entry.get("effect") or ""),
        )
        for entry in pod_spec.get("tolerations") or ()
        if isinstance(entry, dict)
    }
    if asks_gpu:
        found.add(GPU_TOLERATION)
    return tuple(sorted(found))


def untolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> tuple[Taint, ...]:
    tolerations = tuple(tolerations)
    return tuple(t for t in taints if not any(o.tolerates(t) for o in tolerations))


@dataclass(frozen=True)
class Verdict:
    """What the taints leave a job of some node groups and tolerations."""

    groups: tuple[str, ...]  # the node groups it may still use
    withheld: tuple[str, ...]  # nodes of its groups it does not tolerate, beside ones it does
    refused: tuple[Taint, ...]  # the taints that cost it a group, for its pending reason
    refusing: tuple[str, ...]  # the nodes of the groups it lost


@dataclass
class TaintRule:
    """The NoSchedule and NoExecute taints of the schedulable nodes, by node group, and the
    verdict for each (node groups, tolerations) asked about."""

    tainted: dict[str, dict[str, tuple[Taint, ...]]] = field(default_factory=dict)
    schedulable: dict[str, int] = field(default_factory=dict)  # group -> nodes taking work
    _verdicts: dict[tuple, Verdict] = field(default_factory=dict)

    def add_node(self, group: str, name: str, taints: tuple[Taint, ...]) -> None:
        """A schedulable node of `group` with its taints (none: it refuses no one)."""
        self.schedulable[group] = self.schedulable.get(group, 0) + 1
        if taints:
            self.tainted.setdefault(group, {})[name] = taints

    def verdict(self, groups: tuple[str, ...], tolerations: tuple[Toleration, ...]) -> Verdict:
        key = (groups, tolerations)
        if key not in self._verdicts:
            self._verdicts[key] = self._judge(groups, tolerations)
        return self._verdicts[key]

    def _judge(self, groups: tuple[str, ...], tolerations: tuple[Toleration, ...]) -> Verdict:
        kept: list[str] = []
        withheld: list[str] = []
        refused: set[Taint] = set()
        lost: list[str] = []
        for group in groups:
            refusing = {
                name: taints
                for name, taints in self.tainted.get(group, {}).items()
                if untolerated(taints, tolerations)
            }
            if refusing and len(refusing) == self.schedulable[group]:
                refused.update(
                    t for taints in refusing.values() for t in untolerated(taints, tolerations)
                )
                lost.extend(sorted(refusing))
                continue
            kept.append(group)
            withheld.extend(sorted(refusing))
        return Verdict(tuple(kept), tuple(withheld), tuple(sorted(refused)), tuple(lost))
