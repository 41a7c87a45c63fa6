"""PodDisruptionBudgets as the disruption controller keeps their status and as the Eviction
API checks them (`pkg/controller/disruption`, `pkg/registry/core/pod/storage/eviction.go`).

The emulator's "controller" is synchronous: a budget's status is recomputed whenever a pod,
a budget or a scalable owner in its namespace changes, so it is never behind
(observedGeneration always equals generation).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from tests.kube_emulator.errors import ApiError
from tests.kube_emulator.fields import now
from tests.kube_emulator.selectors import label_selector_matches

PERCENT = re.compile(r"^([0-9]+)%$")
# kinds whose pods a percentage budget can count: those with a scale subresource
SCALABLE = {
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "ReplicaSet"),
    ("", "ReplicationController"),
}


class SyncFailed(Exception):
    pass


def check_spec(pdb: dict[str, Any]) -> None:
    """ValidatePodDisruptionBudgetSpec: one of minAvailable and maxUnavailable, each a
    non-negative int or a percentage up to 100%."""
    spec = pdb.get("spec") or {}
    causes = []
    if "minAvailable" in spec and "maxUnavailable" in spec:
        causes.append("spec: Invalid value: minAvailable and maxUnavailable cannot be both set")
    for key in ("minAvailable", "maxUnavailable"):
        value = spec.get(key)
        if value is None:
            continue
        match = PERCENT.match(value) if isinstance(value, str) else None
        if isinstance(value, int) and value < 0:
            causes.append(f"spec.{key}: Invalid value: {value}: must be greater than or equal to 0")
        elif isinstance(value, str) and (match is None or int(match.group(1)) > 100):
            causes.append(f"spec.{key}: Invalid value: {value!r}: must be a percentage up to 100%")
    if causes:
        name = pdb["metadata"].get("name", "")
        raise ApiError(
            422,
            "Invalid",
            f'PodDisruptionBudget.policy "{name}" is invalid: ' + ", ".join(causes),
            name=name,
            group="policy",
            kind="PodDisruptionBudget",
            causes=[{"reason": "FieldValueInvalid", "message": c} for c in causes],
        )


def selects(pdb: dict[str, Any], pod: dict[str, Any]) -> bool:
    """A null selector selects nothing, an empty one every pod of the namespace (policy/v1)."""
    selector = (pdb.get("spec") or {}).get("selector")
    return label_selector_matches(selector, pod["metadata"].get("labels") or {})


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def scaled(value: int | str, total: int, round_up: bool = True) -> int:
    """An int-or-percent against `total` (GetScaledValueFromIntOrPercent)."""
    if isinstance(value, int):
        return value
    match = PERCENT.match(str(value))
    if match is None:
        raise SyncFailed(f"invalid value for IntOrString: invalid value {value!r}")
    share = int(match.group(1)) * total / 100
    return math.ceil(share) if round_up else math.floor(share)


def _expected_scale(pods: list[dict[str, Any]], scale_of: Callable[[str, dict], int | None]):
    """The sum of the scales of the pods' controllers (pods without one are not counted);
    SyncFailed when a controller has no scale (a Job, say)."""
    scales: dict[str, int] = {}
    for pod in pods:
        owner = next(
            (o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")),
            None,
        )
        if owner is None or owner["uid"] in scales:
            continue
        scale = scale_of(pod["metadata"]["namespace"], owner)
        if scale is None:
            raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
        scales[owner["uid"]] = scale
    return sum(scales.values())


def _condition(old: dict[str, Any], allowed: bool, reason: str, message: str, generation: int):
    status = "True" if allowed else "False"
    previous = next(
        (c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), {}
    )
    stamp = previous.get("lastTransitionTime") if previous.get("status") == status else now()
    return {
        "type": "DisruptionAllowed",
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": stamp or now(),
    }


def budget_status(
    pdb: dict[str, Any],
    pods: list[dict[str, Any]],
    scale_of: Callable[[str, dict], int | None],
) -> dict[str, Any]:
    """The status the disruption controller writes for `pdb` given its namespace's pods."""
    spec, old = pdb.get("spec") or {}, pdb.get("status") or {}
    generation = pdb["metadata"].get("generation", 1)
    selected = [p for p in pods if selects(pdb, p)]
    try:
        if "maxUnavailable" in spec:
            expected = _expected_scale(selected, scale_of)
            desired = max(0, expected - scaled(spec["maxUnavailable"], expected))
        elif isinstance(spec.get("minAvailable"), str):
            expected = _expected_scale(selected, scale_of)
            desired = scaled(spec["minAvailable"], expected)
        else:
            expected, desired = len(selected), int(spec.get("minAvailable") or 0)
    except SyncFailed as exc:  # fail safe: no disruptions, the rest as it was
        condition = _condition(old, False, "SyncFailed", str(exc), old.get("observedGeneration", 0))
        return {**old, "disruptionsAllowed": 0, "conditions": [condition]}
    healthy = sum(1 for p in selected if not p["metadata"].get("deletionTimestamp") and is_ready(p))
    allowed = healthy - desired if expected > 0 else 0
    allowed = max(allowed, 0)
    reason = "SufficientPods" if allowed > 0 else "InsufficientPods"
    return {
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [_condition(old, allowed > 0, reason, "", generation)],
    }
