"""The scheduler's policy ConfigMap: its name, its key, and how its document is read.

The compiler writes `policy.yaml` (`compiler.policy.policy_document`): the scheduler's
settings, the department/project tree with quotas, weights, ranks, limits and time limits,
and the node groups. Quantities are plain numbers (`policy_number`): GPUs, CPU cores, bytes,
seconds; unset entries are left out (`compact`). The scheduler reads it back
(`bridge.policy.read_policy_document`) through `PolicyFields`, which checks the type of each
value and names where one is wrong.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

POLICY_CONFIGMAP = "gitops-sched-policy"
POLICY_KEY = "policy.yaml"


class PolicyFormatError(ValueError):
    """The policy document is not one this gitops-sched wrote; says where (`a.b[1].c: ...`)."""


def policy_number(value: float | Decimal | None) -> int | float | None:
    """Whole values as ints so `4` does not read `4.0`; None stays None."""
    if value is None:
        return None
    return int(value) if value == int(value) else float(value)


def compact(values: dict[str, Any]) -> dict[str, Any]:
    """Without unset entries (None, empty lists and maps): the policy says only what is set."""
    return {k: v for k, v in values.items() if v is not None and v != [] and v != {}}


_REQUIRED = object()


class PolicyFields:
    """A mapping of the document with its path, read with a check of each value's type."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, dict):
            raise PolicyFormatError(f"{path or 'policy'}: expected a mapping")
        self.data = data
        self.path = path

    def _at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def _get(self, key: str, default: Any, kind: type | tuple[type, ...], what: str) -> Any:
        value = self.data.get(key, _REQUIRED)
        if value is _REQUIRED or value is None:
            if default is _REQUIRED:
                raise PolicyFormatError(f"{self._at(key)}: missing")
            return default
        # bool is an int to Python, never a number to the document
        if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind):
            raise PolicyFormatError(f"{self._at(key)}: expected {what}")
        return value

    def text(self, key: str, default: Any = _REQUIRED) -> Any:
        return self._get(key, default, str, "a string")

    def number(self, key: str, default: Any = _REQUIRED) -> Any:
        value = self._get(key, default, (int, float), "a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise PolicyFormatError(f"{self._at(key)}: expected a finite number")
        return value

    def integer(self, key: str, default: Any = _REQUIRED) -> Any:
        return self._get(key, default, int, "an integer")

    def flag(self, key: str, default: Any = _REQUIRED) -> Any:
        return self._get(key, default, bool, "true or false")

    def mapping(self, key: str) -> PolicyFields:
        return PolicyFields(self._get(key, {}, dict, "a mapping"), self._at(key))

    def _list(self, key: str) -> list[Any]:
        return self._get(key, [], list, "a list")

    def items(self, key: str) -> list[PolicyFields]:
        return [
            PolicyFields(item, f"{self._at(key)}[{i}]") for i, item in enumerate(self._list(key))
        ]

    def texts(self, key: str) -> tuple[str, ...]:
        return self._scalars(key, str, "a string")

    def integers(self, key: str) -> tuple[int, ...]:
        return self._scalars(key, int, "an integer")

    def _scalars(self, key: str, kind: type, what: str) -> tuple[Any, ...]:
        values = self._list(key)
        for i, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, kind):
                raise PolicyFormatError(f"{self._at(key)}[{i}]: expected {what}")
        return tuple(values)
