"""A plan: both sides loaded, checked, compiled and run; the differences collected.

The base is read from Git at a ref, the head from Git or the working tree, each through
the same loader (`check_source`); nothing here prints or exits: the CLI does.

What the sides share is done once: the head takes the documents (and their schema check)
of the files the change leaves alone from the base, and the workloads rendered from the
same inputs on both sides are left out of both renders (their objects are equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitops_sched.compiler.targets import OURS, render_target
from gitops_sched.compiler.unchanged import unchanged_workloads
from gitops_sched.config.baseline import NO_BASELINE, Baseline
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.model import Repo
from gitops_sched.config.validate import FileChecks
from gitops_sched.gcpause import paused_gc
from gitops_sched.plan.gitsource import GitError, exists_at, git_folder, ref_files, resolve
from gitops_sched.plan.impact import (
    Scenario,
    StateError,
    full_demand,
    state_simulation,
    workloads,
)
from gitops_sched.plan.objects import ObjectChange, object_changes
from gitops_sched.plan.quotas import Capacity, QuotaChange, capacity, quota_changes
from gitops_sched.plan.statefile import StateFileError, read_state
from gitops_sched.plan.warnings import (
    PlanWarning,
    Problem,
    fixed_problems,
    new_problems,
    warnings,
)
from gitops_sched.validate import check_repo, check_source

WORKING_TREE = "working tree"


class PlanInputError(Exception):
    """Input plan cannot use: not a Git repo, unknown ref, a state that does not fit."""


@dataclass(frozen=True)
class Side:
    ref: str  # as given, or "working tree"
    commit: str | None
    repo: Repo | None  # None when invalid
    diagnostics: Diagnostics
    absent: bool = False  # the config folder is not in the ref at all (a new config)

    @property
    def valid(self) -> bool:
        return self.repo is not None

    @property
    def errors(self) -> int:
        return sum(d.severity.value == "error" for d in self.diagnostics.items)


@dataclass(frozen=True)
class Plan:
    path: str
    base: Side
    head: Side
    new_problems: tuple[Problem, ...]
    fixed_problems: tuple[Problem, ...]
    objects: tuple[ObjectChange, ...] = ()
    quotas: tuple[QuotaChange, ...] = ()
    capacity: Capacity | None = None
    full_demand: Scenario | None = None
    workloads: Scenario | None = None
    warnings: tuple[PlanWarning, ...] = ()
    target: str = OURS  # whose objects `objects` diffs: ours, kai or kueue
    # the head's warnings of what the target cannot express: where its scheduler may decide
    # otherwise than the simulation (none for ours)
    target_differences: tuple[Problem, ...] = ()

    @property
    def compared(self) -> bool:
        """Both sides valid: the deltas and the fairness impact are there."""
        return self.base.valid and self.head.valid


def _side(
    path: Path,
    ref: str | None,
    excludes: tuple[str, ...],
    seen: FileChecks,
    base: Side | None = None,
) -> Side:
    """One side, its files left out by its own `.gitops-schedignore` and by `excludes`.

    The head is checked against a valid base, so that a problem two objects share (a
    duplicate name, a sum over its bound) is reported on the one the change introduced.
    `seen` carries the files the base read to the head: those it did not change are not
    read or schema-checked again."""
    baseline = Baseline.of(base.repo.documents()) if base and base.repo else NO_BASELINE
    if ref is None:
        repo, diagnostics = check_repo(path, excludes, baseline, seen)
        return Side(WORKING_TREE, None, repo, diagnostics)
    folder = git_folder(path)
    commit = resolve(folder, ref)
    repo, diagnostics = check_source(ref_files(folder, commit, excludes), baseline, seen)
    return Side(ref, commit, repo, diagnostics, absent=not exists_at(folder, commit))


def _state(path: Path | None, base: Repo):
    if path is None:
        return None
    try:
        data = read_state(path)
    except StateFileError as exc:
        raise PlanInputError(str(exc)) from exc
    try:
        return state_simulation(base, data, path.as_posix())
    except StateError as exc:
        raise PlanInputError(f"the state does not fit the base config:\n{exc}") from exc


@paused_gc()  # both sides' models, objects and runs are large and acyclic
def make_plan(
    path: Path,
    base_ref: str,
    head_ref: str | None = None,
    state: Path | None = None,
    excludes: tuple[str, ...] = (),
    target: str = OURS,
) -> Plan:
    """The plan of the change from `base_ref` to `head_ref` (None: the working tree), its
    object diff of `target`'s objects."""
    try:
        git_folder(path)  # a working-tree head must be in Git too: the base comes from there
        seen: FileChecks = {}
        base = _side(path, base_ref, excludes, seen)
        head = _side(path, head_ref, excludes, seen, base)
    except GitError as exc:
        raise PlanInputError(str(exc)) from exc
    problems = new_problems(base.diagnostics if base.valid else None, head.diagnostics)
    # a config the change adds fixes nothing: the base's "no Cluster document" is no problem
    fixed = () if base.absent else fixed_problems(base.diagnostics, head.diagnostics)
    plan = Plan(path.as_posix(), base, head, problems, fixed, target=target)
    if not (base.valid and head.valid):
        return plan
    assert base.repo is not None and head.repo is not None
    simulation = _state(state, base.repo)
    scenario = workloads(base.repo, head.repo, simulation)
    # workloads rendered from the same inputs on both sides are the same objects: left out
    alone = unchanged_workloads(base.repo, head.repo)
    written: dict[str, Any] = {}
    before = render_target(base.repo, target, alone, written)
    after = render_target(head.repo, target, alone, written)
    return Plan(
        path.as_posix(),
        base,
        head,
        problems,
        fixed,
        objects=object_changes(before.objects, after.objects, base.repo, head.repo, written),
        quotas=quota_changes(base.repo, head.repo),
        capacity=capacity(base.repo, head.repo),
        full_demand=full_demand(base.repo, head.repo),
        workloads=scenario,
        warnings=warnings(base.repo, head.repo, scenario, problems),
        target=target,
        target_differences=tuple(Problem.of(w) for w in after.diagnostics),
    )
