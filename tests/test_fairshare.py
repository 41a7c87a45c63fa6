"""Fair share as KAI's proportion plugin: one level of sibling queues (`split`), the hierarchy."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gitops_sched.engine.fairshare import Claim, fair_shares, split
from gitops_sched.engine.types import GPU_EPSILON, QueueSpec
from tests.conftest import examples
from tests.strategies import halves, ints, just_or, one_of

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


def claim(deserved: float, demand: float, *, name: str = "q", **options) -> Claim:
    return Claim(queue(name, deserved, **options), demand)


def cap_of(c: Claim) -> float:
    """The most a queue may get: its demand, its hard limit, its quota if over quota is denied."""
    cap = c.demand
    if c.spec.limit is not None:
        cap = min(cap, c.spec.limit)
    if not c.spec.over_quota_allowed:
        cap = min(cap, c.spec.deserved)
    return max(cap, 0.0)


def usable(spec: QueueSpec, cap: float) -> float:
    """What a queue can take: its cap, or only its quota when it has no claim on spare GPUs."""
    if spec.over_quota_allowed and spec.over_quota_weight > 0:
        return cap
    return min(spec.deserved, cap)


def owed(c: Claim) -> float:
    """Its deserved quota, capped by what it may take: the part it gets before any spare."""
    return min(c.spec.deserved, cap_of(c))


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def whole(value: float) -> bool:
    return abs(value - round(value)) <= TOLERANCE


# -- split: one level of siblings -------------------------------------------------------------


def test_quota_3_vs_1_gets_75_and_25_percent_of_the_idle_gpus() -> None:
    shares = split(12, [claim(3, 100), claim(1, 100)])
    assert shares == pytest.approx([3 + 6, 1 + 2])


def test_spare_gpus_are_handed_out_in_whole_gpu_rounds_by_weight() -> None:
    # 7 spare GPUs by 3:1 are 5.25 / 1.75: the round gives 5 and 1, and the GPU rounding
    # left goes to the larger fraction (0.75), so 5 and 2
    shares = split(3 + 1 + 7, [claim(3, 100, name="a"), claim(1, 100, name="b")])
    assert shares == [3 + 5, 1 + 2]


def test_gpus_left_by_rounding_go_to_the_largest_fractions_first() -> None:
    # 3 spare GPUs by 5:3:2 are 1.5 / 0.9 / 0.6: the round gives 1 / 0 / 0, then the 2 left
    # go one each to the fractions 0.9 and 0.6, before 0.5
    siblings = [
        claim(0, 100, name="a", weight=5),
        claim(0, 100, name="b", weight=3),
        claim(0, 100, name="c", weight=2),
    ]
    assert split(3, siblings) == [1, 1, 1]


def test_equal_fractions_go_by_name() -> None:
    # 1 spare GPU by 1:1 is 0.5 each; KAI breaks the tie by queue age, then id: here by name
    siblings = [claim(0, 100, name="b", weight=1), claim(0, 100, name="a", weight=1)]
    assert split(1, siblings) == [0, 1]


def test_what_a_queue_leaves_of_its_part_goes_round_again() -> None:
    # 10 spare by 1:1:1: a takes the 1 it asks for, b and c take 3 each (of 3.33); another
    # round splits the 3 left: 1 each (of 1.5); the last GPU goes to the tie's first name
    siblings = [
        claim(0, 1, name="a", weight=1),
        claim(0, 100, name="b", weight=1),
        claim(0, 100, name="c", weight=1),
    ]
    assert split(10, siblings) == [1, 5, 4]


def test_deserved_quota_comes_before_the_spare_split() -> None:
    # weights favour the second queue, but the first still gets its quota of 4 first
    siblings = [claim(4, 100, name="a", weight=1), claim(0, 100, name="b", weight=3)]
    assert split(8, siblings) == [4 + 1, 3]


def test_higher_over_quota_rank_takes_the_spare_first() -> None:
    shares = split(10, [claim(1, 100, rank=0), claim(1, 100, rank=1)])
    assert shares == pytest.approx([1, 9])


def test_higher_rank_takes_spare_gpus_first() -> None:
    # rank 1 splits the 5 spare GPUs in whole-GPU rounds (2.5 each: 2 and 2); what rounding
    # left goes to rank 0's round before rank 1's fractions are served
    siblings = [
        claim(0, 100, name="low", weight=1, rank=0),
        claim(0, 100, name="high-a", weight=1, rank=1),
        claim(0, 100, name="high-b", weight=1, rank=1),
    ]
    assert split(5, siblings) == [1, 2, 2]


def test_a_rank_with_one_queue_gives_it_all_it_asks_for() -> None:
    # no rounds for a lone queue: it takes the 7.5 spare whole, fraction and all
    assert split(7.5, [claim(0, 100, weight=1, rank=1), claim(0, 100, weight=1)]) == [7.5, 0]
    assert split(7.5, [claim(0, 3, weight=1, rank=1), claim(0, 100, weight=1)]) == [3, 4.5]


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


def test_oversubscribed_deserved_quotas_follow_kai() -> None:
    # quotas of 6 + 3 on 6 GPUs: KAI gives every queue its quota (capped by its demand) and
    # scales none down, so the shares add up to more than the capacity and none is spare
    assert split(6, [claim(6, 100), claim(3, 100)]) == [6, 3]
    assert split(6, [claim(6, 2), claim(6, 100), claim(1, 100)]) == [2, 6, 1]


def test_fractional_demand_still_gets_its_share() -> None:
    # a 0.5-GPU notebook whose part (1 of 2 spare) covers it takes just the 0.5; the other
    # queue's next part (0.5) is under a GPU, so it gets the 0.5 as rounding's remainder
    siblings = [claim(0, 0.5, name="notebook", weight=1), claim(0, 10, name="train", weight=1)]
    assert split(2, siblings) == [0.5, 1.5]


def test_fractional_demand_under_its_part_is_served_from_the_remainder() -> None:
    # 1 spare GPU by 1:1 is 0.5 each, less than the 0.75 each asks for: the round gives
    # nothing, then the remainder serves the first name its 0.75 (KAI: a whole GPU, past its
    # demand) and the second what is left
    siblings = [claim(0, 0.75, name="a", weight=1), claim(0, 0.75, name="b", weight=1)]
    assert split(1, siblings) == [0.75, 0.25]


quotas = halves(0, 8)
demands = halves(0, 16)
limits = halves(0, 12)


@st.composite
def claims(
    draw: st.DrawFn,
    quotas: st.SearchStrategy[float] = quotas,
    demands: st.SearchStrategy[float] = demands,
    limits: st.SearchStrategy[float] = limits,
) -> Claim:
    deserved = draw(quotas)
    return claim(
        deserved,
        draw(demands),
        name=draw(one_of("abcdef")),
        weight=draw(just_or(deserved, halves(0, 4))),
        allowed=draw(st.booleans()),
        rank=draw(ints(0, 2)),
        limit=draw(just_or(None, limits)),
    )


any_claims = claims()
whole_claims = claims(st.integers(0, 8), st.integers(0, 16), st.integers(0, 12))


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(1, 8), st.integers(0, 32))
def test_spare_splits_3_to_1_in_whole_gpus_between_quotas_3_to_1(unit, extra) -> None:
    """Quota 3k vs k with unbounded demand: whole GPUs, each within one of 75% / 25%."""
    big, small = 3 * unit, unit
    shares = split(big + small + extra, [claim(big, 1000), claim(small, 1000)])
    assert shares[0] - big in (math.floor(0.75 * extra), math.ceil(0.75 * extra))
    assert shares[1] - small in (math.floor(0.25 * extra), math.ceil(0.25 * extra))
    assert sum(shares) == big + small + extra


@settings(max_examples=examples(100), deadline=None)
@given(halves(0, 32), st.lists(st.sampled_from([0.5, 1, 2, 3, 7.5]), min_size=1, max_size=6))
def test_spare_parts_are_within_one_gpu_of_the_weighted_split(capacity, weights) -> None:
    siblings = [claim(0, 1000, weight=w) for w in weights]
    shares = split(capacity, siblings)
    for share, weight in zip(shares, weights, strict=True):
        assert abs(share - capacity * weight / sum(weights)) < 1
    assert close(sum(shares), capacity)


@settings(max_examples=examples(100), deadline=None)
@given(halves(0, 32), st.lists(claims(), max_size=6))
def test_split_stays_within_every_cap_and_the_capacity_when_quotas_fit(capacity, siblings) -> None:
    shares = split(capacity, siblings)
    assert sum(shares) <= max(capacity, sum(owed(s) for s in siblings)) + TOLERANCE
    for share, sibling in zip(shares, siblings, strict=True):
        assert -GPU_EPSILON <= share <= cap_of(sibling) + TOLERANCE


@settings(max_examples=examples(100), deadline=None)
@given(halves(0, 32), st.lists(claims(), max_size=6))
def test_split_always_gives_the_deserved_quota_capped_by_demand(capacity, siblings) -> None:
    for share, sibling in zip(split(capacity, siblings), siblings, strict=True):
        assert share >= owed(sibling) - TOLERANCE


@settings(max_examples=examples(100), deadline=None)
@given(st.data(), st.lists(claims(), max_size=6))
def test_oversubscribed_quotas_are_all_there_is(data, siblings) -> None:
    # a capacity at most what the quotas owe, drawn as such: filtering random capacities
    # threw away more than half the examples, enough for Hypothesis's filter health check
    # to fail the test now and then
    owes = sum(owed(s) for s in siblings)
    capacity = data.draw(halves(0, min(32, math.floor(2 * owes) / 2)))
    assert split(capacity, siblings) == pytest.approx([owed(s) for s in siblings])


@settings(max_examples=examples(100), deadline=None)
@given(halves(0, 32), st.lists(claims(), max_size=6))
def test_split_hands_out_every_gpu_some_queue_may_take(capacity, siblings) -> None:
    """Work conserving: rounding down never leaves a GPU that some queue asks for."""
    assume(sum(owed(s) for s in siblings) <= capacity)
    wanted = sum(usable(s.spec, cap_of(s)) for s in siblings)
    assert close(sum(split(capacity, siblings)), min(capacity, wanted))


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(0, 32), st.lists(whole_claims, max_size=6))
def test_whole_gpu_demand_gets_whole_gpu_shares(capacity, siblings) -> None:
    assert all(whole(share) for share in split(capacity, siblings))


# -- fair_shares: the hierarchy ---------------------------------------------------------------


def test_departments_then_projects_each_split_the_same_way() -> None:
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


def test_each_level_rounds_to_whole_gpus() -> None:
    departments = [queue("a", 3), queue("b", 1)]
    projects = [queue("a1", 2, parent="a"), queue("a2", 1, parent="a"), queue("b1", 1, parent="b")]
    demand = {"a1": 100, "a2": 100, "b1": 100}
    shares = fair_shares(11, departments, projects, demand)
    # departments: 7 spare by 3:1 -> 5 and 2; a's 8: 5 spare by 2:1 (3.33 / 1.67) -> 3 and 2
    assert shares == {"a": 8, "b": 3, "a1": 5, "a2": 3, "b1": 3}


@st.composite
def hierarchies(draw: st.DrawFn, claim_strategy: st.SearchStrategy[Claim] = any_claims):
    """(capacity, departments, projects, demand) with departments holding their projects' quotas."""
    names = [f"dept-{i}" for i in range(draw(ints(1, 3)))]
    projects = []
    demand = {}
    for i in range(draw(ints(1, 6))):
        c = draw(claim_strategy)
        projects.append(
            queue(
                f"proj-{i}",
                c.spec.deserved,
                c.spec.over_quota_weight,
                allowed=c.spec.over_quota_allowed,
                rank=c.spec.over_quota_rank,
                limit=c.spec.limit,
                parent=draw(one_of(names)),
            )
        )
        demand[f"proj-{i}"] = c.demand
    departments = []
    for name in names:
        deserved = sum(p.deserved for p in projects if p.parent == name) + draw(ints(0, 2))
        weight = draw(just_or(deserved, halves(0, 4)))
        limit = draw(just_or(None, ints(0, 16)))
        departments.append(queue(name, deserved, weight, limit=limit))
    return draw(halves(0, 32)), departments, projects, demand


