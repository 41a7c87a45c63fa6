"""What a reviewer must see before merging, beyond the numbers.

* a project's guaranteed GPUs dropping below what its non-preemptible work holds now;
* a department over capacity (department quotas past the GPUs, or a department's
  projects past its quota);
* a removed project that still has workloads (declared, or running in the state);
* a node group shrinking under the work running on it;
* a quota or limit cut below a gang of its project (the pods that must start together):
  a rule that gang must fit in can then never hold, so it never runs again;
* validation problems the change introduces, compared by code and object, not by line or
  wording (a quota sum that changes from 10 to 12 is the same problem).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace

from gitops_sched.config.diagnostics import Diagnostic, Diagnostics
from gitops_sched.config.model import Repo
from gitops_sched.engine.admission import bounds
from gitops_sched.engine.requests import placed_pod_gpus
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import GPU_EPSILON, Snapshot
from gitops_sched.hardware.gpus import gpus_text, rounded_gpus
from gitops_sched.plan.impact import RUNNING, Scenario, held_gpus
from gitops_sched.plan.quotas import capacity_of


@dataclass(frozen=True)
class PlanWarning:
    kind: str  # quota-below-usage | quota-below-gang | department-over-capacity
    #            | removed-project-with-workloads | node-group-under-work | new-problem
    subject: str  # Kind/name
    message: str


@dataclass(frozen=True)
class Problem:
    """A validation problem, as compared between the two sides: by severity, code and object
    (a warning that becomes an error is new); the message and place are for the reader."""

    severity: str
    code: str
    obj: str
    message: str
    location: str

    @staticmethod
    def of(diagnostic: Diagnostic) -> Problem:
        d = diagnostic
        code = d.code.id if d.code else ""
        return Problem(d.severity.value, code, d.obj, d.message, str(d.location))

    @property
    def key(self) -> tuple[str, str, str]:
        return self.severity, self.code, self.obj


def _unmatched(problems: list[Problem], known: Iterable[Problem]) -> tuple[Problem, ...]:
    """The problems without a counterpart among `known`: one of the same key, the one with
    the same message first. Counted: a second unknown field in one object is a new problem."""
    messages: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for problem in known:
        messages[problem.key].append(problem.message)
    rewritten = []  # no same-message counterpart: matched by key if one is left
    for i, problem in enumerate(problems):
        if problem.message in messages[problem.key]:
            messages[problem.key].remove(problem.message)
        else:
            rewritten.append(i)
    unmatched = set()
    for i in rewritten:
        if messages[problems[i].key]:
            messages[problems[i].key].pop()
        else:
            unmatched.add(i)
    return tuple(p for i, p in enumerate(problems) if i in unmatched)


def new_problems(base: Diagnostics | None, head: Diagnostics) -> tuple[Problem, ...]:
    """The head's problems the base does not have (all of them when there is no base)."""
    known = map(Problem.of, base.sorted()) if base is not None else ()
    return _unmatched(list(map(Problem.of, head.sorted())), known)


def fixed_problems(base: Diagnostics | None, head: Diagnostics) -> tuple[Problem, ...]:
    if base is None:
        return ()
    return _unmatched(list(map(Problem.of, base.sorted())), map(Problem.of, head.sorted()))


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
    """GPUs held now on each node group, pod by pod (as `held_gpus` counts a job's)."""
    result = scenario.base_result
    if result is None:
        return {}
    nodes = {n.name: n for n in result.snapshot.nodes}
    use: dict[str, float] = defaultdict(float)
    for job in result.snapshot.jobs:
        for pod in job.placement:
            node = nodes.get(pod.node)
            if node is not None:
                use[node.node_group] += rounded_gpus(placed_pod_gpus(job, pod, node))
    return use


def _gang_caps(snapshot: Snapshot) -> dict[tuple[str, str], tuple[float, float, str]]:
    """(workload, quota rule) -> (GPUs its gang needs, the cap, the queue) for every
    quota rule of the engine a workload's gang does not fit in, however idle the cluster.
    The caps are the policy's and a gang's GPUs the nodes': a session with no work running
    gives the same, without counting the snapshot's ten thousand jobs in."""
    session = Session(replace(snapshot, jobs=()))
    found = {}
    for job in snapshot.jobs:
        if job.project not in session.projects:
            continue
        gang = session.wanted_gpus(job, job.min_available)
        for bound in bounds(session, job):
            if gang > bound.cap + GPU_EPSILON:
                found[(job.name, bound.rule)] = (gang, bound.cap, bound.queue)
    return found


def _gangs_over_quota(scenario: Scenario) -> list[PlanWarning]:
    """Gangs the change leaves over a quota rule they must fit in (see admission.bounds):
    they can never start again. Those over it before the change already were."""
    if scenario.base_result is None or scenario.head_result is None:
        return []
    if scenario.head_result.snapshot == scenario.base_result.snapshot:
        return []  # the same engine input: the same gangs over the same caps
    before = _gang_caps(scenario.base_result.snapshot)
    found = []
    for (workload, rule), (gang, cap, queue) in sorted(
        _gang_caps(scenario.head_result.snapshot).items()
    ):
        if (workload, rule) not in before:
            found.append(
                PlanWarning(
                    "quota-below-gang",
                    f"Workload/{workload}",
                    f"its gang needs {gpus_text(gang)} GPUs, more than the {gpus_text(cap)} of "
                    f"{queue} ({rule}): it can never run",
                )
            )
    return found


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
                    f"guaranteed {gpus_text(quota)} GPUs, below the {gpus_text(used)} its "
                    "non-preemptible work holds now",
                )
            )
    found += _gangs_over_quota(scenario)
    # departments over capacity, projects over their department
    total = capacity_of(head)
    quotas = sum(d.quota.gpu or 0.0 for d in head.departments)
    if quotas > total + 1e-9:
        found.append(
            PlanWarning(
                "department-over-capacity",
                "Cluster/" + (head.cluster.name if head.cluster else "?"),
                f"department quotas add up to {gpus_text(quotas)} GPUs, over the {total} GPUs "
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
                    f"its projects' quotas add up to {gpus_text(own)} GPUs, over its quota of "
                    f"{gpus_text(department.quota.gpu or 0)}",
                )
            )
    # removed projects with workloads
    running: defaultdict[str, int] = defaultdict(int)
    if scenario.base_result is not None:
        for state in scenario.base_result.workloads:
            if state.status == RUNNING:
                running[state.workload.project] += 1
    declared_in = Counter(w.project for w in base.workloads)
    for removed in base.projects:
        if head.project(removed.name) is not None:
            continue
        declared = declared_in[removed.name]
        if declared or running[removed.name]:
            found.append(
                PlanWarning(
                    "removed-project-with-workloads",
                    f"Project/{removed.name}",
                    f"removed while it has {declared} workload(s), {running[removed.name]} running",
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
                    f"shrinks to {group.gpu_capacity} GPUs under {gpus_text(used)} GPUs of "
                    "running work",
                )
            )
    for group in base.node_groups:
        if group.name not in new_groups and use.get(group.name):
            found.append(
                PlanWarning(
                    "node-group-under-work",
                    f"NodeGroup/{group.name}",
                    f"removed under {gpus_text(use[group.name])} GPUs of running work",
                )
            )
    for problem in problems:
        where = problem.obj or problem.location
        message = f"{problem.severity} {problem.code}: {problem.message}"
        found.append(PlanWarning("new-problem", where, message))
    return tuple(found)
