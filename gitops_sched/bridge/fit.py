"""The never-fit check: workloads that could never run anywhere they may run.

It asks the engine's own rule (`engine.fit.never_fits`) about each workload against the
nodes its node groups declare, the nodes `simulate` builds, so `validate` and `simulate`
call the same workloads "can never fit". Two of its answers are reported by config's checks
already, at their own fields (a gpuMemory bigger than the GPU: `gpus`; a MIG profile no
allowed group offers: `mig`), and an empty node group is a choice, not an error. It plugs
into config's checks from here (`gitops_sched.validate`), so config imports no engine.
"""

from __future__ import annotations

from collections.abc import Iterator

from gitops_sched.bridge.build import gpu_request, job_from_workload, nodes_from_repo
from gitops_sched.config import codes
from gitops_sched.config.checks.common import error_at
from gitops_sched.config.checks.gpus import valid_gpu
from gitops_sched.config.diagnostics import Diagnostic
from gitops_sched.config.document import Path_
from gitops_sched.config.model import GPU_FIELDS, Repo, Workload
from gitops_sched.engine.fit import NeverFit, never_fits

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
    nodes = nodes_from_repo(repo)
    answers: dict[tuple, NeverFit | None] = {}  # many workloads share one shape
    for workload in repo.workloads:
        spec = repo.pod_spec(workload)
        gpu = spec.get("gpu")
        if (gpu is not None and not valid_gpu(gpu)) or workload.min_available > workload.replicas:
            continue  # check_gpu_values and check_gang_sizes report these
        # the job's shape, without building the job: one per shape is enough
        request, groups = gpu_request(spec), repo.workload_node_group_names(workload)
        shape = (request, min(workload.min_available, workload.replicas), groups)
        if shape not in answers:
            answers[shape] = never_fits(job_from_workload(repo, workload, 0), nodes)
        misfit = answers[shape]
        if misfit is None or misfit.kind not in MISFIT_CODES:
            continue
        yield error_at(
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
