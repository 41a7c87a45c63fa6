"""The README's walk-through stays true: the files it shows are `examples/walkthrough/`'s,
and every command it shows prints what it shows (run in order, in a Git checkout of the
example, as a reader would from the root of this repository).

`UPDATE_README=1` writes the commands' real output into the README instead of comparing.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitops_sched.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
EXAMPLE = "examples/walkthrough"
_FILE_BLOCK = re.compile(r"```yaml\n# file: (\S+)\n(.*?)```\n", re.S)
# a block whose output holds a fenced block (plan's Mermaid chart) is fenced with more backticks
_CONSOLE_BLOCK = re.compile(r"^(?P<fence>`{3,})console\n(?P<body>.*?)^(?P=fence)\n", re.S | re.M)
# `plan` names the base commit: the reader's HEAD is not the test's
_COMMIT = re.compile(r"(`HEAD` \()[0-9a-f]{12}(\))")


def _section(text: str) -> tuple[int, int]:
    start = text.index("## Walk-through: a config repo from scratch")
    return start, text.index("\n## ", start + 1)


CLI = ".venv/bin/gitops-sched "


def _checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example in a fresh Git repo at `tmp_path`, the current folder."""
    shutil.copytree(ROOT / EXAMPLE, tmp_path / EXAMPLE)
    monkeypatch.chdir(tmp_path)
    for name in ("COLUMNS", "LINES"):  # the width a terminal-less run gets: rich's default
        monkeypatch.delenv(name, raising=False)
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "walk")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "walk@example.com")
    for command in (
        ["git", "init", "-q"],
        ["git", "add", EXAMPLE],
        ["git", "-c", "commit.gpgsign=false", "commit", "-qm", "x"],
    ):
        subprocess.run(command, check=True)


def _output(command: str) -> str:
    """What a command prints, stdout and stderr; gitops-sched runs in process (faster)."""
    if command.startswith(CLI):
        result = CliRunner().invoke(main, shlex.split(command.removeprefix(CLI)))
        assert result.exit_code == 0, (command, result.output)
        return result.output
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    return done.stderr + done.stdout


def _run(block: str) -> str:
    """The block with each `$ command`'s real output below it."""
    out = []
    for command in re.findall(r"^\$ (.*)$", block, re.M):
        lines = [line.rstrip() for line in _output(command).splitlines()]
        while lines and not lines[-1]:
            lines.pop()
        out += [f"$ {command}", *lines]
    return _COMMIT.sub(r"\g<1>0123456789ab\2", "\n".join(out) + "\n")


def test_the_files_shown_are_the_example_s(tmp_path: Path) -> None:
    text = README.read_text()
    start, end = _section(text)
    shown = {path: body for path, body in _FILE_BLOCK.findall(text[start:end])}
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / EXAMPLE).rglob("*.yaml"))
    assert sorted(shown) == files  # every file, each once
    for path, body in shown.items():
        assert body == (ROOT / path).read_text(), path


def test_the_commands_print_what_the_walk_through_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = README.read_text()
    start, end = _section(text)
    _checkout(tmp_path, monkeypatch)
    section = _CONSOLE_BLOCK.sub(
        lambda m: f"{m['fence']}console\n{_run(m['body'])}{m['fence']}\n", text[start:end]
    )
    if os.environ.get("UPDATE_README"):
        README.write_text(text[:start] + section + text[end:])
    assert section == text[start:end]
