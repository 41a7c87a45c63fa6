"""Semantic checks: what a config repo must satisfy beyond its JSON Schemas.

Each check is a small pure function from the model (and, for names, the raw documents)
to diagnostics, so one run reports every problem. The model holds only schema-valid
documents; the raw documents tell which names exist at all, so an object that failed
the schema is not reported a second time as a dangling reference.

The checks live in modules named for what they check (structure, references, quotas,
gpus, mig, fit, names, volumes, expressions, policy), with `common` and `pods` holding the
helpers they share; this module only runs them, in a fixed order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gitops_sched.config.checks.expressions import (
    check_template_expressions,
    check_template_rendering,
)
from gitops_sched.config.checks.fit import (
    check_node_group_selectors,
    check_pod_resources_fit,
    check_workloads_fit,
)
from gitops_sched.config.checks.gpus import (
    check_gpu_memory,
    check_gpu_values,
    check_node_group_models,
)
from gitops_sched.config.checks.mig import (
    check_mig_layouts,
    check_mig_models,
    check_mig_profiles,
)
from gitops_sched.config.checks.names import check_derived_names, check_node_labels
from gitops_sched.config.checks.policy import check_stale_gang_grace
from gitops_sched.config.checks.quotas import (
    check_cluster_capacity,
    check_department_quotas,
    check_limits,
    check_node_group_capacity,
    check_non_preemptible_quota,
)
from gitops_sched.config.checks.references import (
    _names_by_kind,
    check_references,
    check_workload_node_group_allowed,
)
from gitops_sched.config.checks.structure import (
    check_cluster_count,
    check_default_templates,
    check_duplicate_names,
    check_gang_sizes,
)
from gitops_sched.config.checks.volumes import (
    check_claim_values,
    check_claims_agree,
    check_single_node_claims,
    check_volume_names,
)
from gitops_sched.config.diagnostics import Diagnostic, Diagnostics
from gitops_sched.config.loader import Document
from gitops_sched.config.model import Repo

MODEL_CHECKS: tuple[Callable[[Repo], Iterable[Diagnostic]], ...] = (
    check_workload_node_group_allowed,
    check_default_templates,
    check_department_quotas,
    check_limits,
    check_cluster_capacity,
    check_node_group_capacity,
    check_non_preemptible_quota,
    check_gpu_values,
    check_gpu_memory,
    check_mig_profiles,
    check_node_group_models,
    check_mig_layouts,
    check_mig_models,
    check_gang_sizes,
    check_node_group_selectors,
    check_stale_gang_grace,
    check_derived_names,
    check_node_labels,
    check_claim_values,
    check_volume_names,
    check_claims_agree,
    check_single_node_claims,
    check_template_expressions,
    check_template_rendering,
)


# workloads that could never run on the repo's nodes: errors in a repo; a Simulation's own
# workloads (a what-if, maybe on other nodes) leave them to simulate's "can never fit"
FIT_CHECKS: tuple[Callable[[Repo], Iterable[Diagnostic]], ...] = (
    check_workloads_fit,
    check_pod_resources_fit,
)


def run_checks(
    repo: Repo, documents: list[Document], diagnostics: Diagnostics, fit: bool = True
) -> None:
    """Every semantic check; `repo` holds the schema-valid documents, `documents` all of them.
    `fit`: whether workloads must fit the repo's nodes (FIT_CHECKS)."""
    diagnostics.extend(check_cluster_count(documents))
    diagnostics.extend(check_duplicate_names(documents))
    diagnostics.extend(check_references(repo, _names_by_kind(documents)))
    for check in MODEL_CHECKS + (FIT_CHECKS if fit else ()):
        diagnostics.extend(check(repo))
