"""The agent's pure decisions: inventory and change detection, PID -> pod through cgroups,
fraction enforcement, idle detection, the MIG request format and a GPU's plan."""

import json
import re

import pytest

from gitops_sched.agent.cgroups import pod_uid_for_pid, pod_uid_from_cgroup
from gitops_sched.agent.fake import FakeBackend, FakeGpuSpec, parse_fake_spec
from gitops_sched.agent.fractions import FractionPod, enforce, memory_by_pod
from gitops_sched.agent.idle import Activity, idle_since, observe, utilisation_by_pod
from gitops_sched.agent.inventory import node_inventory
from gitops_sched.agent.mig import MigPlan, plan_gpu
from gitops_sched.contract.inventory import encode_inventory, inventory_changed
from gitops_sched.contract.mig import (
    GpuAnswer,
    GpuLayout,
    encode_request,
    encode_status,
    needs_work,
    parse_request,
    request_digest,
)
from gitops_sched.hardware.mig import MigInstance

GIB = 1024**3
UID = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"


# --- inventory --------------------------------------------------------------------------------


def backend():
    return FakeBackend([FakeGpuSpec("H100-80GB", mig=True), FakeGpuSpec("L40S")], node="n1")


def test_inventory_lists_gpus_with_uuid_model_memory_mig_and_instances():
    gpus = backend()
    gpus.create_instance(0, "3g.40gb", 4)
    gpus.create_instance(0, "1g.10gb", 0)
    inventory = node_inventory(gpus.gpus())
    assert inventory["version"] == 1
    first, second = inventory["gpus"]
    assert first["model"] == "H100-SXM5-80GB" and first["memoryMiB"] == 81559
    assert first["mig"] == "enabled"
    assert first["instances"] == [
        {"profile": "1g.10gb", "start": 0, "computeInstances": 1},
        {"profile": "3g.40gb", "start": 4, "computeInstances": 1},
    ]
    assert (second["model"], second["mig"], second["instances"]) == ("L40S", "unsupported", [])
    assert first["uuid"] != second["uuid"]


def test_inventory_is_deterministic_and_ignores_memory_in_use():
    gpus = backend()
    before = encode_inventory(node_inventory(gpus.gpus()))
    gpus.run_process(1, 99, 20 * GIB, sm_util=90)
    after = encode_inventory(node_inventory(reversed(gpus.gpus())))
    assert before == after
    assert json.loads(after) == node_inventory(gpus.gpus())


def test_inventory_is_published_on_change_only():
    gpus = backend()
    published = encode_inventory(node_inventory(gpus.gpus()))
    assert not inventory_changed(published, node_inventory(gpus.gpus()))
    assert not inventory_changed(
        json.dumps(json.loads(published), indent=2), node_inventory(gpus.gpus())
    )
    gpus.create_instance(0, "1g.10gb", 6)
    assert inventory_changed(published, node_inventory(gpus.gpus()))


@pytest.mark.parametrize("published", [None, "", "{not json"])
def test_nothing_or_garbage_published_counts_as_changed(published):
    assert inventory_changed(published, node_inventory(backend().gpus()))


