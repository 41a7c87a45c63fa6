"""What `render` produces from a config repo: the objects that matter and how they are written."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from gitops_sched.cli import main
from gitops_sched.compiler import render_repo
from gitops_sched.compiler.output import HEADER, dump_object, write_directory, write_stream
from gitops_sched.contract.pods import FRACTION_POLICY
from gitops_sched.validate import check_repo
from testkit.config_builders import doc, node_group

READ_VERBS = {"get", "list", "watch"}
# the node groups' selectors: labels a cloud's node pool and GPU Feature Discovery put
A100_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "node.kubernetes.io/instance-type": "BM.GPU.A100-v2.8",
}
A10_LABELS = {"nvidia.com/gpu.product": "NVIDIA-A10"}


BASE = [
    doc("Cluster", "lab", namespacePrefix="team-", schedulerName="gitops-sched"),
    node_group(
        "a100",
        nodeSelector={"matchLabels": A100_LABELS},
        nodeCount=2,
        gpusPerNode=8,
        gpu={"model": "A100-SXM4-80GB", "memory": "80Gi"},
        mig={"enabled": True, "strategy": "dynamic"},
    ),
    node_group(
        "a10",
        nodeSelector={"matchLabels": A10_LABELS},
        nodeCount=1,
        gpusPerNode=4,
        gpu={"model": "A10", "memory": "24Gi"},
    ),
    doc("Department", "research", quota={"gpu": 20}, admins=["boss@example.com"]),
    doc(
        "Project",
        "vision",
        department="research",
        quota={"gpu": 8},
        interactiveTimeLimit="8h",
        nodeGroups={"allowed": ["a100", "a10"], "byType": {"interactive": ["a10"]}},
        members={"users": ["ann@example.com"], "groups": ["vision-team"]},
    ),
    doc("Project", "nlp", department="research", quota={"gpu": 4}),
    doc(
        "Template",
        "base",
        default=True,
        image="nvcr.io/nvidia/pytorch:24.05-py3",
        env={"RUN": "{{ project.name }}-{{ workload.name }}", "A": "1"},
        resources={"cpu": "4", "memory": "16Gi"},
    ),
    doc(
        "Template",
        "notebook",
        ports=[{"name": "jupyter", "containerPort": 8888}],
        volumes=[{"name": "home", "claimName": "home-{{ workload.name }}", "mountPath": "/home"}],
        sharedMemory="2Gi",
    ),
]


def workload(name: str, project: str = "vision", **spec: Any) -> dict[str, Any]:
    return doc("Workload", name, project=project, **spec)


def render(tmp_path: Path, *documents: dict[str, Any]) -> list[dict[str, Any]]:
    (tmp_path / "repo.yaml").write_text(yaml.safe_dump_all([*BASE, *documents], sort_keys=False))
    repo, diagnostics = check_repo(tmp_path)
    assert repo is not None, [d.text() for d in diagnostics.sorted()]
    return render_repo(repo)


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def container(controller: dict[str, Any]) -> dict[str, Any]:
    (only,) = controller["spec"]["template"]["spec"]["containers"]
    return only


def pod_annotations(controller: dict[str, Any]) -> dict[str, str]:
    return controller["spec"]["template"]["metadata"]["annotations"]


def test_train_job_is_a_gang_for_the_gitops_scheduler_with_whole_gpus(tmp_path: Path) -> None:
    objects = render(tmp_path, workload("ddp", replicas=3, minAvailable=2, gpu=2))
    job = find(objects, "Job", "ddp")
    pod = job["spec"]["template"]["spec"]
    assert job["metadata"]["namespace"] == "team-vision"
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 3
    assert pod["schedulerName"] == "gitops-sched"
    assert pod["priorityClassName"] == "gitops-sched-train"
    assert pod["restartPolicy"] == "Never"
    assert container(job)["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert pod_annotations(job) == {
        "gitops-sched.io/min-available": "2",
        "gitops-sched.io/replicas": "3",
        "gitops-sched.io/preemptible": "true",
        "gitops-sched.io/priority": "50",
    }
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["gitops-sched.io/project"] == "vision"
    assert labels["gitops-sched.io/workload"] == "ddp"
    assert labels["gitops-sched.io/type"] == "train"
    assert "activeDeadlineSeconds" not in job["spec"]
    # its pods find each other: a headless Service, a subdomain and torchrun's variables
    service = find(objects, "Service", "ddp")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"gitops-sched.io/workload": "ddp"}
    assert pod["subdomain"] == "ddp"
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container(job)["env"]}
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "ddp-0.ddp"
    assert env["NNODES"] == "3" and env["MASTER_PORT"] == "29500"
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert env["NODE_RANK"] == {"fieldRef": {"fieldPath": index}}


def test_a_single_pod_train_job_has_no_headless_service(tmp_path: Path) -> None:
    objects = render(tmp_path, workload("solo", gpu=1))
    assert not any(o["kind"] == "Service" for o in objects)
    assert "subdomain" not in find(objects, "Job", "solo")["spec"]["template"]["spec"]


def test_interactive_job_stops_at_the_project_limit_and_serves_its_ports(tmp_path: Path) -> None:
    objects = render(tmp_path, workload("nb", type="interactive", template="notebook", gpu=0.5))
    job = find(objects, "Job", "nb")
    assert job["spec"]["activeDeadlineSeconds"] == 8 * 3600
    assert job["spec"]["template"]["spec"]["priorityClassName"] == "gitops-sched-interactive"
    assert pod_annotations(job)["gitops-sched.io/preemptible"] == "false"
    assert container(job)["ports"] == [
        {"name": "jupyter", "containerPort": 8888, "protocol": "TCP"}
    ]
    service = find(objects, "Service", "nb")
    assert service["metadata"]["namespace"] == "team-vision"
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [
        {"name": "jupyter", "port": 8888, "targetPort": 8888, "protocol": "TCP"}
    ]
    selector = service["spec"]["selector"].items()
    assert selector <= job["spec"]["template"]["metadata"]["labels"].items()


def test_interactive_job_without_a_project_limit_has_no_deadline(tmp_path: Path) -> None:
    objects = render(tmp_path, workload("nb", project="nlp", type="interactive", gpu=1))
    assert "activeDeadlineSeconds" not in find(objects, "Job", "nb")["spec"]


def test_inference_is_a_deployment_with_a_service(tmp_path: Path) -> None:
    ports = [{"name": "http", "containerPort": 8000}]
    objects = render(tmp_path, workload("api", type="inference", replicas=2, gpu=1, ports=ports))
    deployment = find(objects, "Deployment", "api")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["schedulerName"] == "gitops-sched"
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "gitops-sched-inference"
    selector = deployment["spec"]["selector"]["matchLabels"].items()
    assert selector <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert find(objects, "Service", "api")["spec"]["ports"][0]["port"] == 8000
    assert not any(o["kind"] == "Job" for o in objects)


def test_mig_profile_is_the_mixed_strategy_resource(tmp_path: Path) -> None:
    objects = render(tmp_path, workload("slice", mig="3g.40gb", nodeGroup="a100"))
    limits = container(find(objects, "Job", "slice"))["resources"]["limits"]
    assert limits["nvidia.com/mig-3g.40gb"] == 1
    assert "nvidia.com/gpu" not in limits


@pytest.mark.parametrize(
    ("request_", "annotation", "value"),
    [
        ({"gpu": 0.5}, "gitops-sched.io/gpu-fraction", "0.5"),
        ({"gpuMemory": "10Gi"}, "gitops-sched.io/gpu-memory", "10Gi"),
    ],
)
def test_gpu_shares_are_annotations_not_device_requests(
    tmp_path: Path, request_: dict[str, Any], annotation: str, value: str
) -> None:
    objects = render(tmp_path, workload("share", **request_))
    job = find(objects, "Job", "share")
    assert pod_annotations(job)[annotation] == value
    assert "nvidia.com/gpu" not in container(job)["resources"]["limits"]
    # the GPU the scheduler picks, and the share, reach the container through the downward API
    env = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in container(job)["env"]
        if "valueFrom" in e
    }
    assert env == {
        "NVIDIA_VISIBLE_DEVICES": "metadata.annotations['gitops-sched.io/gpu-uuid']",
        "GITOPS_SCHED_GPU_MEMORY_LIMIT_MIB": (
            "metadata.annotations['gitops-sched.io/gpu-memory-limit-mib']"
        ),
    }


def test_templates_merge_and_jinja_renders(tmp_path: Path) -> None:
    objects = render(
        tmp_path,
        workload("nb", type="interactive", template="notebook", env={"A": "2"}, gpu=0.25),
    )
    main_container = container(find(objects, "Job", "nb"))
    assert main_container["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"  # default template
    assert main_container["env"][:2] == [  # merged by name, the workload's value wins, sorted
        {"name": "A", "value": "2"},
        {"name": "RUN", "value": "vision-nb"},
    ]
    assert main_container["resources"]["requests"] == {"cpu": "4", "memory": "16Gi"}
    assert main_container["resources"]["limits"] == {"cpu": "4", "memory": "16Gi"}
    pod = find(objects, "Job", "nb")["spec"]["template"]["spec"]
    assert {"name": "home", "persistentVolumeClaim": {"claimName": "home-nb"}} in pod["volumes"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}} in pod["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in main_container["volumeMounts"]
    assert {"name": "home", "mountPath": "/home", "readOnly": False} in main_container[
        "volumeMounts"
    ]
    template = find(objects, "Template", "base")  # the custom resource keeps the source
    assert template["spec"]["env"]["RUN"] == "{{ project.name }}-{{ workload.name }}"


def node_terms(controller: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = controller["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    return affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def test_node_affinity_follows_allowed_node_groups(tmp_path: Path) -> None:
    objects = render(
        tmp_path,
        workload("train", gpu=1),
        workload("nb", type="interactive", gpu=0.5),
        workload("pinned", mig="1g.10gb", nodeGroup="a100"),  # a100's GPUs are all MIG
        workload("anywhere", project="nlp", gpu=1),
    )

    def term(labels: dict[str, str]) -> dict[str, Any]:
        """A group's term: each selector label `In` its value, sorted by key."""
        expressions = [
            {"key": key, "operator": "In", "values": [value]}
            for key, value in sorted(labels.items())
        ]
        return {"matchExpressions": expressions}

    # one term per allowed group (terms are ORed), in a fixed order; no label of ours
    assert node_terms(find(objects, "Job", "train")) == [term(A100_LABELS), term(A10_LABELS)]
    assert node_terms(find(objects, "Job", "nb")) == [term(A10_LABELS)]
    assert node_terms(find(objects, "Job", "pinned")) == [term(A100_LABELS)]
    # unrestricted: every group that runs workloads, so pods stay off system nodes
    assert node_terms(find(objects, "Job", "anywhere")) == [term(A100_LABELS), term(A10_LABELS)]


