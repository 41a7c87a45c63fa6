"""Quotas per node group (Run:ai's node pools): a project that gives its quota per group is
guaranteed it per group, judged in the group of the node a job lands on; a project with one
quota, and a repo with no per-group quota, schedule as before."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from pathlib import Path
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gitops_sched.bridge.build import nodes_from_repo
from gitops_sched.bridge.policy import policy_from_configmap
from gitops_sched.compiler import render_repo
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.loader import load_repo
from gitops_sched.config.model import Repo, build_repo
from gitops_sched.engine import apply_decisions, schedule, settle
from gitops_sched.engine.actions import reclaim
from gitops_sched.engine.requests import placed_pod_gpus
from gitops_sched.engine.types import GPU_EPSILON, Decisions, EvictReason, PodPlacement, Snapshot
from gitops_sched.plan.impact import workloads as plan_workloads
from gitops_sched.scheduler.snapshot import CycleMemory, build_view
from gitops_sched.scheduler.status import queue_status
from gitops_sched.sim.explain import explain, to_json, to_text
from gitops_sched.sim.run import simulate
from tests.conftest import examples
from tests.engine_builders import department, job, jobs, nodes, policy, project, snapshot
from tests.strategies import pool_quota_snapshots, snapshots

H100, A100 = "h100", "a100"


def pooled(name: str, h100: float, a100: float, **kw) -> object:
    return project(name, h100 + a100, pool_quotas=((A100, a100), (H100, h100)), **kw)


def cluster(h100_nodes: int = 1, a100_nodes: int = 1) -> tuple:
    return (
        *nodes(H100, h100_nodes, gpus=4, model="H100-SXM5-80GB", memory_mib=81920),
        *nodes(A100, a100_nodes, gpus=4, model="A100-SXM4-80GB", memory_mib=81920),
    )


def held_in(settled: Snapshot, name: str, group: str) -> float:
    nodes_by = {n.name: n for n in settled.nodes}
    return sum(
        placed_pod_gpus(j, pod, nodes_by[pod.node])
        for j in settled.jobs
        if j.project == name
        for pod in j.placement
        if nodes_by[pod.node].node_group == group
    )


def on(group: str) -> PodPlacement:
    """The first GPU of the group's first node."""
    return PodPlacement(f"{group}-0", (0,))


def pool_status(decisions: Decisions, name: str, group: str):
    (status,) = [p for p in decisions.projects if p.name == name]
    return {pool.name: pool for pool in status.pools}[group]


def test_a_project_takes_back_its_quota_in_a_pool_from_a_project_over_its_own_there() -> None:
    pol = policy(pooled("vision", 4, 2), pooled("nlp", 4, 2))
    borrowed, _ = settle(snapshot(pol, cluster(), jobs("nlp", "nlp", 4, node_groups=(A100,))))
    assert held_in(borrowed, "nlp", A100) == 4  # within its 6 overall, 2 over its A100 quota
    settled, history = settle(
        replace(borrowed, jobs=borrowed.jobs + tuple(jobs("v", "vision", 2, node_groups=(A100,))))
    )
    assert held_in(settled, "vision", A100) == 2
    assert held_in(settled, "nlp", A100) == 2
    assert pool_status(history[-1], "vision", A100).fair_share == 2


def test_a_quota_in_one_pool_is_no_quota_in_another() -> None:
    """8 H100s and 4 A100s never make 12 A100s: unused H100 quota takes no A100."""
    pol = policy(pooled("vision", 4, 2), pooled("nlp", 4, 2))
    first = jobs("nlp", "nlp", 2, node_groups=(A100,)) + jobs("v", "vision", 2, node_groups=(A100,))
    borrowed, _ = settle(snapshot(pol, cluster(), first))
    more = tuple(jobs("v-more", "vision", 2, node_groups=(A100,)))
    settled, history = settle(replace(borrowed, jobs=borrowed.jobs + more))
    assert held_in(settled, "vision", A100) == 2
    assert held_in(settled, "nlp", A100) == 2
    assert pool_status(history[-1], "vision", A100).queued == 2
    assert not any(d.evictions for d in history)


