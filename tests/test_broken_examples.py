"""Every broken example repo fails `validate` with exactly the diagnostics in its expected.txt."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
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


# The parser's own words for a syntax error differ between PyYAML's C parser (libyaml) and
# its pure-Python one; the position, the code and our hint do not.
_PARSER_WORDS = re.compile(r"(GS106: YAML syntax error: )[^;]*")


def _without_parser_words(lines: list[str]) -> list[str]:
    return [_PARSER_WORDS.sub(r"\1...", line) for line in lines]


@pytest.mark.parametrize("case", CASES)
def test_broken_example(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _validate(case, monkeypatch)
    assert result.exit_code == 1, result.output
    expected = _expected(case)
    if not yaml.__with_libyaml__:  # expected.txt holds libyaml's words
        expected = _without_parser_words(expected)
        assert _without_parser_words(result.stderr.splitlines()) == expected
    else:
        assert result.stderr.splitlines() == expected


@pytest.mark.usefixtures("each_yaml_parser")
@pytest.mark.parametrize("case", [c for c in CASES if " GS106: " in "".join(_expected(c))])
def test_a_syntax_error_reads_the_same_with_either_parser(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _validate(case, monkeypatch)
    assert result.exit_code == 1, result.output
    lines = _without_parser_words(result.stderr.splitlines())
    assert lines == _without_parser_words(_expected(case))


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