def test_members_get_least_privilege_in_their_namespace(tmp_path: Path) -> None:
    objects = render(tmp_path)
    roles = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "Role"}
    assert set(roles) == {"team-vision", "team-nlp"}
    role = roles["team-vision"]
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        if rule["verbs"] != ["create"]:
            assert set(rule["verbs"]) <= READ_VERBS
        else:  # interactive work: a shell or a port-forward into their own pods
            assert set(rule["resources"]) == {"pods/exec", "pods/portforward"}
    by_resource = {r: set(rule["verbs"]) for rule in role["rules"] for r in rule["resources"]}
    assert by_resource["jobs"] == by_resource["deployments"] == READ_VERBS
    assert by_resource["pods/log"] == READ_VERBS

    bindings = [o for o in objects if o["kind"] == "RoleBinding" and o["roleRef"]["kind"] == "Role"]
    (binding,) = bindings  # nlp has no members, so nothing to bind
    assert binding["metadata"]["namespace"] == "team-vision"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "gitops-sched-member",
    }
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ann@example.com"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "vision-team"},
    ]


def test_department_admins_read_only_their_projects(tmp_path: Path) -> None:
    objects = render(tmp_path)
    role = find(objects, "ClusterRole", "gitops-sched-department-research")
    assert role["rules"] == [
        {
            "apiGroups": ["gitops-sched.io"],
            "resources": ["departments"],
            "resourceNames": ["research"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["gitops-sched.io"],
            "resources": ["projects"],
            "resourceNames": ["nlp", "vision"],
            "verbs": ["get", "list", "watch"],
        },
    ]
    binding = find(objects, "ClusterRoleBinding", "gitops-sched-department-research")
    admin = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "boss@example.com"}
    assert binding["subjects"] == [admin]


