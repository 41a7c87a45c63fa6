"""Which files of a config repo are left out: `.gitops-schedignore` and `--exclude GLOB`.

The ignore file sits at the repo's root and uses gitignore syntax (the `pathspec` library
implements Git's rules, negation and folder patterns included); each `--exclude` is one more
line of the same syntax, after the file's, so it can override it. Paths are matched relative
to the repo root with `/` separators, folders with a trailing `/`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pathspec import GitIgnoreSpec

IGNORE_FILE = ".gitops-schedignore"


@dataclass(frozen=True)
class IgnoreRules:
    """The ignore file's lines plus the `--exclude` patterns, as one gitignore spec."""

    spec: GitIgnoreSpec

    @classmethod
    def of(cls, ignore_text: str = "", excludes: Iterable[str] = ()) -> IgnoreRules:
        return cls(GitIgnoreSpec.from_lines([*ignore_text.splitlines(), *excludes]))

    def ignores(self, relative: str, folder: bool = False) -> bool:
        """Whether the file (or folder) at `relative`, below the repo root, is left out."""
        return self.spec.match_file(f"{relative}/" if folder else relative)

    def leaves_out(self, relative: str, folder: bool = False) -> bool:
        """As a folder walk decides: the path, or any folder above it, left out."""
        parts = relative.split("/")
        above = ("/".join(parts[: i + 1]) for i in range(len(parts) - 1))
        return any(self.ignores(f, folder=True) for f in above) or self.ignores(relative, folder)


NO_RULES = IgnoreRules.of()
