"""The schema stage: every document against its kind's JSON Schema, every error reported.

The schemas in `gitops_sched/schemas/` are also what editors use (yaml-language-server),
so the messages an editor shows and the ones printed here come from the same place: a
schema may carry `errorMessage` / `patternErrorMessage` (VS Code's keywords), which we
prefer over jsonschema's generic text. Errors point at the offending value, or at the
key of an unknown field, so `FILE:LINE:COL` lands where the fix goes.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
import reprlib
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match

from gitops_sched.config import codes
from gitops_sched.config.codes import Code
from gitops_sched.config.diagnostics import Diagnostic, Diagnostics
from gitops_sched.config.document import KINDS, SIMULATION, Document, Path_
from gitops_sched.contract.labels import API_VERSION
from gitops_sched.quantity import parse_quantity

_PLAIN_KEY = re.compile(r"[A-Za-z_][-A-Za-z0-9_]*")

_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 40  # scalars only: `_show` names lists and mappings


@cache
def _load(kind: str) -> dict:
    if kind not in KINDS and kind != SIMULATION:
        raise ValueError(f"unknown kind {kind!r}")
    text = (resources.files("gitops_sched") / "schemas" / f"{kind.lower()}.json").read_text()
    return json.loads(text)


def schema_for(kind: str) -> dict:
    """The JSON Schema of `kind` (a copy: callers such as the CRD compiler may reshape it)."""
    return copy.deepcopy(_load(kind))


@cache
def schema_regex(pattern: str) -> re.Pattern[str]:
    r"""A schema `pattern` with `$` as ECMA-262 (editors) and RE2 (the API server, for CRDs)
    read it: the end of the string. Python's `$` also matches before a final newline, so
    `^[a-z0-9]+$` would let "team-a\n" through; here every `$` outside a character class
    becomes `\Z`."""
    out, escaped, in_class = [], False, False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            char = r"\Z"
        out.append(char)
    return re.compile("".join(out))


def _pattern_keyword(validator: Any, pattern: str, instance: Any, schema: dict) -> Iterator:
    if validator.is_type(instance, "string") and not schema_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _quantity_at_most(value: Any, maximum: int) -> bool:
    """Whether a quantity string stands for at most `maximum` (`maximum` bounds numbers
    only; "1e30" or "9999Ei" would pass it). A string that is no quantity is the
    pattern's to report."""
    if not isinstance(value, str):
        return True
    try:
        return parse_quantity(value) <= maximum
    except ValueError:
        return True


def _quantity_maximum_keyword(
    validator: Any, maximum: int, instance: Any, schema: dict
) -> Iterator:
    """`quantityMaximum` (ours): `maximum` for a quantity written as a string."""
    if not _quantity_at_most(instance, maximum):
        yield ValidationError(f"{instance!r} is more than {maximum:.0e}".replace("e+", "e"))


def _is_integer(checker: Any, value: Any) -> bool:
    """JSON Schema counts 2.0 as an integer; the model does not (`gpus: 2.0`, GPU index 1.0)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite_number(checker: Any, value: Any) -> bool:
    """`.inf` and `.nan` are YAML floats but no JSON numbers (and `nan >= 0` is false, so
    `minimum` alone would let NaN through)."""
    return _is_number(value)


# jsonschema's own `pattern` is Python's `re.search`; ours reads `$` as the schema means it.
# Its types are the model's: integers are ints (not 2.0), numbers are finite.
SchemaValidator = validators.extend(
    Draft202012Validator,
    {"pattern": _pattern_keyword, "quantityMaximum": _quantity_maximum_keyword},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_finite_number}
    ),
)


@cache
def validator_for(kind: str) -> Draft202012Validator:
    """The validator of `kind`'s schema (Simulation's too: the Simulation parser's)."""
    return SchemaValidator(_load(kind))


@cache
def quick_check(kind: str) -> Check:
    """The fast path's check of a kind: True only for data its schema accepts (anything else
    goes to jsonschema, which says why)."""
    schema = _load(kind)
    return _compile(schema, schema)


