"""The whole check of a config repo: load, schema, model, semantic checks."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gitops_sched.config.baseline import NO_BASELINE, Baseline
from gitops_sched.config.checks import run_checks
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.loader import Source, folder_files, load_files
from gitops_sched.config.model import Repo, build_repo
from gitops_sched.config.schema import validate_documents
from gitops_sched.gcpause import paused_gc


def check_repo(
    root: Path, excludes: Iterable[str] = (), baseline: Baseline = NO_BASELINE
) -> tuple[Repo | None, Diagnostics]:
    """The repo's model and every diagnostic; the model is None when any error was found.

    `excludes` are gitignore patterns added to the root's `.gitops-schedignore`."""
    return check_source(folder_files(root, excludes), baseline)


@paused_gc()
def check_source(
    files: Source, baseline: Baseline = NO_BASELINE
) -> tuple[Repo | None, Diagnostics]:
    """As `check_repo`, for any source of (path, bytes): a folder or a Git tree.

    `baseline`: the other side of a change (plan's base), so that a problem two objects
    share (a duplicate name, a sum over its bound) lands on the one the change introduced."""
    diagnostics = Diagnostics()
    documents = load_files(files, diagnostics)
    if not documents and diagnostics.has_errors:  # nothing read: no follow-on "no Cluster"
        return None, diagnostics
    valid = validate_documents(documents, diagnostics)
    repo = build_repo(valid)
    run_checks(repo, documents, diagnostics, baseline=baseline)
    if repo.simulations and not diagnostics.has_errors:  # names checked against a sound repo
        # the Simulation parser needs the engine's types: imported only for repos with tests
        from gitops_sched.sim.scenarios import check_simulations

        diagnostics.extend(check_simulations(repo))
    return (None if diagnostics.has_errors else repo), diagnostics
