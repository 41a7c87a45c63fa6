"""Writing files where the user said, and nowhere else.

`render -o DIR` reaches each path below DIR one folder at a time through file descriptors
opened with `O_NOFOLLOW` (`openat`), never by a path string the kernel resolves: a symlinked
subfolder or file inside DIR can neither receive a rendered file nor lose one, even if it
appears while render runs. `OutputFolder.check` refuses such a path before anything is
written. A report file (`test --junit`) is written beside its target and renamed over it,
unless the target is a device or FIFO (`/dev/null`, `/dev/stdout`): that is written in place,
never replaced by a regular file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import uuid
from pathlib import Path
from types import TracebackType

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # render's own list of files: far beyond any render
# `write`'s temporary file beside NAME: a render killed mid-write leaves one (see sweep)
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.[0-9a-f]{12}\.tmp")


class OutputFolder:
    """An output folder, opened once: paths below it are relative, `/`-separated."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fd = -1

    def __enter__(self) -> OutputFolder:
        try:
            self._fd = os.open(self.root, _FOLDER_FLAGS)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise ValueError(f"{self.root} is not a directory (a symlink?)") from exc
            raise
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        os.close(self._fd)

    def check(self, relative: str) -> None:
        """Raise ValueError when a folder on the way to `relative` is a symlink or a file, or
        `relative` is there and is not a regular file."""
        fd = self._folder(relative, create=False)
        if fd is None:
            return
        try:
            info = os.stat(_name(relative), dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        finally:
            os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise self._refused(relative, "is a symlink or not a regular file")

    def holds(self, relative: str) -> bool:
        """Whether anything (a file, a link, a folder) is at `relative`."""
        fd = self._folder(relative, create=False)
        if fd is None:
            return False
        try:
            os.stat(_name(relative), dir_fd=fd, follow_symlinks=False)
            return True
        except FileNotFoundError:
            return False
        finally:
            os.close(fd)

    def read(self, relative: str) -> str | None:
        """The regular file's text (None when there is none, or a link is there); anything
        else there (a FIFO, a socket, a device) is refused. Opened without blocking: a FIFO
        with no writer would otherwise hold the render for ever."""
        fd = self._folder(relative, create=False)
        if fd is None:
            return None
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
        try:
            file = os.open(_name(relative), flags, dir_fd=fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        with os.fdopen(file, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise self._refused(relative, "is not a regular file")
            data = f.read(MAX_MANIFEST_BYTES + 1)
        if len(data) > MAX_MANIFEST_BYTES:
            raise self._refused(relative, f"is over {MAX_MANIFEST_BYTES} bytes")
        return data.decode("utf-8", errors="replace")

    def write(self, relative: str, text: str) -> None:
        """Write beside the file and rename over it: a reader never sees half a file."""
        fd = self._folder(relative, create=True)
        assert fd is not None
        name, temporary = _name(relative), f".{_name(relative)}.{uuid.uuid4().hex[:12]}.tmp"
        assert _TEMPORARY.fullmatch(temporary)
        try:
            file = os.open(temporary, _NEW_FILE_FLAGS, 0o666, dir_fd=fd)
            try:
                write_all(file, text.encode("utf-8"))
            finally:
                os.close(file)
            os.replace(temporary, name, src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            _unlink_quietly(temporary, fd)
            os.close(fd)

    def sweep(self, folder: str, names: set[str]) -> None:
        """Delete what a render killed mid-write left in `folder` ("" the output folder
        itself): the temporary files `write` makes beside the files `names`, and only those."""
        fd = self._folder(f"{folder}/-" if folder else "-", create=False)
        if fd is None:
            return
        try:
            for entry in os.listdir(fd):
                found = _TEMPORARY.fullmatch(entry)
                if found and found["name"] in names:
                    _unlink_quietly(entry, fd)
        finally:
            os.close(fd)

    def delete(self, relative: str) -> None:
        """Delete the regular file at `relative`, then its folders that are left empty."""
        fd = self._folder(relative, create=False)
        if fd is None:
            return
        try:
            info = os.stat(_name(relative), dir_fd=fd, follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                os.unlink(_name(relative), dir_fd=fd)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)
        parts = relative.split("/")[:-1]
        while parts:
            parent = self._folder("/".join(parts), create=False)
            if parent is None:
                return
            try:
                os.rmdir(parts[-1], dir_fd=parent)
            except OSError:  # not empty (or gone): its parents are not empty either
                return
            finally:
                os.close(parent)
            parts.pop()

    def regular_files(self) -> set[str]:
        """Every regular file below the folder, `.git` and links left out (no recursion)."""
        found: set[str] = set()
        stack = [""]
        while stack:
            below = stack.pop()
            with os.scandir(self.root / below if below else self.root) as entries:
                for entry in entries:
                    relative = f"{below}{entry.name}"
                    if entry.is_dir(follow_symlinks=False) and entry.name != ".git":
                        stack.append(f"{relative}/")
                    elif entry.is_file(follow_symlinks=False):
                        found.add(relative)
        return found

    def _folder(self, relative: str, create: bool) -> int | None:
        """A descriptor of the folder holding `relative` (None: it does not exist and
        `create` is false); each folder on the way is opened without following a link."""
        fd = os.dup(self._fd)
        for part in relative.split("/")[:-1]:
            try:
                try:
                    inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    os.mkdir(part, 0o777, dir_fd=fd)
                    inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise self._refused(relative, f"goes through {part!r}, not a folder") from exc
                raise
            os.close(fd)
            fd = inner
        return fd

    def _refused(self, relative: str, why: str) -> ValueError:
        return ValueError(
            f"{self.root / relative} {why} (a symlink inside the output folder?); render writes "
            "and deletes only inside the output folder itself: refusing to render"
        )


def _name(relative: str) -> str:
    return relative.rsplit("/", 1)[-1]


def write_all(fd: int, data: bytes) -> None:
    """Every byte of `data` to `fd` (a full disk raises OSError)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _unlink_quietly(name: str, fd: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=fd)


def write_report(path: Path, text: str) -> None:
    """Write a report file: a device or FIFO in place (never replaced by a file), a regular
    file (or a new one) beside it and renamed over it; raises ValueError for anything else
    (a block device, a socket, a folder) and OSError when it cannot be written."""
    target = Path(os.path.realpath(path))  # a link to a file: the file is replaced
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        # no O_CREAT: what is there is written, nothing new is made; a FIFO without a
        # reader fails at once (ENXIO) instead of waiting for one
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC)
        try:
            os.set_blocking(fd, True)
            write_all(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
        return
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path} is not a regular file, character device or FIFO: not written")
    with OutputFolder(target.parent) as folder:
        folder.write(target.name, text)
