"""What only the NVML backend does: NVML errors become typed errors, driver quirks (bytes,
profile names of unknown GPUs, pending MIG mode, utilisation samples) are absorbed."""

import pynvml
import pytest

from gitops_sched.agent.errors import (
    GpuError,
    InsufficientResources,
    InUse,
    NoPermission,
    NotSupported,
    NvmlUnavailable,
)
from gitops_sched.agent.nvml import NvmlBackend, typed_error
from tests.nvml_driver import UNKNOWN_MODEL_PROFILES, DriverGpu, RecordedNvml, a100_80gb, v100_32gb

GIB = 1024**3


def install(monkeypatch, *gpus, **options):
    driver = RecordedNvml(list(gpus), **options)
    driver.install(monkeypatch)
    return driver


@pytest.mark.parametrize(
    "code, name",
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML_ERROR_LIBRARY_NOT_FOUND"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED"),
    ],
)
def test_no_driver_at_init_is_nvml_unavailable(monkeypatch, code, name):
    driver = install(monkeypatch, v100_32gb("GPU-v"))
    driver.fail("nvmlInit", code)
    with pytest.raises(NvmlUnavailable, match="no NVIDIA driver") as error:
        NvmlBackend()
    assert error.value.code == name


@pytest.mark.parametrize(
    "code, typed",
    [
        (pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, InsufficientResources),
        (pynvml.NVML_ERROR_IN_USE, InUse),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, NotSupported),
        (pynvml.NVML_ERROR_NO_PERMISSION, NoPermission),
        (pynvml.NVML_ERROR_GPU_IS_LOST, GpuError),
    ],
)
def test_nvml_errors_become_typed_errors_saying_what_failed(code, typed):
    error = typed_error(pynvml.NVMLError(code), "GPU 0: creating 1g.10gb at slice 6")
    assert type(error) is typed
    assert str(error).startswith("GPU 0: creating 1g.10gb at slice 6: ")
    assert error.code is not None and error.code in str(error)


def test_creating_without_privileges_is_no_permission_and_creates_nothing(monkeypatch):
    driver = install(monkeypatch, a100_80gb("GPU-a"))
    backend = NvmlBackend()
    driver.fail("nvmlDeviceCreateGpuInstanceWithPlacement", pynvml.NVML_ERROR_NO_PERMISSION)
    with pytest.raises(NoPermission, match="NVML_ERROR_NO_PERMISSION"):
        backend.create_instance(0, "1g.10gb", 6)
    assert backend.gpus()[0].instances == ()


def test_a_gpu_instance_whose_compute_instance_fails_is_taken_back(monkeypatch):
    driver = install(monkeypatch, a100_80gb("GPU-a"))
    backend = NvmlBackend()
    driver.fail("nvmlGpuInstanceCreateComputeInstance", pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
    with pytest.raises(InsufficientResources, match="compute instance"):
        backend.create_instance(0, "2g.20gb", 4)
    assert backend.gpus()[0].instances == ()
    assert "nvmlGpuInstanceDestroy" in driver.calls


def test_destroy_removes_compute_instances_before_the_gpu_instance(monkeypatch):
    driver = install(monkeypatch, a100_80gb("GPU-a"))
    backend = NvmlBackend()
    backend.create_instance(0, "3g.40gb", 0)
    driver.calls.clear()
    backend.destroy_instance(0, 0)
    destroys = [c for c in driver.calls if c.endswith("Destroy")]
    assert destroys == ["nvmlComputeInstanceDestroy", "nvmlGpuInstanceDestroy"]


def test_an_unknown_gpu_model_keeps_its_product_name_and_the_drivers_profile_names(monkeypatch):
    gpu = DriverGpu(
        "NVIDIA B300",
        "GPU-b",
        180 * GIB,
        (pynvml.NVML_DEVICE_MIG_ENABLE,) * 2,
        UNKNOWN_MODEL_PROFILES,
    )
    install(monkeypatch, gpu)
    backend = NvmlBackend()
    backend.create_instance(0, "1g.23gb", 3)
    [described] = backend.gpus()
    assert described.model == "NVIDIA B300"
    assert [(i.profile, i.start) for i in described.instances] == [("1g.23gb", 3)]


def test_a_pending_mig_mode_change_is_reported(monkeypatch):
    gpu = a100_80gb("GPU-a", mig=False)
    gpu.mig = (pynvml.NVML_DEVICE_MIG_DISABLE, pynvml.NVML_DEVICE_MIG_ENABLE)
    install(monkeypatch, gpu)
    [described] = NvmlBackend().gpus()
    assert (described.mig_mode, described.mig_pending) == ("disabled", "enabled")


def test_utilisation_counts_only_samples_since_the_previous_call(monkeypatch):
    driver = install(monkeypatch, v100_32gb("GPU-v"))
    backend = NvmlBackend()
    driver.run_process(0, 11, GIB, sm_util=60)
    driver.gpus[0].processes[11][2].append((driver.clock + 500, 100))
    [first] = backend.processes(0)
    assert first.sm_util == 80  # mean of the two samples
    [second] = backend.processes(0)
    assert second.sm_util == 0  # no sample since: the process was idle


def test_an_unexpected_nvml_error_while_listing_is_a_gpu_error(monkeypatch):
    driver = install(monkeypatch, a100_80gb("GPU-a"))
    backend = NvmlBackend()
    driver.fail("nvmlDeviceGetMigMode", pynvml.NVML_ERROR_GPU_IS_LOST)
    with pytest.raises(GpuError, match="NVML_ERROR_GPU_IS_LOST"):
        backend.gpus()


def test_close_shuts_nvml_down(monkeypatch):
    driver = install(monkeypatch, v100_32gb("GPU-v"))
    NvmlBackend().close()
    assert driver.calls[-1] == "nvmlShutdown" and not driver.initialised
