"""surely_no_room is a true bound: when it says a job's next pods cannot fit, `place`
fails too (a try it skips could never have succeeded, so skipping changes no decision),
for pods of whole GPUs and for shares (fractions, `gpuMemory`) alike."""

from __future__ import annotations

from hypothesis import given, settings

from gitops_sched.engine.placement import place, surely_no_room
from gitops_sched.engine.session import Session
from gitops_sched.engine.types import RequestKind, Snapshot
from tests.conftest import examples
from tests.strategies import snapshots


@settings(max_examples=examples(200), deadline=None)
@given(snapshots(kinds=(RequestKind.WHOLE, RequestKind.FRACTION, RequestKind.MEMORY)))
def test_surely_no_room_never_skips_a_placement_that_fits(snapshot: Snapshot) -> None:
    session = Session(snapshot)
    for job in snapshot.jobs:
        if job.missing <= 0 or not surely_no_room(session, job):
            continue
        with session.statement():  # never committed: nothing stays placed
            assert not place(session, job)
