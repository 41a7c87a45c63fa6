"""The snapshot codec: one versioned, JSON-able shape for the engine's input, read back exactly."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitops_sched.engine.codec import (
    VERSION,
    SnapshotFormatError,
    job_from_dict,
    job_to_dict,
    node_to_dict,
    pod_from_dict,
    pod_to_dict,
    snapshot_from_dict,
    snapshot_to_dict,
)
from gitops_sched.engine.history import record
from gitops_sched.engine.types import (
    Fairness,
    GpuRequest,
    Job,
    PodPlacement,
    Policy,
    ReleasingPod,
    RequestKind,
    Snapshot,
    UsageHistory,
)
from gitops_sched.hardware.mig import MigInstance
from tests.conftest import examples
from tests.strategies import snapshots


@st.composite
def live_snapshots(draw: st.DrawFn) -> Snapshot:
    """`strategies.snapshots()` with what a live cluster adds: namespaces and UIDs, gangs in
    flight, releasing pods, node labels, cordoned nodes, static MIG, a policy's grace, and
    fairness over time with each project's past usage."""
    snapshot = draw(snapshots(max_jobs=12))
    jobs = []
    for i, job in enumerate(snapshot.jobs):
        if draw(st.booleans()):
            job = replace(job, namespace=f"team-{job.project}", uid=f"uid-{i}")
        if job.running and draw(st.booleans()):
            job = replace(job, short_since=draw(st.sampled_from((0.0, 12.5, 1e6))))
        jobs.append(job)
    nodes = []
    for node in snapshot.nodes:
        labels = draw(
            st.dictionaries(st.sampled_from(("zone", "rack", "pool")), st.text(max_size=3))
        )
        static = draw(st.booleans())
        nodes.append(
            replace(
                node,
                labels=tuple(sorted(labels.items())),
                schedulable=draw(st.booleans()),
                gpus=tuple(replace(g, mig_static=static and g.mig_enabled) for g in node.gpus),
            )
        )
    pods = [(job, pod) for job in jobs for pod in job.placement]
    releasing = tuple(
        ReleasingPod(job.key, job.project, pod)
        for job, pod in draw(st.lists(st.sampled_from(pods), max_size=3) if pods else st.just([]))
    )
    fairness = draw(st.none() | st.builds(Fairness, st.sampled_from((0.0, 2.5)), st.just(3600.0)))
    policy = replace(
        snapshot.policy,
        stale_gang_grace_s=draw(st.sampled_from((0.0, 60.0, 90.5))),
        reclaim_threshold=draw(st.sampled_from((0.0, 1.5))),
        fairness=fairness,
    )
    now = draw(st.floats(0, 1e7, allow_nan=False))
    history = UsageHistory()
    for project in draw(st.lists(st.sampled_from([p.name for p in policy.projects]))):
        held = {project: draw(st.floats(0.1, 64))}
        start = draw(st.floats(0, now))
        by_group = {(project, draw(st.sampled_from(("h100", "a100")))): held[project]}
        history = record(history, fairness or Fairness(), start, now, held, by_group)
    return Snapshot(policy, tuple(nodes), tuple(jobs), now, releasing, history)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_snapshots())
def test_a_snapshot_survives_the_codec_and_json(snapshot: Snapshot) -> None:
    data = snapshot_to_dict(snapshot)
    assert snapshot_from_dict(data) == snapshot
    assert snapshot_from_dict(json.loads(json.dumps(data))) == snapshot


JOB = Job(
    name="train",
    project="vision",
    type="train",
    priority=50,
    preemptible=True,
    request=GpuRequest(RequestKind.WHOLE, count=2),
    pods=2,
)
JOB_POLICY = Policy(departments=(), projects=())


def test_pods_have_the_same_keys_whatever_their_state() -> None:
    shared = PodPlacement("n0", (3,), fraction=0.25, index=2)
    mig = PodPlacement("n0", (4,), mig=MigInstance("3g.40gb", 4))
    assert (
        list(pod_to_dict(shared)) == list(pod_to_dict(mig)) == list(pod_to_dict(PodPlacement("n")))
    )
    assert pod_to_dict(mig) == {
        "node": "n0",
        "gpus": [4],
        "fraction": None,
        "mig": {"profile": "3g.40gb", "start": 4},
        "index": 0,
    }


