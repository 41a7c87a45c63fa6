"""From the config model to engine data: queue weights, simulated nodes, job requests."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gitops_sched.bridge.build import job_from_workload, nodes_from_repo, policy_from_repo
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.model import Repo, build_repo
from gitops_sched.config.yamlbuild import load_text
from gitops_sched.engine.types import GpuRequest, RequestKind
from gitops_sched.hardware.mig import MigInstance
from testkit.config_builders import doc, node_group


def repo_of(*documents: dict[str, Any]) -> Repo:
    diagnostics = Diagnostics()
    loaded = load_text(yaml.safe_dump_all(documents, sort_keys=False), "repo.yaml", diagnostics)
    assert not diagnostics.items
    return build_repo(loaded)


def cluster(weights: str = "quota") -> dict[str, Any]:
    return doc(
        "Cluster",
        "lab",
        policy={"defaultOverQuotaWeight": weights, "reclaimThreshold": 0.5, "consolidation": False},
    )


DEPARTMENTS = (
    doc("Department", "research", quota={"gpu": 12}, limit={"gpu": 14}),
    doc("Department", "product", quota={"gpu": 4}, overQuotaWeight=2),
)
PROJECTS = (
    doc("Project", "vision", department="research", quota={"gpu": 8}),
    doc("Project", "nlp", department="research", quota={"gpu": 4}, overQuotaWeight=0),
    doc(
        "Project",
        "search",
        department="product",
        quota={"gpu": 4},
        overQuota="denied",
        overQuotaRank=2,
        limit={"gpu": 6},
        interactiveTimeLimit="8h",
        idleGpuTimeout="30m",
    ),
)


def weights(repo: Repo) -> dict[str, float]:
    policy = policy_from_repo(repo)
    return {q.name: q.over_quota_weight for q in (*policy.departments, *policy.projects)}


def test_quota_rule_weighs_by_gpu_quota_unless_a_weight_is_given() -> None:
    repo = repo_of(cluster("quota"), *DEPARTMENTS, *PROJECTS)
    assert weights(repo) == {
        "research": 12,
        "product": 2,
        "vision": 8,
        "nlp": 0,  # an explicit 0: no share of spare GPUs
        "search": 4,
    }


def test_equal_rule_weighs_everyone_one_unless_a_weight_is_given() -> None:
    repo = repo_of(cluster("equal"), *DEPARTMENTS, *PROJECTS)
    assert weights(repo) == {"research": 1, "product": 2, "vision": 1, "nlp": 0, "search": 1}


def test_queues_carry_quota_limits_parents_and_time_limits() -> None:
    policy = policy_from_repo(repo_of(cluster(), *DEPARTMENTS, *PROJECTS))
    queues = {q.name: q for q in (*policy.departments, *policy.projects)}
    research = queues["research"]
    assert (research.deserved, research.limit, research.parent) == (12, 14, "")
    search = queues["search"]
    assert search.parent == "product"
    assert (search.deserved, search.limit) == (4, 6)
    assert not search.over_quota_allowed
    assert search.over_quota_rank == 2
    assert (search.interactive_time_limit_s, search.idle_timeout_s) == (8 * 3600, 30 * 60)
    assert queues["vision"].over_quota_allowed
    assert (policy.reclaim_threshold, policy.consolidation) == (0.5, False)


@pytest.mark.parametrize(("grace", "seconds"), [(None, 60.0), ("5m", 300.0), ("0s", 0.0)])
def test_the_stale_gang_grace_reaches_the_engine_in_seconds(
    grace: str | None, seconds: float
) -> None:
    policy = {} if grace is None else {"staleGangGrace": grace}
    repo = repo_of(doc("Cluster", "lab", policy=policy), *DEPARTMENTS, *PROJECTS)
    assert policy_from_repo(repo).stale_gang_grace_s == seconds


def test_nodes_per_worker_group_with_topology_domains() -> None:
    repo = repo_of(
        cluster(),
        node_group(
            "dgx",
            nodeCount=5,
            gpusPerNode=8,
            gpu={"model": "NVIDIA H100 80GB HBM3"},
            topology={"label": "rack", "nodesPerDomain": 2},
            nodeSelector={"matchLabels": {"pool": "dgx"}},
        ),
        node_group("cpu", role="cpu-worker", nodeCount=2),
        node_group("ctl", role="system", nodeCount=3),
        node_group(
            "a100",
            nodeCount=1,
            gpusPerNode=4,
            gpu={"model": "A100-SXM4-80GB", "memory": "40Gi"},
            mig={"enabled": True},
        ),
    )
    nodes = nodes_from_repo(repo)
    names = ["dgx-0", "dgx-1", "dgx-2", "dgx-3", "dgx-4", "cpu-0", "cpu-1", "a100-0"]
    assert [n.name for n in nodes] == names  # system nodes run no workloads
    assert [n.topology for n in nodes[:5]] == ["dgx-d0", "dgx-d0", "dgx-d1", "dgx-d1", "dgx-d2"]
    dgx = nodes[0]
    assert dgx.gpu_model == "H100-SXM5-80GB"  # the catalogue's spelling
    assert [(g.index, g.memory_mib, g.mig_enabled) for g in dgx.gpus] == [
        (i, 81559, False) for i in range(8)
    ]
    # what a real cluster gives a node: GPU Feature Discovery's labels, the group's selector
    # (an admin's or a node pool's label) and its topology domain; no label of ours
    assert dict(dgx.labels) == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-SXM5-80GB",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/mig.capable": "true",
        "pool": "dgx",
        "rack": "dgx-d0",
    }
    assert dict(nodes[5].labels) == {"pool": "cpu"}  # no GPUs, no GFD labels
    assert [len(n.gpus) for n in nodes[5:7]] == [0, 0]  # for workloads without GPUs
    a100 = nodes[7]
    assert (a100.topology, len(a100.gpus)) == ("", 4)
    assert {(g.memory_mib, g.mig_enabled) for g in a100.gpus} == {(40 * 1024, True)}


def test_a_selector_naming_a_gfd_label_says_what_the_nodes_carry() -> None:
    # GFD writes NVML's product name ("NVIDIA-H100-80GB-HBM3" on an H100 SXM); the admin's
    # selector says it, and the simulated nodes carry it, so they stay in their group
    product = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    group = node_group(
        "h100",
        nodeSelector={"matchLabels": product},
        nodeCount=1,
        gpusPerNode=8,
        gpu={"model": "H100"},
        mig={"enabled": True},
    )
    (node,) = nodes_from_repo(repo_of(cluster(), group))
    labels = dict(node.labels)
    assert product.items() <= labels.items()
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/mig.strategy"]) == ("8", "mixed")


def test_static_mig_groups_give_fixed_gpus_with_their_declared_instances() -> None:
    layout = [{"profile": "3g.40gb", "start": 4}, {"profile": "3g.40gb", "start": 0}]
    small = [{"profile": "7g.80gb", "start": 0}]
    static = {"enabled": True, "strategy": "static", "layout": layout}
    static["byGpu"] = [{"gpus": [2], "layout": small}]
    repo = repo_of(
        cluster(),
        node_group("serve", nodeCount=2, gpusPerNode=3, gpu={"model": "A100-80GB"}, mig=static),
        node_group(
            "dyn",
            nodeCount=1,
            gpusPerNode=1,
            gpu={"model": "A100-80GB"},
            mig={"enabled": True},
        ),
    )
    serve, _, dyn = nodes_from_repo(repo)
    halves = (MigInstance("3g.40gb", 0), MigInstance("3g.40gb", 4))  # sorted by start
    assert [(g.mig_enabled, g.mig_static, g.mig_instances) for g in serve.gpus] == [
        (True, True, halves),
        (True, True, halves),
        (True, True, (MigInstance("7g.80gb", 0),)),  # its own byGpu layout
    ]
    assert [(g.mig_enabled, g.mig_static, g.mig_instances) for g in dyn.gpus] == [(True, False, ())]


def test_a_layout_outside_the_static_strategy_makes_no_instances() -> None:
    mig = {"enabled": True, "layout": [{"profile": "7g.80gb", "start": 0}]}  # an error in validate
    group = node_group("dyn", nodeCount=1, gpusPerNode=1, gpu={"model": "A100-80GB"}, mig=mig)
    (node,) = nodes_from_repo(repo_of(cluster(), group))
    assert (node.gpus[0].mig_static, node.gpus[0].mig_instances) == (False, ())


def test_a_topology_label_without_domain_size_puts_the_group_in_one_domain() -> None:
    group = node_group("l4", nodeCount=3, gpusPerNode=1, gpu={"model": "L4"})
    group["spec"]["topology"] = {"label": "zone"}
    nodes = nodes_from_repo(repo_of(cluster(), group))
    assert {n.topology for n in nodes} == {"l4-d0"}


REQUEST_REPO = (
    cluster(),
    doc("Department", "research", quota={"gpu": 8}),
    doc(
        "Project",
        "vision",
        department="research",
        quota={"gpu": 8},
        nodeGroups={"allowed": ["dgx", "a100"], "byType": {"interactive": ["a100"]}},
    ),
    doc("Template", "half", gpu=0.5),
)


@pytest.mark.parametrize(
    ("spec", "request_"),
    [
        ({"gpu": 2}, GpuRequest(RequestKind.WHOLE, count=2)),
        ({"gpu": 0.25}, GpuRequest(RequestKind.FRACTION, fraction=0.25)),
        ({"gpuMemory": "10Gi"}, GpuRequest(RequestKind.MEMORY, memory_mib=10240)),
        ({"gpuMemory": "1500M"}, GpuRequest(RequestKind.MEMORY, memory_mib=1431)),  # rounded up
        ({"mig": "1g.10gb"}, GpuRequest(RequestKind.MIG, mig_profile="1g.10gb")),
        ({}, GpuRequest(RequestKind.NONE)),
        ({"template": "half"}, GpuRequest(RequestKind.FRACTION, fraction=0.5)),
        (
            {"template": "half", "mig": "3g.40gb"},
            GpuRequest(RequestKind.MIG, mig_profile="3g.40gb"),
        ),
    ],
)
def test_request_per_form(spec: dict[str, Any], request_: GpuRequest) -> None:
    repo = repo_of(*REQUEST_REPO, doc("Workload", "w", project="vision", **spec))
    assert job_from_workload(repo, repo.workloads[0], submitted=3).request == request_


def test_job_carries_gang_priority_and_submission_order() -> None:
    workload = doc("Workload", "w", project="vision", gpu=8, replicas=4, minAvailable=2)
    repo = repo_of(*REQUEST_REPO, workload)
    job = job_from_workload(repo, repo.workloads[0], submitted=7)
    assert (job.pods, job.min_available, job.submitted) == (4, 2, 7)
    assert (job.type, job.priority, job.preemptible) == ("train", 50, True)
    assert not job.running


@pytest.mark.parametrize(
    ("spec", "groups"),
    [
        ({"type": "train"}, ("a100", "dgx")),  # the project's allowed groups
        ({"type": "interactive"}, ("a100",)),  # the project's groups for the type
        ({"type": "train", "nodeGroup": "a100"}, ("a100",)),  # the workload's own
    ],
)
def test_node_groups_of_a_job(spec: dict[str, Any], groups: tuple[str, ...]) -> None:
    repo = repo_of(*REQUEST_REPO, doc("Workload", "w", project="vision", gpu=1, **spec))
    assert job_from_workload(repo, repo.workloads[0], submitted=0).node_groups == groups
