"""Read a config repo: its files (from a folder, or any source of (path, bytes)) to
documents.

Files are read capped and never blocking (`read_capped`), folders walked with the repo's
ignore file, and each file's text built into documents by `yamlbuild.load_text`.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gitops_sched.config import codes
from gitops_sched.config.codes import Code
from gitops_sched.config.diagnostics import Diagnostics, Location
from gitops_sched.config.document import Document
from gitops_sched.config.ignore import IGNORE_FILE, BadPattern, IgnoreRules
from gitops_sched.config.yamlbuild import load_text

YAML_SUFFIXES = (".yaml", ".yml")
MAX_FILE_BYTES = 4 * 1024 * 1024


def _decode(raw: bytes, file: str, diagnostics: Diagnostics) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        message = f"file is not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
        diagnostics.error(Location(file, line, col), message, code=codes.NOT_UTF8)

        return None
    return text.removeprefix("\ufeff")


def _kind(mode: int) -> str:
    kinds = {
        stat.S_IFIFO: "a FIFO",
        stat.S_IFSOCK: "a socket",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFDIR: "a folder",
    }
    return kinds.get(stat.S_IFMT(mode), "not a regular file")


@dataclass(frozen=True)
class Unreadable:
    """Why a path of a source could not be read: reported at the path, in place of its bytes."""

    reason: str
    code: Code = codes.UNREADABLE_FILE
    line: int = 1  # where in the file, when the reason is in its text


def read_capped(
    path: Path, inside: Path | None = None, cap: int = MAX_FILE_BYTES
) -> bytes | Unreadable:
    """The bytes of the regular file at `path`, or why not; never blocks, never reads past `cap`.

    A symlink is followed only to a file under `inside` (the repo's resolved root), when given.
    FIFOs, sockets and devices are refused before they are opened (and opened non-blocking, so a
    swap between the check and the open cannot hang); at most `cap + 1` bytes are read, whatever
    `st_size` says (/proc files and devices report 0).
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            return Unreadable(f"dangling symlink: its target {os.readlink(path)!r} does not exist")
        return Unreadable("file not found (removed while the repo was read?)")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Unreadable("symlink loop: the link never leads to a file")
        return Unreadable(f"cannot be read: {exc.strerror}")
    if inside is not None and path.is_symlink():
        target = Path(os.path.realpath(path))
        if not target.is_relative_to(inside):
            return Unreadable(f"symlink leads outside the repo (to {target}): refused")
    if not stat.S_ISREG(info.st_mode):
        return Unreadable(f"{_kind(info.st_mode)}, not a regular file: only files are read")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return Unreadable(f"cannot be read: {exc.strerror}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the check above
            return Unreadable("not a regular file: only files are read")
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return Unreadable(f"cannot be read: {exc.strerror}")
    finally:
        os.close(fd)
    if size > cap:
        return Unreadable(f"file is over the {cap}-byte limit", codes.FILE_TOO_LARGE)
    return b"".join(chunks)


Source = Iterable[tuple[str, bytes | Unreadable]]
"""A config repo as (path, bytes) pairs in load order: a folder (`folder_files`) or a Git
tree (`gitops_sched.plan.gitsource`) load the same way through `load_files`. A path that
could not be read comes with an `Unreadable` (the reason) instead of its bytes."""


def folder_rules(root: Path, excludes: Iterable[str] = ()) -> IgnoreRules | Unreadable:
    """The root's `.gitops-schedignore` (if any) plus `excludes`, or why the file is unreadable
    or a pattern (of the file, or an `--exclude`) is malformed."""
    path = root / IGNORE_FILE
    raw = read_capped(path, root.resolve()) if os.path.lexists(path) else b""
    if isinstance(raw, Unreadable):
        return raw
    return ignore_rules(raw, excludes)


def ignore_rules(raw: bytes, excludes: Iterable[str]) -> IgnoreRules | Unreadable:
    """The ignore file's bytes plus `excludes` as rules, or why they are none (GS103)."""
    try:
        return IgnoreRules.of(raw.decode("utf-8"), excludes)
    except UnicodeDecodeError:
        return Unreadable("file is not valid UTF-8", codes.BAD_IGNORE_FILE)
    except BadPattern as exc:  # a malformed pattern, or past the bounds on patterns
        return Unreadable(f"bad pattern: {exc}", codes.BAD_IGNORE_FILE, exc.line)


def loaded_folder(root: Path, folder: Path) -> str | None:
    """`folder` relative to the config folder `root` ("." for `root` itself) when a load of
    `root` reads the files written in it, else None: a folder outside `root`, hidden, or left
    out by the repo's own `.gitops-schedignore` (an `--exclude` lasts one command: it does
    not count)."""
    try:
        relative = folder.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None
    if any(part.startswith(".") for part in relative.split("/") if part != "."):
        return None
    rules = folder_rules(root)
    if relative != "." and isinstance(rules, IgnoreRules) and rules.leaves_out(relative, True):
        return None
    return relative


def _unreadable_folders(failed: list[OSError]) -> Iterator[tuple[str, Unreadable]]:
    """The folders os.walk could not list (its `onerror`), each once; the list is emptied."""
    for exc in failed:
        yield Path(exc.filename).as_posix(), Unreadable(f"folder cannot be read: {exc.strerror}")
    failed.clear()


def _walk(root: Path, failed: list[OSError]) -> Iterator[tuple[Path, list[str], list[str]]]:
    """os.walk, top down, without recursion (a tree thousands of folders deep): each folder
    with its subfolders and other entries; the caller may prune the subfolders in place.
    A folder that cannot be listed goes to `failed` (os.walk's `onerror`)."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as exc:
            failed.append(exc)
            continue
        dirnames: list[str] = []
        filenames: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirnames if is_dir else filenames).append(entry.name)
        yield folder, dirnames, filenames
        stack.extend(folder / name for name in reversed(dirnames))


def folder_files(
    root: Path, excludes: Iterable[str] = ()
) -> Iterator[tuple[str, bytes | Unreadable]]:
    """The YAML files under `root` as (path, bytes), paths as the user named the folder.

    Hidden files and folders (.git) are skipped, and so is what `.gitops-schedignore` or
    `excludes` leave out. Whatever cannot be read (an unreadable file or folder, a FIFO, a
    dangling link, a link leading outside the repo) comes as an `Unreadable`, never skipped.
    """
    if not root.is_dir():  # a single file (a Simulation, a one-file repo)
        yield root.as_posix(), read_capped(root)
        return
    rules = folder_rules(root, excludes)
    if isinstance(rules, Unreadable):
        yield (root / IGNORE_FILE).as_posix(), rules
        return
    inside, found, left_out = root.resolve(), False, 0
    failed: list[OSError] = []
    for folder, dirnames, filenames in _walk(root, failed):
        found = found or bool(failed)
        yield from _unreadable_folders(failed)
        relative = folder.relative_to(root).as_posix().removeprefix(".").lstrip("/")
        below = f"{relative}/" if relative else ""
        kept = []
        for name in sorted(d for d in dirnames if not d.startswith(".")):
            if rules.ignores(below + name, folder=True):
                left_out += 1
            elif os.path.islink(folder / name):  # not walked; one leading outside is refused
                target = Path(os.path.realpath(folder / name))
                if not target.is_relative_to(inside):
                    found = True
                    reason = f"symlink leads outside the repo (to {target}): refused"
                    yield (folder / name).as_posix(), Unreadable(reason)
            else:
                kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if not name.endswith(YAML_SUFFIXES) or name.startswith("."):
                continue
            if rules.ignores(below + name):
                left_out += 1
                continue
            found = True
            # as the user named the repo, so editors and CI can open it
            yield (folder / name).as_posix(), read_capped(folder / name, inside)
    found = found or bool(failed)
    yield from _unreadable_folders(failed)  # the root itself
    if not found:
        note = f" ({left_out} left out by {IGNORE_FILE} or --exclude)" if left_out else ""
        message = f"no YAML files found under {root.as_posix()}{note}"
        yield root.as_posix(), Unreadable(message, codes.NO_YAML_FILES)


def load_files(files: Source, diagnostics: Diagnostics) -> list[Document]:
    """Every gitops-sched document of a source, in its order, documents in file order."""
    documents: list[Document] = []
    for file, raw in files:
        if isinstance(raw, Unreadable):
            diagnostics.error(Location(file, raw.line), raw.reason, code=raw.code)
            continue
        if len(raw) > MAX_FILE_BYTES:
            message = f"file is {len(raw)} bytes, over the {MAX_FILE_BYTES}-byte limit"
            diagnostics.error(Location(file), message, code=codes.FILE_TOO_LARGE)

            continue
        text = _decode(raw, file, diagnostics)
        if text is not None:
            documents.extend(load_text(text, file, diagnostics))
    return documents


def load_repo(root: Path, diagnostics: Diagnostics, excludes: Iterable[str] = ()) -> list[Document]:
    """Every gitops-sched document of a folder, files in path order, documents in file order."""
    return load_files(folder_files(root, excludes), diagnostics)
