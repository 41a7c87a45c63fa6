"""Hierarchical fair share: cluster -> departments -> projects, as KAI's proportion plugin.

Each level splits its parent's share among sibling queues the way NVIDIA KAI Scheduler's
`proportion` plugin does (`pkg/scheduler/plugins/proportion/resource_division`):

1. Deserved: every queue gets its deserved quota, capped by what it may take (its demand,
   its hard limit). Quotas are never scaled down: when they add up to more than there is
   (oversubscription), every queue keeps its quota, the shares add up to more than the
   capacity and nothing is spare.
2. Spare, by rank: what is left goes to the queues that may go over quota (allowed, weight
   above 0), higher over-quota rank first, in rounds. A round offers each queue still
   asking its weight's part of what the round started with: a queue asking for no more
   takes what it asks (fractions too); any other takes the whole GPUs of its part and
   keeps the fraction rounding kept from it (a queue asking for less than a GPU more than
   its part gets nothing in the round and keeps all of its part). Another round follows
   only when some queue needed less than its part. A rank holding a single queue gives it
   all it asks for at once. What a rank leaves goes to the next.
3. Remainder: what rounding left goes out in pieces of one GPU (or what is left, if less)
   to the queues that kept a fraction, higher rank first, then the largest fraction, then
   the older queue (QueueSpec.age), then by name (KAI: queue age, then id); one piece
   each, never more than a queue asks for (KAI gives the whole piece).

So with whole-GPU demand and a whole number of GPUs every fair share is a whole number,
one that whole-GPU jobs can reach: 7 spare GPUs split 3:1 give 5 and 2, not 5.25 and 1.75.
A department's fair share is what its projects share.

`explain` shows how a share came about: pass a `Trace` and every step (the deserved
part, each round, the remainder) is recorded as data; the results do not depend on it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gitops_sched.engine.history import share_weights
from gitops_sched.engine.types import GPU_EPSILON, Gpu, Node, QueueSpec


@dataclass(frozen=True)
class Claim:
    """A queue's claim at one level: its spec and the GPUs its work asks for in total."""

    spec: QueueSpec
    demand: float
    usage: float = 0.0  # decayed past usage, a share of the window (engine.history)


@dataclass(frozen=True)
class Give:
    """What one queue was offered in a step and what it took."""

    queue: str
    offered: float  # deserved step: its quota; a round: its weight's part of the offer
    given: float
    asks: float  # what it could still take before the step (demand, limit, rules)


@dataclass(frozen=True)
class Step:
    """One step of one level's split: `deserved`, a `round` of spare GPUs by weight, or
    the `remainder` rounding left."""

    level: str  # the parent whose share is split: "" for the cluster, else a department
    kind: str  # deserved | round | remainder
    rank: int  # over-quota rank served (0 for deserved)
    offer: float  # GPUs the step started with
    gives: tuple[Give, ...]


@dataclass
class Trace:
    """The steps of fair_shares (or split), in the order they were taken."""

    steps: list[Step] = field(default_factory=list)
    level: str = ""  # the level split is working on, set by fair_shares

    def add(self, kind: str, rank: int, offer: float, gives: list[Give]) -> None:
        if gives:
            self.steps.append(Step(self.level, kind, rank, offer, tuple(gives)))


def split(
    capacity: float,
    claims: Sequence[Claim],
    trace: Trace | None = None,
    history_weight: float = 0.0,
) -> list[float]:
    """Fair shares of `capacity` among sibling queues (one level of the hierarchy);
    `history_weight` above 0: past usage lowers the spare GPUs' parts (engine.history)."""
    caps = [_cap(c) for c in claims]
    shares = [min(c.spec.deserved, cap) for c, cap in zip(claims, caps)]
    if trace is not None:
        gives = [
            Give(c.spec.name, c.spec.deserved, s, cap) for c, s, cap in zip(claims, shares, caps)
        ]
        trace.add("deserved", 0, capacity, gives)
    left = capacity - sum(shares)
    if left <= GPU_EPSILON:
        return shares  # quotas use it all (or oversubscribe it): nothing is spare
    ranks = sorted({c.spec.over_quota_rank for c in claims}, reverse=True)
    fractions: dict[int, dict[int, float]] = {}
    for rank in ranks:
        members = [i for i, c in enumerate(claims) if c.spec.over_quota_rank == rank]
        log = _Log(trace, rank, history_weight=history_weight)
        left, fractions[rank] = _rounds(left, members, claims, caps, shares, log)
    for rank in ranks:
        left = _remainder(left, fractions[rank], claims, caps, shares, _Log(trace, rank))
    return shares


@dataclass
class _Log:
    """Records one rank's steps into a trace, if there is one."""

    trace: Trace | None
    rank: int
    gives: list[Give] = field(default_factory=list)
    history_weight: float = 0.0  # fairness over time: the rounds' weights (see _weights)

    def give(self, claim: Claim, offered: float, given: float, asks: float) -> None:
        """Record a give; a queue that asked for nothing more and got nothing is left out."""
        if self.trace is not None and (given > GPU_EPSILON or asks > GPU_EPSILON):
            self.gives.append(Give(claim.spec.name, offered, given, asks))

    def step(self, kind: str, offer: float) -> None:
        if self.trace is not None:
            self.trace.add(kind, self.rank, offer, self.gives)
        self.gives = []


