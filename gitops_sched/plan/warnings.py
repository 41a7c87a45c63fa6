"""What a reviewer must see before merging, beyond the numbers.

* a project's guaranteed GPUs dropping below what its non-preemptible work holds now;
* a department over capacity (department quotas past the GPUs, or a department's
  projects past its quota);
* a removed project that still has workloads (declared, or running in the state);
* a node group shrinking under the work running on it;
* validation problems the change introduces, compared by problem and object, not by line.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, replace

from gitops_sched.config.diagnostics import Diagnostic, Diagnostics
from gitops_sched.config.model import Repo
from gitops_sched.plan.impact import RUNNING, Scenario, held_gpus
from gitops_sched.plan.quotas import capacity_of


@dataclass(frozen=True)
class PlanWarning:
    kind: str  # quota-below-usage | department-over-capacity | removed-project-with-workloads
    #            | node-group-under-work | new-problem
    subject: str  # Kind/name
    message: str


@dataclass(frozen=True)
class Problem:
    """A validation problem, as compared between the two sides: by object and message."""

    severity: str
    obj: str
    message: str
    location: str  # where it is on its side, for the reader; not compared

    @staticmethod
    def of(diagnostic: Diagnostic) -> Problem:
        d = diagnostic
        return Problem(d.severity.value, d.obj, d.message, str(d.location))

    @property
    def key(self) -> tuple[str, str, str]:
        return self.severity, self.obj, self.message


def new_problems(base: Diagnostics | None, head: Diagnostics) -> tuple[Problem, ...]:
    """The head's problems the base does not have (all of them when there is no base)."""
    known = {Problem.of(d).key for d in base.sorted()} if base is not None else set()
    return tuple(p for p in map(Problem.of, head.sorted()) if p.key not in known)


def fixed_problems(base: Diagnostics | None, head: Diagnostics) -> tuple[Problem, ...]:
    if base is None:
        return ()
    known = {Problem.of(d).key for d in head.sorted()}
    return tuple(p for p in map(Problem.of, base.sorted()) if p.key not in known)


def _non_preemptible_use(scenario: Scenario) -> dict[str, float]:
    """GPUs held now by each project's work that cannot be preempted."""
    result = scenario.base_result
    if result is None:
        return {}
    nodes = {n.name: n for n in result.snapshot.nodes}
    use: dict[str, float] = defaultdict(float)
    for job in result.snapshot.jobs:
        if job.placement and not job.preemptible:
            use[job.project] += held_gpus(job, nodes)
    return use


def _node_group_use(scenario: Scenario) -> dict[str, float]:
    result = scenario.base_result
    if result is None:
        return {}
    nodes = {n.name: n for n in result.snapshot.nodes}
    use: dict[str, float] = defaultdict(float)
    for job in result.snapshot.jobs:
        for pod in job.placement:
            node = nodes.get(pod.node)
            if node is not None:
                use[node.node_group] += held_gpus(replace(job, placement=(pod,)), nodes)
    return use


def warnings(
    base: Repo, head: Repo, scenario: Scenario, problems: tuple[Problem, ...]
) -> tuple[PlanWarning, ...]:
    found: list[PlanWarning] = []
    # guaranteed GPUs below non-preemptible use
    for project, used in sorted(_non_preemptible_use(scenario).items()):
        after = head.project(project)
        quota = (after.quota.gpu or 0.0) if after else 0.0
        if after is not None and quota + 1e-9 < used:
            found.append(
                PlanWarning(
                    "quota-below-usage",
                    f"Project/{project}",
                    f"guaranteed {quota:g} GPUs, below the {used:g} its non-preemptible "
                    "work holds now",
                )
            )
    # departments over capacity, projects over their department
    total = capacity_of(head)
    quotas = sum(d.quota.gpu or 0.0 for d in head.departments)
    if quotas > total + 1e-9:
        found.append(
            PlanWarning(
                "department-over-capacity",
                "Cluster/" + (head.cluster.name if head.cluster else "?"),
                f"department quotas add up to {quotas:g} GPUs, over the {total} GPUs "
                "of the node groups",
            )
        )
    by_department: dict[str, float] = defaultdict(float)
    for p in head.projects:
        by_department[p.department] += p.quota.gpu or 0.0
    for department in head.departments:
        own = by_department[department.name]
        if own > (department.quota.gpu or 0.0) + 1e-9:
            found.append(
                PlanWarning(
                    "department-over-capacity",
                    f"Department/{department.name}",
                    f"its projects' quotas add up to {own:g} GPUs, over its quota of "
                    f"{department.quota.gpu or 0:g}",
                )
            )
    # removed projects with workloads
    running = defaultdict(int)
    if scenario.base_result is not None:
        for state in scenario.base_result.workloads:
            if state.status == RUNNING:
                running[state.workload.project] += 1
    declared_in = Counter(w.project for w in base.workloads)
    for project in base.projects:
        if head.project(project.name) is not None:
            continue
        declared = declared_in[project.name]
        if declared or running[project.name]:
            found.append(
                PlanWarning(
                    "removed-project-with-workloads",
                    f"Project/{project.name}",
                    f"removed while it has {declared} workload(s), {running[project.name]} running",
                )
            )
    # node groups shrinking under running work
    use = _node_group_use(scenario)
    old_groups = {g.name: g for g in reversed(base.node_groups)}  # the first of a name
    new_groups = {g.name for g in head.node_groups}
    for group in head.node_groups:
        old = old_groups.get(group.name)
        used = use.get(group.name, 0.0)
        if (
            old is not None
            and group.gpu_capacity < old.gpu_capacity
            and group.gpu_capacity + 1e-9 < used
        ):
            found.append(
                PlanWarning(
                    "node-group-under-work",
                    f"NodeGroup/{group.name}",
                    f"shrinks to {group.gpu_capacity} GPUs under {used:g} GPUs of running work",
                )
            )
    for group in base.node_groups:
        if group.name not in new_groups and use.get(group.name):
            found.append(
                PlanWarning(
                    "node-group-under-work",
                    f"NodeGroup/{group.name}",
                    f"removed under {use[group.name]:g} GPUs of running work",
                )
            )
    for problem in problems:
        where = problem.obj or problem.location
        found.append(PlanWarning("new-problem", where, f"{problem.severity}: {problem.message}"))
    return tuple(found)
