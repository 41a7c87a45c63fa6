"""`reconciler/` deploys: its manifests are valid Kubernetes objects and kustomize builds them."""

from __future__ import annotations

from tests.deploy_manifests import (
    IMAGE,
    ROOT,
    assert_nothing_broad,
    kustomize,
    manifests,
    needs_kubectl,
    one,
    validate,
)

DEPLOY = ROOT / "reconciler"


def test_every_manifest_matches_the_kubernetes_openapi_schema() -> None:
    objects = manifests(DEPLOY)
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
    validate(objects)


def test_the_deployment_runs_two_replicas_with_probes_as_the_service_account() -> None:
    deployment = one(manifests(DEPLOY), "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["serviceAccountName"] == "gitops-sched-reconciler"


def test_rbac_grants_no_wildcards_and_no_escalation() -> None:
    assert_nothing_broad(manifests(DEPLOY))


@needs_kubectl
def test_kustomize_builds_the_deploy_folder() -> None:
    objects = kustomize(DEPLOY)
    assert len(objects) == len(manifests(DEPLOY))
    validate(objects)
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