def test_non_preemptible_work_must_fit_the_deserved_quota_of_its_pool() -> None:
    pol = policy(pooled("vision", 4, 2))
    notebook = job("notebook", "vision", 3, type="interactive", node_groups=(A100,))
    decisions = schedule(snapshot(pol, cluster(), [notebook]))
    assert not decisions.binds
    assert "deserved quota in a100" in dict(decisions.pending_reasons)[notebook.key]


def test_work_that_may_use_several_pools_goes_where_its_project_has_quota_left() -> None:
    pol = policy(pooled("vision", 4, 2))
    notebook = job("notebook", "vision", 3, type="interactive")  # any group
    decisions = schedule(snapshot(pol, cluster(), [notebook]))
    (bind,) = decisions.binds
    assert bind.pods[0].node.startswith(H100)


def test_over_quota_denied_caps_a_project_per_pool() -> None:
    pol = policy(pooled("vision", 4, 2, over_quota_allowed=False))
    settled, _ = settle(snapshot(pol, cluster(), jobs("v", "vision", 4, node_groups=(A100,))))
    assert held_in(settled, "vision", A100) == 2


def test_preempt_stays_inside_the_pool_it_makes_room_in() -> None:
    """Higher-priority work of a project takes the project's own lower-priority GPUs in the
    pool it runs in, not in another."""
    pol = policy(pooled("vision", 4, 4, over_quota_allowed=False))
    low = jobs("low-h", "vision", 4, node_groups=(H100,)) + jobs(
        "low-a", "vision", 4, node_groups=(A100,)
    )
    busy, _ = settle(snapshot(pol, cluster(), low))
    urgent = job("urgent", "vision", 1, priority=100, node_groups=(A100,))
    decisions = schedule(replace(busy, jobs=(*busy.jobs, urgent)))
    (evicted,) = decisions.evictions
    assert evicted.job.startswith("low-a")


def test_a_project_with_one_quota_keeps_it_over_the_pools_it_may_use() -> None:
    pol = policy(project("single", 6), pooled("nlp", 4, 2))
    settled, history = settle(snapshot(pol, cluster(), jobs("s", "single", 4, node_groups=(A100,))))
    assert held_in(settled, "single", A100) == 4
    (status,) = [p for p in history[-1].projects if p.name == "single"]
    assert status.pools == ()


def test_a_repo_without_per_pool_quotas_builds_no_pools() -> None:
    from gitops_sched.engine.session import Session

    pol = policy(project("a", 4), project("b", 4))
    assert Session(snapshot(pol, cluster(), jobs("a", "a", 2))).pools is None


def test_work_that_may_run_anywhere_makes_way_in_the_pool_a_project_is_guaranteed() -> None:
    """vision is guaranteed 2 A100s and pins 2 jobs there; free (within its own quota) put
    its job, which may run anywhere, on the A100 node while an H100 was free: it is moved
    to the H100 (consolidation counts the free GPUs of every pool), not stopped."""
    pol = policy(
        pooled("vision", 0, 2),
        project("free", 1, department="other"),
        departments=(department("dept", 2), department("other", 1)),
    )
    work = [*jobs("v", "vision", 2, node_groups=(A100,)), job("f", "free", 1)]
    settled, history = settle(
        snapshot(pol, (*nodes(A100, 1, gpus=2), *nodes(H100, 1, gpus=1)), work)
    )
    assert held_in(settled, "vision", A100) == 2
    assert held_in(settled, "free", H100) == 1
    assert {e.reason for d in history for e in d.evictions} <= {EvictReason.CONSOLIDATE}


