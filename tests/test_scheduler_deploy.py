"""`scheduler/` and `scheduler/agent/` deploy: valid Kubernetes objects that kustomize builds,
RBAC that grants what the scheduler and the node agent do and nothing more, the processes
started with flags the CLI knows, and a Grafana dashboard that charts the metrics the
scheduler exports."""

from __future__ import annotations

import json
import re

from gitops_sched.scheduler.loop import DEFAULT_NAMESPACE
from gitops_sched.scheduler.metrics import SchedulerMetrics
from gitops_sched.scheduler.reservations import SERVICE_ACCOUNT, reservation_pod
from tests.deploy_manifests import (
    IMAGE,
    ROOT,
    assert_nothing_broad,
    kustomize,
    manifests,
    needs_kubectl,
    one,
    parse_cli,
    validate,
)

SCHEDULER = ROOT / "scheduler"
AGENT = SCHEDULER / "agent"
DASHBOARD = SCHEDULER / "grafana-dashboard.json"
GPU_NODES = {"nvidia.com/gpu.present": "true"}


def grants(role: dict) -> set[tuple[str, str, str, str]]:
    """(API group, resource, verb, resource name or "") for every rule of a role."""
    return {
        (group, resource, verb, name)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames", [""])
    }


def core(resource: str, *verbs: str) -> set[tuple[str, str, str, str]]:
    return {("", resource, verb, "") for verb in verbs}


def container(workload: dict) -> dict:
    (only,) = workload["spec"]["template"]["spec"]["containers"]
    return only


def env(workload: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container(workload)["env"]}


# --- the scheduler ----------------------------------------------------------------------------


def test_the_scheduler_manifests_match_the_kubernetes_openapi_schema() -> None:
    objects = manifests(SCHEDULER)
    assert {o["kind"] for o in objects} == {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    }
    validate(objects)


def test_the_scheduler_runs_in_the_system_namespace_the_code_defaults_to() -> None:
    namespaces = {o["metadata"].get("namespace") for o in manifests(SCHEDULER)} - {None}
    assert namespaces == {DEFAULT_NAMESPACE}
    labels = one(manifests(SCHEDULER), "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_two_leader_elected_replicas_with_probes_on_the_metrics_port() -> None:
    objects = manifests(SCHEDULER)
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    scheduler = container(deployment)
    context = parse_cli(scheduler["args"])
    assert context.params["leader_elect"] is True
    port = int(context.params["listen"].rpartition(":")[2])
    (http,) = scheduler["ports"]
    assert http["containerPort"] == port
    assert scheduler["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": http["name"]}
    assert scheduler["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": http["name"]}
    fields = {
        name: e["valueFrom"]["fieldRef"]["fieldPath"]
        for name, e in env(deployment).items()
        if "valueFrom" in e
    }
    assert fields == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    assert scheduler["resources"]["requests"].keys() == {"cpu", "memory"}


def test_the_scheduler_runs_unprivileged_on_a_read_only_root() -> None:
    deployment = one(manifests(SCHEDULER), "Deployment")
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    security = container(deployment)["securityContext"]
    assert security == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def test_the_service_and_disruption_budget_select_the_scheduler_pods() -> None:
    objects = manifests(SCHEDULER)
    pods = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    service, budget = one(objects, "Service"), one(objects, "PodDisruptionBudget")
    assert service["spec"]["selector"].items() <= pods.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert budget["spec"]["selector"]["matchLabels"].items() <= pods.items()
    assert budget["spec"]["minAvailable"] == 1


def test_scheduler_rbac_grants_no_wildcards_and_no_escalation() -> None:
    """Which verbs it grants is derived from the API server's audit log of the scheduler's
    calls (tests/test_least_privilege.py); here: nothing broad, whatever it grants."""
    assert_nothing_broad(manifests(SCHEDULER))


def test_reservation_pods_may_only_annotate_pods_of_the_system_namespace() -> None:
    objects = manifests(SCHEDULER)
    assert one(objects, "ServiceAccount", SERVICE_ACCOUNT)
    role = one(objects, "Role", "gitops-sched-reservation")
    assert grants(role) == core("pods", "patch")
    binding = one(objects, "RoleBinding", "gitops-sched-reservation")
    assert binding["subjects"][0]["name"] == SERVICE_ACCOUNT
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_each_account_is_bound_to_its_own_roles() -> None:
    objects = manifests(SCHEDULER)
    account = one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        binding = one(objects, kind, "gitops-sched-scheduler")
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": DEFAULT_NAMESPACE}
        ]


