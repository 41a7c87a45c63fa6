"""Quotas per node pool in the cluster: the in-cluster scheduler on a real control plane
(running as its ServiceAccount, kwok GPU nodes labelled as GPU Feature Discovery labels
them, Jobs whose pods kube-controller-manager makes) binds a repo with two node groups
and per-group quotas exactly as `simulate` predicts, and writes each Project's numbers
per node group (status.nodeGroups) as `simulate` gives them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitops_sched.sim.run import simulate
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.fixtures import wipe
from tests.test_scheduler_e2e import Cluster, installed_repo, simulated

NODE_POOLS = Path(__file__).parent / "scenarios" / "repos" / "node-pools"


@pytest.fixture(scope="module")
def pools(control_plane: ControlPlane) -> Iterator[Cluster]:
    """The node-pools repo installed with the shipped manifests (8 H100s on two nodes, 4
    A100s on one); wiped after the module."""
    try:
        with installed_repo(control_plane, NODE_POOLS) as made:
            yield made
    finally:
        wipe(control_plane)


def test_per_pool_quotas_bind_as_simulate_predicts_and_status_is_per_pool(pools: Cluster):
    pools.submit_repo_workloads()
    pools.settle()

    result = simulate(pools.repo)
    assert pools.placements() == simulated(result)
    # vision's work that may use both pools went where vision had quota left: an H100 node
    assert [node for node, _, _ in pools.placements()["vision-any"]] == ["h100-1"]
    assert pools.failed() == []
    statuses = {
        p["metadata"]["name"]: p.get("status", {})
        for p in pools.client.list("gitops-sched.io/v1alpha1", "Project") or ()
    }
    for queue in result.projects:
        written = statuses[queue.name]["nodeGroups"]
        assert set(written) == {pool.name for pool in queue.pools}
        for pool in queue.pools:
            numbers = {k: written[pool.name][k] for k in ("deserved", "fairShare", "allocated")}
            assert numbers == pytest.approx(
                {
                    "deserved": pool.deserved,
                    "fairShare": pool.fair_share,
                    "allocated": pool.allocated,
                },
                abs=1e-4,
            )
    # nlp borrows no A100 beyond what vision leaves it: each holds its A100 quota of 2
    a100 = {q.name: statuses[q.name]["nodeGroups"]["a100"]["allocated"] for q in result.projects}
    assert a100 == {"nlp": 2, "vision": 2}
