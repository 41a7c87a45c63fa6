"""The resource types the emulator serves: the built-in kinds gitops-sched renders or reads,
and custom resources added when their CRD becomes Established."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False
    generation: bool = False  # metadata.generation counts spec changes
    actions: tuple[str, ...] = ()  # create-only subresources (a pod's binding, eviction)
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one store per group and plural, whatever the version."""
        return self.group, self.plural

    def discovery(self) -> list[dict[str, Any]]:
        entry = {
            "name": self.plural,
            "singularName": self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ALL_VERBS,
        }
        entries = [entry]
        if self.status_subresource:
            entries.append(
                {
                    "name": f"{self.plural}/status",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        for action in self.actions:
            group, version, kind = ACTION_KINDS[action]
            sub = {
                "name": f"{self.plural}/{action}",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": kind,
                "verbs": ["create"],
            }
            if group != self.group:
                sub.update(group=group, version=version)
            entries.append(sub)
        return entries


ACTION_KINDS = {"binding": ("", "v1", "Binding"), "eviction": ("policy", "v1", "Eviction")}


def _t(group: str, version: str, plural: str, kind: str, namespaced: bool, **kw: Any):
    return ResourceType(group, version, plural, kind, namespaced, **kw)


BUILTIN_TYPES = [
    _t("", "v1", "namespaces", "Namespace", False, status_subresource=True),
    _t("", "v1", "configmaps", "ConfigMap", True),
    _t("", "v1", "secrets", "Secret", True),
    _t("", "v1", "services", "Service", True, status_subresource=True),
    _t("", "v1", "serviceaccounts", "ServiceAccount", True),
    _t("", "v1", "events", "Event", True),
    _t("", "v1", "pods", "Pod", True, status_subresource=True, actions=("binding", "eviction")),
    _t("", "v1", "nodes", "Node", False, status_subresource=True),
    _t("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, status_subresource=True),
    _t("apps", "v1", "deployments", "Deployment", True, status_subresource=True, generation=True),
    _t("apps", "v1", "statefulsets", "StatefulSet", True, status_subresource=True, generation=True),
    _t("batch", "v1", "jobs", "Job", True, status_subresource=True, generation=True),
    _t("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, generation=True),
    _t("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    _t("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    _t("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _t("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _t("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    _t("coordination.k8s.io", "v1", "leases", "Lease", True),
    _t("events.k8s.io", "v1", "events", "Event", True),
    _t(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        status_subresource=True,
        generation=True,
    ),
    _t(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        status_subresource=True,
        generation=True,
    ),
]


def custom_types(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CRD serves (its served versions)."""
    spec = crd["spec"]
    names = spec["names"]
    return [
        ResourceType(
            spec["group"],
            version["name"],
            names["plural"],
            names["kind"],
            spec["scope"] == "Namespaced",
            status_subresource="status" in (version.get("subresources") or {}),
            generation=True,
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
        )
        for version in spec["versions"]
        if version.get("served", True)
    ]
