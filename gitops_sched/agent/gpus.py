"""What a GPU backend reports and can do: one small interface, two implementations.

`NvmlBackend` (nvml.py) talks to the driver through pynvml; `FakeBackend` (fake.py) keeps
GPUs in memory with real models' numbers. Both raise the typed errors of `errors.py`.
Memory is in bytes, as NVML reports it; MIG instances are named by the GPU instance
profile (`1g.10gb`) and placed by their first memory slice (`start`), as in
`hardware/mig.py` and `nvidia-smi mig -lgi`.
"""

from dataclasses import dataclass
from typing import Literal, Protocol

MigMode = Literal["enabled", "disabled", "unsupported"]


@dataclass(frozen=True)
class ComputeInstance:
    """A compute instance inside a GPU instance; the agent creates one spanning the whole GI."""

    id: int
    slices: int
    start: int


@dataclass(frozen=True)
class GpuInstance:
    """A MIG GPU instance: profile, first memory slice, NVML's id, its compute instances."""

    profile: str
    start: int
    id: int
    compute_instances: tuple[ComputeInstance, ...] = ()


@dataclass(frozen=True)
class DeviceGpu:
    """One physical GPU as the driver reports it.

    `name` is NVML's product name ("NVIDIA A100-SXM4-80GB"); `model` is the catalogue's
    canonical name when the product is known (`hardware.gpus`), else the product name.
    `mig_pending` is set when a MIG mode change waits for a GPU reset.
    """

    index: int
    uuid: str
    name: str
    model: str
    memory_total: int
    memory_used: int
    mig_mode: MigMode
    mig_pending: MigMode | None = None
    instances: tuple[GpuInstance, ...] = ()


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU (host PID), its memory and streaming-multiprocessor use.

    `instance_start` is the MIG instance it runs in (None without MIG); `sm_util` is the
    percentage averaged over the samples since the previous call, None when the driver
    cannot tell (per-process utilisation is not available in MIG mode).
    """

    pid: int
    gpu_index: int
    used_memory: int | None
    instance_start: int | None = None
    sm_util: float | None = None


class GpuBackend(Protocol):
    """The node agent's only view of GPUs."""

    def gpus(self) -> tuple[DeviceGpu, ...]:
        """Every GPU, by index, with its MIG instances sorted by start."""
        ...

    def create_instance(self, gpu_index: int, profile: str, start: int) -> GpuInstance:
        """Create a GPU instance of `profile` at `start`, with one compute instance over it."""
        ...

    def destroy_instance(self, gpu_index: int, start: int) -> None:
        """Destroy the GPU instance at `start` and its compute instances; InUse if busy."""
        ...

    def processes(self, gpu_index: int) -> tuple[GpuProcess, ...]:
        """Compute processes on the GPU, sorted by PID."""
        ...

    def close(self) -> None:
        """Release the driver (nvmlShutdown); the backend is unusable afterwards."""
        ...
