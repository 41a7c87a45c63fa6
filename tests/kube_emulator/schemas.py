"""Built-in kinds checked against the official OpenAPI schema (kubernetes-validate's strict
files), as `kubernetes_validate.validate` does, with each kind's validator built once: the
library parses its multi-megabyte definitions file on every call, which made every write
to the emulator cost tens of milliseconds."""

from __future__ import annotations

import functools
import re
from typing import Any

from jsonschema.exceptions import best_match
from jsonschema.validators import Draft202012Validator
from kubernetes_validate import utils
from referencing import Registry, Resource


@functools.cache
def _schema_dir(version: str) -> str:
    wanted = utils.major_minor(version)
    known = [v for v in utils.all_versions() if utils.major_minor(v) <= wanted]
    if wanted > utils.latest_version() or not known:
        raise utils.VersionNotSupportedError(version=wanted)
    return f"v{known[-1]}-local-strict"


@functools.cache
def _definitions(schema_dir: str, version: str) -> Resource:
    path = f"kubernetes-json-schema/{schema_dir}/_definitions.json"
    return Resource.from_contents(utils.schema_contents(path, version))


@functools.cache
def _validator(api_version: str, kind: str, version: str) -> Draft202012Validator:
    schema_dir = _schema_dir(version)
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json"
    try:
        schema = utils.schema_contents(path, version)
    except FileNotFoundError as exc:
        raise utils.SchemaNotFoundError(
            version=utils.major_minor(version), kind=kind, api_version=api_version
        ) from exc
    registry = _definitions(schema_dir, version) @ (Resource.from_contents(schema) @ Registry())
    return Draft202012Validator(schema, registry=registry)


def schema_causes(obj: dict[str, Any], version: str) -> list[tuple[str, str]]:
    """The first schema violation of `obj` (field path, message), as the library reports it."""
    error = best_match(_validator(obj["apiVersion"], obj["kind"], version).iter_errors(obj))
    if error is None:
        return []
    return [(".".join(str(p) for p in error.absolute_path), error.message)]
