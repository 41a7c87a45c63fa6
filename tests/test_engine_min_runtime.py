"""Minimum guaranteed runtime (KAI's minruntime plugin): a preemptible job that started
less than its project's preempt (reclaim) minimum ago is no victim of preempt (reclaim)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.engine import schedule
from gitops_sched.engine.types import EvictReason, Job, Policy, Snapshot
from gitops_sched.engine.why import PendingReasons
from tests.conftest import examples
from tests.engine_builders import job, nodes, policy, project, snapshot
from tests.strategies import two_waves
from tests.test_engine_kai_parity import on, running
from tests.test_engine_properties import settle_steps, submit


def evictions(snap: Snapshot) -> list[tuple[str, EvictReason]]:
    return [(e.job, e.reason) for e in schedule(snap).evictions]


def test_reclaim_spares_work_within_its_minimum_and_takes_it_once_it_has_run_it():
    pol = policy(project("a", 1, reclaim_min_runtime_s=600), project("b", 1))
    work = [
        running("a-1", "a", 1, on("n-0", 0), started=0),
        running("a-2", "a", 1, on("n-0", 1), started=0),
        job("b-1", "b", submitted=100),
    ]
    snap = snapshot(pol, nodes("n", 1, gpus=2), work)
    assert evictions(replace(snap, now=599.0)) == []
    assert evictions(replace(snap, now=600.0)) == [("a-2", EvictReason.RECLAIM)]


def test_reclaim_takes_the_older_job_while_the_younger_is_protected():
    # the youngest is the cheapest victim, but it is protected: the one past its minimum goes
    pol = policy(project("a", 1, reclaim_min_runtime_s=600), project("b", 1))
    work = [
        running("a-old", "a", 1, on("n-0", 0), started=0),
        running("a-new", "a", 1, on("n-0", 1), started=500),
        job("b-1", "b", submitted=100),
    ]
    snap = snapshot(pol, nodes("n", 1, gpus=2), work, now=700.0)
    assert evictions(snap) == [("a-old", EvictReason.RECLAIM)]


def test_preempt_spares_lower_priority_work_within_the_preempt_minimum():
    # the reclaim minimum does not protect from preemption, nor the other way round
    pol = policy(project("a", 1, preempt_min_runtime_s=300, reclaim_min_runtime_s=0))
    work = [
        running("a-train", "a", 1, on("n-0", 0), started=0),
        job("a-infer", "a", type="inference", submitted=1),
    ]
    snap = snapshot(pol, nodes("n", 1, gpus=1), work)
    assert evictions(replace(snap, now=299.0)) == []
    assert evictions(replace(snap, now=300.0)) == [("a-train", EvictReason.PREEMPT)]
    unguarded = replace(pol, projects=(project("a", 1, reclaim_min_runtime_s=900),))
    assert evictions(replace(snap, policy=unguarded, now=1.0)) == [("a-train", EvictReason.PREEMPT)]


def test_a_protected_elastic_job_still_gives_up_its_pods_above_the_gang():
    # KAI: a protected elastic victim may lose pods as long as its gang keeps running
    pol = policy(project("a", 1, reclaim_min_runtime_s=600), project("b", 2))
    elastic = running(
        "a-elastic",
        "a",
        1,
        on("n-0", 0, index=0),
        on("n-0", 1, index=1),
        on("n-0", 2, index=2),
        pods=3,
        min_available=1,
        started=0,
    )
    snap = snapshot(pol, nodes("n", 1, gpus=3), [elastic, job("b-1", "b", 2)], now=10.0)
    decisions = schedule(snap)
    taken = [(e.job, e.reason, len(e.pods)) for e in decisions.evictions]
    assert taken == [("a-elastic", EvictReason.RECLAIM, 2)]  # its pods 1 and 2, not pod 0
    assert [b.job for b in decisions.binds] == ["b-1"]


# -- the property ---------------------------------------------------------------------------

MINIMUMS = st.sampled_from([0.0, 600.0, 3600.0, 7200.0])


@st.composite
def guarded_waves(draw: st.DrawFn) -> tuple[Snapshot, tuple[Job, ...], float]:
    """two_waves with minimum runtimes on the projects, and the time the second wave comes."""
    first, more = draw(two_waves())
    projects = tuple(
        replace(p, preempt_min_runtime_s=draw(MINIMUMS), reclaim_min_runtime_s=draw(MINIMUMS))
        for p in first.policy.projects
    )
    pol: Policy = replace(first.policy, projects=projects)
    return replace(first, policy=pol), more, draw(st.sampled_from([0.0, 60.0, 3600.0, 5400.0]))


@settings(max_examples=examples(60), deadline=None)
@given(guarded_waves())
def test_a_protected_job_is_never_a_victim_before_its_minimum_runtime(
    case: tuple[Snapshot, tuple[Job, ...], float],
) -> None:
    first, more, gap = case
    _, settled = settle_steps(first)
    steps, _ = settle_steps(submit(settled, more, advance=gap))
    minimum = {
        EvictReason.PREEMPT: {p.name: p.preempt_min_runtime_s for p in first.policy.projects},
        EvictReason.RECLAIM: {p.name: p.reclaim_min_runtime_s for p in first.policy.projects},
    }
    for before, decisions in steps:
        jobs = {j.key: j for j in before.jobs}
        for evict in decisions.evictions:
            if evict.reason not in minimum:
                continue
            victim = jobs[evict.job]
            assert victim.started_at is not None
            if before.now < victim.started_at + minimum[evict.reason][victim.project]:
                # protected: only pods above its gang may go
                left = len(victim.placement) - len(evict.pods)
                assert left >= victim.min_available, (evict, victim, before.now)


def test_a_claimant_is_told_how_long_the_work_it_would_reclaim_stays_protected():
    pol = policy(project("a", 1, reclaim_min_runtime_s=600), project("b", 1))
    work = [
        running("a-1", "a", 1, on("n-0", 0), started=0),
        running("a-2", "a", 1, on("n-0", 1), started=100),
        job("b-1", "b", submitted=100),
    ]
    snap = snapshot(pol, nodes("n", 1, gpus=2), work, now=250.0)
    claimant = next(j for j in snap.jobs if j.name == "b-1")
    reason = PendingReasons(snap).of(claimant).text
    assert reason.startswith("nothing to reclaim: ")
    assert "a's work there is within its minimum runtime for 350s more" in reason