def test_department_admins_read_what_runs_in_their_projects_namespaces(tmp_path: Path) -> None:
    objects = render(tmp_path)
    reader = find(objects, "ClusterRole", "gitops-sched-namespace-reader")
    for rule in reader["rules"]:
        assert set(rule["verbs"]) <= READ_VERBS  # no exec, no port-forward, no writes
    resources = {r for rule in reader["rules"] for r in rule["resources"]}
    assert {"pods", "pods/log", "jobs", "events"} <= resources
    bindings = [
        o
        for o in objects
        if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "gitops-sched-department-admins"
    ]
    assert {b["metadata"]["namespace"] for b in bindings} == {"team-vision", "team-nlp"}
    for binding in bindings:  # bound in the namespace only: a RoleBinding, not cluster-wide
        assert binding["roleRef"]["name"] == "gitops-sched-namespace-reader"
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "boss@example.com"}
        ]


def test_network_policy_admits_only_the_namespace_and_the_system(tmp_path: Path) -> None:
    objects = render(tmp_path)
    policies = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "NetworkPolicy"}
    assert set(policies) == {"team-vision", "team-nlp"}
    for policy in policies.values():
        spec = policy["spec"]
        assert spec["podSelector"] == {}  # every pod of the namespace
        assert spec["policyTypes"] == ["Ingress"]
        assert spec["ingress"] == [
            {
                "from": [
                    {"podSelector": {}},
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": "gitops-sched-system"}
                        }
                    },
                ]
            }
        ]


