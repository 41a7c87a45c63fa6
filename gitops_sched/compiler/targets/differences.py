"""What another scheduler cannot express: one warning per object and difference, at the line
of the config that asks for it, naming what the target does instead.

Each check is a function of the repo and the target's display name; a target module lists the
checks that apply to it. One is an error, not a warning: names that would make two objects of
one kind (`queue_names`), where nothing can be rendered. `plan --target` shows them as the
places where the target's scheduler may decide otherwise than the simulation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from gitops_sched.config import codes
from gitops_sched.config.diagnostics import Diagnostic, Severity
from gitops_sched.config.document import Document
from gitops_sched.config.model import DEFAULT_PRIORITY, Repo

Check = Callable[[Repo, str], Iterator[Diagnostic]]


def _warning(doc: Document, path: tuple, message: str, code: codes.Code) -> Diagnostic:
    return Diagnostic(doc.key_location(path), message, doc.ref, Severity.WARNING, code)


def _request_path(doc: Document) -> tuple:
    """Where the workload asks for its GPUs: its own request, else its template reference."""
    spec = doc.data.get("spec", {})
    key = next((k for k in ("gpu", "gpuMemory", "mig", "template") if k in spec), None)
    return ("spec", key) if key else ("spec",)


def node_group_quota(repo: Repo, target: str) -> Iterator[Diagnostic]:
    """A quota per node group (Run:ai's node pools) becomes one quota over all of them."""
    for p in repo.projects:
        if p.node_group_quotas:
            groups = ", ".join(sorted(p.node_group_quotas))
            yield _warning(
                p.doc,
                ("spec", "nodeGroupQuotas"),
                f"{target} has one quota per queue, not per node group: the quotas of "
                f"{groups} are summed ({p.quota.gpu or 0:g} GPUs), usable on any of them",
                codes.TARGET_NODE_GROUP_QUOTA,
            )


def idle_timeout(repo: Repo, target: str) -> Iterator[Diagnostic]:
    for p in repo.projects:
        if p.idle_gpu_timeout_s is not None:
            yield _warning(
                p.doc,
                ("spec", "idleGpuTimeout"),
                f"{target} does not stop idle workloads: interactive workloads of this project "
                f"keep their GPUs while idle (only the interactive time limit stops them)",
                codes.TARGET_IDLE_TIMEOUT,
            )


def batch_gang(repo: Repo, target: str) -> Iterator[Diagnostic]:
    """KAI's pod grouper gives a batch Job's pods a PodGroup each (minMember 1)."""
    for w in repo.workloads:
        if w.type != "inference" and w.min_available > 1:
            yield _warning(
                w.doc,
                ("spec", "minAvailable") if "minAvailable" in w.doc.data["spec"] else ("spec",),
                f"{target} schedules a batch Job's pods one by one (a pod group of one per "
                f"pod): the gang of {w.min_available} pods may start partly",
                codes.TARGET_GANG,
            )


def fractions(repo: Repo, target: str) -> Iterator[Diagnostic]:
    for w in repo.workloads:
        spec = repo.pod_spec(w)
        if "gpuMemory" in spec or 0 < spec.get("gpu", 0) < 1:
            yield _warning(
                w.doc,
                _request_path(w.doc),
                f"{target} has no GPU fractions: the pod asks for no nvidia.com/gpu, so it is "
                f"admitted against no GPU quota and gets no GPU from the device plugin",
                codes.TARGET_FRACTION,
            )


def dynamic_mig(repo: Repo, target: str) -> Iterator[Diagnostic]:
    """Neither target creates MIG instances: a `mig:` workload waits for a node that already
    advertises its profile."""
    for w in repo.workloads:
        profile = repo.pod_spec(w).get("mig")
        dynamic = [
            g.name for g in repo.workload_node_groups(w) if g.mig_enabled and not g.mig_static
        ]
        if profile and dynamic:
            yield _warning(
                w.doc,
                _request_path(w.doc),
                f"{target} does not create MIG instances: on {', '.join(sorted(dynamic))} the "
                f"pod waits for a node that already advertises nvidia.com/mig-{profile}",
                codes.TARGET_DYNAMIC_MIG,
            )


def fraction_policy(repo: Repo, target: str) -> Iterator[Diagnostic]:
    for p in repo.projects:
        if p.fraction_policy is not None:
            yield _warning(
                p.doc,
                ("spec", "fractionPolicy"),
                f"{target} does not watch the GPU memory of fraction pods: "
                f"fractionPolicy {p.fraction_policy} is not enforced",
                codes.TARGET_FRACTION_POLICY,
            )


def priority_override(repo: Repo, target: str) -> Iterator[Diagnostic]:
    for w in repo.workloads:
        default = DEFAULT_PRIORITY[w.type]
        if w.priority != default:
            yield _warning(
                w.doc,
                ("spec", "priority"),
                f"{target} takes the priority of the workload type's class: {default}, "
                f"not {w.priority}",
                codes.TARGET_PRIORITY,
            )


def over_quota_rank(repo: Repo, target: str) -> Iterator[Diagnostic]:
    for p in repo.projects:
        if p.over_quota_rank != 0:
            yield _warning(
                p.doc,
                ("spec", "overQuotaRank"),
                f"{target} has no over-quota rank: spare GPUs are shared by weight only, "
                f"rank {p.over_quota_rank} is not served first",
                codes.TARGET_RANK,
            )


def spread_quota(repo: Repo, target: str) -> Iterator[Diagnostic]:
    """An overall quota where the project may use several node groups: a flavor has a quota
    of its own, so the whole quota goes on the first one."""
    for p in repo.projects:
        groups = spread_groups(repo, p.name)
        if not p.node_group_quotas and len(groups) > 1 and (p.quota.gpu or 0) > 0:
            yield _warning(
                p.doc,
                ("spec", "quota"),
                f"{target} has a quota per node group (flavor): the quota of "
                f"{p.quota.gpu:g} GPUs is on {groups[0]} only; on {', '.join(groups[1:])} "
                + (
                    "the project borrows"
                    if p.over_quota_allowed
                    else "it has none and, over quota denied, may not borrow: it cannot run there"
                ),
                codes.TARGET_SPREAD_QUOTA,
            )


def spread_groups(repo: Repo, project: str) -> list[str]:
    """The node groups a project's workloads may use, in file order: its flavors."""
    allowed = {
        name
        for w in repo.workloads
        if w.project == project
        for name in repo.workload_node_group_names(w)
    }
    p = repo.project(project)
    if p is not None:
        allowed |= set(p.node_groups) | {g for gs in p.node_groups_by_type.values() for g in gs}
    if not allowed:
        allowed = {g.name for g in repo.node_groups if g.runs_workloads}
    return [g.name for g in repo.node_groups if g.name in allowed]


def unknown_capacity(repo: Repo, target: str) -> Iterator[Diagnostic]:
    """A flavor's cpu and memory quota, where the project sets none, is the node group's
    capacity: unknown, it is 0 and nothing asking for cpu or memory is admitted there."""
    used = {name for p in repo.projects for name in spread_groups(repo, p.name)}
    for g in repo.node_groups:
        missing = [
            key
            for key, value in (("cpuPerNode", g.cpu_per_node), ("memoryPerNode", g.memory_per_node))
            if value is None
        ]
        if g.name in used and missing:
            yield _warning(
                g.doc,
                ("spec",),
                f"{target} quotas cpu and memory per flavor: without {' and '.join(missing)} "
                f"this group's quota of them is 0 for projects that set none, so their pods "
                f"asking for cpu or memory are not admitted here",
                codes.TARGET_UNKNOWN_CAPACITY,
            )


def department(repo: Repo, target: str) -> Iterator[Diagnostic]:
    """A cohort's capacity is what its queues bring: a department quota above their sum, and
    a department limit, have no place."""
    for d in repo.departments:
        projects = [p for p in repo.projects if p.department == d.name]
        summed = sum(p.quota.gpu or 0 for p in projects)
        if d.quota.gpu is not None and d.quota.gpu != summed:
            yield _warning(
                d.doc,
                ("spec", "quota"),
                f"{target}'s cohort guarantees what its queues' quotas add up to: "
                f"{summed:g} GPUs, not the department's {d.quota.gpu:g}",
                codes.TARGET_DEPARTMENT,
            )
        if d.limit.gpu is not None:
            yield _warning(
                d.doc,
                ("spec", "limit"),
                f"{target}'s cohort has no limit of its own: the department's limit of "
                f"{d.limit.gpu:g} GPUs is not kept (each project's limit still is)",
                codes.TARGET_DEPARTMENT,
            )


def _clash(doc: Document, message: str) -> Diagnostic:
    location = doc.key_location(("metadata", "name"))
    return Diagnostic(location, message, doc.ref, Severity.ERROR, codes.TARGET_NAME_CLASH)


def queue_names(repo: Repo, target: str) -> Iterator[Diagnostic]:
    """KAI's parent and leaf queues are one kind: a project named as a department would be
    a second Queue of that name."""
    departments = {d.name for d in repo.departments}
    for p in repo.projects:
        if p.name in departments:
            yield _clash(
                p.doc,
                f"{target}'s queues share one namespace: Department/{p.name} and this project "
                f"would both be Queue {p.name}",
            )


def cohort_names(repo: Repo, target: str) -> Iterator[Diagnostic]:
    """The root cohort is named after the cluster: a department may not take that name."""
    root = repo.required_cluster.name
    for d in repo.departments:
        if d.name == root:
            yield _clash(
                d.doc,
                f"{target}'s root cohort is named after the Cluster: this department and "
                f"Cluster/{root} would both be Cohort {root}",
            )
