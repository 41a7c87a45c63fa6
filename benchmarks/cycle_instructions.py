"""Instructions of one engine cycle, one plan or one settle (not a test): prints one JSON object.

    .venv/bin/python benchmarks/cycle_instructions.py [schedule_scale.py's options]
    .venv/bin/python benchmarks/cycle_instructions.py --plan [plan_scale.py's options]
    .venv/bin/python benchmarks/cycle_instructions.py --repo [schedule_scale.py's options]

Times on a shared machine drift by ±25% minutes apart, more than most changes to the
engine move them; the instructions the CPU runs do not. This runs schedule_scale.py's
cycle state (the same options, e.g. `--nodes 1000`) under valgrind's cachegrind twice,
once generating the state alone and once generating it and running one cycle, with
PYTHONHASHSEED fixed, and reports the difference: ``cycle_instructions``, the same on
every run of the same code. Needs `valgrind` on the PATH (not a dependency of the
project); a cycle takes about a minute under it.

With `--plan`, the same for plan_scale.py's plan (its repo committed to Git and the change
made, then one `make_plan` with its Markdown and JSON): ``plan_instructions``, about ten
minutes under valgrind for the default 10,000 workloads. With `--repo` (then
schedule_scale.py's options, e.g. `--repo-projects 100`), the same for schedule_scale.py's
repo section, `simulate` of compile_scale's repo from empty: ``repo_instructions``, about
five minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# run under valgrind: build the state, then run argv[1] cycles of it
CYCLE = """
import sys
sys.path[:0] = [{bench!r}, {root!r}]
import schedule_scale
from gitops_sched.engine.cycle import schedule
args = schedule_scale.parse_args(sys.argv[2:])
snapshot = schedule_scale.generate(args).snapshot
for _ in range(int(sys.argv[1])):
    schedule(snapshot)
"""
# likewise: set the repo and its change up, then run argv[1] plans of it
PLAN = """
import os, sys, tempfile
from pathlib import Path
sys.path[:0] = [{bench!r}, {root!r}]
import plan_scale
args = plan_scale.parse_args(sys.argv[2:])
with tempfile.TemporaryDirectory() as tmp:
    plan_scale.set_up(args, Path(tmp))
    os.chdir(tmp)
    for _ in range(int(sys.argv[1])):
        plan_scale.plan()
"""

# likewise: write and validate the repo, then simulate it from empty argv[1] times
REPO = """
import sys, tempfile
from pathlib import Path
sys.path[:0] = [{bench!r}, {root!r}]
import schedule_scale
from gitops_sched.sim.run import simulate
args = schedule_scale.parse_args(sys.argv[2:])
compile_scale = schedule_scale.compile_scale_module()
with tempfile.TemporaryDirectory() as tmp:
    compile_scale.write_repo(compile_scale.generate(schedule_scale.repo_params(args)), Path(tmp))
    repo = compile_scale.validate(Path(tmp))
for _ in range(int(sys.argv[1])):
    simulate(repo)
"""
MODES = {"--plan": ("plan", PLAN), "--repo": ("repo", REPO)}


def instructions(child: str, runs: int, options: list[str]) -> int:
    """Instructions valgrind counts for `child` setting up and running `runs` times."""
    code = child.format(bench=str(HERE), root=str(HERE.parent))
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
    command += ["--cachegrind-out-file=/dev/null", sys.executable, "-c", code]
    done = subprocess.run(
        [*command, str(runs), *options],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(options: list[str]) -> int:
    if shutil.which("valgrind") is None:
        print("cycle_instructions: valgrind is not on the PATH", file=sys.stderr)
        return 2
    measured, child = "cycle", CYCLE
    if options[:1] and options[0] in MODES:
        (measured, child), options = MODES[options[0]], options[1:]
    setup = instructions(child, 0, options)
    total = instructions(child, 1, options)
    result = {
        "benchmark": "cycle_instructions",
        "options": options,
        "setup_instructions": setup,
        f"{measured}_instructions": total - setup,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
