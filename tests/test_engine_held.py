"""GPUs held by others (another scheduler's pods, a reservation pod going): the engine never
places on them, whatever the request, and fair share does not split them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.engine import schedule
from gitops_sched.engine.codec import gpu_from_dict, gpu_to_dict
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import (
    Gpu,
    GpuRequest,
    Job,
    Node,
    PodPlacement,
    RequestKind,
    Snapshot,
)
from gitops_sched.hardware.mig import MigInstance
from tests.conftest import examples
from tests.engine_builders import department, job, nodes, policy, project, snapshot
from tests.strategies import snapshots


def holding(node: Node, *held: int) -> Node:
    """The node with the GPUs at `held` indexes held by others."""
    gpus = tuple(replace(g, held=g.index in held) for g in node.gpus)
    return replace(node, gpus=gpus)


def placed_gpus(decisions) -> list[tuple[str, int]]:
    return sorted((p.node, g) for b in decisions.binds for p in b.pods for g in p.gpus)


MEMORY = GpuRequest(RequestKind.MEMORY, memory_mib=20480)  # 0.625 of a 32 GiB GPU


@pytest.mark.parametrize(
    "request_",
    [
        GpuRequest(RequestKind.WHOLE, count=1),
        GpuRequest(RequestKind.FRACTION, fraction=0.6),
        MEMORY,
    ],
    ids=["whole", "fraction", "memory"],
)
def test_no_pod_lands_on_a_held_gpu(request_: GpuRequest) -> None:
    (node,) = nodes("n", 1, gpus=4)
    work = [replace(job(f"j{i}", "a"), request=request_) for i in range(4)]
    decisions = schedule(snapshot(policy(project("a", 4)), (holding(node, 1, 3),), work))
    # one pod per GPU (0.6 and 0.625 leave no room for a second): only GPUs 0 and 2
    assert placed_gpus(decisions) == [("n-0", 0), ("n-0", 2)]


def test_a_pod_of_more_gpus_than_are_not_held_does_not_fit() -> None:
    (node,) = nodes("n", 1, gpus=4)
    held = (holding(node, 0),)
    pol = policy(project("a", 4))
    assert schedule(snapshot(pol, held, [job("big", "a", 4)])).binds == ()
    (bind,) = schedule(snapshot(pol, held, [job("fits", "a", 3)])).binds
    assert bind.pods[0].gpus == (1, 2, 3)  # the device's own indexes


def test_a_held_mig_gpu_gives_no_instance_and_gets_none_created() -> None:
    mig = nodes(
        "m",
        1,
        gpus=2,
        model="A100-SXM4-80GB",
        memory_mib=81920,
        mig=True,
        instances=(MigInstance("3g.40gb", 0),),
    )
    pol = policy(project("a", 2))
    work = [job(f"j{i}", "a", "3g.40gb") for i in range(4)]
    decisions = schedule(snapshot(pol, (holding(mig[0], 0),), work))
    # GPU 1 only: its idle instance, then one created beside it; nothing on GPU 0
    assert placed_gpus(decisions) == [("m-0", 1), ("m-0", 1)]
    assert {(c.gpu, c.create) for c in decisions.mig_changes} == {(1, True)}
    both = schedule(snapshot(pol, (holding(mig[0], 0, 1),), work))
    assert both.binds == () and both.mig_changes == ()


def fair_share(decisions, name: str) -> float:
    (status,) = [s for s in decisions.projects if s.name == name]
    return status.fair_share


def test_held_gpus_are_not_split_by_fair_share() -> None:
    dept = department("dept", 0, weight=1)
    pol = policy(project("a", 0, weight=1), project("b", 0, weight=1), departments=(dept,))
    eight = nodes("n", 1, gpus=8)
    work = [job("a-big", "a", 8), job("b-big", "b", 8)]
    free = schedule(snapshot(pol, eight, work))
    assert (fair_share(free, "a"), fair_share(free, "b")) == (4, 4)
    half = schedule(snapshot(pol, (holding(eight[0], 4, 5, 6, 7),), work))
    assert (fair_share(half, "a"), fair_share(half, "b")) == (2, 2)


def test_consolidation_moves_work_beside_held_gpus_not_onto_them() -> None:
    a, b = nodes("n", 2, gpus=4)
    pol = policy(project("p", 8))

    def running(name: str, pod: PodPlacement) -> Job:
        return replace(job(name, "p", 1), placement=(pod,), started_at=0.0)

    x = running("x", PodPlacement("n-0", (1,)))
    y = running("y", PodPlacement("n-1", (0,)))
    # n-0: GPU 0 held, x on 1, 2 and 3 free; n-1: y on 0, 1..3 free: 5 GPUs free in all
    decisions = schedule(snapshot(pol, (holding(a, 0), b), [x, y, job("wide", "p", 4)]))
    assert [e.job for e in decisions.evictions] == ["y"]
    binds = {bind.job: bind.pods[0] for bind in decisions.binds}
    assert binds["wide"] == PodPlacement("n-1", (0, 1, 2, 3))
    assert binds["y"].node == "n-0" and binds["y"].gpus[0] in (2, 3)


def test_the_codec_keeps_held_and_reads_old_snapshots_as_not_held() -> None:
    gpu = Gpu(3, 32768, held=True)
    assert gpu_from_dict(gpu_to_dict(gpu)) == gpu
    old = {"index": 0, "memoryMiB": 32768, "migEnabled": False, "migStatic": False, "mig": []}
    assert not gpu_from_dict(old).held


@settings(max_examples=examples(60), deadline=None)
@given(snapshots(), st.data())
def test_whatever_runs_nothing_new_goes_to_a_held_gpu(snapshot: Snapshot, data) -> None:
    used = {(p.node, g) for j in snapshot.jobs for p in j.placement for g in p.gpus}
    free = sorted({(n.name, g.index) for n in snapshot.nodes for g in n.gpus} - used)
    held = set(data.draw(st.lists(st.sampled_from(free), unique=True)) if free else ())
    nodes_ = tuple(
        replace(n, gpus=tuple(replace(g, held=(n.name, g.index) in held) for g in n.gpus))
        for n in snapshot.nodes
    )
    snapshot = replace(snapshot, nodes=nodes_)
    decisions = schedule(snapshot)
    bound = {(p.node, g) for b in decisions.binds for p in b.pods for g in p.gpus}
    assert not bound & held
    assert not {(c.node, c.gpu) for c in decisions.mig_changes} & held
    schedulable = [g for n in nodes_ if n.schedulable for g in n.gpus]
    assert Session(snapshot).capacity == len(schedulable) - len(held & _schedulable(nodes_))


def _schedulable(node_list: tuple[Node, ...]) -> set[tuple[str, int]]:
    return {(n.name, g.index) for n in node_list if n.schedulable for g in n.gpus}