def department_claims(case) -> list[Claim]:
    """Each department's claim: what its projects may take, capped by its hard limit."""
    _, departments, projects, demand = case
    result = []
    for department in departments:
        kids = [p for p in projects if p.parent == department.name]
        asked = sum(usable(p, cap_of(Claim(p, demand[p.name]))) for p in kids)
        if department.limit is not None:
            asked = min(asked, department.limit)
        result.append(Claim(department, asked))
    return result


def project_quotas_fit(case, shares) -> bool:
    """Whether every department's share holds its projects' deserved quotas (capped by demand)."""
    _, departments, projects, demand = case
    return all(
        sum(owed(Claim(p, demand[p.name])) for p in projects if p.parent == d.name)
        <= shares[d.name] + TOLERANCE
        for d in departments
    )


@settings(max_examples=examples(100), deadline=None)
@given(hierarchies())
def test_fair_shares_never_exceed_demand_or_limits(case) -> None:
    capacity, departments, projects, demand = case
    shares = fair_shares(capacity, departments, projects, demand)
    for project in projects:
        assert shares[project.name] <= cap_of(Claim(project, demand[project.name])) + TOLERANCE
    for department in departments:
        if department.limit is not None:
            assert shares[department.name] <= department.limit + TOLERANCE


@settings(max_examples=examples(100), deadline=None)
@given(hierarchies())
def test_department_shares_fit_the_cluster_when_their_quotas_do(case) -> None:
    capacity, departments, projects, demand = case
    shares = fair_shares(capacity, departments, projects, demand)
    quotas = sum(owed(c) for c in department_claims(case))
    assert sum(shares[d.name] for d in departments) <= max(capacity, quotas) + TOLERANCE