def test_a_job_leaves_out_what_is_unset_but_keeps_a_time_of_zero() -> None:
    assert job_to_dict(JOB) == {
        "name": "train",
        "project": "vision",
        "type": "train",
        "priority": 50,
        "preemptible": True,
        "request": {"kind": "whole", "count": 2},
        "pods": 2,
        "minAvailable": 1,
        "submitted": 0,
    }
    running = replace(
        JOB,
        namespace="team-vision",
        placement=(PodPlacement("n0", (0, 1), index=1),),
        started_at=0.0,
        short_since=0.0,
    )
    data = job_to_dict(running)
    assert (data["namespace"], data["startedAt"], data["shortSince"]) == ("team-vision", 0.0, 0.0)
    assert "idleSince" not in data and "uid" not in data
    assert job_from_dict(data) == running


def test_a_hand_written_pod_takes_the_engine_defaults() -> None:
    assert pod_from_dict({"node": "n0"}, index=3) == PodPlacement("n0", index=3)
    assert pod_from_dict({"node": "n0", "gpus": [1], "index": 0}, index=3).index == 0


def test_a_snapshot_says_its_version_and_reads_defaults_for_what_is_left_out() -> None:
    assert snapshot_to_dict(Snapshot(JOB_POLICY, (), ()))["version"] == VERSION == 1
    assert snapshot_from_dict({"version": 1, "policy": {}}) == Snapshot(JOB_POLICY, (), ())


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (None, "snapshot has no `version`; this gitops-sched reads snapshot version 1"),
        (2, "snapshot has version 2; this gitops-sched reads snapshot version 1"),
        ("1", "snapshot has version '1'; this gitops-sched reads snapshot version 1"),
    ],
)
def test_other_versions_are_refused(version: object, message: str) -> None:
    data = snapshot_to_dict(Snapshot(JOB_POLICY, (), (JOB,)))
    data["version"] = version
    if version is None:
        del data["version"]
    with pytest.raises(SnapshotFormatError) as raised:
        snapshot_from_dict(data)
    assert str(raised.value) == message


def test_a_malformed_snapshot_says_where() -> None:
    data = snapshot_to_dict(Snapshot(JOB_POLICY, (), (JOB, JOB)))
    del data["jobs"][1]["name"]
    with pytest.raises(SnapshotFormatError, match=r"^jobs\[1\]: missing key 'name'$"):
        snapshot_from_dict(data)
    data = snapshot_to_dict(Snapshot(JOB_POLICY, (), (JOB,)))
    data["jobs"][0]["request"]["kind"] = "gpus"
    with pytest.raises(SnapshotFormatError, match=r"^jobs\[0\]: 'gpus' is not a valid"):
        snapshot_from_dict(data)
    data["policy"]["projects"] = [{"name": "p"}]
    with pytest.raises(SnapshotFormatError, match=r"^policy\.projects\[0\]: missing key"):
        snapshot_from_dict(data)
    with pytest.raises(SnapshotFormatError, match="a snapshot is a mapping, not list"):
        snapshot_from_dict([])  # type: ignore[arg-type]


def test_a_node_keeps_its_labels_and_static_mig() -> None:
    data = snapshot_to_dict(Snapshot(JOB_POLICY, (), ()))
    node = {
        "name": "n0",
        "nodeGroup": "a100",
        "model": "A100-SXM4-80GB",
        "topology": None,
        "schedulable": False,
        "labels": {"zone": "a"},
        "gpus": [
            {
                "index": 0,
                "memoryMiB": 81920,
                "migEnabled": True,
                "migStatic": True,
                "held": False,
                "reserved": False,
                "mig": [{"profile": "7g.80gb", "start": 0}],
            }
        ],
    }
    data["nodes"] = [node]
    (read,) = snapshot_from_dict(data).nodes
    assert read.labels == (("zone", "a"),)
    assert read.gpus[0].mig_static and not read.schedulable
    assert node_to_dict(read) == node