def _rounds(
    left: float,
    members: list[int],
    claims: Sequence[Claim],
    caps: list[float],
    shares: list[float],
    log: _Log,
) -> tuple[float, dict[int, float]]:
    """Hand `left` to one rank's queues in whole-GPU rounds by weight (updates `shares`).

    Returns what is left and, per queue still asking, the fraction of its last part that
    rounding kept from it: its claim on the remainder.
    """
    fractions: dict[int, float] = {}
    if len(members) == 1:
        (only,) = members
        give = min(left, caps[only] - shares[only])
        log.give(claims[only], left, give, caps[only] - shares[only])
        log.step("round", left)
        shares[only] += give
        return left - give, fractions
    while left > GPU_EPSILON:
        asking = [
            i
            for i in members
            if claims[i].spec.over_quota_weight > 0 and caps[i] - shares[i] > GPU_EPSILON
        ]
        weights = _weights(asking, claims, log.history_weight)
        total_weight = sum(weights.values())
        if not asking or total_weight <= 0:
            break
        offer = left
        slack = False  # some queue needed less than its part: its rest goes round again
        for i in asking:
            part = offer * weights[i] / total_weight
            wants = caps[i] - shares[i]
            if wants <= part + GPU_EPSILON:
                give = wants
                fractions.pop(i, None)
                slack = slack or wants < part - GPU_EPSILON
            else:
                give = float(math.floor(part + GPU_EPSILON))
                if part - give > GPU_EPSILON:
                    fractions[i] = part - give
            log.give(claims[i], part, give, wants)
            shares[i] += give
            left -= give
        log.step("round", offer)
        if not slack:
            break
    return left, fractions


def _weights(asking: list[int], claims: Sequence[Claim], k: float) -> dict[int, float]:
    """The round's weights of the queues asking: their over-quota weights, or with
    fairness over time KAI's share weights (engine.history.share_weights)."""
    weights = [claims[i].spec.over_quota_weight for i in asking]
    if k > 0:
        weights = share_weights(weights, [claims[i].usage for i in asking], k)
    return dict(zip(asking, weights))


def _remainder(
    left: float,
    fractions: dict[int, float],
    claims: Sequence[Claim],
    caps: list[float],
    shares: list[float],
    log: _Log,
) -> float:
    """Up to one GPU each to the queues rounding kept most from, largest fraction first."""
    order = sorted(
        fractions,
        key=lambda i: (-round(fractions[i], 9), claims[i].spec.age, claims[i].spec.name),
    )
    offer = left
    for i in order:
        if left <= GPU_EPSILON:
            break
        give = max(min(1.0, left, caps[i] - shares[i]), 0.0)
        log.give(claims[i], fractions[i], give, caps[i] - shares[i])
        shares[i] += give
        left -= give
    log.step("remainder", offer)
    return left


def _cap(claim: Claim) -> float:
    cap = claim.demand
    if claim.spec.limit is not None:
        cap = min(cap, claim.spec.limit)
    if not claim.spec.over_quota_allowed or claim.spec.over_quota_weight <= 0:
        cap = min(cap, claim.spec.deserved)  # no claim on spare GPUs
    return max(cap, 0.0)


def nodes_capacity(nodes: Iterable[Node]) -> float:
    """The GPUs fair share splits: those of schedulable nodes (see gpus_shared)."""
    return float(sum([gpus_shared(node.gpus) for node in nodes if node.schedulable]))


def gpus_shared(gpus: Iterable[Gpu]) -> int:
    """How many of a schedulable node's GPUs fair share splits: those not held by others
    (another scheduler's pods), which no queue of ours can be given. (A list, not a
    generator, for sum: a generator's every step is a call.)"""
    return sum([not gpu.held for gpu in gpus])


def fair_shares(
    capacity: float,
    departments: Sequence[QueueSpec],
    projects: Sequence[QueueSpec],
    demand: dict[str, float],
    trace: Trace | None = None,
    usage: Mapping[str, float] | None = None,
    history_weight: float = 0.0,
) -> dict[str, float]:
    """Fair share of every department and project, given each project's total demand.

    A department asks for what its projects may take (capped by its own hard limit), so
    no GPU of its share is left to none of its projects. `trace` records every step.
    `usage`: each project's past usage (engine.history.past_usage), a department's the
    sum of its projects'; it counts `history_weight` times in the split of spare GPUs.
    """
    usage = usage or {}
    result: dict[str, float] = {}
    children: dict[str, list[QueueSpec]] = {d.name: [] for d in departments}
    for project in projects:
        children.setdefault(project.parent, []).append(project)
    dept_claims = [
        Claim(
            d,
            min(
                sum(_cap(Claim(p, demand.get(p.name, 0.0))) for p in children[d.name]),
                d.limit if d.limit is not None else float("inf"),
            ),
            sum(usage.get(p.name, 0.0) for p in children[d.name]),
        )
        for d in departments
    ]
    if trace is not None:
        trace.level = ""
    for claim, share in zip(dept_claims, split(capacity, dept_claims, trace, history_weight)):
        result[claim.spec.name] = share
        kids = children[claim.spec.name]
        project_claims = [Claim(p, demand.get(p.name, 0.0), usage.get(p.name, 0.0)) for p in kids]
        if trace is not None:
            trace.level = claim.spec.name
        shares = split(share, project_claims, trace, history_weight)
        for p_claim, p_share in zip(project_claims, shares):
            result[p_claim.spec.name] = p_share
    return result