def test_reservation_pods_meet_the_system_namespaces_restricted_pod_security() -> None:
    pod = reservation_pod("node-1", 0, DEFAULT_NAMESPACE, "gitops-sched", IMAGE)["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for reserve in pod["containers"]:
        assert reserve["securityContext"]["allowPrivilegeEscalation"] is False
        assert reserve["securityContext"]["capabilities"]["drop"] == ["ALL"]


@needs_kubectl
def test_kustomize_builds_the_scheduler_with_one_image_for_it_and_its_reservation_pods() -> None:
    objects = kustomize(SCHEDULER)
    assert len(objects) == len(manifests(SCHEDULER))
    validate(objects)
    deployment = one(objects, "Deployment")
    assert container(deployment)["image"] == IMAGE
    assert env(deployment)["GITOPS_SCHED_IMAGE"]["value"] == IMAGE
    assert {o["metadata"].get("namespace", DEFAULT_NAMESPACE) for o in objects} == {
        DEFAULT_NAMESPACE
    }


# --- the node agent ---------------------------------------------------------------------------


def test_the_agent_manifests_match_the_kubernetes_openapi_schema() -> None:
    objects = manifests(AGENT)
    assert {o["kind"] for o in objects} == {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "DaemonSet",
    }
    validate(objects)


def test_the_agent_runs_on_gpu_nodes_only_in_the_host_pid_namespace() -> None:
    daemonset = one(manifests(AGENT), "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == GPU_NODES
    assert pod["hostPID"] is True
    assert pod["runtimeClassName"] == "nvidia"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    node_name = env(daemonset)["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert node_name == "spec.nodeName"
    assert "nvidia.com/gpu" not in str(container(daemonset)["resources"])  # sees all GPUs
    agent = container(daemonset)
    assert "--listen=:8080" in agent["args"]
    assert agent["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert agent["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_the_agent_holds_cap_sys_admin_and_nothing_more() -> None:
    daemonset = one(manifests(AGENT), "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    security = container(daemonset)["securityContext"]
    assert "privileged" not in security
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    assert security["readOnlyRootFilesystem"] is True
    assert not {"hostNetwork", "hostIPC"} & pod.keys()
    assert all("hostPath" not in volume for volume in pod["volumes"])
    assert env(daemonset)["NVIDIA_MIG_CONFIG_DEVICES"]["value"] == "all"


def test_agent_rbac_is_nothing_broad_and_in_the_device_plugins_namespace() -> None:
    """Which verbs it grants is derived from the API server's audit log of the agent's
    calls (tests/test_least_privilege.py)."""
    objects = manifests(AGENT)
    assert_nothing_broad(objects)
    role = one(objects, "Role")
    # the device plugin's namespace is the one the agent restarts the plugin in
    args = parse_cli(container(one(objects, "DaemonSet"))["args"]).params
    assert role["metadata"]["namespace"] == args["device_plugin_namespace"]
    assert one(objects, "RoleBinding")["metadata"]["namespace"] == role["metadata"]["namespace"]


@needs_kubectl
def test_kustomize_builds_the_agent_keeping_the_device_plugin_namespace() -> None:
    objects = kustomize(AGENT)
    assert len(objects) == len(manifests(AGENT))
    validate(objects)
    assert container(one(objects, "DaemonSet"))["image"] == IMAGE
    assert one(objects, "Role")["metadata"]["namespace"] == "gpu-operator"


# --- the dashboard ----------------------------------------------------------------------------

METRIC = re.compile(r"gitops_sched_[a-z_]+")
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def exported() -> tuple[set[str], set[str]]:
    """The metric names the scheduler exports (counters with `_total`), and its histograms."""
    names, histograms = set(), set()
    for family in SchedulerMetrics().registry.collect():
        names.add(family.name + "_total" if family.type == "counter" else family.name)
        if family.type == "histogram":
            histograms.add(family.name)
    return names, histograms


def dashboard_metrics() -> set[str]:
    """Every metric name the dashboard's queries and variables use, histogram series folded."""
    _, histograms = exported()
    found = set()
    for name in METRIC.findall(DASHBOARD.read_text()):
        base = next((name.removesuffix(s) for s in HISTOGRAM_SERIES if name.endswith(s)), name)
        found.add(base if base in histograms else name)
    return found


def test_the_dashboard_charts_only_and_all_the_metrics_the_scheduler_exports() -> None:
    names, _ = exported()
    assert dashboard_metrics() == names


def test_the_dashboard_is_a_grafana_dashboard_on_a_prometheus_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 39
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert "gitops_sched_queue_allocated_gpus" in variables["project"]["definition"]
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert {p["datasource"]["uid"] for p in panels} == {"${DS_PROMETHEUS}"}
    assert all(t["expr"] for p in panels for t in p["targets"])
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
