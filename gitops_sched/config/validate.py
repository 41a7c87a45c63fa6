"""The config side of checking a repo: load, schema, model, semantic checks.

The whole check, with the engine's never-fit rule and the Simulation checks, is
`gitops_sched.validate`'s, which plugs them in here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from gitops_sched.config.baseline import NO_BASELINE, Baseline
from gitops_sched.config.checks import Check, run_checks
from gitops_sched.config.diagnostics import Diagnostic, Diagnostics
from gitops_sched.config.document import Document
from gitops_sched.config.loader import Source, Unreadable, load_files
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


RepoCheck = Callable[[Repo], Iterable[Diagnostic]]


@paused_gc()
def check_config(
    files: Source,
    baseline: Baseline = NO_BASELINE,
    seen: FileChecks | None = None,
    *,
    fit: Sequence[Check] = (),
    sound: Sequence[RepoCheck] = (),
) -> tuple[Repo | None, Diagnostics]:
    """The model of a source of (path, bytes) (a folder or a Git tree) and every diagnostic;
    the model is None when any error was found.

    `baseline`: the other side of a change (plan's base), so that a problem two objects
    share (a duplicate name, a sum over its bound) lands on the one the change introduced.
    `seen`: files checked before (plan's base), taken from there and added to it.
    `fit` and `sound`: the checks the layers above config plug in (`gitops_sched.validate`):
    that workloads fit the repo's nodes (run with the other derived checks), and checks of a
    repo found sound (the Simulation documents' names)."""
    diagnostics = Diagnostics()
    loaded = _load_checked(files, diagnostics, {} if seen is None else seen)
    documents, valid, unread = loaded
    if not documents and diagnostics.has_errors:  # nothing read: no follow-on "no Cluster"
        return None, diagnostics
    repo = build_repo(valid)
    with time_budget():  # every expression of the repo within one time limit
        run_checks(repo, documents, diagnostics, fit, baseline=baseline, unread=unread)
    for check in sound:
        if diagnostics.has_errors:  # names checked against a sound repo
            break
        diagnostics.extend(check(repo))
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
