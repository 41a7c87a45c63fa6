"""Running one fuzz case as the user would, in a process of its own, within bounds.

The command runs in a child Python with `resource.setrlimit` on its address space and its
CPU time, and the parent waits for it with a wall-clock limit (`os.wait4`, which also gives
the child's own peak memory). A case passes when the command ended by itself within the
limits, with exit code 0, 1 or 2, no traceback and no raw control character in its output: a
hang, a crash, a kill by a limit, memory past `MAX_RSS_MIB` or an ESC echoed raw fails it.
The bounds are generous for a loaded CI machine; what they catch is minutes and gigabytes,
not a slow second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_SECONDS = 60  # wall clock, per case
MAX_CPU_SECONDS = 30
MAX_RSS_MIB = 1024  # peak resident memory of the command
ADDRESS_SPACE = 4 << 30  # the child's RLIMIT_AS: an allocation past it fails at once
RAW_CONTROLS = "\x1b\x07\x9b"  # what a terminal acts on: messages show them escaped

RUNNER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({space}, {space}))
resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))
from gitops_sched.cli import main
sys.argv = ["gitops-sched", *sys.argv[1:]]
main()
"""


@dataclass(frozen=True)
class Outcome:
    code: int  # exit status; -N when killed by signal N
    stdout: str
    stderr: str
    seconds: float
    rss_mib: float

    def problems(self) -> list[str]:
        """What breaks the bounds or the CLI's contract (empty: the case passes)."""
        found = []
        if self.code not in (0, 1, 2):
            found.append(f"exit code {self.code}")
        if "Traceback" in self.stderr or "Traceback" in self.stdout:
            found.append("a traceback")
        if self.rss_mib > MAX_RSS_MIB:
            found.append(f"{self.rss_mib:.0f} MiB of memory (bound {MAX_RSS_MIB})")
        if any(c in self.stdout or c in self.stderr for c in RAW_CONTROLS):
            found.append("a raw control character (ESC, BEL or CSI) reached the output")
        return found


class Hang(AssertionError):
    """The case ran past MAX_SECONDS (its process is killed)."""


def run_case(*args: str, cwd: Path) -> Outcome:
    """`gitops-sched ARGS` in `cwd`, bounded; raises Hang past MAX_SECONDS."""
    runner = RUNNER.format(space=ADDRESS_SPACE, cpu=MAX_CPU_SECONDS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, "-c", runner, *args], cwd=cwd, stdout=out, stderr=err, env=env
        )
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > MAX_SECONDS:
                child.kill()
                os.wait4(child.pid, 0)
                child.returncode = -9  # reaped here: Popen must not wait for it again
                raise Hang(f"gitops-sched {' '.join(args)[:200]} ran past {MAX_SECONDS} s")
            time.sleep(0.02)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return Outcome(
            child.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            seconds,
            usage.ru_maxrss / 1024,  # KiB on Linux
        )


def assert_bounded(*args: str, cwd: Path) -> Outcome:
    outcome = run_case(*args, cwd=cwd)
    problems = outcome.problems()
    assert not problems, (args[:6], problems, outcome.stderr[-3000:])
    return outcome


__all__ = ["MAX_RSS_MIB", "MAX_SECONDS", "Hang", "Outcome", "assert_bounded", "run_case"]
