"""Fairness over time (KAI's time-aware fairness): past usage, decayed, lowers a project's
part of the spare GPUs and never its deserved quota; the engine decides the same for the
same usage, whatever order it is given things in."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.engine import schedule
from gitops_sched.engine.codec import snapshot_from_dict, snapshot_to_dict
from gitops_sched.engine.fairshare import fair_shares
from gitops_sched.engine.history import decay, past_usage, record
from gitops_sched.engine.types import GPU_EPSILON, Fairness, Snapshot, UsageHistory
from tests.conftest import examples
from tests.engine_builders import department, job, nodes, policy, project, snapshot
from tests.strategies import policies
from tests.test_engine_queue_age import aged, assert_deterministic

PROJECTS = ("a", "b", "c")
# two projects alike in all but name: no quota, the same weight, in one department
EQUAL = policy(
    project("a", 0, weight=1),
    project("b", 0, weight=1),
    departments=(department("dept", 0, weight=1),),
)
HOUR = 3600.0

fairnesses = st.builds(
    Fairness,
    history_weight=st.sampled_from([0.5, 1.0, 2.0, 10.0]),
    window_s=st.sampled_from([600.0, HOUR, 8 * HOUR]),
    half_life_s=st.sampled_from([0.0, 300.0, HOUR]),
)
# (start, length, GPUs of each project) of stretches of time, in any order
stretches = st.lists(
    st.tuples(
        st.floats(0, 10 * HOUR),
        st.floats(1, 3 * HOUR),
        st.fixed_dictionaries({p: st.sampled_from([0.0, 0.5, 1.0, 4.0, 8.0]) for p in PROJECTS}),
    ),
    max_size=6,
)


def history_of(fairness: Fairness, recorded: list) -> tuple[UsageHistory, float]:
    """The history of the stretches, recorded in time order, and when the last ended."""
    history, end = UsageHistory(), 0.0
    for start, length, held in sorted(recorded, key=lambda s: s[0] + s[1]):
        history = record(history, fairness, start, start + length, held)
        end = max(end, start + length)
    return history, end


@settings(max_examples=examples(100), deadline=None)
@given(fairnesses, stretches, st.floats(0, 20 * HOUR), st.floats(0, 20 * HOUR))
def test_usage_decay_is_monotone(
    fairness: Fairness, recorded: list, later: float, longer: float
) -> None:
    """Left alone, past usage only ever fades (older counts less, then not at all), and
    recording more use never lowers it."""
    history, end = history_of(fairness, recorded)
    now = end + later
    before = past_usage(history, fairness, now, 8.0)
    after = past_usage(history, fairness, now + longer, 8.0)
    for name in PROJECTS:
        assert after.get(name, 0.0) <= before.get(name, 0.0) + 1e-12
    assert decay(fairness, later + longer) <= decay(fairness, later) <= 1.0
    more = record(history, fairness, end, now, {"a": 1.0})
    assert past_usage(more, fairness, now, 8.0).get("a", 0.0) >= before.get("a", 0.0) - 1e-12


@settings(max_examples=examples(100), deadline=None)
@given(fairnesses, st.floats(0, 5 * HOUR), st.floats(1, 30 * HOUR), st.floats(0, 16))
def test_recorded_gpu_seconds_are_what_was_held_within_the_window(
    fairness: Fairness, start: float, length: float, gpus: float
) -> None:
    history = record(UsageHistory(), fairness, start, start + length, {"a": gpus})
    kept = sum(seconds for _, buckets in history.projects for _, seconds in buckets)
    # everything held in the window is kept, and at most one bucket's worth before it (a
    # holding within the engine's rounding of GPUs, as it counts allocations, is none)
    within = gpus * min(length, fairness.window_s) if gpus > GPU_EPSILON else 0.0
    assert within - 1e-6 <= kept <= within + gpus * fairness.bucket_s + 1e-6


def test_the_whole_cluster_for_the_whole_window_is_a_usage_of_one() -> None:
    fairness = Fairness(window_s=12 * HOUR)
    history = record(UsageHistory(), fairness, 0.0, 12 * HOUR, {"a": 8.0, "b": 0.0})
    usage = past_usage(history, fairness, 12 * HOUR, 8.0)
    assert usage == {"a": 1.0}


@settings(max_examples=examples(60), deadline=None)
@given(
    policies(),
    st.dictionaries(st.sampled_from("pqrstuvwxyz"), st.floats(0, 3), max_size=6),
    st.floats(0.1, 10),
    st.data(),
)
def test_past_usage_never_lowers_a_deserved_quota(
    pol, usage: dict[str, float], k: float, data: st.DataObject
) -> None:
    demand = {p.name: data.draw(st.floats(0, 40)) for p in pol.projects}
    capacity = data.draw(st.floats(0, 64))
    plain = fair_shares(capacity, pol.departments, pol.projects, demand)
    usage = {p.name: usage.get(p.name[-1], 0.0) for p in pol.projects}
    with_usage = fair_shares(
        capacity, pol.departments, pol.projects, demand, usage=usage, history_weight=k
    )
    for queue in (*pol.departments, *pol.projects):
        # the deserved step comes first and is the same with or without past usage
        guaranteed = min(plain[queue.name], queue.deserved)
        assert with_usage[queue.name] >= guaranteed - 1e-9
    assert (
        sum(with_usage[d.name] for d in pol.departments)
        <= max(capacity, sum(d.deserved for d in pol.departments)) + 1e-6
    )


@settings(max_examples=examples(60), deadline=None)
@given(st.floats(0, 1), st.floats(0, 1), st.floats(0.1, 10), st.integers(1, 32))
def test_of_two_equal_projects_the_one_that_used_more_gets_no_more(
    used_a: float, rest: float, k: float, capacity: int
) -> None:
    used_b = rest * (1 - used_a)  # together at most the whole cluster, as usage can be
    pol = EQUAL
    shares = fair_shares(
        float(capacity),
        pol.departments,
        pol.projects,
        {"a": 64.0, "b": 64.0},
        usage={"a": used_a, "b": used_b},
        history_weight=k,
    )
    if used_a > used_b + 1e-6:  # equal usage: the tie goes by age, then name
        assert shares["a"] <= shares["b"]
    assert shares["a"] + shares["b"] == capacity


@st.composite
def with_usage(draw: st.DrawFn) -> Snapshot:
    """A snapshot with queue ages, fairness over time and some past usage of its projects."""
    snap = draw(aged())
    fairness = draw(fairnesses)
    names = [p.name for p in snap.policy.projects]
    history = UsageHistory()
    for i in range(draw(st.integers(0, 3))):
        held = {name: draw(st.sampled_from([0.0, 1.0, 4.0])) for name in names}
        history = record(
            history, fairness, i * fairness.bucket_s, (i + 1) * fairness.bucket_s, held
        )
    now = draw(st.sampled_from([0.0, fairness.bucket_s * 2, fairness.window_s]))
    return replace(
        snap,
        policy=replace(snap.policy, fairness=fairness),
        history=history,
        now=max(snap.now, now),
    )


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_decisions_are_deterministic_with_ages_and_usage(data: st.DataObject) -> None:
    snap = data.draw(with_usage())
    assert_deterministic(snap, data)
    assert snapshot_from_dict(snapshot_to_dict(snap)) == snap


def test_past_usage_moves_the_spare_gpus_and_the_queue_status_shows_it() -> None:
    """Two equal projects: the one that held the node for the window gets none of the
    spare GPUs while the other asks, and its status carries its usage."""
    fairness = Fairness(history_weight=1.0, window_s=HOUR)
    pol = replace(EQUAL, fairness=fairness)
    work = [job("a-1", "a", 4), job("b-1", "b", 4)]
    history = record(UsageHistory(), fairness, 0.0, HOUR, {"a": 4.0})
    empty = snapshot(pol, nodes("n", 1, gpus=4), work, now=HOUR)
    plain = schedule(empty)
    used = schedule(replace(empty, history=history))
    unconfigured = schedule(replace(empty, policy=replace(pol, fairness=None), history=history))
    assert {q.name: q.fair_share for q in plain.projects} == {"a": 2.0, "b": 2.0}
    assert {q.name: q.fair_share for q in used.projects} == {"a": 0.0, "b": 4.0}
    assert [b.job for b in used.binds] == ["b-1"]
    assert {q.name: q.usage for q in used.projects} == {"a": 1.0, "b": 0.0}
    assert unconfigured == plain  # without the policy, past usage counts for nothing
