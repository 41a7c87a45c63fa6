"""Whether a job could ever run on a set of nodes, whatever else runs there.

`validate` asks it about each workload against the nodes its node groups declare and
`simulate` about each pending job against the snapshot's nodes, so both say "can never
fit" for the same workloads and in the same words. Only the nodes matter, not what runs
on them now: a pod bigger than every node it may use, a gang that would not fit even on
empty nodes, a request for a kind of GPU (MIG or not, a MIG profile, enough memory) that
no allowed GPU is. Cordoned nodes count: they may come back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from gitops_sched.engine.types import GPU_EPSILON, Gpu, Job, Node, RequestKind
from gitops_sched.hardware.mig import mig_profiles


class Misfit(StrEnum):
    """Why a job never fits; `validate` reports each kind at the field that causes it."""

    NO_NODES = "no-nodes"  # no node in the groups it may use
    NO_GPUS = "no-gpus"  # a GPU request, but the allowed nodes have no GPUs
    POD_TOO_BIG = "pod-too-big"  # one pod needs more GPUs than any allowed node has
    GANG_TOO_BIG = "gang-too-big"  # its gang does not fit on all the allowed nodes at once
    NEEDS_NON_MIG = "needs-non-mig"  # whole GPUs or a share, but every allowed GPU is MIG
    GPU_MEMORY = "gpu-memory"  # more memory than any allowed GPU has
    MIG_PROFILE = "mig-profile"  # no allowed MIG GPU offers (or holds) the profile


@dataclass(frozen=True)
class NeverFit:
    kind: Misfit
    why: str  # completes "can never fit: ..."; says what would fit where it can


# Nodes of one group sharing one tuple of GPUs (as the bridge builds a group's nodes) are
# looked at once, with their count: a question costs per group rather than per node.
Alike = list[tuple[Node, int]]


def _alike(nodes: Iterable[Node], groups: set[str]) -> Alike:
    """The nodes of `groups` (all if empty), one of each kind with its count."""
    found: dict[tuple[str, int], list] = {}
    for node in nodes:
        if groups and node.node_group not in groups:
            continue
        entry = found.setdefault((node.node_group, id(node.gpus)), [node, 0])
        entry[1] += 1
    return [(node, count) for node, count in found.values()]


def never_fits(job: Job, nodes: Iterable[Node]) -> NeverFit | None:
    """Why `job` could not run on `nodes` even if they were empty; None if it could."""
    shapes = _alike(nodes, set(job.node_groups))
    if not shapes:
        names = ", ".join(job.node_groups) or "none"
        return NeverFit(Misfit.NO_NODES, f"no node in the node groups it may use ({names})")
    where = _Where(shapes)
    kind = job.request.kind
    if kind is RequestKind.NONE:
        return None
    gang = min(job.min_available, job.pods)  # pods that must start together
    if kind is RequestKind.MIG:
        return _mig(job.request.mig_profile, shapes, gang, where)
    plain = [([g for g in node.gpus if not g.mig_enabled], count) for node, count in shapes]
    if not any(gpus for gpus, _ in plain):
        if any(node.gpus for node, _ in shapes):
            return NeverFit(
                Misfit.NEEDS_NON_MIG,
                f"it needs GPUs without MIG, but every GPU it may use is in MIG mode ({where}); "
                "ask for a MIG profile or allow a node group without MIG",
            )
        return NeverFit(Misfit.NO_GPUS, f"the node groups it may use have no GPUs ({where})")
    if kind is RequestKind.WHOLE:
        return _whole(job.request.count, gang, plain, where)
    if kind is RequestKind.FRACTION:
        # how many such pods share one GPU, counted up to the gang: a fraction at the float
        # edge (5e-324) makes 1/f infinite, and only whether the gang fits matters
        per_gpu = math.floor(min(1 / job.request.fraction, gang) + GPU_EPSILON)
        fits = sum(len(gpus) * count for gpus, count in plain) * per_gpu
        return _gang(gang, fits, "pods", where)
    return _memory(job.request.memory_mib, gang, plain, where)


Plain = list[tuple[list[Gpu], int]]  # the GPUs without MIG of each node shape, and its count


def _whole(count: int, gang: int, plain: Plain, where: _Where) -> NeverFit | None:
    largest = max(len(gpus) for gpus, _ in plain)
    if count > largest:
        return NeverFit(
            Misfit.POD_TOO_BIG,
            f"a pod needs {count} GPUs, the largest node it may use has {largest} ({where}); "
            f"at most {largest} GPUs per pod fit",
        )
    fits = sum(len(gpus) // count * nodes for gpus, nodes in plain)
    return _gang(gang, fits, f"pods of {count} GPUs", where)


def _memory(memory_mib: int, gang: int, plain: Plain, where: _Where) -> NeverFit | None:
    largest = max(g.memory_mib for gpus, _ in plain for g in gpus)
    if memory_mib > largest:
        has = (
            f"the largest GPU it may use has {largest} MiB"
            if largest
            else "no GPU it may use has a known memory size"
        )
        return NeverFit(
            Misfit.GPU_MEMORY, f"a pod needs {memory_mib} MiB of GPU memory, {has} ({where})"
        )
    if memory_mib <= 0:  # `gpuMemory: 0` asks for no memory: any GPU holds the gang
        return None
    fits = sum(g.memory_mib // memory_mib * nodes for gpus, nodes in plain for g in gpus)
    return _gang(gang, fits, f"pods of {memory_mib} MiB", where)


def _mig(profile: str, shapes: Alike, gang: int, where: _Where) -> NeverFit | None:
    slots = 0  # instances of the profile the allowed GPUs could hold at once
    for node, nodes in shapes:
        offered = mig_profiles(node.gpu_model).get(profile)
        for gpu in node.gpus:
            if not gpu.mig_enabled or offered is None:
                continue
            if gpu.mig_static:
                slots += sum(i.profile == profile for i in gpu.mig_instances) * nodes
            else:
                slots += offered.max_instances * nodes
    if not slots:
        return NeverFit(
            Misfit.MIG_PROFILE,
            f"no MIG GPU it may use offers {profile} ({where}); static layouts hold only "
            "their declared instances",
        )
    return _gang(gang, slots, f"{profile} pods", where)


def _gang(gang: int, fits: int, pods: str, where: _Where) -> NeverFit | None:
    """A gang of `gang` pods where at most `fits` such pods fit on the allowed nodes."""
    if gang <= fits:
        return None
    return NeverFit(
        Misfit.GANG_TOO_BIG,
        f"its gang of {gang} pods must start together, but the nodes it may use hold at most "
        f"{fits} {pods} ({where}); a gang of {fits} or fewer would fit",
    )


class _Where:
    """The allowed nodes as messages name them (`a100: 3 nodes x 8 GPUs, a10: 2 nodes x 4
    GPUs`, by group), worked out only when a message is written: most jobs fit."""

    def __init__(self, shapes: Alike) -> None:
        self.shapes = shapes

    def __format__(self, spec: str) -> str:
        return _groups_text(self.shapes)


def _groups_text(shapes: Alike) -> str:
    by_group: dict[str, list[tuple[tuple[Gpu, ...], int]]] = {}
    for node, nodes in shapes:
        by_group.setdefault(node.node_group, []).append((node.gpus, nodes))
    parts = []
    for group, members in sorted(by_group.items()):
        sizes = sorted({len(gpus) for gpus, _ in members})
        per_node = "/".join(map(str, sizes))
        count = sum(nodes for _, nodes in members)
        nodes_text = f"{count} node{'s' if count > 1 else ''}"
        all_mig = all(g.mig_enabled for gpus, _ in members for g in gpus)
        mig = " (MIG)" if all_mig and sizes[-1] else ""
        parts.append(f"{group}: {nodes_text} x {per_node} GPUs{mig}")
    return ", ".join(parts)
