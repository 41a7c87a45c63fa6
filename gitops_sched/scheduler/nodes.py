"""Live nodes as the engine's nodes: which node group each belongs to, its GPUs, whether it
takes new work, and which node groups a pod's node selector and affinity allow.

A node's GPUs come from the best source it has: the inventory the node agent publishes
(`NODE_GPUS`), else NVIDIA GPU Feature Discovery's labels and `status.allocatable`, else
what its node group declares. A static-MIG group's GPUs always have the declared layout.
An inventory, or an agent's MIG status, that is there but cannot be read (garbage another
process wrote: not JSON, too large, too deep) makes the node unreadable (`NodeError`): the
cycle leaves it out and says why, and the agent rewrites both on its next tick.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from gitops_sched.bridge.build import canonical_model, group_gpu, group_node_labels
from gitops_sched.bridge.policy import PolicyNodeGroup
from gitops_sched.contract import foreignjson
from gitops_sched.contract.inventory import InventoryGpu, parse_inventory
from gitops_sched.contract.pods import (
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    NODE_GPUS,
    NODE_MIG_STATUS,
)
from gitops_sched.engine.types import Gpu, Node
from gitops_sched.hardware.gfd import GFD_COUNT, GFD_MEMORY, GFD_MIG_COUNT, GFD_PRODUCT
from gitops_sched.hardware.gpus import gpu_memory_mib
from gitops_sched.hardware.mig import MigInstance, find_placement, in_layout_order, mig_profiles
from gitops_sched.quantity import parse_quantity


class NodeError(ValueError):
    """A node whose annotations cannot be read: the cycle leaves it out, saying this."""


def node_group_of(
    labels: dict[str, str], groups: Iterable[PolicyNodeGroup]
) -> PolicyNodeGroup | None:
    """The first group (by name) whose node selector the labels match: the node carries every
    label of it. An empty selector finds no node: it would take every node."""
    for group in groups:
        selector = group.node_selector
        if selector and all(labels.get(k) == v for k, v in selector.items()):
            return group
    return None


def read_node(obj: dict[str, Any], group: PolicyNodeGroup) -> Node:
    """The node as the engine sees it, before GPUs held by others are marked; NodeError
    when its inventory or MIG status is there but cannot be read."""
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    if NODE_MIG_STATUS in annotations:
        try:
            foreignjson.loads(annotations[NODE_MIG_STATUS])
        except ValueError as exc:
            raise NodeError(f"annotation {NODE_MIG_STATUS}: {exc}") from None
    model, gpus = _inventory(annotations, group) or _labelled(obj, group)
    topology = labels.get(group.topology_label, "") if group.topology_label else ""
    return Node(
        name=metadata.get("name") or "",
        node_group=group.name,
        gpu_model=model,
        gpus=gpus,
        topology=topology,
        schedulable=takes_work(obj),
        labels=tuple(sorted(labels.items())),
    )


def takes_work(obj: dict[str, Any]) -> bool:
    """Not cordoned, and Ready: nothing new goes to a node that cannot run it."""
    if (obj.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _inventory(
    annotations: dict[str, str], group: PolicyNodeGroup
) -> tuple[str, tuple[Gpu, ...]] | None:
    """The agent's inventory (`contract.inventory`); None when there is none, NodeError when
    it cannot be read (GPUs indexed 0..n-1, each with its memory)."""
    text = annotations.get(NODE_GPUS)
    if not text:
        return None
    try:
        entries = parse_inventory(text)
        model = canonical_model(entries[0].model or entries[0].product) if entries else ""
        gpus = tuple(_inventory_gpu(entry, group) for entry in entries)
    except ValueError as exc:
        raise NodeError(f"annotation {NODE_GPUS}: {exc}") from None
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise NodeError(f"annotation {NODE_GPUS}: not an inventory ({exc!r})") from None
    return model or canonical_model(group.gpu_model), gpus


def _inventory_gpu(entry: InventoryGpu, group: PolicyNodeGroup) -> Gpu:
    if group.mig_static:
        return group_gpu(group, entry.index, entry.memory_mib)
    instances = in_layout_order(entry.mig_instances())
    return Gpu(
        entry.index, entry.memory_mib, mig_enabled=entry.mig == "enabled", mig_instances=instances
    )


def _labelled(obj: dict[str, Any], group: PolicyNodeGroup) -> tuple[str, tuple[Gpu, ...]]:
    """GPUs from GPU Feature Discovery's labels and the allocatable GPUs, each where the node
    has it, else as the group declares."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    allocatable = ((obj.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
    count = _count(labels.get(GFD_COUNT))
    if count is None:
        count = _count(allocatable)
    if count is None:
        count = group.gpus_per_node
    model = canonical_model(labels.get(GFD_PRODUCT) or group.gpu_model)
    memory = _count(labels.get(GFD_MEMORY))
    if memory is None:
        memory = gpu_memory_mib(model, group.gpu_memory_bytes)
    gpus = tuple(group_gpu(group, index, memory) for index in range(count))
    if group.mig_enabled and not group.mig_static:
        gpus = _with_instances(gpus, model, _mig_counts(labels))
    return model, gpus