def validate_documents(documents: list[Document], diagnostics: Diagnostics) -> list[Document]:
    """The documents that are schema-valid; every problem of the others goes to `diagnostics`."""
    valid: list[Document] = []
    for doc in documents:
        problems = _header_problems(doc)
        if doc.kind in KINDS or doc.kind == SIMULATION:
            # a wrong apiVersion is reported once, above; the rest of the document still counts
            data = {**doc.data, "apiVersion": API_VERSION}
            # most documents pass the quick check: only the rest cost more (Simulations are few)
            if doc.kind == SIMULATION or not quick_check(doc.kind)(data):
                problems += schema_problems(doc, data, validator_for(doc.kind))
            if not problems:
                valid.append(doc)
        diagnostics.extend(problems)
    return valid


def rendered_problems(doc: Document, path: Path_, value: Any) -> list[Diagnostic]:
    """The schema problems `doc` (schema-valid) would have with `value` written at `path`:
    a value a template expression there renders to meets the rules of one written there."""
    data = _replaced(doc.data, path, value)
    if quick_check(doc.kind)(data):
        return []
    return schema_problems(doc, data, validator_for(doc.kind))


def _replaced(data: Any, path: Path_, value: Any) -> Any:
    """`data` with `value` at `path`, copying only the containers on the way."""
    if not path:
        return value
    head, *rest = path
    copied = list(data) if isinstance(data, list) else dict(data)
    copied[head] = _replaced(data[head], tuple(rest), value)  # type: ignore[index]
    return copied


def _header_problems(doc: Document) -> list[Diagnostic]:
    """apiVersion and kind, checked before the schema (the kind picks which schema)."""
    problems = []
    if "apiVersion" not in doc.data:
        message = f"missing apiVersion (expected {API_VERSION})"
        problems.append(Diagnostic(doc.location(), message, doc.ref, code=codes.BAD_API_VERSION))
    elif (api := doc.data["apiVersion"]) != API_VERSION:
        where = doc.location(("apiVersion",))
        if doc.foreign:
            # another API's document (a Deployment left in the folder): one error, no
            # guess at which of our kinds its kind looks like
            message = (
                f"not a gitops-sched document (apiVersion {_show(api)}, expected "
                f"{API_VERSION}): leave it out with .gitops-schedignore or --exclude"
            )
            return [Diagnostic(where, message, doc.ref, code=codes.BAD_API_VERSION)]
        what = (
            f"unknown apiVersion {_show(api)}"
            if isinstance(api, str)
            else f"apiVersion is {_show(api)}"
        )
        message = f"{what} (expected {API_VERSION})"
        problems.append(Diagnostic(where, message, doc.ref, code=codes.BAD_API_VERSION))
    expected = f"expected one of {', '.join((*KINDS, SIMULATION))}"
    if "kind" not in doc.data:
        message = f"missing kind ({expected})"
        problems.append(Diagnostic(doc.location(), message, doc.ref, code=codes.BAD_KIND))
    elif doc.kind not in KINDS and doc.kind != SIMULATION:
        kind = doc.data["kind"]
        what = f"unknown kind {_show(kind)}" if isinstance(kind, str) else f"kind is {_show(kind)}"
        guess = _nearest(kind, (*KINDS, SIMULATION)) if isinstance(kind, str) else None
        hint = f": did you mean '{guess}'?" if guess else ""
        message = f"{what}{hint} ({expected})"
        problems.append(Diagnostic(doc.location(("kind",)), message, doc.ref, code=codes.BAD_KIND))
    return problems


# Problems reported per document: past them validation stops (each costs milliseconds:
# a 64 MiB `plan --state` of 300,000 malformed workloads took minutes)
MAX_SCHEMA_PROBLEMS = 100


