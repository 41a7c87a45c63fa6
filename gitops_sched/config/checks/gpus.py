"""GPU checks: each GPU request has a valid form and fits a GPU the workload may use.

`gpu` is whole GPUs or one fraction of a GPU; a `gpuMemory` request must fit in the
memory of one GPU on some node group the workload may use; and node groups should name
a GPU model the catalogue knows (capacity, memory and MIG checks depend on it),
MIG-capable where MIG is enabled. MIG requests and layouts: see `mig`.
"""

from __future__ import annotations

from collections.abc import Iterator

from gitops_sched.config import codes
from gitops_sched.config.checks.common import diagnostic_at, error_at, format_memory, itemized
from gitops_sched.config.checks.pods import field_source, own_pod_fields, workload_gpu_groups
from gitops_sched.config.diagnostics import Diagnostic, Severity
from gitops_sched.config.model import Repo, quantity
from gitops_sched.hardware.gpus import gpu_memory_bytes, known_gpu_model_names, lookup_gpu_model


def valid_gpu(value: float) -> bool:
    return (value >= 0 and float(value).is_integer()) or 0 < value < 1


def check_gpu_values(repo: Repo) -> Iterator[Diagnostic]:
    """`gpu` is whole GPUs or one fraction of a GPU; 1.5 GPUs cannot be allocated."""
    for doc, fields in own_pod_fields(repo):
        gpu = fields.get("gpu")
        if gpu is not None and not valid_gpu(gpu):
            yield error_at(
                doc,
                ("spec", "gpu"),
                codes.BAD_GPU_COUNT,
                f"gpu must be a whole number of GPUs or a fraction in (0, 1), got {gpu}",
            )


def check_gpu_memory(repo: Repo) -> Iterator[Diagnostic]:
    """A gpuMemory request is a share of one GPU; it must fit on a GPU the workload may use."""
    for workload in repo.workloads:
        spec = repo.pod_spec(workload)
        if "gpuMemory" not in spec:
            continue
        wanted = quantity(spec["gpuMemory"])
        groups = workload_gpu_groups(repo, workload)
        sizes = [
            (g.name, size)
            for g in groups
            if (size := gpu_memory_bytes(g.gpu_model, g.gpu_memory)) is not None
        ]
        if sizes and all(wanted > size for _, size in sizes):
            yield error_at(
                field_source(repo, workload, ("gpuMemory",)),
                ("spec", "gpuMemory"),
                codes.GPU_MEMORY_TOO_LARGE,
                f"gpuMemory {spec['gpuMemory']} is more than one GPU has on the node groups "
                f"workload '{workload.name}' may use ({itemized(sizes, format_memory)})",
            )


def check_node_group_models(repo: Repo) -> Iterator[Diagnostic]:
    """Capacity, memory and MIG checks need a GPU model the catalogue knows."""
    for group in repo.node_groups:
        if group.gpu_model is None:
            continue
        model = lookup_gpu_model(group.gpu_model)
        if model is None:
            yield diagnostic_at(
                group.doc,
                ("spec", "gpu", "model"),
                codes.UNKNOWN_GPU_MODEL,
                f"unknown GPU model '{group.gpu_model}' "
                f"(known: {', '.join(known_gpu_model_names())})",
                Severity.WARNING,
            )
        elif group.mig_enabled and not model.mig_capable:
            yield error_at(
                group.doc,
                ("spec", "mig", "enabled"),
                codes.MIG_NOT_SUPPORTED,
                f"{model.name} GPUs do not support MIG",
            )
