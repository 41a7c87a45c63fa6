"""Kueue's own controller against `simulate` on the NetApp example (testkit/kueue_comparison):
the render `--target kueue` installed on a real control plane with kwok GPU nodes, Kueue
v0.17's manager deciding, and per ClusterQueue the workloads it admits equal to those
`simulate` runs, but for what Kueue's model must decide otherwise, asserted exactly.

Kueue admits whole workloads against quota and places nothing (kube-scheduler would); it
has no GPU fractions (GS904): a notebook on 0.6 of a GPU asks it for no GPU. So a project's
GPUs are the same in both but for its notebooks, and when team-d claims its quota Kueue,
seeing team-c 0.9 GPU lighter, reclaims 4 GPUs where `simulate` reclaims 6: c-train-1
keeps running under Kueue. Once team-d's work is deleted, both run everything again.

Skipped, saying why, when Kueue's controller is not built (`make kueue`: `hack/kueue.sh`
builds it into ~/.cache/gitops-sched, minutes of Go the suite does not spend unasked) or its
CRDs cannot be fetched from the Go module proxy (`hack/target-crds.sh kueue`, as the other
target tests).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json

import pytest

from testkit.control_plane import kueue
from testkit.kueue_comparison import Stage, compare, load, stage_from_dict, table
from testkit.target_crds import crds_or_skip
from tests import readme_blocks

NOTEBOOK_GPUS = {"team-b": 0.6 + 0.5, "team-c": 0.4 + 0.3 + 0.2}  # what GS904 leaves out


@pytest.fixture(scope="module")
def stages(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> list[Stage]:
    """One run per pytest session: the first xdist worker to get here runs it, under a
    lock in the session's temporary folder, and leaves its result there for the other."""
    try:
        kueue.folder()
    except kueue.NotBuilt as exc:
        pytest.skip(str(exc))
    crds = crds_or_skip("kueue")
    if worker_id == "master":  # no xdist
        return compare(tmp_path_factory.mktemp("kueue-plane"), crds)
    session = tmp_path_factory.getbasetemp().parent
    with open(session / "kueue-netapp.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = session / "kueue-netapp.json"
        if not done.exists():
            ran = compare(tmp_path_factory.mktemp("kueue-plane"), crds)
            done.write_text(json.dumps([dataclasses.asdict(s) for s in ran]))
        return [stage_from_dict(s) for s in json.loads(done.read_text())]


def _differences(stage: Stage) -> dict[str, tuple[set[str], set[str]]]:
    """ClusterQueue -> (admitted by Kueue only, run by simulate only), where they differ."""
    return {
        r.queue: (set(r.kueue) - set(r.simulate), set(r.simulate) - set(r.kueue))
        for r in stage.rows
        if r.kueue != r.simulate
    }


def test_kueue_admits_per_cluster_queue_what_simulate_runs(stages: list[Stage]) -> None:
    arrived = stages[0]
    repo, _ = load()
    assert sorted(w for r in arrived.rows for w in r.kueue) == sorted(
        w.name for w in repo.workloads
    )
    assert _differences(arrived) == {}
    assert arrived.pending == {}


def test_kueue_counts_no_gpu_for_a_fraction(stages: list[Stage]) -> None:
    for row in stages[0].rows:
        assert row.kueue_gpus == pytest.approx(
            row.simulate_gpus - NOTEBOOK_GPUS.get(row.queue, 0)
        ), row
    borrowed = {r.queue: r.kueue_borrowed for r in stages[0].rows}
    assert borrowed == {"team-a": 2, "team-b": 1, "team-c": 1, "team-d": 0}


def test_a_claim_reclaims_what_simulate_stops_but_for_the_fractions(
    stages: list[Stage],
) -> None:
    """team-d's d-sweep (8 GPUs, its quota) is admitted by both; Kueue preempts
    bert-finetune and b-train-2 to reclaim 4 GPUs, simulate also stops c-train-1, as it
    counts team-c's notebooks (0.9 GPU) against the cohort."""
    claimed = stages[1]
    rows = {r.queue: r for r in claimed.rows}
    assert rows["team-d"].kueue == rows["team-d"].simulate == ("d-sweep",)
    assert _differences(claimed) == {"team-c": ({"c-train-1"}, set())}
    assert claimed.pending == {
        "bert-finetune": ("team-a", "preempted (InCohortReclamation)"),
        "b-train-2": ("team-b", "preempted (InCohortReclamation)"),
    }
    assert {q: r.kueue_gpus for q, r in rows.items()} == {
        "team-a": 4,
        "team-b": 1,
        "team-c": 3,
        "team-d": 8,
    }


def test_what_was_preempted_runs_again_once_the_claim_is_gone(stages: list[Stage]) -> None:
    released = stages[2]
    assert _differences(released) == {}
    assert released.pending == {}
    assert [r.kueue for r in released.rows] == [r.kueue for r in stages[0].rows]


def test_the_readme_shows_the_comparison(stages: list[Stage]) -> None:
    readme_blocks.check("kueue-netapp", table(stages))
