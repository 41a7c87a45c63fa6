"""The GPU backend interface, run against both backends: the fake, and NVML through pynvml
with the library replaced at the pynvml module boundary by a recorded driver
(tests/nvml_driver.py). Same node for both: an A100-80GB in MIG mode, a V100-32GB, and an
A100-80GB with MIG disabled."""

import pytest

from gitops_sched.agent.errors import (
    InsufficientResources,
    InUse,
    InvalidArgument,
    NotFound,
    NotSupported,
)
from gitops_sched.agent.fake import FakeBackend, FakeGpuSpec
from gitops_sched.agent.nvml import NvmlBackend
from gitops_sched.hardware.mig import mig_profiles
from tests.nvml_driver import RecordedNvml, a100_80gb, v100_32gb

GIB = 1024**3
MIG_GPU, PLAIN_GPU, MIG_OFF_GPU = 0, 1, 2


class Node:
    """A backend and the means to run processes on its GPUs."""

    def __init__(self, backend, run_process, end_process):
        self.backend = backend
        self.run_process = run_process
        self.end_process = end_process


@pytest.fixture(params=["fake", "nvml", "nvml-bytes"])
def node(request, monkeypatch):
    """`nvml-bytes`: the same driver behind an older pynvml that returned names as bytes."""
    if request.param == "fake":
        backend = FakeBackend(
            [FakeGpuSpec("A100-80GB", mig=True), FakeGpuSpec("V100-32GB"), FakeGpuSpec("A100-80GB")]
        )
        node = Node(backend, backend.run_process, backend.end_process)
    else:
        driver = RecordedNvml(
            [
                a100_80gb("GPU-a100-0"),
                v100_32gb("GPU-v100-1"),
                a100_80gb("GPU-a100-2", mig=False),
            ],
            bytes_names=request.param == "nvml-bytes",
        )
        driver.install(monkeypatch)
        node = Node(NvmlBackend(), driver.run_process, driver.end_process)
    yield node
    node.backend.close()


def layout(backend, index=MIG_GPU):
    return [(i.profile, i.start) for i in backend.gpus()[index].instances]


def test_lists_gpus_by_index_with_catalogue_model_memory_and_mig_mode(node):
    gpus = node.backend.gpus()
    assert [g.index for g in gpus] == [0, 1, 2]
    assert [g.model for g in gpus] == ["A100-SXM4-80GB", "V100-SXM2-32GB", "A100-SXM4-80GB"]
    assert [g.mig_mode for g in gpus] == ["enabled", "unsupported", "disabled"]
    assert gpus[0].memory_total == 80 * GIB and gpus[1].memory_total == 32 * GIB
    assert all(isinstance(g.uuid, str) and g.uuid.startswith("GPU-") for g in gpus)
    assert len({g.uuid for g in gpus}) == 3
    assert all(isinstance(g.name, str) for g in gpus)
    assert all(g.instances == () for g in gpus)


def test_created_instance_is_listed_with_profile_start_and_one_compute_instance(node):
    created = node.backend.create_instance(MIG_GPU, "1g.10gb", 6)
    assert (created.profile, created.start) == ("1g.10gb", 6)
    [listed] = node.backend.gpus()[MIG_GPU].instances
    assert (listed.profile, listed.start, listed.id) == ("1g.10gb", 6, created.id)
    assert [ci.slices for ci in listed.compute_instances] == [1]


def test_instances_are_listed_sorted_by_start(node):
    node.backend.create_instance(MIG_GPU, "3g.40gb", 4)
    node.backend.create_instance(MIG_GPU, "1g.10gb", 0)
    node.backend.create_instance(MIG_GPU, "2g.20gb", 2)
    assert layout(node.backend) == [("1g.10gb", 0), ("2g.20gb", 2), ("3g.40gb", 4)]


@pytest.mark.parametrize("profile", sorted(mig_profiles("A100-SXM4-80GB")))
def test_every_placement_in_the_shared_tables_is_accepted_by_the_driver(node, profile):
    for start in mig_profiles("A100-SXM4-80GB")[profile].placements:
        node.backend.create_instance(MIG_GPU, profile, start)
        node.backend.destroy_instance(MIG_GPU, start)
    assert layout(node.backend) == []


def test_a_start_outside_the_profiles_placements_is_an_invalid_argument(node):
    with pytest.raises(InvalidArgument, match=r"3g\.40gb"):
        node.backend.create_instance(MIG_GPU, "3g.40gb", 2)
    assert layout(node.backend) == []


