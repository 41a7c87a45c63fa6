"""Pending reasons say what is true of the cluster they describe (hypothesis, and cases).

Each number a reason gives -- GPUs a job needs, GPUs free where it may run, what a
project or department holds, its fair share, what taking work from it would leave it --
is checked against the settled state, counted here from the jobs' placements, not from
the engine's own indexes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hypothesis import given, settings

from gitops_sched.engine import settle
from gitops_sched.engine.requests import placed_pod_gpus, pod_gpus
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import GPU_EPSILON, Job, PodPlacement, RequestKind, Snapshot
from gitops_sched.engine.why import PendingKind, PendingReasons
from tests.conftest import examples
from tests.engine_builders import job, nodes, policy, project, snapshot
from tests.strategies import snapshots

NUMBER = r"(-?[\d.]+(?:e-?\d+)?)"
HOLDS = re.compile(rf"(\S+) holds {NUMBER} of its fair share of {NUMBER} GPUs")
NEEDS = re.compile(rf"it needs {NUMBER} GPUs and the nodes it may use have {NUMBER} free")
SCATTERED = re.compile(rf"{NUMBER} GPUs free on the nodes it may use, but scattered")
LEAVES = re.compile(
    rf"taking {NUMBER} GPUs of (\S+)'s work would leave (\S+) with {NUMBER} of its fair share "
    rf"of {NUMBER} GPUs \({NUMBER} of it\), not more than (\S+)'s {NUMBER} of its own"
)
AFTER = rf"(?:after taking {NUMBER} GPUs of \S+'s work, )?"
NOT_OVER = re.compile(rf"{AFTER}(\S+) holds {NUMBER} GPUs, not over its deserved quota of {NUMBER}")
AT_SHARE = re.compile(rf"{AFTER}(\S+) holds {NUMBER} GPUs, not more than its share of {NUMBER}")
FIXED = re.compile(rf"non-preemptible work holds {NUMBER}")
ROUNDING = 1e-3  # reasons print GPUs to 4 decimals


def close(said: str, value: float) -> bool:
    return abs(float(said) - value) <= ROUNDING


# -- the state, counted from placements -------------------------------------------------------


def pods_on_gpus(state: Snapshot) -> Iterator[tuple[Job | None, PodPlacement]]:
    """Every pod holding GPUs: running ones with their job, releasing ones without."""
    for running in state.jobs:
        for pod in running.placement:
            yield running, pod
    for releasing in state.releasing:
        yield None, releasing.pod


def may_run_on(state: Snapshot, pending: Job) -> set[str]:
    """The schedulable nodes of the node groups the job may use."""
    allowed = set(pending.node_groups)
    return {
        n.name
        for n in state.nodes
        if n.schedulable and (not allowed or n.node_group in allowed) and n.gpus
    }


def free_room(state: Snapshot, pending: Job) -> float:
    """Free GPUs plus the room left on shared ones (MIG and held GPUs aside), on the
    nodes the job may run on."""
    names = may_run_on(state, pending)
    used: dict[tuple[str, int], float] = {}
    for _, pod in pods_on_gpus(state):
        for index in pod.gpus:
            key = (pod.node, index)
            used[key] = used.get(key, 0.0) + (pod.fraction if pod.fraction else 1.0)
    return sum(
        max(0.0, 1.0 - used.get((n.name, g.index), 0.0))
        for n in state.nodes
        if n.name in names
        for g in n.gpus
        if not (g.mig_enabled or g.held)
    )


def needed(state: Snapshot, pending: Job) -> float:
    """What the job's next pods count for, on the largest GPU it may use."""
    allowed = set(pending.node_groups)
    largest = max(
        (
            (g.memory_mib, n.gpu_model)
            for n in state.nodes
            if not allowed or n.node_group in allowed
            for g in n.gpus
            if not g.mig_enabled
        ),
        default=(0, ""),
    )
    return pod_gpus(pending, None, largest[1], largest[0]) * pending.next_pods


