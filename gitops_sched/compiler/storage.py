"""The PersistentVolumeClaims the repo declares (`volumes[].claim`), in the projects' namespaces.

A claim is named after its volume, so every workload of a project that declares a volume of
that name mounts the same claim; the checks make sure they agree on its spec, and the first
declaration (in file order) is the one rendered. A volume with `claimName` mounts a claim the
user manages: nothing is rendered for it.

Removing a claim from the repo must not delete its data, so claims carry the annotations
with which Argo CD and Flux leave an object in place when it leaves the rendered output.
"""

from __future__ import annotations

from typing import Any

from gitops_sched.compiler.meta import object_meta
from gitops_sched.config.model import Cluster, Repo, VolumeClaim
from gitops_sched.contract.labels import PROJECT_LABEL

NO_PRUNE = {
    "argocd.argoproj.io/sync-options": "Prune=false",
    "kustomize.toolkit.fluxcd.io/prune": "disabled",
}


def render_claims(repo: Repo) -> list[dict[str, Any]]:
    """One PersistentVolumeClaim per project and claimed volume name."""
    cluster = repo.required_cluster
    rendered: dict[tuple[str, str], dict[str, Any]] = {}
    for workload in repo.workloads:
        for _, claim in repo.volume_claims(workload):
            key = (workload.project, claim.name)
            if key not in rendered:
                rendered[key] = persistent_volume_claim(cluster, workload.project, claim)
    return list(rendered.values())


def persistent_volume_claim(cluster: Cluster, project: str, claim: VolumeClaim) -> dict[str, Any]:
    meta = object_meta(claim.name, cluster.project_namespace(project), {PROJECT_LABEL: project})
    meta["annotations"] = dict(NO_PRUNE)
    spec: dict[str, Any] = {
        "accessModes": list(claim.access_modes),
        "resources": {"requests": {"storage": claim.size}},
    }
    if claim.storage_class is not None:
        spec["storageClassName"] = claim.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