@settings(max_examples=examples(100), deadline=None)
@given(hierarchies())
def test_a_department_share_is_exactly_what_its_projects_share(case) -> None:
    """No GPU of a department's fair share is left to none of its projects, so none is lost to
    departments whose projects could use it (unless its projects' quotas oversubscribe it)."""
    capacity, departments, projects, demand = case
    shares = fair_shares(capacity, departments, projects, demand)
    assume(project_quotas_fit(case, shares))
    for department in departments:
        kids = sum(shares[p.name] for p in projects if p.parent == department.name)
        assert kids == pytest.approx(shares[department.name], abs=TOLERANCE)


@settings(max_examples=examples(100), deadline=None)
@given(hierarchies())
def test_fair_shares_hand_out_every_gpu_some_project_may_take(case) -> None:
    """Work conserving: the projects' shares add up to the capacity, or to all they may take."""
    capacity, departments, projects, demand = case
    shares = fair_shares(capacity, departments, projects, demand)
    dept_claims = department_claims(case)
    assume(sum(owed(c) for c in dept_claims) <= capacity and project_quotas_fit(case, shares))
    wanted = sum(usable(c.spec, c.demand) for c in dept_claims)
    total = sum(shares[p.name] for p in projects)
    assert total == pytest.approx(min(capacity, wanted), abs=TOLERANCE)


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(0, 32), hierarchies(whole_claims))
def test_whole_gpu_demand_gets_whole_gpu_fair_shares(capacity, case) -> None:
    _, departments, projects, demand = case
    shares = fair_shares(capacity, departments, projects, demand)
    assert all(whole(share) for share in shares.values())
