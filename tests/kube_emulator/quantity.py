"""Kubernetes quantities in the canonical form the API server stores them in.

The server parses every quantity (`resource.Quantity`) and writes it back canonically: the
same format family (binary `Ki..Ei`, decimal SI `n..E`, or `e` exponent) with the largest
suffix that keeps the mantissa whole, so `12000m` reads back `12`, `1024Mi` as `1Gi`, `0.5`
as `500m` and `1000` as `1k`; a binary amount below 1024 or with a fraction is written in
decimal SI. Written here from the API machinery rules, independent of the reconciler's own
comparison, so the tests check one against the other.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal

_PATTERN = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?$"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}


class QuantityError(ValueError):
    pass


def parse(text: str | int | float) -> tuple[Decimal, str]:
    """The value and its format: "binary", "decimal" or "exponent"."""
    if isinstance(text, bool):
        raise QuantityError(f"quantity {text!r} is not a number")
    if isinstance(text, int | float):
        text = str(text)
    match = _PATTERN.match(text.strip())
    if match is None:
        raise QuantityError(f"quantities must match the regular expression; got {text!r}")
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * (2 ** _BINARY[suffix]), "binary"
    if suffix[:1] in ("e", "E"):
        return number.scaleb(int(suffix[1:])), "exponent"
    return number.scaleb(_DECIMAL[suffix]), "decimal"


def canonical(text: str | int | float) -> str:
    value, fmt = parse(text)
    # the server keeps nanounits at most, rounding up
    value = value.quantize(Decimal("1e-9"), rounding=ROUND_CEILING) if value % 1 else value
    if value == 0:
        return "0"
    if fmt == "binary" and (abs(value) < 1024 or value % 1):
        fmt = "decimal"
    if fmt == "binary":
        whole, power = int(value), 0
        while power < 60 and whole % 1024 == 0:
            whole //= 1024
            power += 10
        suffix = {0: "", **{bits: s for s, bits in _BINARY.items()}}[power]
        return f"{whole}{suffix}"
    exponent = -9
    while exponent < 18 and (value.scaleb(-(exponent + 3))) % 1 == 0:
        exponent += 3
    mantissa = int(value.scaleb(-exponent))
    if fmt == "exponent":
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"