def test_a_department_gives_back_what_it_holds_in_a_pool_beyond_what_its_projects_deserve_there():
    """vision holds its one GPU of fair share on the A100 (borrowing nlp's quota there);
    free, with no quota, holds the one H100, the GPU vision is guaranteed. Free's
    department is below its share over the cluster, but holds in h100 more than its
    projects deserve there (0): vision reclaims it, as it would from a project over its
    quota there."""
    pol = policy(
        pooled("vision", 1, 0, department="d1"),
        pooled("nlp", 0, 1, department="d2"),
        project("free", 0, department="d2"),
        departments=(department("d1", 1), department("d2", 1)),
    )
    work = [
        job("v-a", "vision", 1, node_groups=(A100,), placement=(on(A100),), started_at=0.0),
        job("f-h", "free", 1, node_groups=(H100,), placement=(on(H100),), started_at=0.0),
        job("v-h", "vision", 1, node_groups=(H100,), submitted=10),
    ]
    settled, history = settle(
        snapshot(pol, (*nodes(A100, 1, gpus=1), *nodes(H100, 1, gpus=1)), work)
    )
    assert held_in(settled, "vision", H100) == 1
    assert [(e.job, e.reason) for d in history for e in d.evictions] == [
        ("f-h", EvictReason.RECLAIM)
    ]


@settings(max_examples=examples(100), deadline=None)
@given(pool_quota_snapshots())
def test_per_pool_deserved_quota_is_guaranteed_per_pool(snapshot: Snapshot) -> None:
    """Every project gets, in every pool, its deserved quota there or all the work it
    pinned there, whatever it holds in the other pool."""
    settled, _ = settle(snapshot)
    for queue in snapshot.policy.projects:
        for group, quota in queue.pool_quotas:
            pinned = sum(
                j.pods
                for j in snapshot.jobs
                if j.project == queue.name and j.node_groups == (group,)
            )
            owed = min(math.floor(quota + GPU_EPSILON), pinned)
            held = held_in(settled, queue.name, group)
            assert held >= owed - GPU_EPSILON, (queue.name, group, held, owed)


@settings(max_examples=examples(50), deadline=None)
@given(pool_quota_snapshots())
def test_work_made_to_make_way_in_a_pool_is_moved_never_stopped(snapshot: Snapshot) -> None:
    """Consolidation across pools takes only work that can run elsewhere: every job it
    evicts in a cycle runs again, in its own pool or another it may use, when the cycle
    ends -- through every cycle of a settle."""
    for _ in range(50):
        decisions = schedule(snapshot)
        placed = {bind.job for bind in decisions.binds}
        for evict in decisions.evictions:
            assert evict.reason is not EvictReason.CONSOLIDATE or evict.job in placed, evict
        if not decisions.changed:
            break
        snapshot = apply_decisions(snapshot, decisions)


def moved_into_another_pool() -> Snapshot:
    """`vision` holds its quota in each pool (1 H100, 1 A100; its A100 job may run on
    either); `nlp` (3 of its 4 A100s) and then `speech` (its 2 H100s) reclaim their quotas
    from `scratch` (no quota, one job in each pool), but neither pool has the room alone."""
    pol = policy(
        pooled("vision", 1, 1, age=0.0),
        pooled("nlp", 0, 4, age=1.0),
        pooled("speech", 2, 0, age=2.0),
        project("scratch", 0, age=3.0),
    )
    running = [
        job("x", "scratch", node_groups=(A100,), placement=(on(A100),), started_at=0.0),
        job("j", "vision", placement=(PodPlacement("a100-0", (1,)),), started_at=0.0),
        job("k", "vision", node_groups=(H100,), placement=(on(H100),), started_at=0.0),
        job("y", "scratch", node_groups=(H100,), placement=(PodPlacement("h100-0", (1,)),)),
    ]
    pending = [job("c", "nlp", 3, node_groups=(A100,)), job("d", "speech", 2, node_groups=(H100,))]
    return snapshot(pol, (*nodes(H100, 1, gpus=3), *nodes(A100, 1, gpus=3)), running + pending)


