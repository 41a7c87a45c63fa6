"""Semantic checks: what a config repo must satisfy beyond its JSON Schemas.

Each check is a small pure function from the model (and, for names, the raw documents)
to diagnostics, so one run reports every problem. The model holds only schema-valid
documents; the raw documents tell which names exist at all, so an object that failed
the schema is not reported a second time as a dangling reference.

A problem is reported once, where it is: checks of an object's own fields run over the
whole model; checks that follow references or add up over the repo run over its sound
part and only while the kinds they add up are complete (`soundness`), so a broken
document, a duplicate or a dangling reference has no follow-on errors elsewhere; sums
over several objects blame the one that tips them over (in `plan`, the one the change
introduced: `baseline`).

The checks live in modules named for what they check (structure, references, quotas,
gpus, mig, fit, names, volumes, ports, expressions, policy, deprecated), with `common` and `pods`
holding the helpers they share; this module only runs them, in a fixed order. The checks
that need the engine (never-fit) and the Simulation checks plug in from above config
(`gitops_sched.validate`), so config imports nothing but the hardware tables and contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from gitops_sched.config.baseline import NO_BASELINE, Baseline
from gitops_sched.config.checks.deprecated import check_ignored_fields
from gitops_sched.config.checks.expressions import (
    check_template_expressions,
    check_template_rendering,
)
from gitops_sched.config.checks.fit import check_node_group_selectors
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
from gitops_sched.config.checks.names import (
    check_derived_names,
    check_labels,
    check_node_selectors,
)
from gitops_sched.config.checks.policy import check_stale_gang_grace
from gitops_sched.config.checks.ports import check_ports
from gitops_sched.config.checks.quotas import (
    check_cluster_capacity,
    check_department_quotas,
    check_limits,
    check_node_group_capacity,
    check_non_preemptible_quota,
)
from gitops_sched.config.checks.references import (
    Defined,
    check_references,
    check_workload_node_group_allowed,
)
from gitops_sched.config.checks.soundness import Soundness, without
from gitops_sched.config.checks.structure import (
    check_cluster_count,
    check_default_templates,
    check_duplicate_names,
    check_gang_sizes,
    duplicate_definitions,
)
from gitops_sched.config.checks.volumes import (
    check_claim_values,
    check_claims_agree,
    check_mount_paths,
    check_single_node_claims,
    check_volume_names,
)
from gitops_sched.config.diagnostics import Diagnostic, Diagnostics
from gitops_sched.config.document import Document
from gitops_sched.config.model import Repo
from gitops_sched.config.unread import NOTHING_UNREAD, Unread

Check = Callable[[Repo], Iterable[Diagnostic]]
SumCheck = Callable[[Repo, Baseline], Iterable[Diagnostic]]

# An object's own fields (or objects of one kind side by side): over the whole model.
OWN_CHECKS: tuple[Check, ...] = (
    check_default_templates,
    check_limits,
    check_gpu_values,
    check_node_group_models,
    check_mig_layouts,
    check_mig_models,
    check_gang_sizes,
    check_node_group_selectors,
    check_stale_gang_grace,
    check_derived_names,
    check_node_selectors,
    check_labels,
    check_ignored_fields,
    check_claim_values,
    check_ports,
    check_template_expressions,
)

# Through references (node groups, templates, projects): over the sound part of the model,
# each only while the kinds named are complete ("Cluster": its policy and template context).
DERIVED_CHECKS: tuple[tuple[Check, tuple[str, ...]], ...] = (
    (check_workload_node_group_allowed, ()),
    (check_non_preemptible_quota, ()),
    (check_gpu_memory, ()),
    (check_mig_profiles, ()),
    (check_volume_names, ()),
    (check_mount_paths, ("Cluster",)),
    (check_claims_agree, ()),
    (check_single_node_claims, ()),
    (check_template_rendering, ("Cluster",)),
)

# Sums over several objects, reported on the one that tips the sum over (see `baseline`);
# the policy says whether that is an error or a warning, so the Cluster must be sound.
SUM_CHECKS: tuple[tuple[SumCheck, tuple[str, ...]], ...] = (
    (check_department_quotas, ("Cluster",)),
    (check_cluster_capacity, ("Cluster", "NodeGroup")),
    (check_node_group_capacity, ("Cluster",)),
)


def run_checks(
    repo: Repo,
    documents: list[Document],
    diagnostics: Diagnostics,
    fit: Sequence[Check] = (),
    baseline: Baseline = NO_BASELINE,
    unread: Unread = NOTHING_UNREAD,
) -> None:
    """Every semantic check; `repo` holds the schema-valid documents, `documents` all of them.
    `fit`: the checks that workloads fit the repo's nodes (`gitops_sched.validate.FIT_CHECKS`:
    the engine's never-fit rule plugs in from above config; a Simulation's own workloads, a
    what-if maybe on other nodes, leave them to simulate's "can never fit"); `baseline`: the other
    side of a change, for blaming the objects it introduced (plan's base); `unread`: what
    the files that did not load may define (no "unknown" or "missing" errors about it)."""
    diagnostics.extend(check_cluster_count(documents, baseline, unread))
    duplicates = duplicate_definitions(documents, baseline)
    diagnostics.extend(check_duplicate_names(duplicates))
    whole = without(repo, [doc for doc, _ in duplicates])
    diagnostics.extend(check_references(whole, Defined.of(documents), unread))
    for check in OWN_CHECKS:
        diagnostics.extend(check(whole))
    soundness = Soundness.of(whole, documents, unread)
    sound = soundness.sound_part(whole)
    derived = DERIVED_CHECKS + tuple((check, ()) for check in fit)
    for check, needs in derived:
        if soundness.complete(needs):
            diagnostics.extend(check(sound))
    for sum_check, needs in SUM_CHECKS:
        if soundness.complete(needs):
            diagnostics.extend(sum_check(whole, baseline))
