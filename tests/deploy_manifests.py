"""Helpers for the deploy folders' tests (`reconciler/`, `scheduler/`, `scheduler/agent/`):
their objects, as listed and as kustomize builds them, checked against the official
Kubernetes schema, and their RBAC rules."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import click
import kubernetes_validate
import pytest
import yaml

from gitops_sched.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent
KUBERNETES_VERSION = "1.32"
IMAGE = "ghcr.io/example/gitops-sched:0.1.0"  # what the kustomizations make `gitops-sched`

needs_kubectl = pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl is not installed"
)


def manifests(folder: Path) -> list[dict]:
    """The objects of the files a kustomization lists, as written."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    return [
        obj
        for name in kustomization["resources"]
        for obj in yaml.safe_load_all((folder / name).read_text())
        if obj
    ]


def kustomize(folder: Path) -> list[dict]:
    """The objects `kubectl kustomize` builds from the folder."""
    built = subprocess.run(
        ["kubectl", "kustomize", str(folder)], capture_output=True, text=True, check=True
    ).stdout
    return [obj for obj in yaml.safe_load_all(built) if obj]


def validate(objects: list[dict]) -> None:
    """Each object against the official OpenAPI schema, unknown fields refused."""
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def one(objects: list[dict], kind: str, name: str | None = None) -> dict:
    (found,) = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    return found


# the reconciler's namespace check (reconciler/rbac.yaml): `list` of every kind, metadata
# only, before it deletes a namespace; the one wildcard, in a role of its own
NAMESPACE_CHECK = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}


def assert_nothing_broad(objects: list[dict]) -> None:
    """No wildcard (but the reconciler's namespace check, `list` alone, in a role of its
    own), no way to grant or assume more, no secrets."""
    for role in (o for o in objects if o["kind"] in ("ClusterRole", "Role")):
        if role["metadata"]["name"] == "gitops-sched-reconciler-namespace-check":
            assert role["kind"] == "ClusterRole" and role["rules"] == [NAMESPACE_CHECK], role
            continue
        for rule in role["rules"]:
            _assert_narrow(rule)


def _assert_narrow(rule: dict) -> None:
    for field in ("verbs", "resources", "apiGroups"):
        assert "*" not in rule.get(field, []), rule
    assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
    assert "secrets" not in rule["resources"], rule


def parse_cli(args: list[str]) -> click.Context:
    """The context the CLI would run `args` with (a usage error raises)."""
    command = cli.get_command(click.Context(cli), args[0])
    assert command is not None, args[0]
    return command.make_context(args[0], list(args[1:]))
