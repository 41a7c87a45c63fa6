"""Semantic checks: what a config repo must satisfy beyond its JSON Schemas.

Each check is a small pure function from the model (and, for names, the raw documents)
to diagnostics, so one run reports every problem. The model holds only schema-valid
documents; the raw documents tell which names exist at all, so an object that failed
the schema is not reported a second time as a dangling reference.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from functools import lru_cache
from typing import Any

from jinja2 import TemplateSyntaxError

from gitops_sched.config.diagnostics import Diagnostic, Diagnostics, Location, Severity
from gitops_sched.config.loader import KINDS, Document, Path_
from gitops_sched.config.model import (
    Department,
    NodeGroup,
    Project,
    Repo,
    Workload,
    gpu_request_of,
    quantity,
)
from gitops_sched.config.templating import (
    CONTEXT_NAMES,
    context_for,
    is_templated,
    render_value,
    renders_everywhere,
    unknown_names,
)
from gitops_sched.engine.mig import MigProfile, compute_share, mig_profiles
from gitops_sched.gpus import known_gpu_model_names, lookup_gpu_model

MAX_NAMESPACE_LENGTH = 63  # a namespace is a DNS-1123 label
# A Job's name becomes the `job-name` label value of its pods (63 characters at most) and
# Kubernetes appends suffixes to it, so workloads keep the margin CronJobs use.
MAX_WORKLOAD_NAME_LENGTH = 52
MAX_LABEL_VALUE_LENGTH = 63
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
# GPU quantities are floats (fractions, MIG shares); a sum may miss a bound by rounding noise.
EPSILON = 1e-6

Number = float | Decimal


def _diagnostic(doc: Document, path: Path_, message: str, severity: Severity) -> Diagnostic:
    """A problem of `doc`, at the value `path` names (or its nearest existing ancestor)."""
    return Diagnostic(doc.location(path), message, doc.ref, severity)


def _error(doc: Document, path: Path_, message: str) -> Diagnostic:
    return _diagnostic(doc, path, message, Severity.ERROR)


# --- formatting: numbers as a user would write them, so messages stay stable ---------------


def _number(value: Number) -> str:
    """4, 0.5, 2.25: no float noise, no trailing zeros."""
    return format(Decimal(value).quantize(Decimal("0.0001")).normalize(), "f")


_MEMORY_UNITS = (
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
    ("T", 10**12),
    ("G", 10**9),
    ("M", 10**6),
    ("k", 10**3),
)


def _memory(value: Number) -> str:
    """Bytes in the largest unit that divides them, as Kubernetes quantities are written."""
    exact = Decimal(value)
    for suffix, size in _MEMORY_UNITS:
        if exact >= size and exact % size == 0:
            return f"{_number(exact / size)}{suffix}"
    return _number(exact)


# (field of Resources, how messages name it, how they print it)
RESOURCES: tuple[tuple[str, str, Callable[[Number], str]], ...] = (
    ("gpu", "GPU", _number),
    ("cpu", "CPU", _number),
    ("memory", "memory", _memory),
)


def _over(total: Number, bound: Number) -> bool:
    return total - bound > EPSILON


def _itemized(items: list[tuple[str, Number]], fmt: Callable[[Number], str]) -> str:
    """`a 8, b 4`: which objects make up a sum."""
    return ", ".join(f"{name} {fmt(value)}" for name, value in items)


def _names(items: Iterable[str]) -> str:
    return ", ".join(items) or "none"


# --- documents: one Cluster, unique names --------------------------------------------------


def check_cluster_count(documents: list[Document]) -> Iterator[Diagnostic]:
    """Everything cluster-wide (namespaces, scheduler policy) comes from exactly one Cluster."""
    clusters = [doc for doc in documents if doc.kind == "Cluster"]
    if not clusters:
        # the repo's first file, or the repo itself (".") when it holds no document at all
        where = Location(documents[0].file) if documents else Location(".")
        yield Diagnostic(where, "no Cluster document; a repo declares exactly one")
    for doc in clusters[1:]:
        yield _error(
            doc, ("kind",), f"more than one Cluster (first defined at {clusters[0].location()})"
        )


def check_duplicate_names(documents: list[Document]) -> Iterator[Diagnostic]:
    """Names are the keys references and rendered objects use; a second one would shadow."""
    first: dict[tuple[str, str], Document] = {}
    for doc in documents:
        if doc.kind not in KINDS or doc.kind == "Cluster" or not doc.name:
            continue
        key = (doc.kind, doc.name)
        if key in first:
            yield _error(
                doc,
                ("metadata", "name"),
                f"duplicate {doc.kind} '{doc.name}' (also defined at {first[key].location()})",
            )
        else:
            first[key] = doc


# --- references ----------------------------------------------------------------------------


def _names_by_kind(documents: list[Document]) -> dict[str, set[str]]:
    names: dict[str, set[str]] = defaultdict(set)
    for doc in documents:
        names[doc.kind].add(doc.name)
    return names


Reference = tuple[Path_, str, str]  # where, the kind referred to, the name


def _project_references(project: Project) -> Iterator[Reference]:
    yield ("spec", "department"), "Department", project.department
    for i, group in enumerate(project.node_groups):
        yield ("spec", "nodeGroups", "allowed", i), "NodeGroup", group
    for wtype, groups in project.node_groups_by_type.items():
        for i, group in enumerate(groups):
            yield ("spec", "nodeGroups", "byType", wtype, i), "NodeGroup", group
    for group in project.node_group_quotas:
        yield ("spec", "nodeGroupQuotas", group), "NodeGroup", group


def _workload_references(workload: Workload) -> Iterator[Reference]:
    yield ("spec", "project"), "Project", workload.project
    if workload.template:
        yield ("spec", "template"), "Template", workload.template
    if workload.node_group:
        yield ("spec", "nodeGroup"), "NodeGroup", workload.node_group


def check_references(repo: Repo, names: dict[str, set[str]]) -> Iterator[Diagnostic]:
    """Every name a project or workload refers to must be defined somewhere in the repo."""
    owners = [(p.doc, _project_references(p)) for p in repo.projects] + [
        (w.doc, _workload_references(w)) for w in repo.workloads
    ]
    for doc, references in owners:
        for path, kind, name in references:
            if name not in names[kind]:
                defined = sorted(names[kind])
                known = f"defined: {', '.join(defined)}" if defined else f"no {kind} is defined"
                yield _error(doc, path, f"unknown {kind} '{name}' ({known})")


def check_workload_node_group_allowed(repo: Repo) -> Iterator[Diagnostic]:
    """A workload pinned to a node group its project may not use could never be placed."""
    for workload in repo.workloads:
        project = repo.project(workload.project)
        if not workload.node_group or project is None:
            continue
        allowed = project.allowed_node_groups(workload.type)
        if allowed and workload.node_group not in allowed:
            yield _error(
                workload.doc,
                ("spec", "nodeGroup"),
                f"node group '{workload.node_group}' is not allowed for {workload.type} "
                f"workloads of project '{project.name}' (allowed: {', '.join(allowed)})",
            )


def check_default_templates(repo: Repo) -> Iterator[Diagnostic]:
    """The default template applies to every workload, so there can be only one."""
    defaults = [t for t in repo.templates if t.default]
    for template in defaults[1:]:
        first = defaults[0]
        yield _error(
            template.doc,
            ("spec", "default"),
            f"more than one default Template (the first is '{first.name}' "
            f"at {first.doc.location()})",
        )


# --- quotas and capacity -------------------------------------------------------------------


def check_department_quotas(repo: Repo) -> Iterator[Diagnostic]:
    """A department's quota caps its projects' guarantees; more would promise what is not there."""
    for department in repo.departments:
        projects = [p for p in repo.projects if p.department == department.name]
        for field, label, fmt in RESOURCES:
            bound = getattr(department.quota, field)
            items = [
                (p.name, value) for p in projects if (value := getattr(p.quota, field)) is not None
            ]
            total = sum((value for _, value in items), start=0)
            if bound is not None and _over(total, bound):
                yield _error(
                    department.doc,
                    ("spec", "quota", field),
                    f"projects' {label} quotas add up to {fmt(total)} ({_itemized(items, fmt)}), "
                    f"more than the department's {label} quota of {fmt(bound)}",
                )


def _limits_below_quota(owner: Department | Project) -> Iterator[Diagnostic]:
    for field, label, fmt in RESOURCES:
        limit, quota = getattr(owner.limit, field), getattr(owner.quota, field)
        if limit is not None and quota is not None and _over(quota, limit):
            yield _error(
                owner.doc,
                ("spec", "limit", field),
                f"{label} limit {fmt(limit)} is less than the {label} quota {fmt(quota)}",
            )


def check_limits(repo: Repo) -> Iterator[Diagnostic]:
    """A hard limit below the guaranteed quota would take back the guarantee."""
    for owner in [*repo.departments, *repo.projects]:
        yield from _limits_below_quota(owner)


def _capacity_severity(repo: Repo) -> Severity:
    allowed = repo.cluster is not None and repo.cluster.policy.allow_oversubscription
    return Severity.WARNING if allowed else Severity.ERROR


def _oversubscription_note(severity: Severity) -> str:
    return "; allowed by policy.allowOversubscription" if severity is Severity.WARNING else ""


def _capacity_text(groups: list[NodeGroup]) -> str:
    return ", ".join(f"{g.name} {g.node_count}x{g.gpus_per_node}" for g in groups if g.gpu_capacity)


def check_cluster_capacity(repo: Repo) -> Iterator[Diagnostic]:
    """Department guarantees must be backed by GPUs the node groups declare."""
    if repo.cluster is None:
        return
    items = [(d.name, d.quota.gpu) for d in repo.departments if d.quota.gpu is not None]
    total = sum(value for _, value in items)
    if _over(total, repo.gpu_capacity):
        severity = _capacity_severity(repo)
        yield _diagnostic(
            repo.cluster.doc,
            (),
            f"departments' GPU quotas add up to {_number(total)} ({_itemized(items, _number)}), "
            f"more than the cluster's {repo.gpu_capacity} GPUs "
            f"({_capacity_text(repo.node_groups) or 'no GPU node groups'})"
            + _oversubscription_note(severity),
            severity,
        )


def check_node_group_capacity(repo: Repo) -> Iterator[Diagnostic]:
    """Per-node-group guarantees must be backed by that group's own GPUs."""
    quotas: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for project in repo.projects:
        for group, quota in project.node_group_quotas.items():
            if quota.gpu is not None:
                quotas[group].append((project.name, quota.gpu))
    severity = _capacity_severity(repo)
    for group in repo.node_groups:
        items = quotas.get(group.name, [])
        total = sum(value for _, value in items)
        if _over(total, group.gpu_capacity):
            yield _diagnostic(
                group.doc,
                ("spec", "nodeCount"),
                f"projects' GPU quotas on node group '{group.name}' add up to {_number(total)} "
                f"({_itemized(items, _number)}), more than its {group.gpu_capacity} GPUs "
                f"({group.node_count} x {group.gpus_per_node} per node)"
                + _oversubscription_note(severity),
                severity,
            )


