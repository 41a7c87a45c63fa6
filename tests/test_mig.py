from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitops_sched.hardware.gpus import GPU_MODELS
from gitops_sched.hardware.mig import (
    MigInstance,
    MigProfile,
    compute_share,
    find_placement,
    is_valid_layout,
    layout_with,
    mig_profiles,
)

A100_40 = "A100-SXM4-40GB"
MIG_MODELS = ["A30", "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM5-141GB"]


def inst(profile: str, start: int) -> MigInstance:
    return MigInstance(profile, start)


# --- profile tables ---------------------------------------------------------------------------


def test_a100_40gb_profiles_match_nvidia_smi_placements() -> None:
    profiles = mig_profiles(A100_40)
    assert {name: (p.placements, p.memory_slices) for name, p in profiles.items()} == {
        "1g.5gb": ((0, 1, 2, 3, 4, 5, 6), 1),
        "1g.5gb+me": ((0, 1, 2, 3, 4, 5, 6), 1),
        "1g.10gb": ((0, 2, 4, 6), 2),
        "2g.10gb": ((0, 2, 4), 2),
        "3g.20gb": ((0, 4), 4),
        "4g.20gb": ((0,), 4),
        "7g.40gb": ((0,), 8),
    }
    assert {name: p.max_instances for name, p in profiles.items()} == {
        "1g.5gb": 7,
        "1g.5gb+me": 1,
        "1g.10gb": 4,
        "2g.10gb": 3,
        "3g.20gb": 2,
        "4g.20gb": 1,
        "7g.40gb": 1,
    }


@pytest.mark.parametrize(
    ("model", "names"),
    [
        (
            "A100-SXM4-80GB",
            {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
        ),
        (
            "H100-SXM5-80GB",
            {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
        ),
        (
            "H200-SXM5-141GB",
            {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
        ),
        ("A30", {"1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"}),
    ],
)
def test_profile_names_per_model(model: str, names: set[str]) -> None:
    assert set(mig_profiles(model)) == names


def test_a30_profiles_use_four_memory_slices() -> None:
    profiles = mig_profiles("A30")
    assert profiles["1g.6gb"] == MigProfile("1g.6gb", 1, 1, 4, (0, 1, 2, 3))
    assert profiles["2g.12gb"] == MigProfile("2g.12gb", 2, 2, 2, (0, 2))
    assert profiles["2g.12gb+me"].max_instances == 1
    assert profiles["4g.24gb"] == MigProfile("4g.24gb", 4, 4, 1, (0,))


@pytest.mark.parametrize("model", MIG_MODELS)
def test_full_profile_spans_the_whole_gpu(model: str) -> None:
    full = max(mig_profiles(model).values(), key=lambda p: p.compute_slices)
    assert full.compute_slices == GPU_MODELS[model].mig_slices
    assert full.placements == (0,)
    assert is_valid_layout(model, [inst(full.name, 0)])
    assert find_placement(model, [inst(full.name, 0)], full.name) is None


@pytest.mark.parametrize(
    ("alias", "profile"),
    [("A100-80GB", "3g.40gb"), ("NVIDIA A100 80GB PCIe", "7g.80gb"), ("H200", "3g.71gb")],
)
def test_profiles_found_through_aliases(alias: str, profile: str) -> None:
    assert profile in mig_profiles(alias)


@pytest.mark.parametrize("model", ["T4", "L40S", "V100-32GB", "no-such-gpu", ""])
def test_non_mig_or_unknown_model_has_no_profiles(model: str) -> None:
    assert mig_profiles(model) == {}
    assert find_placement(model, [], "1g.5gb") is None
    assert layout_with(model, [], "1g.5gb", []) is None
    assert is_valid_layout(model, [])
    assert not is_valid_layout(model, [inst("1g.5gb", 0)])


def test_mig_profiles_returns_a_copy() -> None:
    mig_profiles(A100_40).clear()
    assert len(mig_profiles(A100_40)) == 7


# --- layout validity --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout",
    [
        [inst("1g.5gb", s) for s in range(7)],
        [inst("7g.40gb", 0)],
        [inst("3g.20gb", 0), inst("3g.20gb", 4)],
        [inst("4g.20gb", 0), inst("3g.20gb", 4)],
        [inst("4g.20gb", 0), inst("2g.10gb", 4), inst("1g.5gb", 6)],
        [inst("2g.10gb", 0), inst("2g.10gb", 2), inst("2g.10gb", 4), inst("1g.10gb", 6)],
        [inst("1g.10gb", s) for s in (0, 2, 4, 6)],
        [inst("1g.5gb+me", 3), inst("1g.5gb", 0), inst("3g.20gb", 4)],
        [],
    ],
)
def test_known_good_a100_layouts(layout: list[MigInstance]) -> None:
    assert is_valid_layout(A100_40, layout)


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param([inst("4g.20gb", 0), inst("4g.20gb", 0)], id="two 4g overlap"),
        pytest.param([inst("4g.20gb", 4)], id="4g only starts at 0"),
        pytest.param([inst("7g.40gb", 0), inst("1g.5gb", 0)], id="7g takes everything"),
        pytest.param([inst("3g.20gb", 0), inst("4g.20gb", 0)], id="3g and 4g both at 0"),
        pytest.param([inst("3g.20gb", 2)], id="3g not aligned"),
        pytest.param([inst("1g.5gb", 7)], id="1g cannot use the 8th memory slice"),
        pytest.param([inst("1g.10gb", 1)], id="1g.10gb only at even starts"),
        pytest.param([inst("2g.10gb", 6)], id="2g not at 6"),
        pytest.param([inst("1g.5gb+me", 0), inst("1g.5gb+me", 1)], id="one +me only"),
        pytest.param([inst("1g.10gb", 0), inst("1g.5gb", 1)], id="1g.10gb spans 2 slices"),
        pytest.param([inst("3g.40gb", 0)], id="profile of another model"),
    ],
)
def test_invalid_a100_layouts_rejected(layout: list[MigInstance]) -> None:
    assert not is_valid_layout(A100_40, layout)


