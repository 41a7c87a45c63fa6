"""Fair share: water-filling, one level of sibling queues (`split`), and the hierarchy."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gitops_sched.engine.fairshare import Claim, fair_shares, split, water_fill
from gitops_sched.engine.types import GPU_EPSILON, QueueSpec
from tests.strategies import halves

TOLERANCE = 1e-6


def queue(
    name: str,
    deserved: float,
    weight: float | None = None,
    *,
    allowed: bool = True,
    rank: int = 0,
    limit: float | None = None,
    parent: str = "",
) -> QueueSpec:
    """A queue whose over-quota weight defaults to its quota, as the config's does."""
    return QueueSpec(
        name=name,
        deserved=deserved,
        over_quota_weight=deserved if weight is None else weight,
        over_quota_allowed=allowed,
        over_quota_rank=rank,
        limit=limit,
        parent=parent,
    )


def claim(deserved: float, demand: float, **options) -> Claim:
    return Claim(queue("q", deserved, **options), demand)


def cap_of(c: Claim) -> float:
    """The most a queue may get: its demand, its hard limit, its quota if over quota is denied."""
    cap = c.demand
    if c.spec.limit is not None:
        cap = min(cap, c.spec.limit)
    if not c.spec.over_quota_allowed:
        cap = min(cap, c.spec.deserved)
    return max(cap, 0.0)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


# -- water_fill -------------------------------------------------------------------------------


def test_water_fill_splits_in_proportion_to_weights() -> None:
    assert water_fill(8, [10, 10], [3, 1]) == pytest.approx([6, 2])


def test_water_fill_resplits_what_a_capped_entry_leaves() -> None:
    assert water_fill(10, [1, 10, 10], [1, 1, 2]) == pytest.approx([1, 3, 6])


def test_water_fill_gives_nothing_to_zero_weights() -> None:
    assert water_fill(5, [5, 5], [0, 1]) == pytest.approx([0, 5])


def test_water_fill_stops_at_the_caps() -> None:
    assert water_fill(100, [1, 2], [1, 1]) == pytest.approx([1, 2])


def test_water_fill_of_nothing_is_nothing() -> None:
    assert water_fill(0, [3, 4], [1, 1]) == [0, 0]
    assert water_fill(5, [], []) == []