# --- what a workload asks for --------------------------------------------------------------


def _workload_node_groups(repo: Repo, workload: Workload) -> list[NodeGroup]:
    """The node groups a workload may run on: its own pin, its project's list, or all GPU ones."""
    project = repo.project(workload.project)
    if workload.node_group:
        names: tuple[str, ...] = (workload.node_group,)
    else:
        names = project.allowed_node_groups(workload.type) if project else ()
    if names:
        return [g for g in repo.node_groups if g.name in names]
    return [g for g in repo.node_groups if g.role == "gpu-worker"]


def _gpu_memory(group: NodeGroup) -> Decimal | None:
    """Bytes per GPU: as declared, else from the GPU catalogue."""
    if group.gpu_memory is not None:
        return group.gpu_memory
    model = lookup_gpu_model(group.gpu_model) if group.gpu_model else None
    return Decimal(model.memory_mib * 2**20) if model else None


def _mig_tables(groups: list[NodeGroup]) -> dict[str, dict[str, MigProfile]]:
    """MIG profiles per canonical GPU model of the MIG-enabled, MIG-capable groups."""
    tables: dict[str, dict[str, MigProfile]] = {}
    for group in groups:
        model = lookup_gpu_model(group.gpu_model) if group.gpu_model else None
        if group.mig_enabled and model is not None and model.mig_capable:
            tables[model.name] = mig_profiles(model.name)
    return tables


