"""KAI's and Kueue's own CRDs, fetched from their Go modules by `hack/target-crds.sh` into a
cache outside the repository, and validators built from their openAPIV3Schema.

A validator is as strict as kube-apiserver's field validation (`Strict`, kubectl's default):
an object schema that lists its properties and does not preserve unknown fields rejects any
other field, where the apiserver would otherwise prune it silently.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from testkit import fast_yaml

SCRIPT = Path(__file__).resolve().parents[1] / "hack" / "target-crds.sh"
# what the Go command says when the module proxy cannot be reached or will not serve the module
PROXY_DOWN = ("proxy.golang.org", "dial tcp", "no such host", "i/o timeout", "not available")


class Unavailable(RuntimeError):
    """The module proxy did not give the CRDs (offline, or the module is not served)."""


@functools.cache
def crd_folder(target: str) -> Path:
    done = subprocess.run(["bash", str(SCRIPT), target], capture_output=True, text=True)
    if done.returncode != 0:
        if any(sign in done.stderr for sign in PROXY_DOWN):
            raise Unavailable(done.stderr.strip().splitlines()[-1])
        raise AssertionError(f"{SCRIPT} {target} failed ({done.returncode}):\n{done.stderr}")
    return Path(done.stdout.strip().splitlines()[-1])


def crds_or_skip(target: str) -> list[dict[str, Any]]:
    """The target's CRDs; the test is skipped, saying why, when the module proxy is down."""
    return _load(target)


@functools.cache
def _load(target: str) -> list[dict[str, Any]]:
    try:
        folder = crd_folder(target)
    except Unavailable as exc:
        pytest.skip(f"{target}'s CRDs cannot be fetched from the Go module proxy: {exc}")
    return [fast_yaml.load(p.read_text()) for p in sorted(folder.glob("*.yaml"))]  # 2 MB


@functools.cache
def _validators(target: str) -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    validators = {}
    for crd in crds_or_skip(target):
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = _strict(version["schema"]["openAPIV3Schema"])
            validators[(f"{group}/{version['name']}", kind)] = jsonschema.Draft7Validator(schema)
    return validators


def kinds(target: str) -> set[tuple[str, str]]:
    """(apiVersion, kind) of every custom resource the target's CRDs define."""
    return set(_validators(target))


def schema_errors(target: str, obj: dict[str, Any]) -> list[str]:
    """Where `obj` breaks its CRD's schema; [] when valid. The kind must be one of `kinds`."""
    validator = _validators(target)[(obj["apiVersion"], obj["kind"])]
    where = f"{obj['kind']}/{obj['metadata']['name']}"
    return [
        f"{where}: {'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]


def _strict(schema: Any) -> Any:
    """The schema with unknown fields refused wherever the apiserver would prune them."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {k: (v if k == "properties" else _strict(v)) for k, v in schema.items()}
    if "properties" in schema:
        strict["properties"] = {k: _strict(v) for k, v in schema["properties"].items()}
        if not schema.get("x-kubernetes-preserve-unknown-fields"):
            strict.setdefault("additionalProperties", False)
    return strict