amounts = st.floats(0, 64, allow_nan=False)
caps_and_weights = st.lists(
    st.tuples(st.floats(0, 16, allow_nan=False), st.sampled_from([0, 0.5, 1, 2, 3, 7.5])),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(amounts, caps_and_weights)
def test_water_fill_hands_out_the_amount_up_to_the_usable_caps(amount, entries) -> None:
    caps, weights = [c for c, _ in entries], [w for _, w in entries]
    shares = water_fill(amount, caps, weights)
    usable = sum(c for c, w in entries if w > 0)
    assert close(sum(shares), min(amount, usable))


@settings(max_examples=300, deadline=None)
@given(amounts, caps_and_weights)
def test_water_fill_never_exceeds_a_cap_or_feeds_a_zero_weight(amount, entries) -> None:
    shares = water_fill(amount, [c for c, _ in entries], [w for _, w in entries])
    for share, (cap, weight) in zip(shares, entries, strict=True):
        assert -GPU_EPSILON <= share <= cap + GPU_EPSILON
        if weight == 0:
            assert share == 0


@settings(max_examples=300, deadline=None)
@given(amounts, caps_and_weights)
def test_water_fill_is_proportional_among_uncapped_entries(amount, entries) -> None:
    """Uncapped entries share one level (share/weight); capped ones sit at or below it."""
    shares = water_fill(amount, [c for c, _ in entries], [w for _, w in entries])
    levels = [s / w for s, (c, w) in zip(shares, entries) if w > 0 and s < c - TOLERANCE]
    if not levels:
        return
    level = levels[0]
    assert all(close(other, level) for other in levels)
    for share, (_, weight) in zip(shares, entries):
        if weight > 0:
            assert share / weight <= level + TOLERANCE


# -- split: one level of siblings -------------------------------------------------------------


def test_quota_3_vs_1_gets_75_and_25_percent_of_the_idle_gpus() -> None:
    shares = split(12, [claim(3, 100), claim(1, 100)])
    assert shares == pytest.approx([3 + 6, 1 + 2])


def test_deserved_quota_comes_before_the_spare_split() -> None:
    # weights favour the second queue, but the first still gets its quota of 4 first
    assert split(6, [claim(4, 100, weight=1), claim(0, 100, weight=3)]) == pytest.approx(
        [4 + 0.5, 1.5]
    )


def test_higher_over_quota_rank_takes_the_spare_first() -> None:
    shares = split(10, [claim(1, 100, rank=0), claim(1, 100, rank=1)])
    assert shares == pytest.approx([1, 9])


def test_lower_rank_gets_what_the_higher_rank_cannot_use() -> None:
    shares = split(10, [claim(1, 100, rank=0), claim(1, 3, rank=1)])
    assert shares == pytest.approx([7, 3])


def test_over_quota_denied_stops_at_the_deserved_quota() -> None:
    shares = split(10, [claim(2, 100, allowed=False), claim(2, 100)])
    assert shares == pytest.approx([2, 8])


def test_hard_limit_caps_the_share() -> None:
    shares = split(10, [claim(2, 100, limit=3), claim(2, 100)])
    assert shares == pytest.approx([3, 7])


def test_zero_over_quota_weight_gets_no_spare() -> None:
    shares = split(10, [claim(2, 100, weight=0), claim(2, 100)])
    assert shares == pytest.approx([2, 8])


def test_demand_below_quota_leaves_the_rest_to_others() -> None:
    shares = split(8, [claim(4, 1), claim(4, 100)])
    assert shares == pytest.approx([1, 7])


def test_quotas_above_capacity_are_scaled_down_in_proportion() -> None:
    shares = split(6, [claim(6, 100), claim(3, 100)])
    assert shares == pytest.approx([4, 2])


quotas = halves(0, 8)
demands = halves(0, 16)


@st.composite
def claims(draw: st.DrawFn) -> Claim:
    deserved = draw(quotas)
    return claim(
        deserved,
        draw(demands),
        weight=draw(st.one_of(st.just(deserved), halves(0, 4))),
        allowed=draw(st.booleans()),
        rank=draw(st.integers(0, 2)),
        limit=draw(st.one_of(st.none(), halves(0, 12))),
    )


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8), halves(0, 32))
def test_spare_splits_3_to_1_between_quotas_3_to_1(unit, extra) -> None:
    """Quota 3k vs k with unbounded demand: 75% / 25% of whatever is left over."""
    big, small = 3 * unit / 2, unit / 2
    capacity = big + small + extra
    shares = split(capacity, [claim(big, 1000), claim(small, 1000)])
    assert shares[0] - big == pytest.approx(0.75 * extra)
    assert shares[1] - small == pytest.approx(0.25 * extra)


@settings(max_examples=300, deadline=None)
@given(halves(0, 32), st.lists(claims(), max_size=6))
def test_split_stays_within_capacity_and_every_cap(capacity, siblings) -> None:
    shares = split(capacity, siblings)
    assert sum(shares) <= capacity + TOLERANCE
    for share, sibling in zip(shares, siblings, strict=True):
        assert -GPU_EPSILON <= share <= cap_of(sibling) + TOLERANCE


@settings(max_examples=300, deadline=None)
@given(halves(0, 32), st.lists(claims(), max_size=6))
def test_split_guarantees_deserved_quota_when_quotas_fit(capacity, siblings) -> None:
    owed = [min(s.spec.deserved, cap_of(s)) for s in siblings]
    assume(sum(owed) <= capacity)
    for share, floor in zip(split(capacity, siblings), owed, strict=True):
        assert share >= floor - TOLERANCE


# -- fair_shares: the hierarchy ---------------------------------------------------------------


