"""`reconciler/` deploys: its manifests are valid Kubernetes objects and kustomize builds them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parent.parent / "reconciler"
KUBERNETES_VERSION = "1.32"


def manifests() -> list[dict]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    return [
        obj
        for name in kustomization["resources"]
        for obj in yaml.safe_load_all((DEPLOY / name).read_text())
        if obj
    ]


def test_every_manifest_matches_the_kubernetes_openapi_schema() -> None:
    objects = manifests()
    assert {o["kind"] for o in objects} >= {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
    }
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_deployment_runs_two_replicas_with_probes_as_the_service_account() -> None:
    deployment = next(o for o in manifests() if o["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["serviceAccountName"] == "gitops-sched-reconciler"


def test_rbac_grants_no_wildcards_and_no_escalation() -> None:
    rules = [r for o in manifests() if o["kind"] in ("ClusterRole", "Role") for r in o["rules"]]
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
    resources = {r for rule in rules for r in rule["resources"]}
    assert "secrets" not in resources


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_builds_the_deploy_folder() -> None:
    built = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY)], capture_output=True, text=True, check=True
    ).stdout
    objects = list(yaml.safe_load_all(built))
    assert len(objects) == len(manifests())
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "ghcr.io/example/gitops-sched:0.1.0"