def test_fake_spec_gives_gpus_in_order_with_mig_flag():
    specs = parse_fake_spec("A100-80GB:2:mig, V100-32GB:1,H200:1")
    assert [(s.model, s.mig) for s in specs] == [
        ("A100-SXM4-80GB", True),
        ("A100-SXM4-80GB", True),
        ("V100-SXM2-32GB", False),
        ("H200-SXM5-141GB", False),
    ]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("B200:1", "unknown GPU model 'B200'; known: A10,"),
        ("A10:two", "whole number"),
        ("A10:0", "at least 1"),
        ("A10:1:mig", "has no MIG"),
        ("", "no GPUs"),
    ],
)
def test_bad_fake_specs_are_explained(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_fake_spec(spec)


# --- PID -> pod -------------------------------------------------------------------------------

SYSTEMD_UID = UID.replace("-", "_")
CGROUPS = {
    "v2 systemd": (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/"
        "cri-containerd-4f5e6d7c8b9a.scope\n"
    ),
    "v2 systemd guaranteed": (
        f"0::/kubepods.slice/kubepods-pod{SYSTEMD_UID}.slice/crio-4f5e6d7c8b9a.scope\n"
    ),
    "v2 cgroupfs": f"0::/kubepods/besteffort/pod{UID}/4f5e6d7c8b9a\n",
    "v1 cgroupfs": (
        f"12:memory:/kubepods/burstable/pod{UID}/4f5e6d7c8b9a\n"
        f"11:cpu,cpuacct:/kubepods/burstable/pod{UID}/4f5e6d7c8b9a\n"
        "1:name=systemd:/system.slice/containerd.service\n"
    ),
    "v1 cgroupfs guaranteed": f"4:devices:/kubepods/pod{UID}/4f5e6d7c8b9a\n",
    "v1 systemd docker": (
        "11:devices:/kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{SYSTEMD_UID}.slice/docker-4f5e6d7c8b9a.scope\n"
    ),
    "kind cgroup root": (
        "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
        f"kubelet-kubepods-besteffort-pod{SYSTEMD_UID}.slice/cri-containerd-4f5e.scope\n"
    ),
}


@pytest.mark.parametrize("case", sorted(CGROUPS))
def test_pod_uid_from_the_cgroup_kubelet_writes(case):
    assert pod_uid_from_cgroup(CGROUPS[case]) == UID


def test_static_pods_have_a_hash_uid():
    text = "0::/kubepods/burstable/pod3b5f9e1e0e6a1c9b7f9b8d6a1f2e3c4d/8e7f\n"
    assert pod_uid_from_cgroup(text) == "3b5f9e1e0e6a1c9b7f9b8d6a1f2e3c4d"


@pytest.mark.parametrize(
    "text",
    [
        "0::/system.slice/nvidia-persistenced.service\n",
        "0::/user.slice/user-1000.slice/session-3.scope\n",
        "12:memory:/kubepods/burstable\n",  # the QoS cgroup itself, no pod
        "",
    ],
)
def test_processes_outside_pods_have_no_pod(text):
    assert pod_uid_from_cgroup(text) is None


def test_pid_to_pod_reads_the_given_proc_root(tmp_path):
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(CGROUPS["v2 systemd"])
    assert pod_uid_for_pid(4242, proc_root=tmp_path) == UID
    assert pod_uid_for_pid(4243, proc_root=tmp_path) is None  # gone, or another PID namespace


# --- fractions --------------------------------------------------------------------------------


def pod(policy, share=10 * GIB, uid="u1", gpu="GPU-a"):
    return FractionPod(uid, "project-a", f"nb-{uid}", gpu, share, policy)


def test_memory_is_summed_per_pod_and_gpu_leaving_out_non_pod_processes():
    usage = memory_by_pod(
        [("u1", "GPU-a", 3 * GIB), ("u1", "GPU-a", 2 * GIB), ("u1", "GPU-b", GIB)]
        + [(None, "GPU-a", 9 * GIB), ("u2", "GPU-a", None)]
    )
    assert usage == {("u1", "GPU-a"): 5 * GIB, ("u1", "GPU-b"): GIB}


def test_under_its_share_a_pod_is_left_alone():
    actions, state = enforce([pod("evict")], {("u1", "GPU-a"): 10 * GIB}, 0.0, {}, grace=60)
    assert actions == () and state == {}


def test_over_its_share_under_evict_a_pod_is_warned_then_evicted_after_the_grace_period():
    pods, usage = [pod("evict")], {("u1", "GPU-a"): 12 * GIB}
    actions, state = enforce(pods, usage, 100.0, {}, grace=60)
    assert [a.kind for a in actions] == ["warn"]
    assert "12.0 GiB" in actions[0].message and "share of 10.0 GiB" in actions[0].message
    actions, state = enforce(pods, usage, 159.0, state, grace=60)
    assert actions == ()
    actions, state = enforce(pods, usage, 160.0, state, grace=60)
    assert [a.kind for a in actions] == ["evict"]
    actions, state = enforce(pods, usage, 200.0, state, grace=60)
    assert actions == ()  # evicted once, not on every tick


def test_under_warn_a_pod_over_its_share_only_gets_one_event():
    pods, usage = [pod("warn")], {("u1", "GPU-a"): 12 * GIB}
    actions, state = enforce(pods, usage, 0.0, {}, grace=60)
    assert [a.kind for a in actions] == ["warn"] and "not evicted" in actions[0].message
    for now in (60.0, 600.0, 6000.0):
        actions, state = enforce(pods, usage, now, state, grace=60)
        assert actions == ()


def test_going_back_under_the_share_restarts_the_grace_period():
    pods = [pod("evict")]
    over, under = {("u1", "GPU-a"): 12 * GIB}, {("u1", "GPU-a"): 8 * GIB}
    _, state = enforce(pods, over, 0.0, {}, grace=60)
    _, state = enforce(pods, under, 30.0, state, grace=60)
    actions, state = enforce(pods, over, 50.0, state, grace=60)
    assert [a.kind for a in actions] == ["warn"]
    actions, _ = enforce(pods, over, 100.0, state, grace=60)
    assert actions == ()


def test_only_memory_on_the_pods_own_gpu_counts():
    actions, _ = enforce([pod("evict")], {("u1", "GPU-b"): 40 * GIB}, 0.0, {}, grace=0)
    assert actions == ()


def test_zero_grace_warns_and_evicts_at_once_and_actions_are_ordered_by_pod():
    pods = [pod("evict", uid="u2"), pod("warn", uid="u1")]
    usage = {("u1", "GPU-a"): 11 * GIB, ("u2", "GPU-a"): 11 * GIB}
    actions, _ = enforce(pods, usage, 0.0, {}, grace=0)
    assert [(a.kind, a.pod.uid) for a in actions] == [
        ("warn", "u1"),
        ("warn", "u2"),
        ("evict", "u2"),
    ]


# --- idle -------------------------------------------------------------------------------------


def test_pod_utilisation_sums_its_processes_and_is_zero_without_any():
    samples = [("u1", 30.0), ("u1", 20.0), (None, 99.0), ("u3", None), ("other", 5.0)]
    assert utilisation_by_pod(samples, ["u1", "u2", "u3"]) == {"u1": 50.0, "u2": 0.0, "u3": None}


def test_a_pod_is_idle_since_its_last_activity_once_idle_for_a_whole_window():
    state = observe({}, {"u1": 40.0}, now=0.0)
    state = observe(state, {"u1": 0.0}, now=60.0)
    state = observe(state, {"u1": 0.5}, now=120.0)  # below the 1% threshold
    assert idle_since(state["u1"], now=120.0, window=300) is None
    assert idle_since(state["u1"], now=300.0, window=300) == 0.0


def test_a_pod_never_active_is_idle_since_first_seen():
    state = observe({}, {"u1": 0.0}, now=10.0)
    state = observe(state, {"u1": 0.0}, now=400.0)
    assert state["u1"] == Activity(first_seen=10.0, last_active=None)
    assert idle_since(state["u1"], now=400.0, window=300) == 10.0


def test_activity_resets_idleness_and_unknown_utilisation_counts_as_active():
    state = observe({}, {"u1": 0.0, "u2": 0.0}, now=0.0)
    state = observe(state, {"u1": 75.0, "u2": None}, now=500.0)
    assert idle_since(state["u1"], now=600.0, window=300) is None
    assert idle_since(state["u2"], now=600.0, window=300) is None
    assert idle_since(state["u1"], now=800.0, window=300) == 500.0


def test_pods_no_longer_watched_are_forgotten():
    state = observe({}, {"u1": 0.0, "u2": 0.0}, now=0.0)
    assert set(observe(state, {"u2": 0.0}, now=10.0)) == {"u2"}


# --- MIG requests ------------------------------------------------------------------------------


def test_a_request_round_trips_and_its_digest_names_its_exact_text():
    text = encode_request({1: [MigInstance("3g.40gb", 4), MigInstance("1g.10gb", 0)], 0: []})
    assert parse_request(text) == (
        GpuLayout(0, ()),
        GpuLayout(1, (MigInstance("1g.10gb", 0), MigInstance("3g.40gb", 4))),
    )
    assert request_digest(text) != request_digest(text + " ")


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "not JSON"),
        ('{"version": 2, "gpus": []}', "version 1"),
        ('{"version": 1, "gpus": {}}', "`gpus` must be a list"),
        ('{"version": 1, "gpus": [{"index": -1, "instances": []}]}', "gpus[0]: needs an `index`"),
        ('{"version": 1, "gpus": [{"index": true, "instances": []}]}', "gpus[0]: needs an `index`"),
        (
            '{"version": 1, "gpus": [{"index": 0, "instances": []}, '
            '{"index": 0, "instances": []}]}',
            "gpus[1]: GPU 0 is listed twice",
        ),
        (
            '{"version": 1, "gpus": [{"index": 0, "instances": [{"profile": "1g.10gb"}]}]}',
            "gpus[0]: each instance needs a `profile` and a `start`",
        ),
    ],
)
def test_an_unreadable_request_says_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_request(text)