def _pod_gpus(repo: Repo, workload: Workload, spec: dict[str, Any]) -> float | None:
    """What one pod counts against quota, on the most favourable node group it may use.

    Whole GPUs and fractions count as written, GPU memory as its share of the GPU's
    memory, a MIG instance as its share of the GPU's compute slices. None: not known
    (no node group to measure against; other checks say why).
    """
    request = gpu_request_of(spec)
    if request.gpu is not None:
        return request.gpu
    groups = _workload_node_groups(repo, workload)
    if request.gpu_memory is not None:
        sizes = [size for g in groups if (size := _gpu_memory(g))]
        return min((float(request.gpu_memory / size) for size in sizes), default=None)
    if request.mig is not None:
        tables = _mig_tables(groups)
        shares = [compute_share(m, request.mig) for m, t in tables.items() if request.mig in t]
        return min(shares, default=None)
    return 0.0


def _non_preemptible(repo: Repo) -> dict[str, list[tuple[Workload, float]]]:
    """Non-preemptible workloads by project, with their GPUs per pod, where measurable."""
    found: dict[str, list[tuple[Workload, float]]] = defaultdict(list)
    for workload in repo.workloads:
        if not workload.preemptible:
            per_pod = _pod_gpus(repo, workload, repo.pod_spec(workload))
            if per_pod is not None:
                found[workload.project].append((workload, per_pod))
    return found


