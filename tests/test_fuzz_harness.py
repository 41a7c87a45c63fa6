"""The fuzz harness's own contract: a command that ends well passes; its exit code, time
and peak memory are what the child process had."""

from __future__ import annotations

from pathlib import Path

from tests.fuzz_harness import MAX_RSS_MIB, Outcome, run_case

EXAMPLE = Path(__file__).parent.parent / "examples" / "clusters" / "oci-a100"


def test_a_valid_repo_passes_within_the_bounds() -> None:
    outcome = run_case("validate", str(EXAMPLE), cwd=Path.cwd())
    assert outcome.code == 0 and "valid" in outcome.stderr
    assert outcome.problems() == []
    assert 0 < outcome.rss_mib < MAX_RSS_MIB


def test_a_usage_error_passes_and_a_crash_or_memory_past_the_bound_does_not() -> None:
    usage = run_case("render", str(EXAMPLE), "-o", "", cwd=Path.cwd())
    assert usage.code == 2 and usage.problems() == []
    crash = Outcome(1, "", "Traceback (most recent call last):\n", 1.0, 50)
    killed = Outcome(-9, "", "", 1.0, 50)
    fat = Outcome(0, "", "", 1.0, MAX_RSS_MIB + 1)
    raw = Outcome(1, "", "x.yaml: \x1b[2J\n", 1.0, 50)
    assert [len(o.problems()) for o in (crash, killed, fat, raw)] == [1, 1, 1, 1]
