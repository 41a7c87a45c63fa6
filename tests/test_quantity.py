"""Our quantity parser agrees with the Kubernetes client's on every valid quantity, and
refuses what the API server would."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity as client_parse_quantity

from gitops_sched.quantity import parse_quantity
from tests.conftest import examples

SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@st.composite
def quantities(draw: st.DrawFn) -> str:
    whole = draw(st.integers(0, 10**6))
    fraction = draw(st.one_of(st.just(""), st.integers(0, 999).map(lambda f: f".{f}")))
    sign = draw(st.sampled_from(["", "+", "-"]))
    suffix = draw(
        st.one_of(
            st.sampled_from(SUFFIXES),
            st.integers(-20, 20).map(lambda e: f"e{e}"),
        )
    )
    return f"{sign}{whole}{fraction}{suffix}"


@settings(max_examples=examples(300))
@given(quantities())
def test_quantities_parse_as_the_kubernetes_client_parses_them(text: str) -> None:
    assert parse_quantity(text) == client_parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12000m", Decimal(12)),
        ("1Gi", Decimal(1024**3)),
        ("1024Mi", Decimal(1024**3)),
        ("1.5k", Decimal(1500)),
        ("1e3", Decimal(1000)),
        (4, Decimal(4)),
        (0.1, Decimal("0.1")),
    ],
)
def test_known_quantities(text: str | int | float, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text", ["", "Gi", "1 Gi", "1Gi\n", "1ki", "1K", "inf", "nan", "1e999999999", True, None]
)
def test_what_is_not_a_quantity_is_refused(text) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_non_finite_numbers_are_refused() -> None:
    for value in (float("inf"), float("nan"), Decimal("Infinity")):
        with pytest.raises(ValueError):
            parse_quantity(value)
