"""The CLI on hostile or ignored files: exit codes and messages, never a traceback or a hang."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gitops_sched.cli import main
from gitops_sched.compiler import writing
from tests.test_plan import base_config, git
from tests.test_plan import write as write_config

EXAMPLE = Path(__file__).parent.parent / "examples" / "clusters" / "oci-a100"
BROKEN = "apiVersion: gitops-sched.io/v1alpha1\nkind: Project\nmetadata: {name: [oops]}\n"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of a valid example repo, with a broken file under ci/."""
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root)
    (root / "ci").mkdir()
    (root / "ci" / "pipeline.yaml").write_text(BROKEN)
    return root


def test_a_file_instead_of_a_folder_is_a_usage_error(repo: Path) -> None:
    code, output = run("validate", str(repo / "cluster.yaml"))
    assert code == 2
    assert "is a file" in output


def test_an_empty_folder_is_invalid_and_says_why(tmp_path: Path) -> None:
    code, output = run("validate", str(tmp_path))
    assert code == 1
    assert output == f"{tmp_path}:1:1: error GS102: no YAML files found under {tmp_path}\n"


def test_a_fifo_and_an_outside_link_are_errors_not_hangs(repo: Path) -> None:
    (repo / "ci" / "pipeline.yaml").unlink()
    os.mkfifo(repo / "pipe.yaml")
    (repo / "zero.yaml").symlink_to("/dev/zero")
    code, output = run("validate", str(repo))
    assert code == 1
    assert output.splitlines() == [
        f"{repo}/pipe.yaml:1:1: error GS101: a FIFO, not a regular file: only files are read",
        f"{repo}/zero.yaml:1:1: error GS101: symlink leads outside the repo (to /dev/zero): "
        "refused",
    ]


@pytest.mark.parametrize("command", ["validate", "render -o -", "simulate --format json"])
def test_exclude_leaves_files_out_of_every_command(repo: Path, command: str) -> None:
    name, *rest = command.split()
    assert run(name, str(repo), *rest)[0] == 1
    code, output = run(name, str(repo), *rest, "--exclude", "ci/")
    assert code == 0, output


def test_the_ignore_file_leaves_files_out_and_exclude_adds_to_it(repo: Path) -> None:
    (repo / ".gitops-schedignore").write_text("ci/\n")
    assert run("validate", str(repo))[0] == 0
    (repo / "scratch.yaml").write_text(BROKEN)
    assert run("validate", str(repo))[0] == 1
    assert run("validate", str(repo), "--exclude", "scratch.yaml", "--exclude", "*.tmp")[0] == 0


def test_plan_reads_each_sides_own_ignore_file_and_applies_excludes_to_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "git"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_config(root / "cfg", base_config())
    (root / "cfg" / "rendered").mkdir()
    (root / "cfg" / "rendered" / "out.yaml").write_text(BROKEN)
    (root / "cfg" / ".gitops-schedignore").write_text("rendered/\n")
    git(root, "add", "cfg")
    git(root, "commit", "-q", "-m", "base")
    monkeypatch.chdir(root)
    # the base ignores rendered/ by its committed ignore file; the working tree by its own
    code, output = run("plan", "cfg", "--base", "main", "--format", "json")
    assert code == 0, output
    # a broken file on both sides, left out of both by --exclude
    (root / "cfg" / "scratch").mkdir()
    (root / "cfg" / "scratch" / "x.yaml").write_text(BROKEN)
    git(root, "add", "cfg")
    git(root, "commit", "-q", "-m", "scratch")
    assert run("plan", "cfg", "--base", "main")[0] == 1
    code, output = run("plan", "cfg", "--base", "main", "--exclude", "scratch/", "--format", "json")
    assert code == 0, output
    # the working tree drops its ignore file: rendered/ counts there, and breaks the head
    (root / "cfg" / ".gitops-schedignore").unlink()
    code, _ = run("plan", "cfg", "--base", "main", "--exclude", "scratch/")
    assert code == 1


# --- where render writes -------------------------------------------------------------------


def test_render_under_a_file_is_a_clear_usage_error(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    code, output = run("render", str(EXAMPLE), "-o", str(tmp_path / "afile" / "out"))
    assert code == 2
    assert f"render: cannot write {tmp_path / 'afile' / 'out'}: Not a directory" in output


@pytest.mark.parametrize("name", ["kustomization.yaml", ".gitops-sched-render"])
def test_a_fifo_where_render_reads_its_own_files_is_refused_not_waited_on(
    tmp_path: Path, name: str
) -> None:
    # a FIFO opened for reading blocks until a writer comes: render would hang for ever
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / name)
    code, output = run("render", str(EXAMPLE), "-o", str(out))
    assert code == 2
    assert f"{out / name} is not a regular file" in output


def test_the_next_render_removes_what_a_killed_render_left_beside_its_files(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    assert run("render", str(EXAMPLE), "-o", str(out))[0] == 0
    leaf = next(p for p in sorted(out.rglob("*.yaml")) if p.parent != out)
    # what `write` leaves when killed between creating its temporary file and renaming it
    left = [
        leaf.parent / f".{leaf.name}.0123456789ab.tmp",
        out / ".kustomization.yaml.abcdef012345.tmp",
    ]
    foreign = leaf.parent / ".notes.yaml.0123456789ab.tmp"  # beside no file render writes
    for path in (*left, foreign):
        path.write_text("")
    assert run("render", str(EXAMPLE), "-o", str(out))[0] == 0
    assert not any(path.exists() for path in left)
    assert foreign.exists()


CLI = "from gitops_sched.cli import main; main()"  # the console script, in a process of its own


def test_a_disk_that_fills_mid_render_leaves_no_half_file_and_the_next_render_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    real_write = writing.write_all
    written = []

    def fill_up(fd: int, data: bytes) -> None:
        if len(written) == 10:  # the disk fills halfway through the 11th file
            real_write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(fd)
        real_write(fd, data)

    monkeypatch.setattr(writing, "write_all", fill_up)
    code, output = run("render", str(EXAMPLE), "-o", str(out))
    assert code == 2 and "No space left on device" in output
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]  # no staging left
    for path in out.rglob("*.yaml"):  # every file there is whole
        list(yaml.safe_load_all(path.read_text()))
    monkeypatch.undo()
    code, _ = run("render", str(EXAMPLE), "-o", str(out))  # the next render completes it
    assert code == 0
    assert (out / "kustomization.yaml").is_file()


@pytest.mark.parametrize(
    "command",
    [
        ["render", str(EXAMPLE), "-o", "-"],
        ["simulate", str(EXAMPLE)],
        ["simulate", str(EXAMPLE), "--format", "json"],
        ["explain", str(EXAMPLE), "sandbox-notebook"],
        ["test", str(EXAMPLE.parent / "netapp-dgx")],  # oci-a100 has no scenarios
    ],
)
def test_every_command_says_when_its_output_cannot_be_written(command: list[str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-c", CLI, *command],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    assert done.returncode == 2
    assert "gitops-sched: cannot write the output: No space left on device" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_file_that_fails_a_command_is_named_in_one_line(monkeypatch) -> None:
    # an OSError no loader turned into a diagnostic (here a file that became unreadable
    # mid-run) names its file instead of blaming the output
    def unreadable(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "cfg/projects/team-a.yaml")

    monkeypatch.setattr("gitops_sched.validate.check_repo", unreadable)
    done = CliRunner().invoke(main, ["validate", str(EXAMPLE)])
    assert done.exit_code == 2
    assert done.stderr == "gitops-sched: cfg/projects/team-a.yaml: Permission denied\n"