def check_non_preemptible_quota(repo: Repo) -> Iterator[Diagnostic]:
    """Work that cannot be preempted must fit in the deserved quota, alone and together."""
    by_project = _non_preemptible(repo)
    for project in repo.projects:
        quota = project.quota.gpu or 0.0
        workloads = by_project.get(project.name, [])
        for workload, per_pod in workloads:
            total = per_pod * workload.replicas
            if _over(total, quota):
                pods = (
                    f" ({workload.replicas} x {_number(per_pod)})" if workload.replicas > 1 else ""
                )
                yield _error(
                    workload.doc,
                    ("spec", "type"),
                    f"non-preemptible {workload.type} workload needs {_number(total)} GPUs{pods}, "
                    f"more than the GPU quota of project '{project.name}' ({_number(quota)})",
                )
        needs = [(w.name, per_pod * w.replicas) for w, per_pod in workloads]
        total = sum(value for _, value in needs)
        if len(needs) > 1 and _over(total, quota):
            yield _error(
                project.doc,
                ("spec", "quota", "gpu"),
                f"non-preemptible workloads need {_number(total)} GPUs together "
                f"({_itemized(needs, _number)}), more than the project's GPU quota "
                f"of {_number(quota)}",
            )


def _own_pod_fields(repo: Repo) -> list[tuple[Document, dict[str, Any]]]:
    """The pod fields each template and workload writes itself (all under `spec`)."""
    return [(t.doc, t.spec) for t in repo.templates] + [
        (w.doc, w.overrides) for w in repo.workloads
    ]


def _valid_gpu(value: float) -> bool:
    return (value >= 0 and float(value).is_integer()) or 0 < value < 1


def check_gpu_values(repo: Repo) -> Iterator[Diagnostic]:
    """`gpu` is whole GPUs or one fraction of a GPU; 1.5 GPUs cannot be allocated."""
    for doc, fields in _own_pod_fields(repo):
        gpu = fields.get("gpu")
        if gpu is not None and not _valid_gpu(gpu):
            yield _error(
                doc,
                ("spec", "gpu"),
                f"gpu must be a whole number of GPUs or a fraction in (0, 1), got {gpu}",
            )


def _layers(repo: Repo, workload: Workload) -> list[tuple[Document, dict[str, Any]]]:
    """The pod-field layers `Repo.pod_spec` merges, earliest first."""
    templates = (repo.default_template(), repo.template(workload.template))
    return [(t.doc, t.spec) for t in templates if t is not None] + [
        (workload.doc, workload.overrides)
    ]


def _source(repo: Repo, workload: Workload, path: Path_) -> Document:
    """The document whose value for a merged pod field (e.g. `("env", "HOME")`) wins."""
    for doc, fields in reversed(_layers(repo, workload)):
        value: Any = fields
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            return doc
    return workload.doc