@pytest.mark.parametrize(
    "existing, profile, start",
    [
        ([("1g.10gb", 6)], "3g.40gb", 4),  # memory slices overlap
        ([("1g.10gb+me", 0)], "1g.10gb+me", 1),  # only one +me instance
        ([("4g.40gb", 0), ("3g.40gb", 4)], "1g.10gb", 6),  # all 7 compute slices used
        ([("7g.80gb", 0)], "1g.10gb", 3),
    ],
)
def test_no_room_is_insufficient_resources_and_changes_nothing(node, existing, profile, start):
    for name, at in existing:
        node.backend.create_instance(MIG_GPU, name, at)
    with pytest.raises(InsufficientResources) as error:
        node.backend.create_instance(MIG_GPU, profile, start)
    assert error.value.code == "NVML_ERROR_INSUFFICIENT_RESOURCES"
    assert layout(node.backend) == sorted(existing, key=lambda pair: pair[1])


def test_seven_one_slice_instances_fill_the_gpu(node):
    for start in range(7):
        node.backend.create_instance(MIG_GPU, "1g.10gb", start)
    assert [start for _, start in layout(node.backend)] == list(range(7))


def test_an_unknown_profile_is_not_supported(node):
    with pytest.raises(NotSupported, match=r"2g\.10gb"):
        node.backend.create_instance(MIG_GPU, "2g.10gb", 0)


@pytest.mark.parametrize("gpu", [PLAIN_GPU, MIG_OFF_GPU])
def test_mig_on_a_gpu_without_mig_mode_is_not_supported(node, gpu):
    with pytest.raises(NotSupported):
        node.backend.create_instance(gpu, "1g.10gb", 0)


def test_a_free_instance_is_destroyed(node):
    node.backend.create_instance(MIG_GPU, "1g.10gb", 6)
    node.backend.create_instance(MIG_GPU, "3g.40gb", 0)
    node.backend.destroy_instance(MIG_GPU, 6)
    assert layout(node.backend) == [("3g.40gb", 0)]


def test_an_instance_with_a_process_is_not_destroyed_until_the_process_ends(node):
    node.backend.create_instance(MIG_GPU, "1g.10gb", 6)
    node.run_process(MIG_GPU, 4242, 2 * GIB, instance_start=6)
    with pytest.raises(InUse) as error:
        node.backend.destroy_instance(MIG_GPU, 6)
    assert error.value.code == "NVML_ERROR_IN_USE"
    assert layout(node.backend) == [("1g.10gb", 6)]
    node.end_process(4242)
    node.backend.destroy_instance(MIG_GPU, 6)
    assert layout(node.backend) == []


def test_destroying_where_no_instance_starts_is_not_found(node):
    node.backend.create_instance(MIG_GPU, "3g.40gb", 4)
    with pytest.raises(NotFound):
        node.backend.destroy_instance(MIG_GPU, 0)


def test_processes_report_memory_and_their_mig_instance(node):
    node.backend.create_instance(MIG_GPU, "3g.40gb", 4)
    node.run_process(MIG_GPU, 30, 5 * GIB, instance_start=4)
    node.run_process(MIG_GPU, 20, 1 * GIB, instance_start=4)
    processes = node.backend.processes(MIG_GPU)
    assert [(p.pid, p.used_memory, p.instance_start) for p in processes] == [
        (20, 1 * GIB, 4),
        (30, 5 * GIB, 4),
    ]
    assert all(p.sm_util is None for p in processes)  # no per-process utilisation in MIG mode
    assert node.backend.processes(PLAIN_GPU) == ()


def test_processes_report_utilisation_outside_mig_and_count_in_memory_used(node):
    node.run_process(PLAIN_GPU, 7, 3 * GIB, sm_util=85)
    node.run_process(PLAIN_GPU, 8, 1 * GIB, sm_util=0)
    [busy, idle] = node.backend.processes(PLAIN_GPU)
    assert (busy.pid, busy.instance_start, busy.sm_util) == (7, None, 85)
    assert (idle.pid, idle.sm_util) == (8, 0)
    assert node.backend.gpus()[PLAIN_GPU].memory_used == 4 * GIB


def test_a_gpu_index_that_does_not_exist_is_an_invalid_argument(node):
    with pytest.raises(InvalidArgument):
        node.backend.processes(3)
    with pytest.raises(InvalidArgument):
        node.backend.create_instance(3, "1g.10gb", 0)
