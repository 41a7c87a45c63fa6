"""MIG checks: a static node group's layout is one its GPUs can hold, and every MIG request
has a node group that offers its profile.

A node group with MIG enabled is `dynamic` (the scheduler creates and destroys instances
on demand; it declares none) or `static` (the admin's fixed layout: `layout` on every GPU
of a node, `byGpu` for the GPUs that differ). A static layout must be one NVIDIA's
placement tables allow on the group's GPU model, as `nvidia-smi mig -lgipp` prints them:
profiles the model offers, each at one of its placements, no two sharing a memory slice,
within the per-profile counts and the GPU's compute slices. A MIG request needs a
MIG-enabled group it may use whose GPU model offers the profile and, on a static group,
whose layout has an instance of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from gitops_sched.config import codes
from gitops_sched.config.checks.common import error_at, key_error_at
from gitops_sched.config.checks.pods import field_source, mig_tables, workload_gpu_groups
from gitops_sched.config.diagnostics import Diagnostic
from gitops_sched.config.document import Path_
from gitops_sched.config.model import MigLayout, NodeGroup, Repo
from gitops_sched.hardware.gpus import known_gpu_model_names, lookup_gpu_model
from gitops_sched.hardware.mig import MigProfile, is_valid_layout, mig_profiles

STRATEGY = ("spec", "mig", "strategy")


def _names(items: list[str]) -> str:
    return ", ".join(items) or "none"


def check_mig_layouts(repo: Repo) -> Iterator[Diagnostic]:
    """A static group declares a valid layout for every GPU; a dynamic one declares none."""
    for group in repo.node_groups:
        if group.mig_static:
            yield from _static_group(group)
        elif group.mig_strategy == "static":
            yield error_at(
                group.doc,
                STRATEGY,
                codes.STATIC_WITHOUT_MIG,
                "strategy static needs mig.enabled: true",
            )
        elif group.mig_layouts:
            first = group.mig_layouts[0]
            yield key_error_at(
                group.doc,
                first.path if first.gpus is None else ("spec", "mig", "byGpu"),
                codes.LAYOUT_ON_DYNAMIC,
                "a MIG layout is for strategy: static only (a dynamic group's instances are "
                "created by the scheduler)",
            )


def check_mig_models(repo: Repo) -> Iterator[Diagnostic]:
    """A dynamic MIG group needs a GPU model with known MIG profiles: without them the
    scheduler can neither create instances nor count them, so no MIG request would ever
    run there. (A static group says so at its layout, a non-MIG model at mig.enabled.)"""
    for group in repo.node_groups:
        if not group.mig_enabled or group.mig_static:
            continue
        model = lookup_gpu_model(group.gpu_model) if group.gpu_model else None
        if model is not None:
            continue
        what = f"GPU model '{group.gpu_model}'" if group.gpu_model else "no spec.gpu.model"
        yield error_at(
            group.doc,
            ("spec", "mig", "enabled"),
            codes.MIG_MODEL_WITHOUT_PROFILES,
            f"MIG is enabled on {what}, which has no known MIG profiles: the scheduler could "
            f"not create instances there (MIG models: {', '.join(_mig_models())})",
        )


def _mig_models() -> list[str]:
    return [name for name in known_gpu_model_names() if mig_profiles(name)]


def _static_group(group: NodeGroup) -> Iterator[Diagnostic]:
    yield from _gpu_indexes(group)
    missing = [i for i in range(group.gpus_per_node) if group.mig_layout(i) is None]
    if missing:
        which = "every GPU" if len(missing) == group.gpus_per_node else f"GPUs {_indexes(missing)}"
        yield key_error_at(
            group.doc,
            STRATEGY,
            codes.MISSING_LAYOUT,
            f"strategy static needs the instances of {which}: `layout` (every GPU of a node) "
            "or `byGpu` entries",
        )
    if group.gpu_model is None:
        yield key_error_at(
            group.doc,
            STRATEGY,
            codes.LAYOUT_UNCHECKABLE,
            "a static MIG layout needs spec.gpu.model to be checked against",
        )
        return
    model = lookup_gpu_model(group.gpu_model)
    if model is None:
        yield key_error_at(
            group.doc,
            STRATEGY,
            codes.LAYOUT_UNCHECKABLE,
            f"a static MIG layout cannot be checked on unknown GPU model '{group.gpu_model}'",
        )
        return
    if not model.mig_capable:
        return  # check_node_group_models reports it at mig.enabled
    for layout in group.mig_layouts:
        yield from _layout_problems(group, model.name, model.mig_slices, layout)


def _indexes(indexes: list[int]) -> str:
    return ", ".join(map(str, indexes))


def _gpu_indexes(group: NodeGroup) -> Iterator[Diagnostic]:
    """`byGpu` names each GPU of a node at most once, and only GPUs the node has."""
    seen: set[int] = set()
    for layout in group.mig_layouts:
        for j, index in enumerate(layout.gpus or ()):
            where = (*layout.path[:-1], "gpus", j)
            if index >= group.gpus_per_node:
                yield error_at(
                    group.doc,
                    where,
                    codes.BAD_GPU_INDEX,
                    f"GPU {index} does not exist on a node of {group.gpus_per_node} GPUs "
                    f"(indexes 0 to {group.gpus_per_node - 1})",
                )
            elif index in seen:
                message = f"GPU {index} has a layout already in byGpu"
                yield error_at(group.doc, where, codes.BAD_GPU_INDEX, message)
            seen.add(index)


def _layout_problems(
    group: NodeGroup, model: str, compute_slices: int, layout: MigLayout
) -> Iterator[Diagnostic]:
    """Each instance where NVIDIA's tables place it, then the layout as a whole."""
    doc = group.doc
    if not layout.instances:
        yield key_error_at(
            doc,
            layout.path,
            codes.BAD_MIG_LAYOUT,
            "a static layout needs instances (a MIG GPU serves no other work)",
        )
        return
    profiles = mig_profiles(model)
    taken: dict[int, tuple[str, int]] = {}  # memory slice -> (profile, start) holding it
    problems = 0
    for j, instance in enumerate(layout.instances):
        where: Path_ = (*layout.path, j)
        profile = profiles.get(instance.profile)
        if profile is None:
            problems += 1
            yield error_at(
                doc,
                (*where, "profile"),
                codes.UNKNOWN_MIG_PROFILE,
                f"MIG profile '{instance.profile}' does not exist on {model} "
                f"(valid: {', '.join(profiles)})",
            )
            continue
        if instance.start not in profile.placements:
            problems += 1
            yield error_at(
                doc,
                (*where, "start"),
                codes.BAD_MIG_PLACEMENT,
                f"{profile.name} cannot start at memory slice {instance.start} on {model} "
                f"(valid starts: {_indexes(list(profile.placements))})",
            )
            continue
        span = range(instance.start, instance.start + profile.memory_slices)
        if shared := [s for s in span if s in taken]:
            other, start = taken[shared[0]]
            problems += 1
            yield error_at(
                doc,
                where,
                codes.BAD_MIG_PLACEMENT,
                f"{profile.name} at slice {instance.start} overlaps {other} at slice {start} "
                f"(memory slices {_indexes(shared)})",
            )
            continue
        taken.update(dict.fromkeys(span, (profile.name, instance.start)))
    if not problems and not is_valid_layout(model, layout.instances):
        why = _too_much(profiles, compute_slices, [i.profile for i in layout.instances])
        message = f"not a valid {model} MIG layout: {why}"
        yield key_error_at(doc, layout.path, codes.BAD_MIG_LAYOUT, message)