def _count(value: Any) -> int | None:
    """A non-negative whole number from a label or a quantity; None if it is not one."""
    if value is None:
        return None
    try:
        number = parse_quantity(value)
    except ValueError:
        return None
    return int(number) if number >= 0 and number == int(number) else None


def _mig_counts(labels: dict[str, str]) -> dict[str, int]:
    """GFD's `nvidia.com/mig-<profile>.count` labels: instances per profile on the node."""
    counts = {}
    for key, value in labels.items():
        if key.startswith(MIG_RESOURCE_PREFIX) and key.endswith(GFD_MIG_COUNT):
            count = _count(value)
            if count:
                counts[key[len(MIG_RESOURCE_PREFIX) : -len(GFD_MIG_COUNT)]] = count
    return counts


def _with_instances(gpus: tuple[Gpu, ...], model: str, counts: dict[str, int]) -> tuple[Gpu, ...]:
    """The instances GFD counts, laid out where NVIDIA's placement rules put them (largest
    profiles first, each on the first GPU it fits): the labels say how many, not where."""
    profiles = mig_profiles(model)
    layouts: list[list[MigInstance]] = [list(gpu.mig_instances) for gpu in gpus]
    order = sorted(
        (p for p in counts if p in profiles),
        key=lambda p: (-profiles[p].memory_slices, p),
    )
    for profile in order:
        for _ in range(counts[profile]):
            for layout in layouts:
                start = find_placement(model, layout, profile)
                if start is not None:
                    layout.append(MigInstance(profile, start))
                    break
    return tuple(
        replace(gpu, mig_instances=in_layout_order(layout)) for gpu, layout in zip(gpus, layouts)
    )


def with_held(
    node: Node,
    taken: set[int],
    foreign: dict[int, set[MigInstance]] | None = None,
    reserved: set[int] | None = None,
) -> Node:
    """The node with the GPUs others hold (`taken`) marked held, which the engine neither
    uses nor counts, and without the MIG instances they hold (`foreign`, by GPU). A GPU that
    loses instances keeps the rest, as a fixed layout: the engine neither creates an
    instance where theirs are nor destroys one. GPUs keep the device's indexes. The GPUs in
    `reserved` (a live reservation pod of ours, no pod of ours on them) are marked so.
    """
    if not taken and not foreign and not reserved:
        return node
    foreign, reserved = foreign or {}, reserved or set()
    gpus = []
    for gpu in node.gpus:
        if gpu.index in reserved and gpu.index not in taken:
            gpu = replace(gpu, reserved=True)
        if gpu.index in taken:
            gpu = replace(gpu, held=True)
        elif gpu.index in foreign:
            left = tuple(i for i in gpu.mig_instances if i not in foreign[gpu.index])
            gpu = replace(gpu, mig_instances=left, mig_static=True)
        gpus.append(gpu)
    return replace(node, gpus=tuple(gpus))


# --- which node groups a pod may run on ------------------------------------------------------


def allowed_groups(
    constraints: str,
    groups: Iterable[PolicyNodeGroup],
    members: dict[str, list[dict[str, str]]],
) -> tuple[str, ...]:
    """The groups (that run workloads) with a node the pod's nodeSelector and required node
    affinity admit (`constraints`, see `pods.node_constraints`); a group with no node yet is
    judged by the labels its nodes would carry (`bridge.build.group_node_labels`)."""
    names = [g.name for g in groups if g.runs_workloads]
    if not constraints:
        return tuple(names)
    selector, terms = json.loads(constraints)
    by_name = {g.name: g for g in groups}
    allowed = []
    for name in names:
        nodes = members.get(name) or [_expected_labels(by_name[name])]
        if any(_admits(labels, selector, terms) for labels in nodes):
            allowed.append(name)
    return tuple(allowed)


def _expected_labels(group: PolicyNodeGroup) -> dict[str, str]:
    return group_node_labels(
        group.node_selector,
        group.gpu_model,
        group.gpus_per_node,
        group.gpu_memory_bytes,
        group.mig_enabled,
    )


def _admits(labels: dict[str, str], selector: dict[str, str], terms: list[dict[str, Any]]) -> bool:
    """nodeSelector (every label) and the required terms (any term, every expression in
    it); a term of field expressions only (a node by name) is not a node group's choice."""
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    if not terms:
        return True
    return any(_term(labels, term) for term in terms)


def _term(labels: dict[str, str], term: dict[str, Any]) -> bool:
    expressions = term.get("matchExpressions") or ()
    if not expressions:  # an empty term admits nothing; field expressions, any group
        return bool(term.get("matchFields"))
    return all(_expression(labels, e) for e in expressions)


def _expression(labels: dict[str, str], expression: dict[str, Any]) -> bool:
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or ()
    value = labels.get(key) if isinstance(key, str) else None
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False