def test_max_instances_enforced_even_without_overlap() -> None:
    assert not is_valid_layout("A30", [inst("2g.12gb+me", 0), inst("2g.12gb+me", 2)])
    assert is_valid_layout("A30", [inst("2g.12gb+me", 0), inst("2g.12gb", 2)])


def test_a30_media_extensions_are_exclusive() -> None:
    assert is_valid_layout("A30", [inst("1g.6gb+me", 0), inst("1g.6gb", 1), inst("2g.12gb", 2)])
    assert not is_valid_layout("A30", [inst("1g.6gb+me", 0), inst("2g.12gb+me", 2)])


def test_is_valid_layout_accepts_any_iterable() -> None:
    assert is_valid_layout("A100-40GB", (inst("1g.5gb", s) for s in range(7)))


# --- placement --------------------------------------------------------------------------------


def test_seven_1g_fit_and_the_eighth_does_not() -> None:
    layout: list[MigInstance] = []
    for _ in range(7):
        start = find_placement(A100_40, layout, "1g.5gb")
        assert start is not None
        layout.append(inst("1g.5gb", start))
    assert sorted(i.start for i in layout) == list(range(7))
    assert is_valid_layout(A100_40, layout)
    assert find_placement(A100_40, layout, "1g.5gb") is None
    assert find_placement(A100_40, layout, "1g.10gb") is None


def test_only_one_7g() -> None:
    assert find_placement(A100_40, [], "7g.40gb") == 0
    assert find_placement(A100_40, [inst("7g.40gb", 0)], "7g.40gb") is None


def test_small_profiles_fill_from_the_end() -> None:
    assert find_placement(A100_40, [], "1g.5gb") == 6
    assert find_placement(A100_40, [], "2g.10gb") == 4
    assert find_placement(A100_40, [], "3g.20gb") == 4
    assert find_placement(A100_40, [], "1g.10gb") == 6


def test_3g_then_4g_fit_in_either_order() -> None:
    first_3g = find_placement(A100_40, [], "3g.20gb")
    assert first_3g == 4
    assert find_placement(A100_40, [inst("3g.20gb", 4)], "4g.20gb") == 0
    assert find_placement(A100_40, [inst("4g.20gb", 0)], "3g.20gb") == 4


def test_two_3g_fit_but_not_two_4g() -> None:
    assert find_placement(A100_40, [inst("3g.20gb", 4)], "3g.20gb") == 0
    assert find_placement(A100_40, [inst("4g.20gb", 0)], "4g.20gb") is None


def test_1g_beside_a_3g_keeps_the_4g_side_free() -> None:
    start = find_placement(A100_40, [inst("3g.20gb", 0)], "1g.5gb")
    assert start == 6
    assert find_placement(A100_40, [inst("3g.20gb", 0), inst("1g.5gb", 6)], "2g.10gb") == 4


def test_unknown_profile_or_invalid_existing_gives_none() -> None:
    assert find_placement(A100_40, [], "3g.40gb") is None
    assert find_placement(A100_40, [inst("4g.20gb", 0), inst("4g.20gb", 0)], "1g.5gb") is None


def test_find_placement_on_a30() -> None:
    assert find_placement("A30", [], "2g.12gb") == 2
    assert find_placement("A30", [inst("2g.12gb", 2)], "2g.12gb") == 0
    assert find_placement("A30", [inst("2g.12gb", 0), inst("2g.12gb", 2)], "1g.6gb") is None


# --- compute share ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "profile", "share"),
    [
        (A100_40, "3g.20gb", 3 / 7),
        (A100_40, "1g.10gb", 1 / 7),
        (A100_40, "7g.40gb", 1.0),
        ("A100-80GB", "2g.20gb", 2 / 7),
        ("H100-80GB", "4g.40gb", 4 / 7),
        ("H200", "1g.18gb+me", 1 / 7),
        ("A30", "2g.12gb", 0.5),
        ("A30", "1g.6gb", 0.25),
        ("A30", "4g.24gb", 1.0),
    ],
)
def test_compute_share(model: str, profile: str, share: float) -> None:
    assert compute_share(model, profile) == pytest.approx(share)


