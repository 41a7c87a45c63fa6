"""Instructions of one engine cycle (not a test): prints one JSON object.

    .venv/bin/python benchmarks/cycle_instructions.py [schedule_scale.py's options]

Times on a shared machine drift by ±25% minutes apart, more than most changes to the
engine move them; the instructions the CPU runs do not. This runs schedule_scale.py's
cycle state (the same options, e.g. `--nodes 1000`) under valgrind's cachegrind twice,
once generating the state alone and once generating it and running one cycle, with
PYTHONHASHSEED fixed, and reports the difference: ``cycle_instructions``, the same on
every run of the same code. Needs `valgrind` on the PATH (not a dependency of the
project); a cycle takes about a minute under it.
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
CHILD = """
import sys
sys.path[:0] = [{bench!r}, {root!r}]
import schedule_scale
from gitops_sched.engine.cycle import schedule
args = schedule_scale.parse_args(sys.argv[2:])
snapshot = schedule_scale.generate(args).snapshot
for _ in range(int(sys.argv[1])):
    schedule(snapshot)
"""


def instructions(cycles: int, options: list[str]) -> int:
    """Instructions valgrind counts for building the state and running `cycles` cycles."""
    code = CHILD.format(bench=str(HERE), root=str(HERE.parent))
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
    command += ["--cachegrind-out-file=/dev/null", sys.executable, "-c", code]
    done = subprocess.run(
        [*command, str(cycles), *options],
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
    setup = instructions(0, options)
    total = instructions(1, options)
    result = {
        "benchmark": "cycle_instructions",
        "options": options,
        "setup_instructions": setup,
        "cycle_instructions": total - setup,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
