"""Getting the config repo: a Git URL cloned and fetched with the git CLI (HTTPS or SSH,
credentials from the environment: a mounted SSH key and known_hosts, or a credential
helper), or a local path (a mounted checkout, e.g. kept fresh by git-sync).

The revision is the commit checked out; a local directory that is not a Git work tree is
identified by a digest of its files instead.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


class SourceError(Exception):
    pass


@dataclass(frozen=True)
class Checkout:
    root: Path  # the work tree
    revision: str

    def config_dir(self, subdir: str | None) -> Path:
        path = (self.root / subdir).resolve() if subdir else self.root
        if subdir and not path.is_relative_to(self.root.resolve()):
            raise SourceError(f"--path {subdir} leaves the repository")
        if not path.is_dir():
            raise SourceError(f"{subdir or '.'} is not a directory in the repository")
        return path


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    result = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=False
    )
    if result.returncode != 0:
        raise SourceError(f"git {' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout.strip()


def is_url(repo: str) -> bool:
    return "://" in repo or (repo.count(":") == 1 and "@" in repo.split(":")[0])


class GitSource:
    """A clone under `workdir`, fetched (shallow) on every `fetch`."""

    def __init__(self, url: str, ref: str | None, workdir: Path):
        self.url, self.ref, self.dir = url, ref, workdir / "repo"

    def fetch(self) -> Checkout:
        if not (self.dir / ".git").is_dir():
            self.dir.mkdir(parents=True, exist_ok=True)
            _git("init", "--quiet", str(self.dir))
            _git("remote", "add", "origin", self.url, cwd=self.dir)
        _git("fetch", "--quiet", "--depth", "1", "origin", self.ref or "HEAD", cwd=self.dir)
        _git("checkout", "--quiet", "--force", "FETCH_HEAD", cwd=self.dir)
        _git("clean", "--quiet", "-dffx", cwd=self.dir)
        return Checkout(self.dir, _git("rev-parse", "HEAD", cwd=self.dir))


class LocalSource:
    """A directory already on disk; with `ref`, that commit is read out of its Git history
    into a separate work tree instead of using the files as they are."""

    def __init__(self, path: Path, ref: str | None, workdir: Path):
        self.path, self.ref, self.workdir = path, ref, workdir

    def fetch(self) -> Checkout:
        if not self.path.is_dir():
            raise SourceError(f"{self.path} is not a directory")
        if self.ref:
            return GitSource(str(self.path.resolve()), self.ref, self.workdir).fetch()
        try:
            top = Path(_git("rev-parse", "--show-toplevel", cwd=self.path))
            if _git("status", "--porcelain", cwd=self.path) == "":
                return Checkout(self.path, _git("rev-parse", "HEAD", cwd=self.path))
            return Checkout(
                self.path, f"{_git('rev-parse', 'HEAD', cwd=top)}-dirty-{_digest(self.path)}"
            )
        except SourceError:
            return Checkout(self.path, f"sha256:{_digest(self.path)}")


def _digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def open_source(repo: str, ref: str | None, workdir: Path) -> GitSource | LocalSource:
    return GitSource(repo, ref, workdir) if is_url(repo) else LocalSource(Path(repo), ref, workdir)
