"""What one cycle sees of the cluster, beside the engine's Snapshot: the live pods behind
each job, the reservation pods holding shared GPUs, and the pods the scheduler cannot take.

`snapshot.build_view` makes it from listed objects; `actuate` carries out the engine's
decisions with it (a Bind names a job and pod indexes: `pods` says which pod objects those
are). Plain frozen data, so a cycle's view can be kept and compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitops_sched.engine.types import Snapshot


@dataclass(frozen=True)
class PodRef:
    """A live pod of ours: identity, its index in its job, and where it is bound."""

    namespace: str
    name: str
    uid: str
    index: int  # the pod's index in its job (completion index, else by name)
    node: str = ""  # spec.nodeName; "" while pending
    terminating: bool = False  # has a deletionTimestamp: releasing its GPUs
    annotations: tuple[tuple[str, str], ...] = ()
    owner: tuple[str, str] = ("", "")  # its controller's kind and name; ("", "") when bare

    @property
    def bound(self) -> bool:
        return bool(self.node)


@dataclass(frozen=True)
class Reservation:
    """A reservation pod holding one whole GPU of a node for the fraction pods sharing it."""

    namespace: str
    name: str
    node: str
    gpu: int  # the GPU's index on the node (the engine's index)
    uuid: str = ""  # the device the plugin gave it, once the pod has written it
    bound: bool = False
    terminating: bool = False  # deleted, still holding its GPU until it has gone
    uid: str = ""


@dataclass(frozen=True)
class Ignored:
    """A pod with our schedulerName that the scheduler will not place, and why (said on the
    pod as a pending reason): a namespace of no project, an annotation it cannot read."""

    namespace: str
    name: str
    uid: str
    why: str
    bound: bool = False  # bound already (by someone else, or with a placement we cannot use)


@dataclass(frozen=True, order=True)
class SkippedNode:
    """A node of a node group the cycle left out, and why: annotations it cannot read."""

    name: str
    uid: str
    why: str


@dataclass(frozen=True)
class ClusterView:
    snapshot: Snapshot
    pods: dict[str, tuple[PodRef, ...]]  # job key -> its live pods, by index
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> Node object
    reservations: tuple[Reservation, ...] = ()
    ignored: tuple[Ignored, ...] = ()
    skipped: tuple[SkippedNode, ...] = ()

    def pod(self, job: str, index: int) -> PodRef | None:
        """The pod of `job` with `index`, if it is live."""
        return next((p for p in self.pods.get(job, ()) if p.index == index), None)
