"""Every broken example repo fails `validate` with exactly the diagnostics in its expected.txt."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitops_sched.cli import main

BROKEN = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "broken"
CASES = sorted(p.name for p in BROKEN.iterdir() if p.is_dir())
TEXT_LINE = re.compile(
    r"(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): error (?P<code>GS\d{3}) (?P<obj>[^:]+): "
    r"(?P<msg>.*)"
)
GITHUB_LINE = re.compile(
    r"::error file=(?P<file>[^,]+),line=(?P<line>\d+),col=(?P<col>\d+),"
    r"title=(?P<code>GS\d{3}) (?P<obj>[^:]+)::(?P<msg>.*)"
)


def _validate(case: str, monkeypatch: pytest.MonkeyPatch, *options: str):
    monkeypatch.chdir(BROKEN / case)
    return CliRunner().invoke(main, ["validate", ".", *options])


def _expected(case: str) -> list[str]:
    return (BROKEN / case / "expected.txt").read_text().splitlines()


def _fields(pattern: re.Pattern[str], line: str) -> tuple[str, int, int, str, str, str]:
    match = pattern.fullmatch(line)
    assert match, line
    return (
        match["file"],
        int(match["line"]),
        int(match["col"]),
        match["code"],
        match["obj"],
        match["msg"],
    )


def test_there_are_cases() -> None:
    assert len(CASES) >= 10


@pytest.mark.parametrize("case", CASES)
def test_broken_example(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _validate(case, monkeypatch)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == _expected(case)


def test_json_and_github_formats_carry_the_same_diagnostics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = "project-over-department-quota"
    expected = [_fields(TEXT_LINE, line) for line in _expected(case)]

    as_json = _validate(case, monkeypatch, "--format", "json")
    assert as_json.exit_code == 1
    payload = json.loads(as_json.stdout)
    assert payload["valid"] is False
    assert payload["errors"] == len(expected)
    assert [
        (d["file"], d["line"], d["col"], d["code"], d["object"], d["message"])
        for d in payload["diagnostics"]
    ] == expected
    assert {d["severity"] for d in payload["diagnostics"]} == {"error"}

    as_github = _validate(case, monkeypatch, "--format", "github")
    assert as_github.exit_code == 1
    assert [_fields(GITHUB_LINE, line) for line in as_github.stdout.splitlines()] == expected