def held(state: Snapshot) -> dict[str, float]:
    """GPUs each project and department holds."""
    by_name = {n.name: n for n in state.nodes}
    parent = {p.name: p.parent for p in state.policy.projects}
    out: dict[str, float] = {}
    for running, pod in pods_on_gpus(state):
        if running is None:
            continue
        gpus = placed_pod_gpus(running, pod, by_name.get(pod.node))
        for queue in (running.project, parent.get(running.project, "")):
            out[queue] = out.get(queue, 0.0) + gpus
    return out


def non_preemptible_on(state: Snapshot, pending: Job) -> float:
    names = may_run_on(state, pending)
    by_name = {n.name: n for n in state.nodes}
    return sum(
        placed_pod_gpus(running, pod, by_name[pod.node])
        for running in state.jobs
        if not running.preemptible
        for pod in running.placement
        if pod.node in names
    )


# -- the checks -------------------------------------------------------------------------------


def check_reason(state: Snapshot, pending: Job, kind: PendingKind, text: str) -> None:
    """Every number the reason gives is the state's."""
    shares = Session(state).fair_share
    holding = held(state)
    deserved = {q.name: q.deserved for q in (*state.policy.projects, *state.policy.departments)}
    free, need = free_room(state, pending), needed(state, pending)
    if kind is PendingKind.FAIR_SHARE:
        said = NEEDS.search(text)
        assert said, text
        assert close(said[1], need) and close(said[2], free), (text, need, free)
        assert free < need - GPU_EPSILON, text
    if kind is PendingKind.FRAGMENTATION:
        said = SCATTERED.search(text)
        assert said and close(said[1], free), (text, free)
        assert free >= need - GPU_EPSILON, text
    for queue, has, share in HOLDS.findall(text):
        assert close(has, holding.get(queue, 0.0)), (text, queue, holding)
        assert close(share, shares.get(queue, 0.0)), (text, queue, shares)
    for taken, _, queue, left, share, part, claimant, theirs in LEAVES.findall(text):
        assert close(left, holding.get(queue, 0.0) - float(taken)), (text, holding)
        assert close(share, shares[queue]), (text, shares)
        claimant_share = shares[claimant]
        ratio = (holding.get(claimant, 0.0) + need) / claimant_share
        assert ratio > 1, (text, ratio)  # ratios count only above the claimant's share
        assert abs(float(theirs) - ratio) <= 0.01 * ratio, (text, ratio)
        assert float(part) <= float(theirs), text
    for taken, queue, has, quota in NOT_OVER.findall(text):
        assert close(has, holding.get(queue, 0.0) - float(taken or 0)), (text, holding)
        assert close(quota, deserved[queue]) and float(has) <= float(quota), text
    for taken, queue, has, share in AT_SHARE.findall(text):
        assert close(has, holding.get(queue, 0.0) - float(taken or 0)), (text, holding)
        assert close(share, allocatable(state, queue, shares)), (text, shares)
        assert float(has) <= float(share) + ROUNDING, text
    for fixed in FIXED.findall(text):
        assert close(fixed, non_preemptible_on(state, pending)), text


def allocatable(state: Snapshot, queue: str, shares: dict[str, float]) -> float:
    """What a queue may hold before it may lose work: max(deserved, fair share), capped by
    its hard limit."""
    spec = next(q for q in (*state.policy.projects, *state.policy.departments) if q.name == queue)
    share = max(spec.deserved, shares.get(queue, 0.0))
    return share if spec.limit is None else min(share, spec.limit)


def reasons_of(state: Snapshot) -> list[tuple[Job, PendingKind, str]]:
    reasons = PendingReasons(state)
    found = []
    for pending in state.jobs:
        if pending.missing > 0:
            answer = reasons.of(pending)
            found.append((pending, answer.kind, answer.text))
    return found


@settings(max_examples=examples(60), deadline=None)
@given(snapshots(max_jobs=15))
def test_every_pending_reason_is_true_of_the_settled_cluster(start: Snapshot) -> None:
    state, _ = settle(start)
    for pending, kind, text in reasons_of(state):
        check_reason(state, pending, kind, text)