def test_compute_share_rejects_unknown_inputs() -> None:
    with pytest.raises(ValueError, match="A100-SXM4-40GB"):
        compute_share("T4", "1g.5gb")
    with pytest.raises(ValueError, match="no MIG profile"):
        compute_share(A100_40, "1g.6gb")


# --- layout_with ------------------------------------------------------------------------------


def test_layout_with_needs_no_victims_when_there_is_room() -> None:
    assert layout_with(A100_40, [inst("3g.20gb", 4)], "4g.20gb", [inst("3g.20gb", 4)]) == (0, ())


def test_layout_with_destroys_the_fewest_idle_instances() -> None:
    existing = [inst("1g.5gb", s) for s in range(4)] + [inst("3g.20gb", 4)]
    idle = existing
    # A 3g at 0 needs four 1g gone; one 3g at 4 frees the same room in one step.
    assert layout_with(A100_40, existing, "3g.20gb", idle) == (4, (inst("3g.20gb", 4),))


def test_layout_with_only_touches_removable_instances() -> None:
    existing = [inst("1g.5gb", s) for s in range(4)] + [inst("3g.20gb", 4)]
    idle_1g = [inst("1g.5gb", s) for s in range(4)]
    result = layout_with(A100_40, existing, "3g.20gb", idle_1g)
    assert result is not None
    start, victims = result
    assert start == 0
    assert sorted(victims, key=lambda i: i.start) == idle_1g
    assert layout_with(A100_40, existing, "3g.20gb", idle_1g[:3]) is None


def test_layout_with_prefers_destroying_fewer_compute_slices() -> None:
    existing = [inst("4g.20gb", 0), inst("2g.10gb", 4), inst("1g.5gb", 6)]
    # A 1g.5gb fits after removing either the 2g or the 1g; the 1g wastes less.
    assert layout_with(A100_40, existing, "1g.5gb", existing) == (6, (inst("1g.5gb", 6),))


def test_layout_with_tie_breaks_deterministically() -> None:
    existing = [inst("2g.10gb", 0), inst("2g.10gb", 2), inst("2g.10gb", 4), inst("1g.5gb", 6)]
    removable = list(reversed(existing))
    result = layout_with(A100_40, existing, "2g.10gb", removable)
    assert result == (0, (inst("2g.10gb", 0),))
    assert layout_with(A100_40, existing, "2g.10gb", existing) == result


def test_layout_with_rejects_removable_outside_existing() -> None:
    with pytest.raises(ValueError, match="part of the existing layout"):
        layout_with(A100_40, [inst("7g.40gb", 0)], "1g.5gb", [inst("1g.5gb", 0)])


def test_layout_with_impossible_cases() -> None:
    assert layout_with(A100_40, [], "3g.40gb", []) is None
    assert layout_with(A100_40, [inst("7g.40gb", 0)], "1g.5gb", []) is None


# --- properties -------------------------------------------------------------------------------


def _brute_force_fits(model: str, existing: list[MigInstance], profile: str) -> bool:
    placements = mig_profiles(model)[profile].placements
    return any(is_valid_layout(model, [*existing, inst(profile, s)]) for s in placements)


@st.composite
def profile_sequences(draw: st.DrawFn) -> tuple[str, list[str]]:
    model = draw(st.sampled_from(MIG_MODELS))
    names = sorted(mig_profiles(model))
    return model, draw(st.lists(st.sampled_from(names), max_size=14))


@given(profile_sequences())
def test_repeated_find_placement_keeps_layout_valid(case: tuple[str, list[str]]) -> None:
    model, requests = case
    layout: list[MigInstance] = []
    for profile in requests:
        start = find_placement(model, layout, profile)
        assert (start is not None) == _brute_force_fits(model, layout, profile)
        if start is not None:
            layout.append(inst(profile, start))
        assert is_valid_layout(model, layout)
    total = sum(mig_profiles(model)[i.profile].compute_slices for i in layout)
    assert total <= GPU_MODELS[model].mig_slices


@given(profile_sequences(), st.data())
def test_layout_with_is_minimal_and_valid(case: tuple[str, list[str]], data: st.DataObject) -> None:
    model, requests = case
    layout: list[MigInstance] = []
    for profile in requests:
        start = find_placement(model, layout, profile)
        if start is not None:
            layout.append(inst(profile, start))
    wanted = data.draw(st.sampled_from(sorted(mig_profiles(model))))
    result = layout_with(model, layout, wanted, layout)
    assert result is not None  # everything is removable, so an empty GPU is always reachable
    start, victims = result
    kept = [i for i in layout if i not in victims]
    assert is_valid_layout(model, [*kept, inst(wanted, start)])
    for smaller in range(len(victims)):
        for subset in combinations(layout, smaller):
            rest = [i for i in layout if i not in subset]
            assert not _brute_force_fits(model, rest, wanted)