def test_a_request_needs_work_until_answered_and_again_while_a_gpu_is_pending():
    request = encode_request({0: [MigInstance("1g.10gb", 0)]})
    digest = request_digest(request)
    done = encode_status(digest, [GpuAnswer(0, "done", "created 1g.10gb@0")])
    pending = encode_status(digest, [GpuAnswer(0, "pending", "1g.10gb@6 still in use")])
    failed = encode_status(digest, [GpuAnswer(0, "error", "NVML_ERROR_IN_USE")])
    assert needs_work(request, None) and needs_work(request, "garbage")
    assert needs_work(request, encode_status("older", [GpuAnswer(0, "done", "")]))
    assert needs_work(request, pending)
    assert not needs_work(request, done) and not needs_work(request, failed)


def test_a_gpu_plan_destroys_what_is_not_wanted_and_creates_what_is_missing():
    gpus = backend()
    gpus.create_instance(0, "7g.80gb", 0)
    wanted = GpuLayout(0, (MigInstance("3g.40gb", 0), MigInstance("3g.40gb", 4)))
    plan = plan_gpu(gpus.gpus()[0], wanted, busy=set(), static=False)
    assert plan == MigPlan(0, (MigInstance("7g.80gb", 0),), wanted.instances)
    assert plan.describe() == "GPU 0: destroy 7g.80gb@0; create 3g.40gb@0, 3g.40gb@4"
    assert plan_gpu(gpus.gpus()[0], wanted, busy={0}, static=False) == GpuAnswer(
        0, "pending", "7g.80gb@0 still in use by a process"
    )
