"""Hierarchical fair share: cluster -> departments -> projects, by water-filling.

At each level a queue first gets its deserved quota (capped by what it asks for);
what is left over is split among the queues that may go over quota, higher
over-quota ranks first, in proportion to their over-quota weights, each capped by
its demand and hard limit. A department's fair share is what its projects share.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gitops_sched.engine.types import GPU_EPSILON, QueueSpec


def water_fill(amount: float, caps: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Split `amount` in proportion to `weights`, no share above its cap; leftovers re-split.

    Entries with weight 0 get nothing. The result sums to min(amount, sum of positive-weight
    caps).
    """
    shares = [0.0] * len(caps)
    open_ = [i for i, w in enumerate(weights) if w > 0 and caps[i] > GPU_EPSILON]
    while amount > GPU_EPSILON and open_:
        total_weight = sum(weights[i] for i in open_)
        capped = [i for i in open_ if caps[i] - shares[i] <= amount * weights[i] / total_weight]
        if not capped:
            for i in open_:
                shares[i] += amount * weights[i] / total_weight
            return shares
        for i in capped:
            amount -= caps[i] - shares[i]
            shares[i] = caps[i]
        open_ = [i for i in open_ if i not in capped]
    return shares


@dataclass(frozen=True)
class Claim:
    """A queue's claim at one level: its spec and the GPUs its work asks for in total."""

    spec: QueueSpec
    demand: float


def split(capacity: float, claims: Sequence[Claim]) -> list[float]:
    """Fair shares of `capacity` among sibling queues (one level of the hierarchy)."""
    caps = [_cap(c) for c in claims]
    deserved = water_fill(
        capacity,
        [min(c.spec.deserved, cap) for c, cap in zip(claims, caps)],
        [max(c.spec.deserved, GPU_EPSILON) for c in claims],
    )
    left = capacity - sum(deserved)
    shares = list(deserved)
    for rank in sorted({c.spec.over_quota_rank for c in claims}, reverse=True):
        members = [
            i
            for i, c in enumerate(claims)
            if c.spec.over_quota_rank == rank and c.spec.over_quota_allowed
        ]
        extra = water_fill(
            left,
            [caps[i] - shares[i] for i in members],
            [claims[i].spec.over_quota_weight for i in members],
        )
        for i, amount in zip(members, extra):
            shares[i] += amount
        left -= sum(extra)
    return shares


def _cap(claim: Claim) -> float:
    cap = claim.demand
    if claim.spec.limit is not None:
        cap = min(cap, claim.spec.limit)
    if not claim.spec.over_quota_allowed or claim.spec.over_quota_weight <= 0:
        cap = min(cap, claim.spec.deserved)  # no claim on spare GPUs
    return max(cap, 0.0)


def fair_shares(
    capacity: float,
    departments: Sequence[QueueSpec],
    projects: Sequence[QueueSpec],
    demand: dict[str, float],
) -> dict[str, float]:
    """Fair share of every department and project, given each project's total demand."""
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
        )
        for d in departments
    ]
    for claim, share in zip(dept_claims, split(capacity, dept_claims)):
        result[claim.spec.name] = share
        kids = children[claim.spec.name]
        project_claims = [Claim(p, demand.get(p.name, 0.0)) for p in kids]
        for p_claim, p_share in zip(project_claims, split(share, project_claims)):
            result[p_claim.spec.name] = p_share
    return result
