"""Dynamic MIG in a cluster: the engine's MIG changes as each node's request to its agent,
and what a node advertises.

The scheduler writes, on each node of a dynamic MIG group it wants changed, the annotation
`NODE_MIG_REQUEST` (canonical JSON: sorted keys, no spaces):

    {"gpus": [{"index": 0, "instances": [{"profile": "1g.10gb", "start": 0},
                                         {"profile": "3g.40gb", "start": 4}]}],
     "version": 1}

For each GPU listed, the full list of instances wanted on it: the instances it has now
(the engine's `Gpu.mig_instances`) less those the engine destroys, plus those it creates.
GPUs not listed are left alone. The request is the scheduler's latest intent: it is
rewritten (a merge patch, only when its text changes) when the engine wants other
changes, and emptied (`"gpus": []`) once the engine wants none on the node. A GPU whose
changes wait for pods to leave (victims still terminating) is not listed until they have.

The node agent (`contract.mig`'s format) answers in `NODE_MIG_STATUS`:

    {"version": 1, "observed": "<sha256 of the request annotation's text>",
     "gpus": [{"index": 0, "state": "done|pending|error", "message": "..."}]}

A pod using a MIG instance is bound only once the node advertises the profile: its
`status.allocatable["nvidia.com/mig-<profile>"]` exceeds the pods of ours bound there on
that profile. An agent's `error` for the GPU is said as the waiting pods' pending reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from gitops_sched.contract.mig import answered_error, encode_request
from gitops_sched.contract.pods import MIG_RESOURCE_PREFIX, NODE_MIG_REQUEST, NODE_MIG_STATUS
from gitops_sched.engine.types import MigChange, Node, Snapshot
from gitops_sched.hardware.mig import MigInstance
from gitops_sched.quantity import parse_quantity

_EMPTY = encode_request({})  # what a node without the annotation asks for: nothing


def node_annotations(node: dict[str, Any] | None) -> dict[str, str]:
    return ((node or {}).get("metadata") or {}).get("annotations") or {}


def requests_to_write(
    snapshot: Snapshot, nodes: dict[str, dict[str, Any]], changes: Iterable[MigChange]
) -> dict[str, str]:
    """node -> the request annotation to write, for each node whose request must change.

    Nodes with changes get their request; nodes that still carry one and have no changes
    now get an empty one. A node's request is left out when its annotation already says it.
    """
    ready = _ready_changes(changes)
    by_name = {node.name: node for node in snapshot.nodes}
    asking = {name for name, obj in nodes.items() if NODE_MIG_REQUEST in node_annotations(obj)}
    wanted: dict[str, str] = {}
    for name in sorted(set(ready) | asking):
        node = by_name.get(name)
        if node is None:
            continue
        text = encode_request(_layouts(node, ready.get(name, [])))
        if node_annotations(nodes.get(name)).get(NODE_MIG_REQUEST, _EMPTY) != text:
            wanted[name] = text
    return wanted


def _ready_changes(changes: Iterable[MigChange]) -> dict[str, list[MigChange]]:
    """Changes by node, without those of GPUs where some change still waits for pods."""
    changes = list(changes)
    waiting = {(c.node, c.gpu) for c in changes if c.waits_for}
    ready: dict[str, list[MigChange]] = {}
    for change in changes:
        if (change.node, change.gpu) not in waiting:
            ready.setdefault(change.node, []).append(change)
    return ready


def _layouts(node: Node, changes: list[MigChange]) -> dict[int, list[MigInstance]]:
    """The wanted instances of each GPU changed, the changes applied in their order."""
    gpus = {gpu.index: gpu for gpu in node.gpus}
    layouts: dict[int, list[MigInstance]] = {}
    for change in changes:
        current = gpus[change.gpu].mig_instances if change.gpu in gpus else ()
        layout = layouts.setdefault(change.gpu, list(current))
        if change.create:
            layout.append(change.instance)
        elif change.instance in layout:
            layout.remove(change.instance)
    return layouts


def agent_error(node: dict[str, Any] | None, gpu: int) -> str:
    """What the node agent said went wrong with the current request on `gpu`, or ""."""
    annotations = node_annotations(node)
    return answered_error(annotations.get(NODE_MIG_REQUEST), annotations.get(NODE_MIG_STATUS), gpu)


def advertised(node: dict[str, Any] | None, profile: str) -> int:
    """How many instances of `profile` the node's device plugin advertises (allocatable)."""
    allocatable = ((node or {}).get("status") or {}).get("allocatable") or {}
    try:
        return int(parse_quantity(allocatable.get(f"{MIG_RESOURCE_PREFIX}{profile}", 0)))
    except ValueError:
        return 0


def mig_in_use(snapshot: Snapshot) -> Counter[tuple[str, str]]:
    """(node, profile) -> pods of ours bound on that profile and not terminating."""
    return Counter(
        (pod.node, pod.mig.profile)
        for job in snapshot.jobs
        for pod in job.placement
        if pod.mig is not None
    )
