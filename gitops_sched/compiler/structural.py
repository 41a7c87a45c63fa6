"""A config kind's JSON Schema (draft 2020-12) as a Kubernetes *structural* schema.

A CRD accepts only a subset of OpenAPI v3: every field typed, no references, value
validations only inside `allOf`/`anyOf`/`oneOf`, Go (RE2) regular expressions. The repo's
own schema and checks stay the authority; the CRD schema must accept every valid document
and be accepted by the API server. So:

- `$ref`s are inlined (a sibling `description` wins); `$schema`, `$id`, `$defs`, `title`,
  `examples` and editor keywords (`errorMessage`, `patternErrorMessage`) are dropped;
- `default` is dropped, so the API server never adds fields the rendered object lacks
  (the reconciler would read them as drift);
- `additionalProperties: false` is dropped (structural schemas prune unknown fields);
- `propertyNames`, `dependentSchemas`, `not`, and `allOf`/`anyOf`/`oneOf` whose branches do
  more than value validation (e.g. declare types) are dropped; branches of pure value
  validation, such as "`quota` or `nodeGroupQuotas` is required", are kept;
- `pattern`s RE2 cannot compile (look-around, back-references) are dropped;
- `const` becomes a one-value `enum`; a numeric `exclusiveMinimum`/`exclusiveMaximum`
  becomes OpenAPI's `minimum` plus boolean flag; `uniqueItems` becomes
  `x-kubernetes-list-type: set` on lists of scalars;
- type unions: integer|string becomes `x-kubernetes-int-or-string`; a union with number (a
  quantity may be `0.5` or `"500m"`) becomes an untyped
  `x-kubernetes-preserve-unknown-fields` value without validations; a missing `type` is
  inferred from `enum`/`const` values or `properties`.
"""

from __future__ import annotations

import re
from typing import Any

_VALIDATIONS = frozenset(
    {
        "enum",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "multipleOf",
        "pattern",
        "required",
    }
)
_JUNCTORS = ("allOf", "anyOf", "oneOf")
# keywords that say nothing to the API server: text, and our own quantityMaximum (a
# quantity string's value, which the server checks as the resource's own quantity)
_EDITOR_ONLY = frozenset(
    {"description", "errorMessage", "patternErrorMessage", "title", "quantityMaximum"}
)
_SCALARS = frozenset({"string", "integer", "number", "boolean"})
# Python regex features Go's RE2 lacks: look-ahead/behind, atomic groups, back-references.
_NOT_RE2 = re.compile(r"\(\?[=!<>]|\\[1-9]")


def structural_schema(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """The structural form of `node`, whose `$ref`s point into `defs` (`#/$defs/<name>`)."""
    node = _resolve(node, defs)
    out: dict[str, Any] = {}
    _set_type(node, out)
    if "description" in node:
        out["description"] = node["description"]
    if out.get("x-kubernetes-preserve-unknown-fields") and "type" not in out:
        return out  # an untyped union: validations of one branch would reject the others
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: structural_schema(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = structural_schema(value, defs)
        elif key in _JUNCTORS:
            branches = [_validation_only(branch, defs) for branch in value]
            if all(b is not None for b in branches):
                out[key] = branches
        elif key == "uniqueItems" and value and _scalar_items(node, defs):
            out["x-kubernetes-list-type"] = "set"
        else:
            out.update(_value_validation(key, value))
    return out


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """`node` with its `$ref` (and the target's own `$ref`s) inlined; siblings win."""
    while "$ref" in node:
        target = defs[node["$ref"].removeprefix("#/$defs/")]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _scalar_items(node: dict[str, Any], defs: dict[str, Any]) -> bool:
    return _resolve(node.get("items", {}), defs).get("type") in _SCALARS


def _set_type(node: dict[str, Any], out: dict[str, Any]) -> None:
    declared = node.get("type") or _inferred_type(node)
    types = [declared] if isinstance(declared, str) else list(declared or ())
    if "null" in types:
        types.remove("null")
        out["nullable"] = True
    if len(types) == 1:
        out["type"] = types[0]
    elif set(types) == {"integer", "string"}:
        out["x-kubernetes-int-or-string"] = True
    else:  # a number|string union, or nothing to go by: accept any value
        out["x-kubernetes-preserve-unknown-fields"] = True


def _inferred_type(node: dict[str, Any]) -> str | None:
    values = node.get("enum", [node["const"]] if "const" in node else [])
    if "properties" in node or "additionalProperties" in node:
        return "object"
    if values and all(isinstance(v, str) for v in values):
        return "string"
    if values and all(isinstance(v, bool) for v in values):
        return "boolean"
    return None


def _value_validation(key: str, value: Any) -> dict[str, Any]:
    """The structural spelling of one value-validation keyword; {} when it has none."""
    if key == "const":
        return {"enum": [value]}
    if key in ("exclusiveMinimum", "exclusiveMaximum"):
        bound = "minimum" if key == "exclusiveMinimum" else "maximum"
        return {key: value} if isinstance(value, bool) else {bound: value, key: True}
    if key == "pattern" and _NOT_RE2.search(value):
        return {}
    return {key: value} if key in _VALIDATIONS else {}


def _validation_only(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any] | None:
    """A junctor branch kept as pure value validation, or None when it does more than that."""
    node = _resolve(node, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _JUNCTORS:
            branches = [_validation_only(branch, defs) for branch in value]
            if any(b is None for b in branches):
                return None
            out[key] = branches
        elif key in _VALIDATIONS or key == "const":
            out.update(_value_validation(key, value))
        elif key not in _EDITOR_ONLY:
            return None
    return out
