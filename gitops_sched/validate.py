"""The whole check of a config repo, what `validate`, `plan` and the reconciler run.

Config's own checks (`config.validate.check_config`) with the checks that need the layers
above it plugged in: whether each workload could ever fit the repo's nodes (the engine's
rule, through the bridge) and the repo's Simulation documents (the simulator's parser).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gitops_sched.bridge.fit import check_workloads_fit
from gitops_sched.config.baseline import NO_BASELINE, Baseline
from gitops_sched.config.checks import Check
from gitops_sched.config.checks.fit import check_pod_resources_fit
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.loader import Source, folder_files
from gitops_sched.config.model import Repo
from gitops_sched.config.validate import FileChecks, check_config
from gitops_sched.sim.scenarios import check_simulations

# workloads that could never run on the repo's nodes: errors in a repo; a Simulation's own
# workloads (a what-if, maybe on other nodes) leave them to simulate's "can never fit"
FIT_CHECKS: tuple[Check, ...] = (check_workloads_fit, check_pod_resources_fit)


def check_repo(
    root: Path,
    excludes: Iterable[str] = (),
    baseline: Baseline = NO_BASELINE,
    seen: FileChecks | None = None,
) -> tuple[Repo | None, Diagnostics]:
    """The repo's model and every diagnostic; the model is None when any error was found.

    `excludes` are gitignore patterns added to the root's `.gitops-schedignore`."""
    return check_source(folder_files(root, excludes), baseline, seen)


def check_source(
    files: Source, baseline: Baseline = NO_BASELINE, seen: FileChecks | None = None
) -> tuple[Repo | None, Diagnostics]:
    """As `check_repo`, for any source of (path, bytes): a folder or a Git tree (see
    `config.validate.check_config` for `baseline` and `seen`)."""
    return check_config(files, baseline, seen, fit=FIT_CHECKS, sound=(check_simulations,))