def check_gpu_memory(repo: Repo) -> Iterator[Diagnostic]:
    """A gpuMemory request is a share of one GPU; it must fit on a GPU the workload may use."""
    for workload in repo.workloads:
        spec = repo.pod_spec(workload)
        if "gpuMemory" not in spec:
            continue
        wanted = quantity(spec["gpuMemory"])
        groups = _workload_node_groups(repo, workload)
        sizes = [(g.name, size) for g in groups if (size := _gpu_memory(g)) is not None]
        if sizes and all(wanted > size for _, size in sizes):
            yield _error(
                _source(repo, workload, ("gpuMemory",)),
                ("spec", "gpuMemory"),
                f"gpuMemory {spec['gpuMemory']} is more than one GPU has on the node groups "
                f"workload '{workload.name}' may use ({_itemized(sizes, _memory)})",
            )


def check_mig_profiles(repo: Repo) -> Iterator[Diagnostic]:
    """A MIG request needs a MIG-enabled node group whose GPU model offers that profile."""
    for workload in repo.workloads:
        profile = repo.pod_spec(workload).get("mig")
        if profile is None:
            continue
        doc = _source(repo, workload, ("mig",))
        groups = _workload_node_groups(repo, workload)
        if not any(g.mig_enabled for g in groups):
            yield _error(
                doc,
                ("spec", "mig"),
                f"no MIG-enabled node group for MIG profile '{profile}' among the node groups "
                f"workload '{workload.name}' may use ({_names(g.name for g in groups)})",
            )
            continue
        tables = _mig_tables(groups)
        if tables and all(profile not in table for table in tables.values()):
            offers = " or ".join(
                f"{model} (valid: {', '.join(table)})" for model, table in tables.items()
            )
            yield _error(
                doc, ("spec", "mig"), f"MIG profile '{profile}' does not exist on {offers}"
            )


def check_node_group_models(repo: Repo) -> Iterator[Diagnostic]:
    """Capacity, memory and MIG checks need a GPU model the catalogue knows."""
    for group in repo.node_groups:
        if group.gpu_model is None:
            continue
        model = lookup_gpu_model(group.gpu_model)
        if model is None:
            yield _diagnostic(
                group.doc,
                ("spec", "gpu", "model"),
                f"unknown GPU model '{group.gpu_model}' "
                f"(known: {', '.join(known_gpu_model_names())})",
                Severity.WARNING,
            )
        elif group.mig_enabled and not model.mig_capable:
            yield _error(
                group.doc, ("spec", "mig", "enabled"), f"{model.name} GPUs do not support MIG"
            )


def check_gang_sizes(repo: Repo) -> Iterator[Diagnostic]:
    """A gang larger than the workload's pods could never start."""
    for workload in repo.workloads:
        if workload.min_available > workload.replicas:
            yield _error(
                workload.doc,
                ("spec", "minAvailable"),
                f"minAvailable {workload.min_available} is more than replicas "
                f"({workload.replicas}); the gang could never start",
            )


# --- names Kubernetes derives ---------------------------------------------------------------


def check_derived_names(repo: Repo) -> Iterator[Diagnostic]:
    """Names the compiler derives must still be valid Kubernetes names."""
    if repo.cluster is not None:
        for project in repo.projects:
            namespace = repo.cluster.namespace_prefix + project.name
            if len(namespace) > MAX_NAMESPACE_LENGTH:
                yield _error(
                    project.doc,
                    ("metadata", "name"),
                    f"namespace '{namespace}' is {len(namespace)} characters, more than the "
                    f"{MAX_NAMESPACE_LENGTH} Kubernetes allows",
                )
    for workload in repo.workloads:
        if len(workload.name) > MAX_WORKLOAD_NAME_LENGTH:
            yield _error(
                workload.doc,
                ("metadata", "name"),
                f"workload name is {len(workload.name)} characters, more than "
                f"{MAX_WORKLOAD_NAME_LENGTH} (its Job name becomes a pod label value)",
            )


def _valid_label_value(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= MAX_LABEL_VALUE_LENGTH
        and LABEL_VALUE.fullmatch(value) is not None
    )


