"""Scale benchmark for `gitops-sched plan` (not a test): prints one JSON object.

    .venv/bin/python benchmarks/plan_scale.py [--seed 1] [--departments 50]
        [--projects 1000] [--workloads 10000] [--repeat 3] [--profile FILE]
        [--change quota|comment]

The repo is compile_scale.py's generated one (imported, same seed, same sizes), committed
to a temporary Git repo; the working tree then raises one project's GPU quota by one
(a project whose department has the slack, so the head stays valid), or with
`--change comment` adds one comment to that project's file and changes nothing: its plan
must show no eviction, no start and no allocation change (``evicted``, ``started``,
``allocation_changed``). Measured, best of `--repeat` (``time.perf_counter``):

* ``validate_s``: ``check_repo`` of the working tree, what ``gitops-sched validate`` does;
* ``plan_s``: ``make_plan(path, base="HEAD")`` — the base read from Git, both sides
  validated (the head reads and schema-checks only the files the change touched),
  compiled (the workloads rendered from the same inputs on both sides left out of both)
  and simulated (the repo's workloads settled under the base, then the head applied),
  objects diffed — and its Markdown and JSON written in memory;
* ``ratio_plan_over_validate``: the figure the goal is stated in (<= 6).
* ``engine_cycles``, ``engine_cpu_s``: the engine cycles the last plan's settles ran (base,
  then head, each until a cycle changes nothing) and their CPU seconds: a change to the
  engine's rules may add cycles (a reclaim that cascades over more cycles) at the same cost
  each, or cost more per cycle, and only these tell the two apart.

Each timed run starts from a collected heap (``gc.collect()``, not timed), so that no run
pays for the collector's walk over what the run before left, validate and plan alike.

``--profile FILE`` runs one more plan under cProfile (not timed) and writes its stats to
FILE (``python -m pstats FILE``); the JSON then also gives ``settle_share``, the share of
that plan's time spent in the engine's ``settle`` (two settles: base, then head).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compile_scale import generate, write_repo

from gitops_sched.engine import apply as engine_apply
from gitops_sched.plan.build import make_plan
from gitops_sched.plan.jsonout import to_json
from gitops_sched.plan.markdown import render
from gitops_sched.validate import check_repo

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=True, capture_output=True
    )


def quota_to_raise(files: dict[str, list[dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    """The file and the first project whose department's quota has room for one more GPU."""
    for name, docs in sorted(files.items()):
        if not name.startswith("projects/"):
            continue
        department = files[name.replace("projects/", "departments/")][0]["spec"]["quota"]["gpu"]
        used = sum(d["spec"].get("quota", {}).get("gpu", 0) for d in docs)
        for project in docs:
            quota = project["spec"].get("quota")
            if quota and "gpu" in quota and used + 1 <= department:
                return name, project
    raise SystemExit("no department with slack for one more GPU")


def change(files: dict[str, list[dict[str, Any]]], root: Path, how: str) -> str:
    """Write the working tree with the change `how` made; what it changed."""
    name, project = quota_to_raise(files)
    if how == "quota":
        project["spec"]["quota"]["gpu"] += 1
    write_repo(files, root)
    if how == "comment":
        with (root / name).open("a", encoding="utf-8") as file:
            file.write("# a comment: nothing else changes\n")
        return name
    return project["metadata"]["name"]


def allocation_changed(moves: dict[str, Any]) -> list[str]:
    """The projects whose allocation for the repo's workloads the plan says changes."""
    return [
        row["name"]
        for row in moves["projects"]
        if row["allocated"]["before"] != row["allocated"]["after"]
    ]


def best(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of `repeat` runs; each starts from a collected heap, so that no run pays
    for the collector's walk over what the run before left (validate and plan alike)."""
    times, result = [], None
    for _ in range(repeat):
        result = None
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


@contextmanager
def engine_cycles() -> Iterator[list[float]]:
    """The CPU seconds of each engine cycle the settles run meanwhile, in a list the caller
    may clear: how many cycles a plan's settles take and what each costs, the two things a
    change to the engine's rules moves apart (more cycles, or dearer ones)."""
    cycles: list[float] = []
    schedule = engine_apply.schedule_carrying

    def counted(snapshot: Any, carried: Any = None) -> Any:
        start = time.process_time()
        result = schedule(snapshot, carried)
        cycles.append(time.process_time() - start)
        return result

    engine_apply.schedule_carrying = counted  # what settle calls, looked up at each call
    try:
        yield cycles
    finally:
        engine_apply.schedule_carrying = schedule


def profile(fn: Callable[[], Any], file: str) -> dict[str, Any]:
    """One run of `fn` under cProfile, its stats written to `file`; the settles' share."""
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    profiler.dump_stats(file)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = max(ct for (_, _, _, ct, _) in stats.values())
    settle = sum(
        ct
        for (path, _, name), (_, _, _, ct, _) in stats.items()
        if name == "settle" and os.path.join("gitops_sched", "engine", "") in path
    )
    return {
        "profile": file,
        "profiled_plan_s": round(total, 3),
        "settle_s": round(settle, 3),
        "settle_share": round(settle / total, 3),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--departments", type=int, default=50)
    parser.add_argument("--projects", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", metavar="FILE", help="cProfile one more plan into FILE")
    parser.add_argument(
        "--change",
        choices=("quota", "comment"),
        default="quota",
        help="raise one project's quota (default), or add a comment that changes nothing",
    )
    args = parser.parse_args(argv)
    if args.profile:
        args.profile = os.path.abspath(args.profile)  # the run changes directory
    return args


def set_up(args: argparse.Namespace, root: Path) -> str:
    """The generated repo committed to a Git repo at `root` (in `cfg`), the change made in
    the working tree; what it changed."""
    files = generate(args)
    write_repo(files, root / "cfg")
    git(root, "init", "-q")
    git(root, "add", "cfg")
    git(root, "commit", "-q", "-m", "base")
    return change(files, root / "cfg", args.change)


def plan() -> Any:
    """One plan of the change in the current directory's `cfg`, with its Markdown and JSON."""
    result = make_plan(Path("cfg"), "HEAD")
    return result, render(result), json.dumps(to_json(result))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="plan-scale-") as tmp:
        root = Path(tmp)
        changed = set_up(args, root)
        os.chdir(root)
        validate_s, (repo, _) = best(args.repeat, lambda: check_repo(Path("cfg")))
        assert repo is not None, "the changed repo must validate"

        with engine_cycles() as cycles:

            def counted_plan() -> Any:
                cycles.clear()  # the last run's alone
                return plan()

            plan_s, (result, _, _) = best(args.repeat, counted_plan)
        data = to_json(result)
        moves = data["fairness"]["workloads"]
        profiled = profile(plan, args.profile) if args.profile else {}
    json.dump(
        {
            "benchmark": "plan_scale",
            "projects": args.projects,
            "workloads": args.workloads,
            "change": args.change,
            "changed": changed,
            "summary": data["summary"],
            "objects_changed": data["objects"]["changed"],
            "evicted": len(moves["evicted"]),
            "started": len(moves["started"]),
            "allocation_changed": allocation_changed(moves),
            "validate_s": round(validate_s, 3),
            "plan_s": round(plan_s, 3),
            "ratio_plan_over_validate": round(plan_s / validate_s, 2),
            "engine_cycles": len(cycles),
            "engine_cpu_s": round(sum(cycles), 3),
            "goal": "ratio <= 6",
            "repeat": args.repeat,
            **profiled,
            "machine": {"cpus": os.cpu_count(), "load_average_1m": os.getloadavg()[0]},
        },
        sys.stdout,
        indent=2,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
