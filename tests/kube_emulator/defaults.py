"""What the API server adds to and normalises in the built-in kinds gitops-sched renders.

Each function changes the object in place the way the real defaulting and conversion code
does (`pkg/apis/*/v1/defaults.go`), for the fields those kinds use: quantities become
canonical strings, and the fields a real server fills in appear, so a client that diffs
rendered objects against live ones meets the same differences it would in a cluster.
Custom resources are pruned to their schema (unknown fields dropped), as the server does.
"""

from __future__ import annotations

import ipaddress
import itertools
from typing import Any

from tests.kube_emulator.quantity import canonical

_cluster_ips = (str(ipaddress.IPv4Address("10.96.0.10") + i) for i in itertools.count())


def _quantities(values: dict[str, Any] | None) -> None:
    for name, value in (values or {}).items():
        values[name] = canonical(value)


def _container(container: dict[str, Any]) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    image = container.get("image", "")
    tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
    latest = image.endswith(":latest") or not tagged
    container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    for port in container.get("ports", []):
        port.setdefault("protocol", "TCP")
    resources = container.setdefault("resources", {})
    _quantities(resources.get("limits"))
    _quantities(resources.get("requests"))
    for env in container.get("env", []):
        source = (env.get("valueFrom") or {}).get("fieldRef")
        if source is not None:
            source.setdefault("apiVersion", "v1")


def pod_spec(spec: dict[str, Any], restart_policy: str = "Always") -> None:
    spec.setdefault("restartPolicy", restart_policy)
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        _container(container)
    for volume in spec.get("volumes", []):
        if "emptyDir" in volume and "sizeLimit" in volume["emptyDir"]:
            volume["emptyDir"]["sizeLimit"] = canonical(volume["emptyDir"]["sizeLimit"])
        if "configMap" in volume:
            volume["configMap"].setdefault("defaultMode", 420)
        if "secret" in volume:
            volume["secret"].setdefault("defaultMode", 420)


def _template(spec: dict[str, Any], restart_policy: str = "Always") -> None:
    template = spec.setdefault("template", {})
    template.setdefault("metadata", {})
    pod_spec(template.setdefault("spec", {}), restart_policy)


def _namespace(obj: dict[str, Any]) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    labels = obj["metadata"].setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    obj.setdefault("status", {}).setdefault("phase", "Active")


def _service(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") != "None":
        spec.setdefault("clusterIP", next(_cluster_ips))
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports", []):
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    obj.setdefault("status", {}).setdefault("loadBalancer", {})


def _job(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", spec["parallelism"])
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    policy = "Failed" if "podFailurePolicy" in spec else "TerminatingOrFailed"
    spec.setdefault("podReplacementPolicy", policy)
    for rule in (spec.get("podFailurePolicy") or {}).get("rules", []):
        for condition in rule.get("onPodConditions", []):
            condition.setdefault("status", "True")
    uid = obj["metadata"]["uid"]
    name = obj["metadata"]["name"]
    generated = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    _template(spec, restart_policy="Never")
    labels = spec["template"]["metadata"].setdefault("labels", {})
    for key, value in generated.items():
        labels.setdefault(key, value)
    obj.setdefault("status", {})


def _deployment(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    _template(spec)
    obj.setdefault("status", {})


def _network_policy(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if "policyTypes" not in spec:
        spec["policyTypes"] = ["Ingress", *(["Egress"] if "egress" in spec else [])]
    for rule in spec.get("ingress", []) + spec.get("egress", []):
        for port in rule.get("ports", []):
            port.setdefault("protocol", "TCP")


def _priority_class(obj: dict[str, Any]) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _binding(obj: dict[str, Any]) -> None:
    for subject in obj.get("subjects", []):
        if subject.get("kind") in ("User", "Group"):
            subject.setdefault("apiGroup", "rbac.authorization.k8s.io")


def _crd(obj: dict[str, Any]) -> None:
    spec = obj["spec"]
    names = spec["names"]
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})
    obj.setdefault("status", {}).setdefault("conditions", [])
    obj["status"].setdefault(
        "storedVersions", [v["name"] for v in spec["versions"] if v["storage"]]
    )


def _pvc(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("volumeMode", "Filesystem")
    _quantities((spec.get("resources") or {}).get("requests"))
    obj.setdefault("status", {}).setdefault("phase", "Pending")


def _pod(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    pod_spec(spec)
    spec.setdefault("enableServiceLinks", True)
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        resources = container["resources"]
        for name, value in (resources.get("limits") or {}).items():
            resources.setdefault("requests", {}).setdefault(name, value)
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(spec))


def _qos_class(spec: dict[str, Any]) -> str:
    """Guaranteed when every container limits CPU and memory at its requests, BestEffort
    when none asks for either, Burstable otherwise (the server sets it at creation)."""
    containers = spec.get("containers", []) + spec.get("initContainers", [])
    compute = ("cpu", "memory")
    asked = [
        {k: v for k, v in (c["resources"].get(part) or {}).items() if k in compute}
        for c in containers
        for part in ("requests", "limits")
    ]
    if not any(asked):
        return "BestEffort"
    guaranteed = all(
        set(c["resources"].get("limits") or {}) >= set(compute)
        and all(
            (c["resources"].get("requests") or {}).get(k) == c["resources"]["limits"][k]
            for k in compute
        )
        for c in containers
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _node(obj: dict[str, Any]) -> None:
    status = obj.setdefault("status", {})
    _quantities(status.get("capacity"))
    _quantities(status.get("allocatable"))


DEFAULTERS = {
    "Namespace": _namespace,
    "Service": _service,
    "Job": _job,
    "Deployment": _deployment,
    "NetworkPolicy": _network_policy,
    "PriorityClass": _priority_class,
    "RoleBinding": _binding,
    "ClusterRoleBinding": _binding,
    "CustomResourceDefinition": _crd,
    "PersistentVolumeClaim": _pvc,
    "Pod": _pod,
    "Node": _node,
}


def apply_defaults(obj: dict[str, Any]) -> None:
    defaulter = DEFAULTERS.get(obj["kind"])
    if defaulter is not None:
        defaulter(obj)


def prune_unknown(value: Any, schema: dict[str, Any] | None) -> Any:
    """`value` without the fields `schema` does not declare (structural pruning)."""
    if schema is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if properties is None and isinstance(extra, dict):
            return {k: prune_unknown(v, extra) for k, v in value.items()}
        if properties is None:
            return value if schema.get("type") != "object" else {}
        return {k: prune_unknown(v, properties[k]) for k, v in value.items() if k in properties}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune_unknown(v, schema["items"]) for v in value]
    return value