def check_node_labels(repo: Repo) -> Iterator[Diagnostic]:
    """Node group labels are put on and matched against nodes; Kubernetes rejects bad values."""
    for group in repo.node_groups:
        labels = [(("spec", "nodeLabel", "value"), group.node_label[1])] + [
            (("spec", "nodeSelector", "matchLabels", key), value)
            for key, value in group.node_selector.items()
        ]
        for path, value in labels:
            if not _valid_label_value(value):
                yield _error(
                    group.doc,
                    path,
                    f"invalid label value '{value}' (at most {MAX_LABEL_VALUE_LENGTH} characters: "
                    "alphanumerics, '-', '_' and '.', beginning and ending with an alphanumeric)",
                )


# --- Jinja2 expressions ---------------------------------------------------------------------


def _templated_strings(value: Any, path: Path_) -> Iterator[tuple[Path_, str]]:
    """Every string holding a Jinja2 expression inside a value, with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _templated_strings(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _templated_strings(item, (*path, i))
    elif is_templated(value):
        yield path, value


@lru_cache(maxsize=4096)  # the same few expressions come back for every workload
def _expression_problems(source: str) -> tuple[str, ...]:
    """What is wrong with an expression whatever workload it is rendered for."""
    try:
        names = unknown_names(source)
    except TemplateSyntaxError as exc:
        return (f"template syntax error: {exc.message}",)
    known = ", ".join(CONTEXT_NAMES)
    return tuple(f"unknown name '{name}' in template expression (known: {known})" for name in names)


def check_template_expressions(repo: Repo) -> Iterator[Diagnostic]:
    """Syntax errors and unknown names, reported once where the expression is written."""
    for doc, fields in _own_pod_fields(repo):
        for path, source in _templated_strings(fields, ("spec",)):
            for message in _expression_problems(source):
                yield _error(doc, path, message)


def _merged_fields(repo: Repo, workload: Workload) -> Iterator[tuple[Path_, Any]]:
    """The workload's merged pod fields by path below `spec`; `env` one variable at a time."""
    for key, value in repo.pod_spec(workload).items():
        if key == "env" and isinstance(value, dict):
            for name, item in value.items():
                yield (key, name), item
        else:
            yield (key,), value


def check_template_rendering(repo: Repo) -> Iterator[Diagnostic]:
    """Render each workload's expressions as the compiler will (e.g. `project.nosuchattr`)."""
    # Most field values come from templates, shared by many workloads: each value is searched
    # once for the expressions that need rendering per workload (keyed by identity: the repo
    # keeps every value alive meanwhile).
    found: dict[int, list[tuple[Path_, str]]] = {}
    for workload in repo.workloads:
        yield from _rendering_problems(repo, workload, found)


def _rendering_problems(
    repo: Repo, workload: Workload, found: dict[int, list[tuple[Path_, str]]]
) -> Iterator[Diagnostic]:
    context = None
    for field, value in _merged_fields(repo, workload):
        if (sources := found.get(id(value))) is None:
            sources = found[id(value)] = _to_render(value)
        for path, source in sources:
            if context is None:
                context = context_for(repo.cluster, repo.project(workload.project), workload)
            try:
                render_value(source, context)
            except Exception as exc:  # user expressions may raise anything (1/0, bad types)
                message = f"cannot render template expression: {exc}"
                yield _error(_source(repo, workload, field), ("spec", *field, *path), message)


def _to_render(value: Any) -> list[tuple[Path_, str]]:
    """The expressions in `value` whose rendering may fail for some workload.

    Not those with problems of their own (check_template_expressions reports them), nor
    those that only print names every context has.
    """
    return [
        (path, source)
        for path, source in _templated_strings(value, ())
        if not _expression_problems(source) and not renders_everywhere(source)
    ]


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
    check_gang_sizes,
    check_derived_names,
    check_node_labels,
    check_template_expressions,
    check_template_rendering,
)


def run_checks(repo: Repo, documents: list[Document], diagnostics: Diagnostics) -> None:
    """Every semantic check; `repo` holds the schema-valid documents, `documents` all of them."""
    diagnostics.extend(check_cluster_count(documents))
    diagnostics.extend(check_duplicate_names(documents))
    diagnostics.extend(check_references(repo, _names_by_kind(documents)))
    for check in MODEL_CHECKS:
        diagnostics.extend(check(repo))
