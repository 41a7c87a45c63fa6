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

from gitops_sched.config import codes
from gitops_sched.config.ignore import IGNORE_FILE, IgnoreRules
from gitops_sched.config.loader import MAX_FILE_BYTES, YAML_SUFFIXES, Unreadable, ignore_rules

BLOB_MODES = ("100644", "100755")  # regular files; links and submodules are not config
LINK_MODE = "120000"  # a symlink: its blob is the target's path, which a ref is not read by


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
    top, prefix = (found.stdout.decode("utf-8", "surrogateescape").splitlines() + ["", ""])[:2]
    return GitFolder(Path(top), prefix, path)


def exists_at(folder: GitFolder, commit: str) -> bool:
    """Whether the folder is in the commit's tree (the repo's root always is): a config
    folder a change adds is not there at the base."""
    if not folder.prefix:
        return True
    found = _git(folder.top, "ls-tree", "--name-only", commit, "--", folder.prefix.rstrip("/"))
    return found.returncode == 0 and bool(found.stdout.strip())


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
    if _git(folder.top, "rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
        raise GitError(
            f"unknown Git ref '{ref}': {folder.top} has no commit yet; commit the base config "
            "first (git add -A && git commit), then plan the change against it"
        )
    raise GitError(f"unknown Git ref '{ref}' (not a branch, tag or commit of {folder.top})")


def _walk_order(path: str) -> tuple:
    """os.walk's order with sorted names: a folder's files before its subfolders."""
    *dirs, name = path.split("/")
    return (*((1, d) for d in dirs), (0, name))


def _rules(
    folder: GitFolder, blob: Blob | None, excludes: Iterable[str]
) -> IgnoreRules | Unreadable:
    """The folder's `.gitops-schedignore` at the ref (if any) plus `excludes`, or why the
    file is unreadable (as `folder_rules` says for a folder)."""
    if blob is None:
        return ignore_rules(b"", excludes)
    if blob.size > MAX_FILE_BYTES:
        return Unreadable(f"file is over the {MAX_FILE_BYTES}-byte limit", codes.FILE_TOO_LARGE)
    found = _git(folder.top, "cat-file", "blob", blob.id)
    if found.returncode != 0:
        raise GitError(f"git cat-file {blob.id}: {found.stderr.decode().strip()}")
    return ignore_rules(found.stdout, excludes)


@dataclass(frozen=True)
class Blob:
    """A file's content in the object database: its id and size (from `ls-tree -l`)."""

    id: str
    size: int
    link: bool = False  # a symlink (LINK_MODE): reported, never read


def _listed(
    folder: GitFolder, commit: str, excludes: Iterable[str]
) -> tuple[list[tuple[str, Blob]], IgnoreRules | Unreadable]:
    """(path below the folder, blob) of the YAML files a folder load would read, and the
    ignore rules (or why the ignore file is unreadable: then no file is listed)."""
    below = [folder.prefix] if folder.prefix else []  # the repo's root: no pathspec at all
    listing = _git(folder.top, "ls-tree", "-r", "-z", "-l", "--full-tree", commit, "--", *below)
    if listing.returncode != 0:
        raise GitError(f"git ls-tree {commit}: {listing.stderr.decode().strip()}")
    files, ignore_file = [], None
    for entry in listing.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, full_bytes = entry.partition(b"\t")
        mode, kind, blob, size = meta.decode("ascii").split()
        # a name that is not UTF-8 is named as a folder load names it (os.fsdecode)
        full = full_bytes.decode("utf-8", "surrogateescape")
        relative = full[len(folder.prefix) :]
        parts = PurePosixPath(relative).parts
        if relative == IGNORE_FILE and kind == "blob":
            ignore_file = Blob(blob, int(size))
        link = mode == LINK_MODE
        if (
            kind != "blob"
            or not (link or mode in BLOB_MODES)
            or any(p.startswith(".") for p in parts)
        ):
            continue
        if relative.endswith(YAML_SUFFIXES):
            files.append((relative, Blob(blob, int(size), link)))
    rules = _rules(folder, ignore_file, excludes)
    if isinstance(rules, Unreadable):
        return [], rules
    kept = [(relative, blob) for relative, blob in files if not rules.leaves_out(relative)]
    return sorted(kept, key=lambda item: _walk_order(item[0])), rules


def ref_files(
    folder: GitFolder, commit: str, excludes: Iterable[str] = ()
) -> Iterator[tuple[str, bytes | Unreadable]]:
    """The folder's YAML files at `commit` as (path, bytes), as `folder_files` names them.

    Left out as a folder load would: the ref's own `.gitops-schedignore`, then `excludes`.
    A blob over the size limit comes as an `Unreadable`, never read."""
    files, rules = _listed(folder, commit, excludes)
    if isinstance(rules, Unreadable):
        yield (folder.shown / IGNORE_FILE).as_posix(), rules
        return
    wanted = [blob.id for _, blob in files if blob.size <= MAX_FILE_BYTES and not blob.link]
    contents = _contents(folder, wanted) if wanted else {}
    for relative, blob in files:
        shown = (folder.shown / relative).as_posix()
        if blob.link:  # never skipped unsaid: a folder load reports its links too
            why = "a symlink in the Git tree: plan reads only regular files at a ref"
            yield shown, Unreadable(why)
        elif blob.size > MAX_FILE_BYTES:
            yield (
                shown,
                Unreadable(
                    f"file is {blob.size} bytes, over the {MAX_FILE_BYTES}-byte limit",
                    codes.FILE_TOO_LARGE,
                ),
            )
        else:
            yield shown, contents[blob.id]


def _contents(folder: GitFolder, blobs: list[str]) -> dict[str, bytes]:
    """Each blob's bytes, streamed by one `git cat-file --batch`."""
    batch = _git(folder.top, "cat-file", "--batch", stdin="".join(f"{b}\n" for b in blobs).encode())
    if batch.returncode != 0:
        raise GitError(f"git cat-file: {batch.stderr.decode().strip()}")
    out, at, found = batch.stdout, 0, {}
    for blob in blobs:
        end = out.index(b"\n", at)
        size = int(out[at:end].split()[2])
        found[blob] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1  # the content, then a newline
    return found
