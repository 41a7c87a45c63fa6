"""Where `render -o` and `test --junit` write: inside the output folder only, through no
link, and never replacing a device or FIFO by a regular file."""

from __future__ import annotations

import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitops_sched.cli import main

EXAMPLE = Path(__file__).parent.parent / "examples" / "clusters" / "netapp-dgx"
NAMESPACE = "project-team-a"  # a folder a render of the example writes


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry below `folder`: a file's bytes, a link's target, a folder's mark."""
    found: dict[str, bytes | str] = {}
    for path in folder.rglob("*"):
        key = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[key] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            found[key] = "folder"
        else:
            found[key] = path.read_bytes()
    return found


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    """A render of the example in tmp_path/out, and an outside folder holding one file."""
    out = tmp_path / "out"
    assert run("render", str(EXAMPLE), "-o", str(out))[0] == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.yaml").write_text("precious\n")
    return out


def _link_a_folder(out: Path, outside: Path) -> None:
    shutil.rmtree(out / NAMESPACE)
    (out / NAMESPACE).symlink_to(outside, target_is_directory=True)


def _link_crds(out: Path, outside: Path) -> None:
    shutil.rmtree(out / "crds")
    (out / "crds").symlink_to(outside, target_is_directory=True)


def _link_a_deeper_folder(out: Path, outside: Path) -> None:
    shutil.rmtree(out / NAMESPACE / "job")
    (out / NAMESPACE / "job").symlink_to(outside, target_is_directory=True)


def _link_a_file(out: Path, outside: Path) -> None:
    (out / "kustomization.yaml").unlink()
    (out / "kustomization.yaml").symlink_to(outside / "keep.yaml")


def _link_a_rendered_file(out: Path, outside: Path) -> None:
    job = next((out / NAMESPACE / "job").iterdir())
    job.unlink()
    job.symlink_to(outside / "keep.yaml")


def _link_a_stale_entry(out: Path, outside: Path) -> None:
    """The manifest lists a file below a folder that is now a link: a delete would follow."""
    (out / "gone").symlink_to(outside, target_is_directory=True)
    with (out / ".gitops-sched-render").open("a") as manifest:
        manifest.write("gone/keep.yaml\n")


def _link_a_folder_to_a_folder_inside(out: Path, outside: Path) -> None:
    """Even a link that stays inside the output is not followed."""
    shutil.rmtree(out / NAMESPACE)
    (out / NAMESPACE).symlink_to(out / "_cluster", target_is_directory=True)


LINKS = [
    _link_a_folder,
    _link_crds,
    _link_a_deeper_folder,
    _link_a_file,
    _link_a_rendered_file,
    _link_a_stale_entry,
    _link_a_folder_to_a_folder_inside,
]


@pytest.mark.parametrize("make_link", LINKS, ids=[f.__name__.strip("_") for f in LINKS])
def test_render_refuses_a_link_inside_the_output_and_writes_nothing(
    rendered: Path, make_link: object
) -> None:
    outside = rendered.parent / "outside"
    make_link(rendered, outside)  # type: ignore[operator]
    before, outside_before = snapshot(rendered), snapshot(outside)
    code, output = run("render", str(EXAMPLE), "-o", str(rendered))
    assert code == 2
    assert "render writes and deletes only inside the output folder" in output
    assert snapshot(outside) == outside_before  # nothing written or deleted outside
    assert snapshot(rendered) == before  # and nothing half-done inside


@pytest.mark.parametrize("output", ["", "--output="])
def test_an_empty_output_is_a_usage_error_not_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    monkeypatch.chdir(tmp_path)
    args = [output] if output else ["-o", ""]
    code, out = run("render", str(EXAMPLE), *args)
    assert code == 2
    assert "empty" in out
    assert list(tmp_path.iterdir()) == []


# --- test --junit --------------------------------------------------------------------------


def test_junit_to_a_character_device_writes_in_place(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
    code, _ = run("test", str(EXAMPLE), "--junit", str(null))
    assert code == 0
    assert stat.S_ISCHR(os.lstat(null).st_mode)  # still the device, not a regular file


def test_junit_to_a_block_device_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    loop = tmp_path / "loop"
    os.mknod(loop, 0o600 | stat.S_IFBLK, os.makedev(7, 200))  # a loop device nobody set up
    code, output = run("test", str(EXAMPLE), "--junit", str(loop))
    assert code == 2
    assert "not a regular file" in output
    assert stat.S_ISBLK(os.lstat(loop).st_mode)


def test_junit_to_a_fifo_writes_to_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    code, _ = run("test", str(EXAMPLE), "--junit", str(fifo))
    reader.join()
    assert code == 0
    assert received[0].startswith(b"<?xml") and b"<testsuites" in received[0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_junit_to_a_fifo_without_a_reader_fails_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, output = run("test", str(EXAMPLE), "--junit", str(fifo))
    assert code == 2
    assert f"cannot write {fifo}" in output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_junit_through_a_link_replaces_the_file_it_names_and_keeps_the_link(
    tmp_path: Path,
) -> None:
    target = tmp_path / "reports" / "junit.xml"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "junit.xml"
    link.symlink_to(target)
    assert run("test", str(EXAMPLE), "--junit", str(link))[0] == 0
    assert link.is_symlink()
    assert target.read_text().startswith("<?xml")


def test_an_empty_junit_is_a_usage_error_not_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = run("test", str(EXAMPLE), "--junit", "")
    assert code == 2
    assert "--junit is empty" in output
    assert list(tmp_path.iterdir()) == []


def test_junit_to_a_socket_is_refused(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(path))
        code, output = run("test", str(EXAMPLE), "--junit", str(path))
    assert code == 2
    assert "not a regular file, character device or FIFO: not written" in output
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_junit_to_a_full_device_is_a_message(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    code, output = run("test", str(EXAMPLE), "--junit", "/dev/full")
    assert code == 2
    assert "cannot write /dev/full: No space left on device" in output
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)


def test_a_list_of_more_files_than_any_render_writes_is_refused(
    rendered: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitops_sched.compiler import output

    monkeypatch.setattr(output, "MAX_LISTED_FILES", 1_000)
    with (rendered / output.MANIFEST).open("a") as manifest:
        manifest.writelines(f"x{i}/y.yaml\n" for i in range(1_000))
    before = snapshot(rendered)
    code, out = run("render", str(EXAMPLE), "-o", str(rendered))
    assert code == 2
    assert "lists more than 1,000 files, more than any render writes" in out
    assert snapshot(rendered) == before


def test_stale_paths_below_folders_that_are_gone_are_dropped_from_the_list(
    rendered: Path,
) -> None:
    """Each listed path is looked up by its folder: 50,000 in a thousand folders that are
    gone cost a thousand lookups; those in a folder that is there are deleted."""
    from gitops_sched.compiler.output import MANIFEST

    (rendered / "_cluster" / "old").mkdir()
    (rendered / "_cluster" / "old" / "x.yaml").write_text("stale\n")
    with (rendered / MANIFEST).open("a") as manifest:
        manifest.writelines(f"gone{i % 1000}/y{i}.yaml\n" for i in range(50_000))
        manifest.write("_cluster/old/x.yaml\n")
    code, _ = run("render", str(EXAMPLE), "-o", str(rendered))
    assert code == 0
    listed = (rendered / MANIFEST).read_text().splitlines()
    assert not any(p.startswith(("gone", "_cluster/old")) for p in listed)
    assert not (rendered / "_cluster" / "old").exists()
