"""The example cluster repos are clean and render to objects a real cluster accepts.

Built-in kinds are checked against the official OpenAPI schema of the example's Kubernetes
version (kubernetes-validate, strict: unknown fields fail); our custom resources against the
openAPIV3Schema of the CRD rendered with them, and the CRD schemas against the rules that
make a schema structural, since no API server runs in these tests.
"""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from jsonschema import Draft4Validator

from gitops_sched.compiler import render_repo
from gitops_sched.compiler.output import write_directory
from gitops_sched.config.model import Repo
from gitops_sched.validate import check_repo

CLUSTERS = Path(__file__).resolve().parent.parent / "examples" / "clusters"
EXAMPLES = sorted(p.name for p in CLUSTERS.iterdir() if p.is_dir() and p.name != "broken")
OUR_GROUP = "gitops-sched.io"
# Keywords a structural schema may not use (or that Kubernetes rejects in a CRD).
NOT_STRUCTURAL = {
    "$ref",
    "$defs",
    "$schema",
    "$id",
    "const",
    "default",
    "dependentSchemas",
    "propertyNames",
    "patternProperties",
    "if",
    "then",
    "else",
    "title",
    "examples",
}


@cache
def load(example: str) -> tuple[Repo, list[dict[str, Any]]]:
    repo, diagnostics = check_repo(CLUSTERS / example)
    assert repo is not None, [d.text() for d in diagnostics.sorted()]
    return repo, render_repo(repo)


def crd_schemas(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        o["spec"]["names"]["kind"]: o["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for o in objects
        if o["kind"] == "CustomResourceDefinition"
    }


def test_there_are_examples() -> None:
    assert {"netapp-dgx", "oci-a100"} <= set(EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_validates_without_diagnostics(example: str) -> None:
    _, diagnostics = check_repo(CLUSTERS / example)
    assert [d.text() for d in diagnostics.sorted()] == []


@pytest.mark.parametrize("example", EXAMPLES)
def test_builtin_objects_match_the_kubernetes_openapi_schema(example: str) -> None:
    repo, objects = load(example)
    builtin = [o for o in objects if not o["apiVersion"].startswith(f"{OUR_GROUP}/")]
    assert builtin
    for obj in builtin:
        kubernetes_validate.validate(obj, repo.cluster.kubernetes_version, strict=True)


@pytest.mark.parametrize("example", EXAMPLES)
def test_custom_resources_match_their_crd_schema(example: str) -> None:
    _, objects = load(example)
    schemas = crd_schemas(objects)
    custom = [o for o in objects if o["apiVersion"].startswith(f"{OUR_GROUP}/")]
    assert {o["kind"] for o in custom} == set(schemas)  # every kind is used
    for obj in custom:
        errors = [e.message for e in Draft4Validator(schemas[obj["kind"]]).iter_errors(obj)]
        assert errors == [], (obj["kind"], obj["metadata"]["name"])


def structural_problems(node: dict[str, Any], path: str, in_junctor: bool = False) -> list[str]:
    problems = [f"{path}: {key}" for key in NOT_STRUCTURAL & set(node)]
    if node.get("additionalProperties") is False or node.get("uniqueItems") is True:
        problems.append(f"{path}: additionalProperties false or uniqueItems true")
    untyped = not (
        node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    )
    if in_junctor:
        problems += [f"{path}: {k} in a junctor" for k in ("type", "description") if k in node]
    elif untyped and "type" not in node:
        problems.append(f"{path}: no type")
    for name, sub in node.get("properties", {}).items():
        problems += structural_problems(sub, f"{path}.{name}", in_junctor)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            problems += structural_problems(node[key], f"{path}.{key}", in_junctor)
    for key in ("allOf", "anyOf", "oneOf"):
        for i, branch in enumerate(node.get(key, [])):
            problems += structural_problems(branch, f"{path}.{key}[{i}]", in_junctor=True)
    return problems


@pytest.mark.parametrize("example", EXAMPLES)
def test_crd_schemas_are_structural(example: str) -> None:
    _, objects = load(example)
    for kind, schema in crd_schemas(objects).items():
        assert structural_problems(schema, kind) == []


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("example", EXAMPLES)
def test_kustomize_builds_the_rendered_directory(example: str, tmp_path: Path) -> None:
    """kustomize reads YAML with Go's parser: every value must come back as rendered."""
    _, objects = load(example)
    write_directory(objects, tmp_path / "out")
    built = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def key(obj: dict[str, Any]) -> tuple[str, str, str]:
        meta = obj["metadata"]
        return obj["kind"], meta.get("namespace", ""), meta["name"]

    assert sorted(yaml.safe_load_all(built), key=key) == sorted(objects, key=key)
