"""A settled state stays settled: continued under the same config from what it wrote out
(`simulate --format json` fed back as `running:`), the engine decides nothing; and a plan
blames a change only for what it causes, so a change that changes nothing moves nothing.

The repos are the benchmarks' generated ones (`benchmarks/compile_scale.py`: whole GPUs,
fractions, GPU memory, MIG, gangs and elastic workloads, interactive and inference work,
several departments, over-quota weights, ranks and denials, limits) at small sizes. Issue
23's repo is the smallest found where the order a continuation queued its workloads in
(by name, not as they were submitted) made a settled state evict and start work.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml
from conftest import examples
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from benchmarks.compile_scale import generate, write_repo
from gitops_sched.config.model import Repo
from gitops_sched.config.validate import check_repo
from gitops_sched.plan.build import Plan, make_plan
from gitops_sched.plan.impact import state_simulation
from gitops_sched.sim.report import to_json
from gitops_sched.sim.run import simulate

Files = dict[str, list[dict[str, Any]]]
ISSUE_23 = {"seed": 2, "departments": 3, "projects": 20, "workloads": 150}
NO_OPS = ("comment", "reordered keys", "reformatted")


def generated(seed: int, departments: int, projects: int, workloads: int) -> Files:
    args = argparse.Namespace(
        seed=seed, departments=departments, projects=projects, workloads=workloads
    )
    return generate(args)


def load(files: Files) -> Repo | None:
    """The generated repo as `validate` loads it; None where the generator made an invalid
    one (it sizes for hundreds of projects: a few small draws break a rule)."""
    with tempfile.TemporaryDirectory() as tmp:
        write_repo(files, Path(tmp))
        repo, _ = check_repo(Path(tmp))
    return repo


sizes = {
    "seed": st.integers(1, 10_000),
    "departments": st.integers(1, 3),
    "projects": st.integers(3, 16),
    "workloads": st.integers(20, 120),
}


@settings(max_examples=examples(12), deadline=None)
@given(**sizes)
@example(**ISSUE_23)
def test_a_settled_state_fed_back_as_running_decides_nothing(
    seed: int, departments: int, projects: int, workloads: int
) -> None:
    repo = load(generated(seed, departments, projects, workloads))
    assume(repo is not None)
    assert repo is not None
    settled = json.loads(json.dumps(to_json(simulate(repo))))
    again = simulate(repo, state_simulation(repo, settled, "state.json"))
    assert [(e.action, e.workload, e.reason) for e in again.log] == []
    assert to_json(again)["workloads"] == settled["workloads"]


# --- plan: a change that changes nothing ----------------------------------------------------


def git(cwd: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(cwd)}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def reordered(value: Any) -> Any:
    """Every mapping's keys in reverse order (lists keep theirs: their order is content)."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(value)}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def no_op_text(docs: list[dict[str, Any]], text: str, how: str) -> str:
    """The file's text changed in a way that changes none of its objects."""
    if how == "comment":
        return text + "# a reviewer's note: nothing else changes\n"
    if how == "reordered keys":
        return yaml.safe_dump_all([reordered(d) for d in docs], sort_keys=False)
    return yaml.safe_dump_all(docs, sort_keys=True, default_flow_style=True, width=60, indent=4)


def plan_of_no_op(files: Files, file: int, how: str) -> Plan:
    """The plan of a working tree that changes one file of the committed repo, `how`."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_repo(files, root / "cfg")
        git(root, "init", "-q")
        git(root, "add", "cfg")
        git(root, "commit", "-q", "-m", "base")
        name = sorted(files)[file % len(files)]
        path = root / "cfg" / name
        path.write_text(no_op_text(files[name], path.read_text(), how), encoding="utf-8")
        return make_plan(root / "cfg", "HEAD")


def assert_no_moves(plan: Plan) -> None:
    assert plan.compared and plan.workloads is not None
    assert plan.objects == ()
    assert [m.workload for m in plan.workloads.evicted] == []
    assert [m.workload for m in plan.workloads.started] == []
    changed = [p for p in plan.workloads.projects if p.changed]
    assert changed == []


@settings(max_examples=examples(6), deadline=None)
@given(**sizes, file=st.integers(0, 1000), how=st.sampled_from(NO_OPS))
@example(**ISSUE_23, file=0, how="comment")
def test_the_plan_of_a_change_that_changes_nothing_moves_nothing(
    seed: int, departments: int, projects: int, workloads: int, file: int, how: str
) -> None:
    files = generated(seed, departments, projects, workloads)
    assume(load(files) is not None)
    assert_no_moves(plan_of_no_op(files, file, how))
