"""A config folder as it is at a Git ref, read straight from the object database.

`git ls-tree -r` lists the tree and one `git cat-file --batch` streams the blobs: no
checkout, no change to the working tree or the index, git on PATH the only requirement.
Files come in the order and with the names a folder load gives (`folder_files`), so a ref
and a folder load the same way and their diagnostics compare.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gitops_sched.config.ignore import IGNORE_FILE, IgnoreRules
from gitops_sched.config.loader import YAML_SUFFIXES

BLOB_MODES = ("100644", "100755")  # regular files; links and submodules are not config


class GitError(Exception):
    """A usage problem with the Git side: not a repo, unknown ref, shallow history."""


@dataclass(frozen=True)
class GitFolder:
    """A folder (`prefix`, relative to the repo's top) of the repo at `top`."""

    top: Path
    prefix: str  # "" or "clusters/prod/" as `git rev-parse --show-prefix` spells it
    shown: Path  # the folder as the user named it: the start of every file name


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed (plan reads the base ref with git)") from exc


def git_folder(path: Path) -> GitFolder:
    """The Git repo holding the folder `path`; GitError when there is none."""
    folder = path if path.is_dir() else path.parent
    found = _git(folder, "rev-parse", "--show-toplevel", "--show-prefix")
    if found.returncode != 0:
        raise GitError(f"{path}: not inside a Git repository (plan compares Git refs)")
    top, prefix = (found.stdout.decode().splitlines() + ["", ""])[:2]
    return GitFolder(Path(top), prefix, path)


def resolve(folder: GitFolder, ref: str) -> str:
    """The commit `ref` names; GitError saying why not (a shallow clone is named as such)."""
    found = _git(
        folder.top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"
    )
    if found.returncode == 0:
        return found.stdout.decode().strip()
    shallow = _git(folder.top, "rev-parse", "--is-shallow-repository").stdout.decode().strip()
    if shallow == "true":
        raise GitError(
            f"unknown Git ref '{ref}': this is a shallow clone without it; fetch the history "
            "(actions/checkout with fetch-depth: 0, or git fetch --unshallow)"
        )
    raise GitError(f"unknown Git ref '{ref}' (not a branch, tag or commit of {folder.top})")


def _walk_order(path: str) -> tuple:
    """os.walk's order with sorted names: a folder's files before its subfolders."""
    *dirs, name = path.split("/")
    return (*((1, d) for d in dirs), (0, name))


def _rules(folder: GitFolder, blob: str | None, excludes: Iterable[str]) -> IgnoreRules:
    """The folder's `.gitops-schedignore` at the ref (blob id, if any) plus `excludes`."""
    if blob is None:
        return IgnoreRules.of("", excludes)
    found = _git(folder.top, "cat-file", "blob", blob)
    if found.returncode != 0:
        raise GitError(f"git cat-file {blob}: {found.stderr.decode().strip()}")
    try:
        return IgnoreRules.of(found.stdout.decode("utf-8"), excludes)
    except (UnicodeDecodeError, ValueError) as exc:
        raise GitError(f"{folder.shown / IGNORE_FILE}: not a gitignore file ({exc})") from exc


def _listed(folder: GitFolder, commit: str, excludes: Iterable[str]) -> list[tuple[str, str]]:
    """(path below the folder, blob id) of the YAML files a folder load would read."""
    below = [folder.prefix] if folder.prefix else []  # the repo's root: no pathspec at all
    listing = _git(folder.top, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *below)
    if listing.returncode != 0:
        raise GitError(f"git ls-tree {commit}: {listing.stderr.decode().strip()}")
    files, ignore_file = [], None
    for entry in listing.stdout.decode().split("\0"):
        if not entry:
            continue
        meta, _, full = entry.partition("\t")
        mode, kind, blob = meta.split()
        relative = full[len(folder.prefix) :]
        parts = PurePosixPath(relative).parts
        if relative == IGNORE_FILE and kind == "blob":
            ignore_file = blob
        if kind != "blob" or mode not in BLOB_MODES or any(p.startswith(".") for p in parts):
            continue
        if relative.endswith(YAML_SUFFIXES):
            files.append((relative, blob))
    rules = _rules(folder, ignore_file, excludes)
    kept = [(relative, blob) for relative, blob in files if not rules.leaves_out(relative)]
    return sorted(kept, key=lambda item: _walk_order(item[0]))


def ref_files(
    folder: GitFolder, commit: str, excludes: Iterable[str] = ()
) -> Iterator[tuple[str, bytes]]:
    """The folder's YAML files at `commit` as (path, bytes), as `folder_files` names them.

    Left out as a folder load would: the ref's own `.gitops-schedignore`, then `excludes`."""
    files = _listed(folder, commit, excludes)
    if not files:
        return
    batch = _git(
        folder.top, "cat-file", "--batch", stdin="".join(f"{b}\n" for _, b in files).encode()
    )
    if batch.returncode != 0:
        raise GitError(f"git cat-file: {batch.stderr.decode().strip()}")
    out, at = batch.stdout, 0
    for relative, _ in files:
        end = out.index(b"\n", at)
        size = int(out[at:end].split()[2])
        yield (folder.shown / relative).as_posix(), out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1  # the content, then a newline