# -- the cases users met ----------------------------------------------------------------------


def test_a_job_needing_more_than_is_free_says_how_many_it_needs_and_how_many_are_free() -> None:
    # 3.5 GPUs free on one 8-GPU node: a 4-GPU job of a project at its fair share waits
    state, _ = settle(
        snapshot(
            policy(project("a", 4), project("b", 4)),
            nodes("n", 1),
            [
                job("a-run", "a", 4, type="inference"),
                job("b-half", "b", 0.5, type="inference"),
                job("a-more", "a", 4),
            ],
        )
    )
    [(pending, kind, text)] = reasons_of(state)
    assert pending.name == "a-more" and kind is PendingKind.FAIR_SHARE
    assert "it needs 4 GPUs and the nodes it may use have 3.5 free" in text
    assert "no GPU is free" not in text
    check_reason(state, pending, kind, text)


def test_a_holder_over_its_share_loses_even_the_job_that_takes_it_below_it() -> None:
    # b holds 4 GPUs, over its fair share of 3, in one job: KAI judges a victim's queue
    # before the loss, so b-big may go although it leaves b with 0; b-big then waits,
    # told that taking it back would pass b's share
    state, _ = settle(
        snapshot(
            policy(project("a", 1), project("b", 1)),
            nodes("n", 1, gpus=6),
            [job("a-run", "a", 1, type="inference"), job("b-big", "b", 4)],
        )
    )
    state, _ = settle(snapshot(state.policy, state.nodes, [*state.jobs, job("a-two", "a", 2)]))
    [(pending, kind, text)] = reasons_of(state)
    assert pending.name == "b-big" and kind is PendingKind.FAIR_SHARE, text
    assert text.startswith(
        "fair share reached: b holds 0 of its fair share of 3 GPUs, 4 more would pass it"
    ), text
    check_reason(state, pending, kind, text)


def test_nothing_to_reclaim_names_a_holder_at_its_share() -> None:
    # a (1 of its fair share of 3) needs 2 GPUs on group x, where b holds exactly its
    # fair share of 3: a queue must hold more than max(deserved, fair share) to lose work
    # (b's work is pinned to x: work that may use y's free GPUs would be moved there)
    def on_x(*gpus: int) -> dict:
        return {"placement": (PodPlacement("x-0", gpus),), "started_at": 0.0, "node_groups": ("x",)}

    state, _ = settle(
        snapshot(
            policy(project("a", 1), project("b", 1)),
            (*nodes("x", 1, gpus=4), *nodes("y", 1, gpus=2)),
            [
                job("a-run", "a", 1, type="inference", **on_x(0)),
                *(job(f"b-{i}", "b", 1, **on_x(i)) for i in (1, 2, 3)),
                job("a-two", "a", 2, node_groups=("x",)),
            ],
        )
    )
    [(pending, kind, text)] = reasons_of(state)
    assert pending.name == "a-two" and kind is PendingKind.FAIR_SHARE, text
    assert text.startswith(
        "nothing to reclaim: a holds 1 of its fair share of 3 GPUs; it needs 2 GPUs and the "
        "nodes it may use have 0 free; of the GPUs there, non-preemptible work holds 1; "
        "b holds 3 GPUs, not more than its share of 3 (the larger of its deserved quota and "
        "fair share), and may lose no more"
    ), text
    check_reason(state, pending, kind, text)


def test_a_pending_whole_gpu_job_counts_only_whole_gpus_of_the_nodes_it_may_use() -> None:
    # the free GPUs of a node group the job may not use are not "free where it may run"
    state, _ = settle(
        snapshot(
            policy(project("a", 2), project("b", 2)),
            (*nodes("x", 1, gpus=2), *nodes("y", 1, gpus=4)),
            [job("b-x", "b", 2, type="inference"), job("a-x", "a", 2, node_groups=("x",))],
        )
    )
    [(pending, kind, text)] = reasons_of(state)
    assert pending.request.kind is RequestKind.WHOLE
    assert "the nodes it may use have 0 free" in text, text
    check_reason(state, pending, kind, text)