def test_work_moved_into_a_pool_over_its_quota_there_may_be_reclaimed_in_the_same_cycle() -> None:
    """nlp's reclaim stops scratch's A100 job and moves vision's to the free H100: vision
    now holds 2 H100s against a quota of 1 there (its total unchanged), so speech, next,
    takes its quota back from scratch and vision in the same cycle."""
    decisions = schedule(moved_into_another_pool())
    assert {b.job: b.pods[0].node for b in decisions.binds} == {
        "c": "a100-0",
        "j": "h100-0",
        "d": "h100-0",
    }
    assert {(e.job, e.by) for e in decisions.evictions} == {
        ("x", "c"),
        ("j", "c"),
        ("y", "d"),
        ("k", "d"),
    }


@settings(max_examples=examples(100), deadline=None)
@given(st.one_of(snapshots(), pool_quota_snapshots(max_gpus=2)))
@example(moved_into_another_pool())
def test_reclaim_keeping_its_queue_order_in_step_decides_as_sorting_it_afresh(
    snapshot: Snapshot,
) -> None:
    """Reclaim re-places only the queues a try touched in its order of who gives work (a
    speed-up); working that order out again from scratch around every try decides the
    same. A project with per-group quotas whose job moved keeps its total, not its
    standing per group."""
    in_step = schedule(snapshot)

    def claim_for(self: reclaim._VictimQueues, project: str) -> None:
        self.open = self.session.department_of(project)
        self.rebuild()

    def rebuild(self: reclaim._VictimQueues, projects: object) -> None:
        self.rebuild()

    afresh = mock.patch.multiple(
        reclaim._VictimQueues, claim_for=claim_for, settle=rebuild, refresh=rebuild
    )
    with afresh:
        assert schedule(snapshot) == in_step


# -- simulate, plan and the scheduler agree ----------------------------------------------------

NODE_POOLS = Path(__file__).parent / "scenarios" / "repos" / "node-pools"