def schema_problems(doc: Document, data: dict, validator: Draft202012Validator) -> list[Diagnostic]:
    """One diagnostic per problem, in the validator's order, without repeats; at most
    MAX_SCHEMA_PROBLEMS, then one saying the rest is not checked."""
    root = validator.schema  # the kind's schema: a Simulation file's may say another kind
    found: dict[Diagnostic, None] = {}
    for error in validator.iter_errors(data):
        if len(found) >= MAX_SCHEMA_PROBLEMS:
            message = f"more than {MAX_SCHEMA_PROBLEMS} problems: the rest is not checked"
            found[Diagnostic(doc.location(), message, doc.ref, code=codes.FILE_TOO_LARGE)] = None
            break
        found.update(dict.fromkeys(_explain(doc, error, root)))
    return list(found)


def _explain(doc: Document, error: ValidationError, root: dict) -> Iterator[Diagnostic]:
    if error.validator in ("anyOf", "oneOf") and error.context and not _custom_message(error):
        error = best_match(error.context)  # the branch the user most likely meant
    path = tuple(error.absolute_path)
    if error.validator == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        for key in error.instance:
            if key not in known:
                where = doc.key_location((*path, key))
                message = _unknown(root, path, key, error)
                yield Diagnostic(where, message, doc.ref, code=codes.UNKNOWN_FIELD)
    elif error.validator == "required":
        misspelt = _misspelt(error)
        for name in error.validator_value:
            if name not in error.instance and name not in misspelt:
                message = f"missing required field '{_dotted((*path, name))}'"
                where = doc.key_location(path)
                yield Diagnostic(where, message, doc.ref, code=codes.MISSING_FIELD)
    elif "propertyNames" in error.absolute_schema_path:  # the key itself is wrong
        message = f"{_dotted(path)}: {_message(error)}"
        where = doc.key_location((*path, error.instance))
        yield Diagnostic(where, message, doc.ref, code=codes.INVALID_VALUE)
    else:
        message = f"{_dotted(path)}: {_message(error)}" if path else _message(error)
        where = doc.key_location(path) if _is_container(error.instance) else doc.location(path)
        code = _KEYWORD_CODES.get(str(error.validator), codes.INVALID_VALUE)
        yield Diagnostic(where, message, doc.ref, code=code)


# What a failed keyword means to the user (other keywords: an invalid value).
_KEYWORD_CODES: dict[str, Code] = {
    "type": codes.WRONG_TYPE,
    **dict.fromkeys(
        ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength"),
        codes.OUT_OF_RANGE,
    ),
    **dict.fromkeys(("minItems", "maxItems", "minProperties", "maxProperties"), codes.OUT_OF_RANGE),
    **dict.fromkeys(("anyOf", "oneOf", "not", "dependentSchemas"), codes.CONFLICTING_FIELDS),
    "uniqueItems": codes.REPEATED_ITEM,
}


def _misspelt(error: ValidationError) -> set[str]:
    """The fields of a mapping that no field may hold that its unknown fields look like
    (`departmnet`: `department`): their unknown-field error already says "did you mean",
    so no second error says the field is missing."""
    if error.schema.get("additionalProperties") is not False:
        return set()
    known = list(error.schema.get("properties", {}))
    unknown = [key for key in error.instance if isinstance(key, str) and key not in known]
    return {guess for key in unknown if (guess := _nearest(key, known))}


