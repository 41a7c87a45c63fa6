"""Queue age (KAI: the queue's creation time) breaks ties between otherwise equal queues:
the oldest is served first, the newest gives up work first; names only after it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.engine import schedule
from gitops_sched.engine.types import EvictReason, Snapshot
from tests.conftest import examples
from tests.engine_builders import job, nodes, policy, project, snapshot
from tests.strategies import snapshots
from tests.test_engine_kai_parity import bound, is_running, on, running, settled
from tests.test_engine_properties import outcome


def test_allocate_serves_the_older_of_equal_queues_first_whatever_the_names():
    # equal in rank, fair share, ratio, quota and pending submission: b, the older, goes first
    pol = policy(project("a", 2, age=1), project("b", 2, age=0))
    work = [
        running("a-run", "a", 1, on("n-0", 0)),
        running("b-run", "b", 1, on("n-0", 1)),
        job("a-new", "a", 2, submitted=5),
        job("b-new", "b", 2, submitted=5),
    ]
    final, history = settled(snapshot(pol, nodes("n", 1, gpus=4), work))
    assert bound(history) == ["b-new"]
    assert not is_running(final, "a-new")


def test_age_outranks_the_oldest_pending_work():
    # the queue's age decides before the submission of its pending work does
    pol = policy(project("a", 2, age=0), project("b", 2, age=1))
    work = [
        running("a-run", "a", 1, on("n-0", 0)),
        running("b-run", "b", 1, on("n-0", 1)),
        job("a-new", "a", 2, submitted=10),
        job("b-new", "b", 2, submitted=5),
    ]
    _, history = settled(snapshot(pol, nodes("n", 1, gpus=4), work))
    assert bound(history) == ["a-new"]


def test_reclaim_takes_from_the_newer_of_equal_queues_first_whatever_the_names():
    # a and b are equally over their fair share; d claims one GPU: b, the newer, gives it
    pol = policy(project("a", 1, age=0), project("b", 1, age=2), project("d", 2, age=1))
    work = [
        running("a-1", "a", 1, on("n-0", 0), started=0),
        running("a-2", "a", 1, on("n-0", 1), started=0),
        running("b-1", "b", 1, on("n-0", 2), started=0),
        running("b-2", "b", 1, on("n-0", 3), started=0),
        job("d-1", "d", submitted=10),
    ]
    snap = snapshot(pol, nodes("n", 1, gpus=4), work, now=100.0)
    evicted = [(e.job, e.reason) for e in schedule(snap).evictions]
    assert evicted == [("b-2", EvictReason.RECLAIM)]


@st.composite
def aged(draw: st.DrawFn) -> Snapshot:
    """A snapshot whose queues have ages, ties among them allowed."""
    snap = draw(snapshots())
    ages = st.integers(0, 3)
    pol = snap.policy
    return replace(
        snap,
        policy=replace(
            pol,
            projects=tuple(replace(p, age=draw(ages)) for p in pol.projects),
            departments=tuple(replace(d, age=draw(ages)) for d in pol.departments),
        ),
    )


def assert_deterministic(snap: Snapshot, data: st.DataObject) -> None:
    """The same decisions twice, and the same outcome with the queues, jobs and nodes in
    any other order."""
    pol = snap.policy
    shuffled = replace(
        snap,
        policy=replace(
            pol,
            projects=tuple(data.draw(st.permutations(pol.projects))),
            departments=tuple(data.draw(st.permutations(pol.departments))),
        ),
        jobs=tuple(data.draw(st.permutations(snap.jobs))),
        nodes=tuple(data.draw(st.permutations(snap.nodes))),
    )
    decided = schedule(snap)
    assert schedule(snap) == decided
    assert outcome(schedule(shuffled)) == outcome(decided)


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_decisions_with_ages_are_deterministic_whatever_the_order_of_queues_jobs_and_nodes(
    data: st.DataObject,
) -> None:
    assert_deterministic(data.draw(aged()), data)