def _too_much(profiles: dict[str, MigProfile], compute_slices: int, names: list[str]) -> str:
    """Why placements that fit one by one are still no layout: counts, compute, media."""
    reasons = [
        f"{count} x {name}, at most {profiles[name].max_instances}"
        for name, count in Counter(names).items()
        if count > profiles[name].max_instances
    ]
    compute = sum(profiles[name].compute_slices for name in names)
    if compute > compute_slices:
        reasons.append(f"{compute} compute slices, the GPU has {compute_slices}")
    if sum(profiles[name].media_extensions for name in names) > 1:
        reasons.append("more than one +me instance")
    return "; ".join(reasons) or "NVIDIA's placement tables do not allow it"


def _declared(group: NodeGroup) -> list[str]:
    """The profiles of a static group's layouts, each once, in the order written."""
    names = (i.profile for layout in group.mig_layouts for i in layout.instances)
    return list(dict.fromkeys(names))


def check_mig_profiles(repo: Repo) -> Iterator[Diagnostic]:
    """A MIG request needs a MIG-enabled node group whose GPU model offers that profile,
    and where the group is static, an instance of it in the layout."""
    for workload in repo.workloads:
        profile = repo.pod_spec(workload).get("mig")
        if profile is None:
            continue
        doc = field_source(repo, workload, ("mig",))
        groups = workload_gpu_groups(repo, workload)
        enabled = [g for g in groups if g.mig_enabled]
        if not enabled:
            yield error_at(
                doc,
                ("spec", "mig"),
                codes.NO_MIG_NODE_GROUP,
                f"no MIG-enabled node group for MIG profile '{profile}' among the node groups "
                f"workload '{workload.name}' may use ({_names([g.name for g in groups])})",
            )
            continue
        static = [g for g in enabled if g.mig_static]
        tables = mig_tables([g for g in enabled if not g.mig_static])
        if any(profile in _declared(g) for g in static):
            continue
        if any(profile in table for table in tables.values()):
            continue
        if not tables and not static:
            continue  # dynamic groups of unknown models: check_mig_models reports them
        reasons = [
            f"is not in the static MIG layout of node group '{g.name}' ({_names(_declared(g))})"
            for g in static
        ]
        if tables:
            offers = " or ".join(
                f"{model} (valid: {', '.join(table)})" for model, table in tables.items()
            )
            reasons.append(f"does not exist on {offers}")
        message = f"MIG profile '{profile}' {' and '.join(reasons)}"
        yield error_at(doc, ("spec", "mig"), codes.MIG_PROFILE_NOT_OFFERED, message)
