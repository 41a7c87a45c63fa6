"""Fit checks: workloads that could never run anywhere they may run, and node groups that
would count the same nodes twice.

The GPU side asks the engine's own rule (`engine.fit.never_fits`) about each workload
against the nodes its node groups declare, the nodes `simulate` builds, so `validate`
and `simulate` call the same workloads "can never fit". Two of its answers are reported by
other checks already, at their own fields (a gpuMemory bigger than the GPU: `gpus`; a MIG
profile no allowed group offers: `mig`), and an empty node group is a choice, not an
error. CPU and memory per pod are checked against the node groups that declare
`cpuPerNode`/`memoryPerNode` (the engine does not model them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal

from gitops_sched.config import codes
from gitops_sched.config.checks.common import (
    Number,
    _error,
    _itemized,
    _key_error,
    _memory,
    _number,
)
from gitops_sched.config.checks.gpus import _valid_gpu
from gitops_sched.config.checks.pods import _source
from gitops_sched.config.diagnostics import Diagnostic
from gitops_sched.config.loader import Path_
from gitops_sched.config.model import GPU_FIELDS, NodeGroup, Repo, Workload, quantity

# engine.fit.Misfit values -> codes; the others are reported by check_gpu_memory
# (gpu-memory) and check_mig_profiles (mig-profile), and a group of 0 nodes is deliberate
MISFIT_CODES = {
    "pod-too-big": codes.POD_TOO_BIG,
    "gang-too-big": codes.GANG_NEVER_FITS,
    "needs-non-mig": codes.NEEDS_NON_MIG,
    "no-gpus": codes.NO_GPUS_ALLOWED,
}


def check_workloads_fit(repo: Repo) -> Iterator[Diagnostic]:
    """A workload whose pods (or gang) could not run even on empty nodes is an error."""
    # imported here: the engine loads only when a repo is checked, not for --help
    from gitops_sched.bridge.build import job_from_workload, nodes_from_repo
    from gitops_sched.engine.fit import NeverFit, never_fits

    nodes = nodes_from_repo(repo)
    answers: dict[tuple, NeverFit | None] = {}  # many workloads share one shape
    for workload in repo.workloads:
        gpu = repo.pod_spec(workload).get("gpu")
        if (gpu is not None and not _valid_gpu(gpu)) or workload.min_available > workload.replicas:
            continue  # check_gpu_values and check_gang_sizes report these
        job = job_from_workload(repo, workload, 0)
        shape = (job.request, min(job.min_available, job.pods), job.node_groups)
        if shape not in answers:
            answers[shape] = never_fits(job, nodes)
        misfit = answers[shape]
        if misfit is None or misfit.kind not in MISFIT_CODES:
            continue
        yield _error(
            workload.doc,
            _misfit_path(workload, misfit.kind),
            MISFIT_CODES[misfit.kind],
            f"can never fit: {misfit.why}",
        )


def _misfit_path(workload: Workload, kind: str) -> Path_:
    """Where to point: the gang size, the node group pin, else the GPU request as written
    on the workload (or its template reference, when the template asks)."""
    written = workload.doc.data.get("spec", {})
    if kind == "gang-too-big":
        return ("spec", "minAvailable" if "minAvailable" in written else "replicas")
    if kind == "needs-non-mig" and workload.node_group:
        return ("spec", "nodeGroup")
    own = next((key for key in GPU_FIELDS if key in workload.overrides), None)
    if own is None and workload.template:
        return ("spec", "template")
    return ("spec", own or "gpu")


# (pod resource, NodeGroup attribute, how messages print it)
PER_NODE: tuple[tuple[str, str, Callable[[Number], str]], ...] = (
    ("cpu", "cpu_per_node", _number),
    ("memory", "memory_per_node", _memory),
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
            source = _source(repo, workload, ("resources", field))
            who = "" if source is workload.doc else f"workload '{workload.name}' "
            yield _error(
                source,
                ("spec", "resources", field),
                codes.POD_RESOURCES_TOO_LARGE,
                f"{who}can never fit: a pod asks for {field} "
                f"{fmt(wanted)}, more than any node it may use has ({_itemized(known, fmt)} "
                f"per node); at most {fmt(largest)} would fit",
            )


def check_node_group_selectors(repo: Repo) -> Iterator[Diagnostic]:
    """Two groups where one's selector is a subset of the other's select the same nodes:
    those nodes' GPUs would be counted (and quota'd, and simulated) twice."""
    groups = [g for g in repo.node_groups if g.node_selector]
    for i, later in enumerate(groups):
        for earlier in groups[:i]:
            if _selects_all_of(earlier, later) or _selects_all_of(later, earlier):
                yield _key_error(
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
