"""Kubernetes quantities (`12000m`, `1Gi`, `1e3`) as exact decimals.

Our own small parser so that the CLI need not import the `kubernetes` client (a third of
a second at start-up) to read a quota; it follows the API server's grammar and is
property-tested against the client's `parse_quantity`.
"""

from __future__ import annotations

import re
from decimal import Decimal

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<binary>[KMGTPE]i)|(?P<decimal>[numkMGTPE])|[eE](?P<exponent>[+-]?\d+))?"
)
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
MAX_EXPONENT = 100  # beyond any real quantity; keeps `1e999999999` from building a huge number


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """The quantity's exact value (a YAML float as written: 0.1 is 0.1); ValueError when it
    is not one, non-finite numbers included."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, float):
        value = Decimal(repr(value))
    if isinstance(value, int | Decimal):
        if isinstance(value, Decimal) and not value.is_finite():
            raise ValueError(f"not a finite quantity: {value!r}")
        return Decimal(value)
    match = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    number = Decimal(match["number"])
    if match["binary"]:
        return number * (2 ** _BINARY[match["binary"]])
    if match["decimal"]:
        return number.scaleb(_DECIMAL[match["decimal"]])
    if match["exponent"]:
        exponent = int(match["exponent"])
        if abs(exponent) > MAX_EXPONENT:
            raise ValueError(f"quantity exponent out of range: {value!r}")
        return number.scaleb(exponent)
    return number
