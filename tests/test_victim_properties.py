"""Reclaim and preempt on random packed clusters: a victim is stopped or moved only when
the claimant took one of its places (KAI's by-node solver never evicts off the node it
frees)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.engine import apply_decisions, schedule
from gitops_sched.engine.types import Decisions, Snapshot
from tests.conftest import examples
from tests.engine_builders import job, nodes, policy, project
from tests.strategies import scattered


@st.composite
def packed(draw) -> Snapshot:
    """Nodes filled with q's preemptible one- and two-GPU jobs (some gangs over two nodes),
    and one pending job wanting most of a node: reclaimed for p (no quota of q's, p's
    quota the cluster) or preempted within q (a higher priority)."""
    node_count, gpus = draw(st.integers(2, 5)), 4
    free = {(f"n-{i}", g) for i in range(node_count) for g in range(gpus)}
    running = []
    while free:
        size, pods = draw(st.integers(1, 2)), draw(st.integers(1, 2))
        # what is left is filled with one-GPU jobs
        placed = scattered(draw, free, size, pods) or scattered(draw, free, 1, 1)
        assert placed is not None  # a free GPU holds a one-GPU pod
        # each pod holds what the job asks for (scattered gives every pod as many GPUs)
        work = job(f"run-{len(running)}", "q", len(placed[0].gpus), pods=len(placed))
        started = float(draw(st.integers(0, 5)))
        running.append(replace(work, placement=placed, started_at=started))
    size = draw(st.integers(2, gpus))
    if draw(st.booleans()):
        pending, pol = (
            job("claim", "p", size),
            policy(project("p", node_count * gpus), project("q", 0)),
        )
    else:
        pending = replace(job("claim", "q", size, type="inference"), priority=1000)
        pol = policy(project("q", node_count * gpus))
    return Snapshot(pol, nodes("n", node_count, gpus=gpus), (*running, pending), now=10.0)


def holders(snapshot: Snapshot, decisions: Decisions) -> dict[tuple[str, int], str]:
    after = apply_decisions(snapshot, decisions)
    return {(p.node, g): j.name for j in after.jobs for p in j.placement for g in p.gpus}


@settings(max_examples=examples(80), deadline=None)
@given(packed())
def test_a_victim_is_evicted_only_for_gpus_the_claimant_takes(snapshot: Snapshot) -> None:
    # per job: a gang's pod elsewhere goes with the pod whose place the claimant took (a
    # gang cannot run short); a victim whose GPUs it did not take stays where it ran,
    # rather than one displaced moving into its place and getting it stopped
    decisions = schedule(snapshot)
    held = holders(snapshot, decisions)
    for evicted in decisions.evictions:
        places = {(pod.node, gpu) for pod in evicted.pods for gpu in pod.gpus}
        assert any(held.get(place) == "claim" for place in places), evicted.job