def test_departments_then_projects_each_by_water_filling() -> None:
    departments = [queue("research", 6), queue("prod", 2)]
    projects = [
        queue("vision", 3, parent="research"),
        queue("nlp", 3, parent="research"),
        queue("serving", 2, parent="prod"),
    ]
    demand = {"vision": 10, "nlp": 1, "serving": 10}
    shares = fair_shares(16, departments, projects, demand)
    # research claims 11 (vision 10 + nlp 1), prod 10: after quotas 6 + 2, the 8 spare go 6:2,
    # but research needs only 5 of them and prod takes the other 3
    assert shares == pytest.approx(
        {"research": 11, "prod": 5, "vision": 10, "nlp": 1, "serving": 5}
    )


@st.composite
def hierarchies(draw: st.DrawFn):
    """(capacity, departments, projects, demand) with departments holding their projects' quotas."""
    names = [f"dept-{i}" for i in range(draw(st.integers(1, 3)))]
    projects = []
    for i in range(draw(st.integers(1, 6))):
        c = draw(claims())
        projects.append(
            queue(
                f"proj-{i}",
                c.spec.deserved,
                c.spec.over_quota_weight,
                allowed=c.spec.over_quota_allowed,
                rank=c.spec.over_quota_rank,
                limit=c.spec.limit,
                parent=draw(st.sampled_from(names)),
            )
        )
    departments = []
    for name in names:
        deserved = sum(p.deserved for p in projects if p.parent == name) + draw(halves(0, 2))
        weight = draw(st.one_of(st.just(deserved), halves(0, 4)))
        limit = draw(st.one_of(st.none(), halves(0, 16)))
        departments.append(queue(name, deserved, weight, limit=limit))
    demand = {p.name: draw(demands) for p in projects}
    return draw(halves(0, 32)), departments, projects, demand


@settings(max_examples=300, deadline=None)
@given(hierarchies())
def test_fair_shares_never_exceed_demand_or_limits(case) -> None:
    capacity, departments, projects, demand = case
    shares = fair_shares(capacity, departments, projects, demand)
    for project in projects:
        assert shares[project.name] <= cap_of(Claim(project, demand[project.name])) + TOLERANCE
    for department in departments:
        if department.limit is not None:
            assert shares[department.name] <= department.limit + TOLERANCE


@settings(max_examples=300, deadline=None)
@given(hierarchies())
def test_department_shares_fit_the_cluster_and_hold_their_projects_shares(case) -> None:
    capacity, departments, projects, demand = case
    shares = fair_shares(capacity, departments, projects, demand)
    assert sum(shares[d.name] for d in departments) <= capacity + TOLERANCE
    for department in departments:
        kids = sum(shares[p.name] for p in projects if p.parent == department.name)
        assert kids <= shares[department.name] + TOLERANCE


@settings(max_examples=300, deadline=None)
@given(hierarchies())
def test_a_department_share_is_exactly_what_its_projects_share(case) -> None:
    """No GPU of a department's fair share is left to none of its projects, so none is lost to
    departments whose projects could use it."""
    capacity, departments, projects, demand = case
    shares = fair_shares(capacity, departments, projects, demand)
    for department in departments:
        kids = sum(shares[p.name] for p in projects if p.parent == department.name)
        assert kids == pytest.approx(shares[department.name], abs=TOLERANCE)


def usable(spec: QueueSpec, cap: float) -> float:
    """What a queue can take: its cap, or only its quota when it has no claim on spare GPUs."""
    if spec.over_quota_allowed and spec.over_quota_weight > 0:
        return cap
    return min(spec.deserved, cap)


@settings(max_examples=300, deadline=None)
@given(hierarchies())
def test_fair_shares_hand_out_every_gpu_some_project_may_take(case) -> None:
    """Work conserving: the projects' shares add up to the capacity, or to all they may take."""
    capacity, departments, projects, demand = case
    shares = fair_shares(capacity, departments, projects, demand)
    wanted = 0.0
    for department in departments:
        kids = [p for p in projects if p.parent == department.name]
        asked = sum(usable(p, cap_of(Claim(p, demand[p.name]))) for p in kids)
        if department.limit is not None:
            asked = min(asked, department.limit)
        wanted += usable(department, asked)
    total = sum(shares[p.name] for p in projects)
    assert total == pytest.approx(min(capacity, wanted), abs=TOLERANCE)