def _namespace_peers(policy: dict[str, Any]) -> list[str]:
    (rule,) = policy["spec"]["ingress"]
    return [
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for peer in rule["from"]
        if "namespaceSelector" in peer
    ]


def test_network_policy_admits_the_namespaces_cluster_and_project_allow(tmp_path: Path) -> None:
    cluster = doc(
        "Cluster",
        "lab",
        namespacePrefix="team-",
        network={"allowedNamespaces": ["monitoring", "ingress-nginx"]},
    )
    vision = doc(
        "Project",
        "vision",
        department="research",
        quota={"gpu": 8},
        network={"allowedNamespaces": ["gradio-proxy", "monitoring", "team-nlp"]},
    )
    others = [d for d in BASE if d["kind"] != "Cluster" and d["metadata"]["name"] != "vision"]
    (tmp_path / "repo.yaml").write_text(yaml.safe_dump_all([cluster, vision, *others]))
    repo, diagnostics = check_repo(tmp_path)
    assert repo is not None, [d.text() for d in diagnostics.sorted()]
    objects = render_repo(repo)
    policies = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "NetworkPolicy"}
    # the system namespace first, then the allowed ones sorted, each once; matched by name
    assert _namespace_peers(policies["team-nlp"]) == [
        "gitops-sched-system",
        "ingress-nginx",
        "monitoring",
    ]
    assert _namespace_peers(policies["team-vision"]) == [
        "gitops-sched-system",
        "gradio-proxy",
        "ingress-nginx",
        "monitoring",
        "team-nlp",
    ]
    assert policies["team-vision"]["spec"]["ingress"][0]["from"][0] == {"podSelector": {}}