def scheduler_view_of(repo: Repo) -> Snapshot:
    """The snapshot the in-cluster scheduler builds: the rendered workloads' pods as their
    controllers make them, the nodes as a real cluster labels them, the policy read back
    from the rendered ConfigMap."""
    objects = render_repo(repo)
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    pods = []
    for controller in (o for o in objects if o["kind"] in ("Job", "Deployment")):
        template = controller["spec"]["template"]
        for i in range(controller["spec"].get("parallelism") or controller["spec"]["replicas"]):
            name = controller["metadata"]["name"]
            metadata = copy.deepcopy(template["metadata"])
            metadata |= {
                "name": f"{name}-{i}",
                "namespace": controller["metadata"]["namespace"],
                "uid": f"uid-{name}-{i}",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [{"kind": "Job", "uid": f"uid-{name}", "controller": True}],
            }
            annotations = metadata.setdefault("annotations", {})
            annotations["batch.kubernetes.io/job-completion-index"] = str(i)
            pods.append({"metadata": metadata, "spec": copy.deepcopy(template["spec"])})
    nodes = [
        {
            "metadata": {"name": n.name, "labels": dict(n.labels), "annotations": {}},
            "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        for n in nodes_from_repo(repo)
    ]
    policy = policy_from_configmap(config_map)
    return build_view(pods, nodes, policy, 1_767_225_600.0, CycleMemory()).snapshot


def per_pool(statuses) -> dict[tuple[str, str], tuple[float, float, float]]:
    return {
        (q.name, p.name): (round(p.deserved, 4), round(p.fair_share, 4), round(p.allocated, 4))
        for q in statuses
        for p in q.pools
    }


def test_simulate_plan_and_the_scheduler_agree_on_the_shares_per_pool() -> None:
    diagnostics = Diagnostics()
    repo = build_repo(load_repo(NODE_POOLS, diagnostics))
    assert not diagnostics.has_errors
    simulated = per_pool(simulate(repo).projects)
    assert simulated[("vision", A100)] == (2, 2, 2)
    assert simulated[("nlp", A100)] == (2, 2, 2)
    assert simulated[("vision", H100)] == (4, 4, 4)
    # plan's "now": the repo's workloads settled, the change (none here) applied
    planned = {
        (row.name, group.name): (group.deserved[1], group.fair_share[1], group.allocated[1])
        for row in plan_workloads(repo, repo).projects
        for group in row.node_groups
    }
    assert planned == simulated
    # the scheduler: its own snapshot of the rendered pods, settled; what it writes
    _, history = settle(scheduler_view_of(repo))
    assert per_pool(history[-1].projects) == simulated
    (vision,) = [q for q in history[-1].projects if q.name == "vision"]
    assert queue_status(vision)["nodeGroups"][A100] == {
        "deserved": 2,
        "fairShare": 2,
        "allocated": 2,
        "queued": 0,
    }


def test_explain_shows_the_fair_share_per_pool() -> None:
    diagnostics = Diagnostics()
    repo = build_repo(load_repo(NODE_POOLS, diagnostics))
    explanation = explain(repo, None, "nlp-a100")
    text = to_text(explanation)
    assert "a100: deserved 2, fair share 2, holds 2, asks for 2 more" in text
    assert to_json(explanation)["fairShare"]["nodeGroups"]["h100"]["fairShare"] == 2


def test_plans_full_demand_has_the_fair_share_per_pool_the_engine_gives(
    tmp_path: Path,
) -> None:
    """plan's full-demand column per node group: what simulate gives each project with
    per-group quotas when every project asks for every GPU of every pool; the Markdown
    shows it on the project's `↳ in <group>` rows (a change of vision's H100 quota)."""
    import shutil
    import subprocess

    from click.testing import CliRunner

    from gitops_sched.cli import main
    from gitops_sched.config.document import Document
    from gitops_sched.config.model import build_workload
    from gitops_sched.plan.impact import full_demand

    diagnostics = Diagnostics()
    repo = build_repo(load_repo(NODE_POOLS, diagnostics))
    greedy = []
    for name in ("nlp", "vision"):
        for group, gpus in ((H100, 8), (A100, 4)):
            spec = {"project": name, "gpu": gpus, "nodeGroup": group, "type": "train"}
            data = {"kind": "Workload", "metadata": {"name": f"{name}-{group}"}, "spec": spec}
            greedy.append(build_workload(Document("greedy.yaml", 0, data, {(): (1, 1)})))
    result = simulate(replace(repo, workloads=greedy))
    simulated = {(q.name, p.name): p.fair_share for q in result.projects for p in q.pools}
    assert simulated == {(n, g): s for n in ("nlp", "vision") for g, s in ((A100, 2), (H100, 4))}
    rows = full_demand(repo, repo).projects
    planned = {(r.name, g.name): g.fair_share[1] for r in rows for g in r.node_groups}
    assert planned == simulated

    shutil.copytree(NODE_POOLS, tmp_path / "cfg")
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "."], [*ident, "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=tmp_path, env=env, check=True)
    cluster = tmp_path / "cfg" / "cluster.yaml"
    text = cluster.read_text()
    vision = "nodeGroupQuotas: {h100: {gpu: 4}, a100: {gpu: 2}}}\n---\napiVersion"
    assert text.count(vision) == 1  # vision's, the next to last Project
    cluster.write_text(text.replace(vision, vision.replace("h100: {gpu: 4}", "h100: {gpu: 2}")))
    invoked = CliRunner().invoke(main, ["plan", str(tmp_path / "cfg"), "--base", "HEAD"])
    assert invoked.exit_code == 0, invoked.output
    # vision's H100 quota 4 -> 2: at full demand the 8 H100s split 3/5 instead of 4/4
    assert "| ↳ in `h100` | 4 → **2** | 4 → **3** | 4 | 4 |" in invoked.output  # vision
    assert "| ↳ in `h100` | 4 | 4 → **5** | 2 | 2 |" in invoked.output  # nlp
    assert "| ↳ in `a100` | 2 | 2 | 2 | 2 |" in invoked.output