def _nearest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate `word` most likely misspells, if any: what "did you mean" names."""
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return close[0] if close else None


def _unknown(root: dict, path: Path_, key: str, error: ValidationError) -> str:
    """`unknown field 'spec.qouta': did you mean 'quota'? (allowed: ...)`.

    Most unknown fields are typos, or a key indented a level too shallow (a field of one
    of the fields beside it: `quota` under the document instead of under `spec`) or too
    deep (a field of the mapping one level up). The allowed fields are always listed; a
    schema's own `errorMessage` (e.g. the shape Kubernetes users expect) comes last.
    """
    known = list(error.schema.get("properties", {}))
    guess = _nearest(key, known)
    under = [name for name in known if key in _fields_of(root, error.schema["properties"][name])]
    parent = _fields_of(root, _schema_at(root, path[:-1])) if path else {}
    if guess:
        hint = f": did you mean '{guess}'?"
    elif under:
        hint = f": indent it under '{_dotted((*path, under[0]))}'?"
    elif key in parent:
        hint = f": indented one level too deep? '{key}' is a field of '{_dotted(path[:-1])}'"
    else:
        hint = ""
    custom = _custom_message(error)
    shape = f"; {_dotted(path)} {custom}" if custom else ""
    allowed = f"allowed: {', '.join(known)}" if known else "no fields are allowed here"
    return f"unknown field '{_dotted((*path, key))}'{hint} ({allowed}){shape}"


def _resolved(root: dict, schema: Any) -> dict:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    return schema if isinstance(schema, dict) else {}


def _fields_of(root: dict, schema: Any) -> dict:
    """The fields a (sub)schema of `root` declares, {} when it is no mapping of fields."""
    return _resolved(root, schema).get("properties", {})


def _schema_at(root: dict, path: Path_) -> dict:
    """The subschema of `root` the value at `path` is checked against (by its fields)."""
    schema = root
    for part in path:
        schema = _resolved(root, schema)
        if isinstance(part, int):
            schema = schema.get("items", {})
        else:
            schema = schema.get("properties", {}).get(part, schema.get("additionalProperties"))
    return _resolved(root, schema)


def _custom_message(error: ValidationError) -> str | None:
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "pattern" and "patternErrorMessage" in schema:
        return schema["patternErrorMessage"]
    return schema.get("errorMessage")


def _message(error: ValidationError) -> str:
    """The schema's own message after the value, else ours or jsonschema's with the value
    shown as YAML users write it (never a Python repr of a list or mapping)."""
    custom = _custom_message(error)
    if custom is None and error.validator == "type" and isinstance(error.instance, float):
        custom = _FLOAT_PROBLEMS.get(_float_problem(error.instance, error.validator_value) or "")
    if custom is None and (ours := _OWN_MESSAGES.get(str(error.validator))) is not None:
        text = ours(error.instance, error.validator_value)
        fields = error.schema.get("properties") if isinstance(error.schema, dict) else None
        if error.validator == "type" and fields and not text.endswith(")"):
            text += f" (its fields: {', '.join(fields)})"  # the shape, for `quota: 8`
        return text
    if custom is None:
        return error.message.replace(repr(error.instance), _show(error.instance), 1)
    if _is_container(error.instance) and not custom.startswith("is "):
        return custom  # says what the field takes; the position shows the value
    return f"{_show(error.instance)} {custom}"


_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "null": "null",
}


# `quota: gpu:8` is the string "gpu:8": YAML needs a space after a key's colon
_NO_SPACE_AFTER_COLON = re.compile(r"^[A-Za-z_][-\w.]*:[^\s/]")


def _type_message(value: Any, types: str | list[str]) -> str:
    names = [types] if isinstance(types, str) else types
    wanted = " or ".join(_TYPE_WORDS[name] for name in names)
    hint = ""
    if "object" in names and isinstance(value, str) and _NO_SPACE_AFTER_COLON.match(value):
        hint = " (a space missing after ':'?)"
    return f"{_show(value)} is not {wanted}{hint}"


def _enum_message(value: Any, options: list[Any]) -> str:
    return f"{_show(value)} is not one of {', '.join(_show(option) for option in options)}"


def _unique_message(value: Any, unique: bool) -> str:
    seen: list[Any] = []
    for item in value:
        if any(_same(item, other) for other in seen):
            return f"lists {_show(item)} more than once"
        seen.append(item)
    return "has repeated items"


# jsonschema's messages that would print a list or mapping as Python does
_OWN_MESSAGES: dict[str, Callable[[Any, Any], str]] = {
    "type": _type_message,
    "enum": _enum_message,
    "uniqueItems": _unique_message,
}


_FLOAT_PROBLEMS = {
    "non-finite": "is not a finite number",
    "decimal point": "is not an integer (write it without the decimal point)",
}


def _float_problem(value: float, types: str | list[str]) -> str | None:
    """Why a float failed a `type`: `.inf`/`.nan`, or `2.0` where an integer is expected
    (None: jsonschema's message says it, as for 1.5)."""
    names = [types] if isinstance(types, str) else types
    if not math.isfinite(value):
        return "non-finite" if "number" in names or "integer" in names else None
    return "decimal point" if "integer" in names and value.is_integer() else None


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list)