def test_a_claim_is_rendered_once_per_project_and_mounted_by_name(tmp_path: Path) -> None:
    volume = {
        "name": "ckpt",
        "claim": {"size": "1Ti", "storageClass": "nfs", "accessModes": ["ReadWriteMany"]},
        "mountPath": "/ckpt",
    }
    existing = {"name": "data", "claimName": "{{ project.name }}-data", "mountPath": "/data"}
    objects = render(
        tmp_path,
        workload("a", gpu=1, volumes=[volume, existing]),
        workload("b", gpu=1, volumes=[volume]),
        workload("c", project="nlp", gpu=1, volumes=[{**volume, "claim": {"size": "10Gi"}}]),
    )
    claims = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in objects
        if o["kind"] == "PersistentVolumeClaim"
    }
    assert set(claims) == {("team-vision", "ckpt"), ("team-nlp", "ckpt")}  # not "data": yours
    vision = claims[("team-vision", "ckpt")]
    assert vision["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "1Ti"}},
        "storageClassName": "nfs",
    }
    # removing it from the repo must not delete the data: Argo CD and Flux leave it be
    assert vision["metadata"]["annotations"] == {
        "argocd.argoproj.io/sync-options": "Prune=false",
        "kustomize.toolkit.fluxcd.io/prune": "disabled",
    }
    assert claims[("team-nlp", "ckpt")]["spec"] == {  # the cluster's default class, RWO
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "10Gi"}},
    }
    pod = find(objects, "Job", "a")["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "vision-data"}},
    ]


def test_namespaces_carry_project_and_department(tmp_path: Path) -> None:
    objects = render(tmp_path)
    labels = find(objects, "Namespace", "team-vision")["metadata"]["labels"]
    assert labels["gitops-sched.io/project"] == "vision"
    assert labels["gitops-sched.io/department"] == "research"
    assert not any(o["kind"] == "ResourceQuota" for o in objects)


def test_crds_have_a_status_subresource_and_the_right_scope(tmp_path: Path) -> None:
    crds = [o for o in render(tmp_path) if o["kind"] == "CustomResourceDefinition"]
    scopes = {c["spec"]["names"]["kind"]: c["spec"]["scope"] for c in crds}
    assert scopes == {
        "Cluster": "Cluster",
        "NodeGroup": "Cluster",
        "Department": "Cluster",
        "Project": "Cluster",
        "Template": "Cluster",
        "Workload": "Namespaced",
    }
    for crd in crds:
        (version,) = crd["spec"]["versions"]
        assert version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}
        assert "status" in version["schema"]["openAPIV3Schema"]["properties"]
    project = find(crds, "CustomResourceDefinition", "projects.gitops-sched.io")
    status = project["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert {"deserved", "fairShare", "allocated", "queued"} <= set(status["properties"])


def test_priority_classes_order_the_types(tmp_path: Path) -> None:
    classes = {o["metadata"]["name"]: o for o in render(tmp_path) if o["kind"] == "PriorityClass"}
    values = {name: c["value"] for name, c in classes.items()}
    assert values == {
        "gitops-sched-train": 50,
        "gitops-sched-interactive": 100,
        "gitops-sched-inference": 125,
    }
    assert classes["gitops-sched-interactive"]["preemptionPolicy"] == "Never"
    assert classes["gitops-sched-inference"]["preemptionPolicy"] == "Never"


def test_policy_config_map_holds_the_tree(tmp_path: Path) -> None:
    objects = render(tmp_path)
    config_map = find(objects, "ConfigMap", "gitops-sched-policy")
    assert config_map["metadata"]["namespace"] == "gitops-sched-system"
    policy = yaml.safe_load(config_map["data"]["policy.yaml"])
    assert policy["schedulerName"] == "gitops-sched"
    assert policy["staleGangGraceSeconds"] == 60  # the default, KAI's
    (department,) = policy["departments"]
    assert [p["name"] for p in department["projects"]] == ["nlp", "vision"]
    vision = department["projects"][1]
    assert vision["quota"] == {"gpu": 8}
    assert vision["interactiveTimeLimitSeconds"] == 8 * 3600
    assert vision["nodeGroupsByType"] == {"interactive": ["a10"]}
    assert [g["name"] for g in policy["nodeGroups"]] == ["a10", "a100"]


def test_policy_config_map_carries_the_stale_gang_grace_in_seconds(tmp_path: Path) -> None:
    cluster = doc("Cluster", "lab", policy={"staleGangGrace": "2m30s"})
    (tmp_path / "repo.yaml").write_text(yaml.safe_dump_all([cluster, *BASE[1:]], sort_keys=False))
    repo, diagnostics = check_repo(tmp_path)
    assert repo is not None, [d.text() for d in diagnostics.sorted()]
    config_map = find(render_repo(repo), "ConfigMap", "gitops-sched-policy")
    assert yaml.safe_load(config_map["data"]["policy.yaml"])["staleGangGraceSeconds"] == 150


def test_objects_come_in_apply_order(tmp_path: Path) -> None:
    objects = render(tmp_path, workload("w", gpu=1))
    tiers = []
    for obj in objects:
        if obj["kind"] == "CustomResourceDefinition":
            tiers.append(0)
        elif obj["kind"] == "Namespace":
            tiers.append(2)
        else:
            tiers.append(3 if "namespace" in obj["metadata"] else 1)
    assert tiers == sorted(tiers)
    assert objects == render(tmp_path, workload("w", gpu=1))


def test_output_directory_lists_every_file_in_kustomization(tmp_path: Path) -> None:
    objects = render(tmp_path, workload("nb", type="interactive", template="notebook", gpu=0.5))
    out = tmp_path / "out"
    write_directory(objects, out)
    kustomization_text = (out / "kustomization.yaml").read_text()
    assert kustomization_text.startswith(HEADER)
    kustomization = yaml.safe_load(kustomization_text)
    crds = yaml.safe_load((out / "crds" / "kustomization.yaml").read_text())["resources"]
    files = sorted(
        p.relative_to(out).as_posix() for p in out.rglob("*.yaml") if p.name != "kustomization.yaml"
    )
    # the CRDs are a kustomization of their own, listed first
    assert kustomization["resources"][0] == "crds"
    assert kustomization["resources"][1:] + [f"crds/{c}" for c in crds] == sorted(
        files, key=lambda f: f.startswith("crds/")
    )
    assert len(files) == len(objects)
    assert {yaml.safe_load((out / "crds" / c).read_text())["kind"] for c in crds} == {
        "CustomResourceDefinition"
    }
    assert yaml.safe_load((out / "team-vision/job/nb.yaml").read_text()) == find(
        objects, "Job", "nb"
    )
    write_directory(objects[:3], out)  # a render replaces the previous one
    assert len(list(out.rglob("*.yaml"))) == 5  # 3 CRDs and two kustomizations
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "repo.yaml"]  # no leftovers


