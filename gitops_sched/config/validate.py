"""The whole check of a config repo: load, schema, model, semantic checks."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gitops_sched.config.baseline import NO_BASELINE, Baseline
from gitops_sched.config.checks import run_checks
from gitops_sched.config.diagnostics import Diagnostic, Diagnostics
from gitops_sched.config.loader import Document, Source, Unreadable, folder_files, load_files
from gitops_sched.config.model import Repo, build_repo
from gitops_sched.config.schema import validate_documents
from gitops_sched.config.templating import time_budget
from gitops_sched.config.unread import NOTHING_UNREAD, Unread
from gitops_sched.gcpause import paused_gc

# A file read and schema-checked: its documents, the schema-valid ones, their diagnostics,
# and what it may define beyond its documents when it did not load whole (else None).
FileCheck = tuple[list[Document], list[Document], list[Diagnostic], Unread | None]
# Files already read and schema-checked, by path and content: a plan's two sides share
# most files, and a file with the same path and bytes gives the same documents.
FileChecks = dict[tuple[str, bytes | Unreadable], FileCheck]


def check_repo(
    root: Path,
    excludes: Iterable[str] = (),
    baseline: Baseline = NO_BASELINE,
    seen: FileChecks | None = None,
) -> tuple[Repo | None, Diagnostics]:
    """The repo's model and every diagnostic; the model is None when any error was found.

    `excludes` are gitignore patterns added to the root's `.gitops-schedignore`."""
    return check_source(folder_files(root, excludes), baseline, seen)


@paused_gc()
def check_source(
    files: Source, baseline: Baseline = NO_BASELINE, seen: FileChecks | None = None
) -> tuple[Repo | None, Diagnostics]:
    """As `check_repo`, for any source of (path, bytes): a folder or a Git tree.

    `baseline`: the other side of a change (plan's base), so that a problem two objects
    share (a duplicate name, a sum over its bound) lands on the one the change introduced.
    `seen`: files checked before (plan's base), taken from there and added to it."""
    diagnostics = Diagnostics()
    loaded = _load_checked(files, diagnostics, {} if seen is None else seen)
    documents, valid, unread = loaded
    if not documents and diagnostics.has_errors:  # nothing read: no follow-on "no Cluster"
        return None, diagnostics
    repo = build_repo(valid)
    with time_budget():  # every expression of the repo within one time limit
        run_checks(repo, documents, diagnostics, baseline=baseline, unread=unread)
    if repo.simulations and not diagnostics.has_errors:  # names checked against a sound repo
        # the Simulation parser needs the engine's types: imported only for repos with tests
        from gitops_sched.sim.scenarios import check_simulations

        diagnostics.extend(check_simulations(repo))
    return (None if diagnostics.has_errors else repo), diagnostics


def _load_checked(
    files: Source, diagnostics: Diagnostics, seen: FileChecks
) -> tuple[list[Document], list[Document], Unread]:
    """Every document of `files`, the schema-valid ones, and what the files that did not
    load whole may define (see `unread`), file by file (a file's documents are checked on
    their own); a file in `seen` is not read again."""
    documents: list[Document] = []
    valid: list[Document] = []
    unread = NOTHING_UNREAD
    for file, raw in files:
        if (check := seen.get((file, raw))) is None:
            found = Diagnostics()
            docs = load_files(((file, raw),), found)
            lost = Unread.of(raw) if found.has_errors else None  # only the loader's, so far
            check = seen[file, raw] = (docs, validate_documents(docs, found), found.items, lost)
        documents += check[0]
        valid += check[1]
        diagnostics.extend(check[2])
        if check[3] is not None:
            unread |= check[3]
    return documents, valid, unread
