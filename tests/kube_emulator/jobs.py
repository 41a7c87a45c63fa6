"""What the API server refuses in an update of a batch/v1 Job, as 1.32 to 1.35 do
(`ValidateJobSpecUpdate` in `pkg/apis/batch/validation`): most of a Job's spec is fixed at
creation. Pure rules on Job dicts, after defaulting: `api.py` stores."""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.kube_emulator.errors import ApiError

# compared as a whole: a change anywhere inside is refused
IMMUTABLE = (
    "selector",
    "template",
    "completionMode",
    "podFailurePolicy",
    "backoffLimitPerIndex",
    "managedBy",
    "successPolicy",
)
# what a suspended Job that never started may change in its pod template (the
# mutable scheduling directives, for queueing controllers such as Kueue)
SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")


def check_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    """422 Invalid with the server's message when `new` changes a field a Job keeps for
    life: parallelism, activeDeadlineSeconds, suspend, backoffLimit, ttlSecondsAfterFinished
    and the like may change; completions only for an Indexed Job, together with parallelism
    (elastic Indexed Jobs)."""
    before, after = old.get("spec") or {}, new.get("spec") or {}
    causes = []
    completions = after.get("completions")
    if completions != before.get("completions"):
        if after.get("completionMode") != "Indexed":
            causes.append(_immutable("spec.completions", completions))
        elif completions is not None and completions != after.get("parallelism"):
            message = "can only be modified in tandem with spec.parallelism"
            causes.append(("spec.completions", f"Invalid value: {completions}: {message}"))
    allowed = _allowed_template(old, new)
    for key in IMMUTABLE:
        was, now = before.get(key), after.get(key)
        if key == "template":
            was = allowed
        if _semantic(was) != _semantic(now):
            causes.append(_immutable(f"spec.{key}", now))
    if causes:
        name = new["metadata"]["name"]
        listed = [f"{path}: {message}" for path, message in causes]
        text = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
        raise ApiError(
            422,
            "Invalid",
            f'Job.batch "{name}" is invalid: {text}',
            name=name,
            group="batch",
            kind="Job",
            causes=[
                {"reason": "FieldValueInvalid", "message": message, "field": path}
                for path, message in causes
            ],
        )


def _allowed_template(old: dict[str, Any], new: dict[str, Any]) -> Any:
    """The old pod template with what this update may change in it taken from the new one
    (`validatePodTemplateUpdate`): nothing, unless the Job is suspended and never started."""
    template = copy.deepcopy((old.get("spec") or {}).get("template"))
    wanted = (new.get("spec") or {}).get("template")
    suspended = (new.get("spec") or {}).get("suspend") is True
    started = (old.get("status") or {}).get("startTime") is not None
    if not suspended or started or not isinstance(template, dict) or not isinstance(wanted, dict):
        return template
    meta, wanted_meta = template.setdefault("metadata", {}), wanted.get("metadata") or {}
    for key in ("labels", "annotations"):
        _take(meta, wanted_meta, key)
    spec, wanted_spec = template.setdefault("spec", {}), wanted.get("spec") or {}
    for key in SCHEDULING_DIRECTIVES:
        _take(spec, wanted_spec, key)
    affinity, wanted_affinity = spec.get("affinity"), wanted_spec.get("affinity")
    node_affinity = (wanted_affinity or {}).get("nodeAffinity")
    rest = {k: v for k, v in (affinity or {}).items() if k != "nodeAffinity"}
    if node_affinity is not None:
        rest["nodeAffinity"] = node_affinity
    if rest or wanted_affinity is not None:
        spec["affinity"] = rest
    else:
        spec.pop("affinity", None)
    return template


def _semantic(value: Any) -> Any:
    """`value` as apiequality.Semantic compares it: an empty map or list is no value."""
    if isinstance(value, dict):
        kept = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [])} or None
    if isinstance(value, list):
        return [_semantic(v) for v in value] or None
    return value


def _take(target: dict[str, Any], source: dict[str, Any], key: str) -> None:
    if key in source:
        target[key] = copy.deepcopy(source[key])
    else:
        target.pop(key, None)


def _immutable(path: str, value: Any) -> tuple[str, str]:
    shown = value if isinstance(value, int) else json.dumps(value, sort_keys=True)
    return path, f"Invalid value: {shown}: field is immutable"