def test_rerendering_into_a_git_checkout_keeps_what_render_did_not_write(tmp_path: Path) -> None:
    objects = render(tmp_path, workload("nb", type="interactive", template="notebook", gpu=0.5))
    deploy = tmp_path / "deploy"
    (deploy / ".git").mkdir(parents=True)
    (deploy / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (deploy / ".github" / "workflows").mkdir(parents=True)
    (deploy / ".github" / "workflows" / "ci.yaml").write_text("on: push\n")
    (deploy / "README.md").write_text("rendered manifests\n")
    write_directory(objects, deploy)
    write_directory([o for o in objects if o["kind"] != "Job"], deploy)  # the job went away
    assert (deploy / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (deploy / ".github" / "workflows" / "ci.yaml").read_text() == "on: push\n"
    assert (deploy / "README.md").read_text() == "rendered manifests\n"
    assert not (deploy / "team-vision" / "job").exists()
    assert (deploy / "team-vision" / "service" / "nb.yaml").is_file()


def test_render_refuses_to_replace_what_it_did_not_write(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "repo.yaml").write_text(yaml.safe_dump_all(BASE, sort_keys=False))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    (mine / "kustomization.yaml").write_text("resources: [app.yaml]\n")
    result = CliRunner().invoke(main, ["render", str(repo), "-o", str(mine)])
    assert result.exit_code == 2
    assert "refusing to replace" in result.output
    assert sorted(p.name for p in mine.iterdir()) == ["kustomization.yaml", "notes.txt"]
    assert (mine / "kustomization.yaml").read_text() == "resources: [app.yaml]\n"
    (mine / "kustomization.yaml").unlink()
    result = CliRunner().invoke(main, ["render", str(repo), "-o", str(mine)])
    assert result.exit_code == 0  # files of its own beside the user's
    assert (mine / "notes.txt").read_text() == "precious"
    a_file = tmp_path / "file.yaml"
    a_file.write_text("x: 1\n")
    result = CliRunner().invoke(main, ["render", str(repo), "-o", str(a_file)])
    assert result.exit_code == 2
    assert a_file.read_text() == "x: 1\n"


def test_render_writes_into_the_config_folder_only_where_the_load_leaves_it_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "repo.yaml").write_text(yaml.safe_dump_all(BASE, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    for output, extra in [("rendered", ()), ("./out/rendered", ("--exclude", "out/"))]:
        result = CliRunner().invoke(main, ["render", ".", "-o", output, *extra])
        assert result.exit_code == 2, result.output
        inside = output.removeprefix("./")
        assert (
            f"Error: the output folder {output} is inside the config folder .: validate, plan "
            "and render would read the rendered files as config; render elsewhere, or add "
            f"`/{inside}/` to .gitops-schedignore\n"
        ) in result.stderr
    result = CliRunner().invoke(main, ["render", str(tmp_path), "-o", str(tmp_path)])
    assert result.exit_code == 2 and result.stderr.endswith("; render elsewhere\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo.yaml"]  # nothing written
    # left out by the ignore file, or hidden: the render is written and never loads
    valid = CliRunner().invoke(main, ["validate", "."]).output
    (tmp_path / ".gitops-schedignore").write_text("/rendered/\nout/\n")
    for output in ("rendered", "out/rendered", ".rendered"):
        result = CliRunner().invoke(main, ["render", ".", "-o", output])
        assert result.exit_code == 0, result.output
        assert (tmp_path / output / "kustomization.yaml").is_file()
        after = CliRunner().invoke(main, ["validate", "."])
        assert (after.exit_code, after.output) == (0, valid)


def test_stream_parses_back_to_the_same_objects(tmp_path: Path) -> None:
    objects = render(tmp_path, workload("api", type="inference", gpu=1, args=["--lr", "3e-4"]))
    result = CliRunner().invoke(main, ["render", str(tmp_path), "-o", "-"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("---\n")
    assert list(yaml.safe_load_all(result.stdout)) == objects
    stream = io.StringIO()
    write_stream(objects, stream)
    assert stream.getvalue() == result.stdout


# YAML's rules and Go's readers (kubectl, kustomize) disagree on what is a string; these
# must stay strings for every reader.
@pytest.mark.parametrize(
    "text", ["3e-4", "1e3", "0o17", "0x1F", "y", "N", "on", "1.32", "=", "~", "", "- a", "a: b"]
)
def test_ambiguous_strings_are_quoted(text: str) -> None:
    assert dump_object({"v": text}) == f'v: "{text}"\n'


JSON_LIKE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]))
    | st.text(st.sampled_from("ab01.:-#\n\t\r '\"|>!&*%@`?{}[],~=")),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(min_size=1), JSON_LIKE, max_size=5))
def test_dump_object_round_trips(value: dict[str, Any]) -> None:
    assert yaml.safe_load(dump_object(value)) == (value or None)


def test_a_projects_fraction_policy_goes_on_its_fraction_pods_only(tmp_path: Path) -> None:
    """The node agent reads it there: evict, or warn, when a pod uses more than its share."""
    strict = doc(
        "Project", "strict", department="research", quota={"gpu": 2}, fractionPolicy="evict"
    )
    objects = render(
        tmp_path,
        strict,
        workload("shared", project="strict", gpu=0.5),
        workload("whole", project="strict", gpu=1),
        workload("other", project="nlp", gpu=0.5),
    )
    assert pod_annotations(find(objects, "Job", "shared"))[FRACTION_POLICY] == "evict"
    assert FRACTION_POLICY not in pod_annotations(find(objects, "Job", "whole"))
    assert FRACTION_POLICY not in pod_annotations(find(objects, "Job", "other"))  # agent decides