def _show(value: Any) -> str:
    """A value as short as a message needs, YAML's spelling for true/false/null; a list or
    mapping by what it is (its Python repr would be noise: the position shows it)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' * (len(value) != 1)}" if value else "an empty list"
    if isinstance(value, dict):
        return (
            f"a mapping of {len(value)} key{'s' * (len(value) != 1)}"
            if value
            else "an empty mapping"
        )
    return _SHORT.repr(value)


def _dotted(path: Path_) -> str:
    """`spec.ports[0].name`; keys that are not plain words in brackets."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f'["{part}"]'
    return text


# The quick check: jsonschema spends ~0.3 ms a document (a validator object per keyword and
# value); repos hold thousands of workloads. So each schema is also compiled to plain
# predicates over the keywords our schemas use. It may reject a document jsonschema accepts
# (then jsonschema decides, and finds nothing) but never accepts one jsonschema rejects;
# hence `not` is compiled only in its `not: {}` form, where it is exact.

Check = Callable[[Any], bool]

# Keywords that only annotate (editors show them); they never make a document invalid.
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$defs",
        "title",
        "description",
        "default",
        "deprecated",
        "examples",
        "errorMessage",
        "patternErrorMessage",
    }
)


def _compile(schema: dict | bool, root: dict) -> Check:
    """A predicate equivalent to (or stricter than) validating against `schema`."""
    if isinstance(schema, bool):
        return lambda v: schema
    unknown = set(schema) - _ANNOTATIONS - set(_KEYWORDS)
    if unknown:
        raise ValueError(f"the quick schema check does not know {sorted(unknown)}")
    checks = [_KEYWORDS[k](v, schema, root) for k, v in schema.items() if k in _KEYWORDS]
    return _all(checks)


# These predicates run for every value of every document, so they avoid `all(<generator>)`,
# which costs a generator per call: `map` over C callables, chained closures, or a loop.


def _all(checks: list[Check]) -> Check:
    if len(checks) < 2:  # the usual case: no extra layer of calls
        return checks[0] if checks else lambda v: True
    first, then = checks[0], _all(checks[1:])
    return lambda v: first(v) and then(v)


def _any(checks: list[Check]) -> Check:
    if len(checks) < 2:
        return checks[0] if checks else lambda v: False
    first, otherwise = checks[0], _any(checks[1:])
    return lambda v: first(v) or otherwise(v)


def _is_number(value: Any) -> bool:
    """A JSON number: an int, or a finite float (not `.inf`, not `.nan`)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "number": _is_number,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
# The JSON types that are one Python type each: tested inline by `_on`.
_PYTHON_TYPES: dict[str, type] = {"object": dict, "array": list, "string": str, "boolean": bool}


def _on(type_name: str, test: Check) -> Check:
    """Most keywords constrain only values of the type they are about."""
    if (python_type := _PYTHON_TYPES.get(type_name)) is not None:
        return lambda v: not isinstance(v, python_type) or test(v)
    applies = _TYPES[type_name]
    return lambda v: not applies(v) or test(v)


def _same(a: Any, b: Any) -> bool:
    """Equal and of one type: Python's `True == 1` must not pass for JSON Schema."""
    return type(a) is type(b) and a == b


def _ref(ref: str, schema: dict, root: dict) -> Check:
    if not ref.startswith("#/$defs/"):
        raise ValueError(f"the quick schema check resolves only local $defs, not {ref!r}")
    return _compile(root["$defs"][ref.removeprefix("#/$defs/")], root)


