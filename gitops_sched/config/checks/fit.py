"""Fit checks: pods asking more CPU or memory than any node they may use declares, and node
groups that would count the same nodes twice.

CPU and memory per pod are checked against the node groups that declare
`cpuPerNode`/`memoryPerNode` (the engine does not model them). Whether a workload's GPUs
could ever fit is the engine's rule, asked from above config (`bridge.fit`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal

from gitops_sched.config import codes
from gitops_sched.config.checks.common import (
    Number,
    error_at,
    format_memory,
    format_number,
    itemized,
    key_error_at,
)
from gitops_sched.config.checks.pods import field_source
from gitops_sched.config.diagnostics import Diagnostic
from gitops_sched.config.model import NodeGroup, Repo, quantity

# (pod resource, NodeGroup attribute, how messages print it)
PER_NODE: tuple[tuple[str, str, Callable[[Number], str]], ...] = (
    ("cpu", "cpu_per_node", format_number),
    ("memory", "memory_per_node", format_memory),
)


def check_pod_resources_fit(repo: Repo) -> Iterator[Diagnostic]:
    """A pod asking more CPU or memory than every node it may use declares never starts."""
    for workload in repo.workloads:
        resources = repo.pod_spec(workload).get("resources") or {}
        groups = repo.workload_node_groups(workload)
        for field, attribute, fmt in PER_NODE:
            if field not in resources or not groups:
                continue
            wanted = quantity(resources[field])
            sizes: list[tuple[str, Decimal | None]] = [
                (g.name, getattr(g, attribute)) for g in groups
            ]
            known: list[tuple[str, Number]] = [(n, size) for n, size in sizes if size is not None]
            if len(known) < len(sizes) or any(wanted <= size for _, size in known):
                continue  # some group may have room (or does not say)
            largest = max(size for _, size in known)
            source = field_source(repo, workload, ("resources", field))
            who = "" if source is workload.doc else f"workload '{workload.name}' "
            yield error_at(
                source,
                ("spec", "resources", field),
                codes.POD_RESOURCES_TOO_LARGE,
                f"{who}can never fit: a pod asks for {field} "
                f"{fmt(wanted)}, more than any node it may use has ({itemized(known, fmt)} "
                f"per node); at most {fmt(largest)} would fit",
            )


def check_node_group_selectors(repo: Repo) -> Iterator[Diagnostic]:
    """Two groups where one's selector is a subset of the other's select the same nodes:
    those nodes' GPUs would be counted (and quota'd, and simulated) twice."""
    groups = [g for g in repo.node_groups if g.node_selector]
    for i, later in enumerate(groups):
        for earlier in groups[:i]:
            if _selects_all_of(earlier, later) or _selects_all_of(later, earlier):
                yield key_error_at(
                    later.doc,
                    ("spec", "nodeSelector", "matchLabels"),
                    codes.OVERLAPPING_SELECTORS,
                    f"node groups '{earlier.name}' and '{later.name}' select the same nodes "
                    f"({_labels(earlier)} vs {_labels(later)}): every node one matches the "
                    "other matches too, so their GPUs would be counted twice; give each "
                    "group a label the other does not have",
                )


def _selects_all_of(wide: NodeGroup, narrow: NodeGroup) -> bool:
    """Whether every node `narrow` selects is selected by `wide` as well."""
    return wide.node_selector.items() <= narrow.node_selector.items()


def _labels(group: NodeGroup) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(group.node_selector.items()))
