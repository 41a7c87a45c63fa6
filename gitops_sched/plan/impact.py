"""Fairness impact: the engine run on both configs, per project before -> after.

Two scenarios, both through the code `simulate` runs (`bridge` for the translation,
`sim.run.simulate` for the engine), so the numbers equal what `simulate` prints:

* full demand: every project asks for the whole cluster; the fair share each would get
  (the engine's `fair_shares` with the capacity a session counts).
* workloads: the cluster as it is now — the base config settled with the repo's workloads,
  or the `--state` a `simulate --format json` run printed — continued under the base and
  under the head alike: `simulate(config, running=<that state>)`. What runs after the
  base's continuation and not after the head's would be evicted; what runs after the
  head's only could start. A settled state continued under its own config decides nothing
  (the workloads queue in the order they were submitted, the MIG layout stays), so a
  change that changes nothing shows nothing, and only what the change causes is shown.
  The base's continuation of its own settled run is that run (it would decide nothing), so
  the plan runs the engine on the base once, not twice; a head whose engine input is the
  base's settled state (a change the engine does not see) is not cycled at all.

Carrying the state over: a workload keeps its pods when it still exists, asks the same
per pod, has no more pods than replicas, its nodes still exist with the same GPUs and its
MIG instance is still in the layout; otherwise it is queued again (or gone, when the
change removes it). The workloads keep their order and ages; dynamic MIG layouts stay on the
nodes whose GPUs the change keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gitops_sched.bridge.build import gpu_request, nodes_from_repo, policy_from_repo
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.document import Document, Path_
from gitops_sched.config.model import Repo
from gitops_sched.contract.labels import API_VERSION
from gitops_sched.engine.fairshare import fair_shares, nodes_capacity
from gitops_sched.engine.requests import placed_pod_gpus
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import (
    GpuRequest,
    Job,
    Node,
    PodPlacement,
    Policy,
    QueueStatus,
    RequestKind,
    Snapshot,
)
from gitops_sched.hardware.gpus import gpus_text, rounded_gpus
from gitops_sched.sim.events import Placed, Simulation, parse_simulation, repo_workloads
from gitops_sched.sim.run import SimulationResult, WorkloadState, simulate

RUNNING = "running"
PENDING = "pending"
ACTIVE = (None, RUNNING, PENDING)
# of a `--state` workload, as `running:`
STATE_KEYS = ("name", "status", "pods", "runningFor", "idleFor", "workload")
ENDED_KEYS = ("name", "status")  # of one stopped or deleted: it stays so


class StateError(Exception):
    """A `--state` file that does not fit the base config (its diagnostics as text)."""


@dataclass(frozen=True)
class ProjectImpact:
    name: str
    department: tuple[str | None, str | None]
    deserved: tuple[float | None, float | None]
    fair_share: tuple[float | None, float | None]
    allocated: tuple[float | None, float | None]  # None in the full-demand scenario
    # a project with quotas per node group: the same per group (simulated scenarios only)
    node_groups: tuple[ProjectImpact, ...] = ()

    @property
    def changed(self) -> bool:
        return (
            self.fair_share[0] != self.fair_share[1]
            or self.allocated[0] != self.allocated[1]
            or self.deserved[0] != self.deserved[1]
            or self.department[0] != self.department[1]
        )


@dataclass(frozen=True)
class Moved:
    """A workload that would stop running (evicted), keep running with pods stopped (moved
    elsewhere, or elastic pods given up) or start (could start)."""

    workload: str
    project: str
    reason: str  # evicted: reclaim, preempt, node removed, removed, ...; started: new, or
    #              what lets it start (see _WhyStarted)
    gpus: float  # what it holds (evicted) or gets (started)


@dataclass(frozen=True)
class Scenario:
    name: str  # full-demand | workloads | state
    projects: tuple[ProjectImpact, ...]  # every project of either side, by name
    evicted: tuple[Moved, ...] = ()
    started: tuple[Moved, ...] = ()
    # running after as before, but some pods it ran are stopped: they restart elsewhere or
    # are given up (an elastic job shrinks)
    shrunk: tuple[Moved, ...] = ()
    base_result: SimulationResult | None = None
    head_result: SimulationResult | None = None


def _num(value: float | None) -> float | None:
    return None if value is None else rounded_gpus(value)


def full_demand_shares(policy: Policy, nodes: tuple[Node, ...]) -> dict[str, float]:
    """Fair share of every department and project when each project asks for everything
    (`policy` and `nodes`: a repo's, as bridge.build gives them)."""
    capacity = nodes_capacity(nodes)
    demand = {p.name: capacity for p in policy.projects}
    return fair_shares(capacity, policy.departments, policy.projects, demand)


def full_demand_pools(
    policy: Policy, nodes: tuple[Node, ...]
) -> dict[str, tuple[QueueStatus, ...]]:
    """Each project with per-node-group quotas: its deserved quota and fair share per
    node group (QueueStatus, `allocated` 0) when every project asks for everything, in
    every group: the engine's session (engine.pools) with one pending job per project and
    group asking for the whole group. Empty where no project has per-group quotas."""
    if not any(p.pool_quotas for p in policy.projects):
        return {}
    sizes: dict[str, int] = {}
    for node in nodes:
        if node.schedulable:
            free = sum(not gpu.held for gpu in node.gpus)
            sizes[node.node_group] = sizes.get(node.node_group, 0) + free
    jobs = [
        Job(
            f"{p.name}-{group}",
            p.name,
            "train",
            0,
            True,
            GpuRequest(RequestKind.WHOLE, count=size),
            1,
            1,
            (group,),
        )
        for p in policy.projects
        for group, size in sorted(sizes.items())
        if size > 0
    ]
    session = Session(Snapshot(policy, tuple(nodes), tuple(jobs)))  # its pools need it
    pools = session.pools
    assert pools is not None  # some project has per-group quotas
    return {p.name: pools.statuses(p.name, {}) for p in policy.projects if p.pool_quotas}


def full_demand(base: Repo, head: Repo) -> Scenario:
    # each side's engine input, built once for both figures
    (policy_before, nodes_before), (policy_after, nodes_after) = [
        (policy_from_repo(repo), nodes_from_repo(repo)) for repo in (base, head)
    ]
    before = full_demand_shares(policy_before, nodes_before)
    after = full_demand_shares(policy_after, nodes_after)
    pools_before = full_demand_pools(policy_before, nodes_before)
    pools_after = full_demand_pools(policy_after, nodes_after)
    rows = []
    for name in sorted({p.name for p in base.projects} | {p.name for p in head.projects}):
        old, new = base.project(name), head.project(name)
        was, now = pools_before.get(name), pools_after.get(name)
        rows.append(
            ProjectImpact(
                name,
                (old.department if old else None, new.department if new else None),
                (
                    _num(old.quota.gpu or 0.0) if old else None,
                    _num(new.quota.gpu or 0.0) if new else None,
                ),
                (_num(before.get(name)) if old else None, _num(after.get(name)) if new else None),
                (None, None),
                _pool_impacts(was, now, allocated=False),
            )
        )
    return Scenario("full-demand", tuple(rows))


# --- the state now ---------------------------------------------------------------------


def state_simulation(repo: Repo, state: dict[str, Any], file: str) -> Simulation:
    """The `--state` JSON's workloads as a Simulation's `running:` against `repo` (the
    parser every Simulation file goes through); StateError with its problems otherwise."""
    entries = [w for w in state.get("workloads") or () if isinstance(w, dict)]
    data = {
        "apiVersion": API_VERSION,
        "kind": "Simulation",
        "metadata": {"name": str(state.get("simulation") or "state")},
        "running": [
            {
                k: v
                for k, v in entry.items()
                if k in (STATE_KEYS if entry.get("status") in ACTIVE else ENDED_KEYS)
                and v is not None
            }
            for entry in entries
        ],
        # the clock and past usage it printed (fairness over time): the same usage continued
        **{key: state[key] for key in ("time", "usage") if state.get(key) is not None},
    }
    # positions: each entry on "line" i + 2, so a problem names the entry it is about
    positions: dict[Path_, tuple[int, int]] = {
        ("running", i): (i + 2, 1) for i in range(len(entries))
    }
    doc = Document(file, 0, data, {(): (1, 1), **positions}, {})
    diagnostics = Diagnostics()
    simulation = parse_simulation(doc, repo, diagnostics)
    if simulation is None:
        problems = []
        for d in diagnostics.sorted():
            where = d.location.line - 2
            entry = (
                f"workloads[{where}] ({entries[where].get('name')}): "
                if 0 <= where < len(entries)
                else ""
            )
            problems.append(f"{file}: {entry}{d.message}")
        raise StateError("\n".join(problems) or f"{file}: not a simulate --format json state")
    return simulation


def settled_state(result: SimulationResult) -> Simulation:
    """A run's final state as the start of a run that continues from it: its running and
    pending workloads in the order they were submitted, with their pods and how long they
    have run (and gone idle), on its nodes (with the MIG instances it left), at its time
    with its past usage -- what
    `simulate --format json` prints, fed back. Continued under the same config, a settled
    state decides nothing."""
    queued = tuple(
        Placed(state.workload, state.pods, state.running_for or 0.0, state.idle_for)
        for state in result.queue
        if state.status in ACTIVE
    )
    ended = frozenset(s.workload.name for s in result.workloads if s.status not in ACTIVE)
    last = result.snapshot
    return Simulation(result.name, last.nodes, queued, (), ended, last.now, last.history)


def _same_gpus(old: Node, new: Node | None) -> bool:
    return (
        new is not None
        and new.gpu_model == old.gpu_model
        and len(new.gpus) == len(old.gpus)
        and all(
            a.mig_enabled == b.mig_enabled and a.mig_static == b.mig_static
            for a, b in zip(old.gpus, new.gpus)
        )
    )


def _layout_kept(old: Node | None, new: Node) -> Node:
    """`new` with the MIG instances its dynamic GPUs have now, when its GPUs stay the same
    (a static layout is the config's)."""
    if old is None or not _same_gpus(old, new):
        return new
    gpus = tuple(
        gpu if gpu.mig_static else replace(gpu, mig_instances=was.mig_instances)
        for gpu, was in zip(new.gpus, old.gpus)
    )
    return replace(new, gpus=gpus)


def carried_over(start: Simulation, base: Repo, head: Repo) -> tuple[Simulation, dict[str, str]]:
    """The state `start` (under the base config) as the head's starting state: the same
    workloads in the same order, and why workloads that ran do not keep their pods
    (workload -> reason)."""
    old_nodes = {node.name: node for node in start.nodes}
    nodes = {
        node.name: _layout_kept(old_nodes.get(node.name), node) for node in nodes_from_repo(head)
    }
    head_workloads = repo_workloads(head)
    placed: list[Placed] = []
    lost: dict[str, str] = {}
    for was in start.running:
        workload = head_workloads.get(was.workload.name)
        if workload is None:
            lost[was.workload.name] = "removed from the repo"
            continue
        kept = replace(was, workload=workload)
        if was.pods:
            why = _why_requeued(was, workload, base, head, nodes, old_nodes)
            if why:
                lost[workload.name], kept = why, Placed(workload, ())
        placed.append(kept)
    name = head.cluster.name if head.cluster else ""
    simulation = Simulation(name, tuple(nodes.values()), tuple(placed), (), start.ended)
    return replace(simulation, start=start.start, history=start.history), lost


def _why_requeued(
    was: Placed,
    workload: Any,
    base: Repo,
    head: Repo,
    nodes: dict[str, Node],
    old_nodes: dict[str, Node],
) -> str:
    if any(pod.node not in nodes for pod in was.pods):
        return "its node is removed"
    if any(not _same_gpus(old_nodes[pod.node], nodes[pod.node]) for pod in was.pods):
        return "its node's GPUs change"
    if gpu_request(head.pod_spec(workload)) != gpu_request(base.pod_spec(was.workload)):
        return "its GPU request changes"
    if len(was.pods) > workload.replicas:
        return "its replicas shrink"
    if base.project_namespace(was.workload.project) != head.project_namespace(workload.project):
        return "it moves to another project"
    if any(
        pod.mig is not None and pod.mig not in nodes[pod.node].gpus[pod.gpus[0]].mig_instances
        for pod in was.pods
    ):
        return "its MIG instance leaves the node's layout"
    return ""


# --- the scenario ------------------------------------------------------------------------


def held_gpus(job: Job | None, nodes: dict[str, Node]) -> float:
    """GPUs a job holds, as the engine counts them toward quota."""
    if job is None:
        return 0.0
    total = sum(
        placed_pod_gpus(job, pod, nodes[pod.node]) for pod in job.placement if pod.node in nodes
    )
    return _num(total) or 0.0


def _evictions(result: SimulationResult) -> dict[str, str]:
    """Why each workload was evicted in the run (its last eviction), with what it made room for."""
    why = {}
    for entry in result.log:
        if entry.action == "evict":
            why[entry.workload] = entry.reason + (f" by {entry.by}" if entry.by else "")
    return why


class _WhyStarted:
    """What lets a workload that was pending start after the change, the first that holds:
    the evictions made for it; GPUs freed on its nodes by work the change stops; a node
    new in the change; its project's guaranteed quota or fair share rising; its own
    request changing; else it says what kept it pending before."""

    def __init__(
        self,
        base: Repo,
        head: Repo,
        base_result: SimulationResult,
        head_result: SimulationResult,
        old_status: dict[str, QueueStatus],
        new_status: dict[str, QueueStatus],
        evicted: list[Moved],
    ) -> None:
        self.base, self.head = base, head
        self.old_status, self.new_status = old_status, new_status
        self.made_room: dict[str, list[str]] = {}  # workload -> the evictions made for it
        for entry in head_result.log:
            if entry.action == "evict" and entry.by:
                taken = f"{entry.workload} ({entry.reason})"
                if taken not in self.made_room.setdefault(entry.by, []):
                    self.made_room[entry.by].append(taken)
        self.stopped_on: dict[str, list[str]] = {}  # node -> the work the change stops there
        old_jobs = {j.name: j for j in base_result.snapshot.jobs}
        for moved in evicted:
            job = old_jobs.get(moved.workload)
            for node in sorted({pod.node for pod in job.placement} if job else ()):
                self.stopped_on.setdefault(node, []).append(moved.workload)
        self.old_nodes = {n.name for n in base_result.snapshot.nodes}

    def of(self, was: WorkloadState | None, now: WorkloadState) -> str:
        name, project = now.workload.name, now.workload.project
        if name in self.made_room:
            made = f"takes GPUs freed by evicting {', '.join(self.made_room[name])}"
            return made if was is not None else f"new; {made}"
        if was is None:
            return "new"
        nodes = sorted({pod.node for pod in now.pods})
        freed = sorted({w for node in nodes for w in self.stopped_on.get(node, ())})
        if freed:
            return f"takes GPUs that {', '.join(freed)} held (stopped by this change)"
        new_nodes = [node for node in nodes if node not in self.old_nodes]
        if new_nodes:
            return f"runs on {', '.join(new_nodes)}, new in this change"
        old_p, new_p = self.base.project(project), self.head.project(project)
        if old_p and new_p and (new_p.quota.gpu or 0.0) > (old_p.quota.gpu or 0.0):
            return (
                f"{project}'s guaranteed quota rises {gpus_text(old_p.quota.gpu or 0)} → "
                f"{gpus_text(new_p.quota.gpu or 0)} GPUs"
            )
        old_s, new_s = self.old_status.get(project), self.new_status.get(project)
        if old_s and new_s and rounded_gpus(new_s.fair_share) > rounded_gpus(old_s.fair_share):
            return (
                f"{project}'s fair share rises {gpus_text(old_s.fair_share)} → "
                f"{gpus_text(new_s.fair_share)} GPUs"
            )
        if was.request != now.request:
            return "its GPU request changes"
        return f"was {was.status}" + (f": {was.reason}" if was.reason else "")


def _pool_impacts(
    old: tuple[QueueStatus, ...] | None,
    new: tuple[QueueStatus, ...] | None,
    allocated: bool = True,
) -> tuple[ProjectImpact, ...]:
    """A project's numbers per node group before and after (engine.pools); `allocated`
    False: none (the full-demand scenario)."""
    olds = {pool.name: pool for pool in old or ()}
    news = {pool.name: pool for pool in new or ()}
    rows = []
    for group in sorted(olds.keys() | news.keys()):
        was, now = olds.get(group), news.get(group)
        held = (
            (_num(was.allocated) if was else None, _num(now.allocated) if now else None)
            if allocated
            else (None, None)
        )
        rows.append(
            ProjectImpact(
                group,
                (None, None),
                (_num(was.deserved) if was else None, _num(now.deserved) if now else None),
                (_num(was.fair_share) if was else None, _num(now.fair_share) if now else None),
                held,
            )
        )
    return tuple(rows)


def workloads(base: Repo, head: Repo, state: Simulation | None = None) -> Scenario:
    """The base and the head each continued from the same state: the `--state`, else the
    repo's workloads settled under the base. What differs is what the change causes; what
    the base would do anyway (start pending work of an unsettled state) is not.

    The repo's workloads settled under the base are their own continuation under the base:
    a settled state continued under its own config decides nothing and ends as it started
    (tests/test_settled_state.py), so the base is run once, not settled a second time."""
    if state is None:
        base_result = simulate(base)
        start = settled_state(base_result)
    else:
        start, base_result = state, simulate(base, state)
    simulation, lost = carried_over(start, base, head)
    head_result = simulate(head, simulation, settled=base_result)
    before = {s.workload.name: s for s in base_result.workloads}
    after = {s.workload.name: s for s in head_result.workloads}
    old_jobs = {j.name: j for j in base_result.snapshot.jobs}
    new_jobs = {j.name: j for j in head_result.snapshot.jobs}
    old_nodes = {n.name: n for n in base_result.snapshot.nodes}
    new_nodes = {n.name: n for n in head_result.snapshot.nodes}
    evicted_by = _evictions(head_result)
    evicted, started, shrunk = [], [], []
    for name in sorted(before.keys() | after.keys()):
        was, now = before.get(name), after.get(name)
        ran = was is not None and was.status == RUNNING
        runs = now is not None and now.status == RUNNING
        if ran and not runs and was is not None:
            reason = lost.get(name) or evicted_by.get(name) or (now.reason if now else "removed")
            gpus = held_gpus(old_jobs.get(name), old_nodes)
            evicted.append(Moved(name, was.workload.project, reason, gpus))
        elif ran and runs and was is not None and now is not None and _lost_pods(was, now):
            job = old_jobs.get(name)
            shrunk.append(_shrunk(was, now, evicted_by.get(name), job, old_nodes))
    old_status = {q.name: q for q in base_result.projects}
    new_status = {q.name: q for q in head_result.projects}
    why = _WhyStarted(base, head, base_result, head_result, old_status, new_status, evicted)
    for name in sorted(after.keys()):
        was, now = before.get(name), after[name]
        if now.status == RUNNING and (was is None or was.status != RUNNING):
            reason = why.of(was, now)
            started.append(
                Moved(name, now.workload.project, reason, held_gpus(new_jobs.get(name), new_nodes))
            )
    rows = []
    for name in sorted(old_status.keys() | new_status.keys()):
        old, new = old_status.get(name), new_status.get(name)
        old_p, new_p = base.project(name), head.project(name)
        rows.append(
            ProjectImpact(
                name,
                (old_p.department if old_p else None, new_p.department if new_p else None),
                (_num(old.deserved) if old else None, _num(new.deserved) if new else None),
                (_num(old.fair_share) if old else None, _num(new.fair_share) if new else None),
                (_num(old.allocated) if old else None, _num(new.allocated) if new else None),
                _pool_impacts(old.pools if old else None, new.pools if new else None),
            )
        )
    return Scenario(
        "state" if state is not None else "workloads",
        tuple(rows),
        evicted=tuple(evicted),
        started=tuple(started),
        shrunk=tuple(shrunk),
        base_result=base_result,
        head_result=head_result,
    )


def _lost_pods(was: WorkloadState, now: WorkloadState) -> list[PodPlacement]:
    """The pods the workload ran before and does not run (as they were) after."""
    return [pod for pod in was.pods if pod not in now.pods]


def _shrunk(
    was: WorkloadState,
    now: WorkloadState,
    evicted_by: str | None,
    job: Job | None,
    nodes: dict[str, Node],
) -> Moved:
    """A workload that keeps running with some of its pods stopped: moved (as many pods
    run after as before) or shrunk, with the eviction that did it; the GPUs of the pods
    stopped."""
    stopped = _lost_pods(was, now)
    if len(now.pods) < len(was.pods):
        what = f"shrinks from {len(was.pods)} to {len(now.pods)} pods"
    else:
        what = f"{len(stopped)} pod{' moves' if len(stopped) == 1 else 's move'}"
    gpus = 0.0
    if job is not None:
        gpus = sum(placed_pod_gpus(job, pod, nodes.get(pod.node)) for pod in stopped)
    reason = f"{what} ({evicted_by})" if evicted_by else what
    return Moved(was.workload.name, was.workload.project, reason, _num(gpus) or 0.0)