def _type(names: str | list[str], schema: dict, root: dict) -> Check:
    return _any([_TYPES[name] for name in ([names] if isinstance(names, str) else names)])


def _properties(props: dict, schema: dict, root: dict) -> Check:
    checks = {name: _compile(sub, root) for name, sub in props.items()}

    def properties(v: dict) -> bool:
        for key, item in v.items():  # the value's keys, fewer than the schema's
            check = checks.get(key)
            if check is not None and not check(item):
                return False
        return True

    return _on("object", properties)


def _additional(sub: dict | bool, schema: dict, root: dict) -> Check:
    if "patternProperties" in schema:
        raise ValueError("the quick schema check does not know patternProperties")
    known, check = frozenset(schema.get("properties", ())), _compile(sub, root)
    if sub is False:  # the usual case: only the known keys
        return _on("object", known.issuperset)

    def additional(v: dict) -> bool:
        for key, item in v.items():  # noqa: SIM110 - see _all
            if key not in known and not check(item):
                return False
        return True

    return _on("object", additional)


def _dependent(deps: dict, schema: dict, root: dict) -> Check:
    checks = {name: _compile(sub, root) for name, sub in deps.items()}

    def dependent(v: dict) -> bool:
        for name, check in checks.items():  # noqa: SIM110 - see _all
            if name in v and not check(v):
                return False
        return True

    return _on("object", dependent)


def _required(names: list[str], schema: dict, root: dict) -> Check:
    return _on("object", lambda v: all(map(v.__contains__, names)))


def _property_names(sub: dict, schema: dict, root: dict) -> Check:
    check = _compile(sub, root)
    return _on("object", lambda v: all(map(check, v)))


def _items(sub: dict, schema: dict, root: dict) -> Check:
    check = _compile(sub, root)
    return _on("array", lambda v: all(map(check, v)))


def _unique(flag: bool, schema: dict, root: dict) -> Check:
    def unique(v: list) -> bool:
        return all(isinstance(x, str) for x in v) and len(set(v)) == len(v)

    return _on("array", unique) if flag else lambda v: True


def _all_of(subs: list, schema: dict, root: dict) -> Check:
    return _all([_compile(sub, root) for sub in subs])


def _any_of(subs: list, schema: dict, root: dict) -> Check:
    return _any([_compile(sub, root) for sub in subs])


def _not(sub: dict | bool, schema: dict, root: dict) -> Check:
    if sub not in ({}, True):  # elsewhere a stricter inner check would make `not` laxer
        raise ValueError("the quick schema check knows `not` only as `not: {}`")
    return lambda v: False


def _pattern(pattern: str, schema: dict, root: dict) -> Check:
    search = schema_regex(pattern).search
    return _on("string", lambda v: search(v) is not None)


def _enum(options: list, schema: dict, root: dict) -> Check:
    def enum(v: Any) -> bool:
        for option in options:  # noqa: SIM110 - see _all
            if _same(v, option):
                return True
        return False

    return enum


_KEYWORDS: dict[str, Callable[[Any, dict, dict], Check]] = {
    "$ref": _ref,
    "type": _type,
    "properties": _properties,
    "additionalProperties": _additional,
    "dependentSchemas": _dependent,
    "required": _required,
    "propertyNames": _property_names,
    "items": _items,
    "uniqueItems": _unique,
    "allOf": _all_of,
    "anyOf": _any_of,
    "not": _not,
    "pattern": _pattern,
    "enum": _enum,
    "const": lambda const, s, r: lambda v: _same(v, const),
    "minLength": lambda n, s, r: _on("string", lambda v: len(v) >= n),
    "maxLength": lambda n, s, r: _on("string", lambda v: len(v) <= n),
    "minimum": lambda n, s, r: _on("number", lambda v: v >= n),
    "maximum": lambda n, s, r: _on("number", lambda v: v <= n),
    "quantityMaximum": lambda n, s, r: lambda v: _quantity_at_most(v, n),
    "exclusiveMinimum": lambda n, s, r: _on("number", lambda v: v > n),
}
