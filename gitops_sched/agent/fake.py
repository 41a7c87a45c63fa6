"""An in-memory GPU backend with real GPU models' numbers, for tests and GPU-less machines.

Memory, MIG capability, profiles and placements come from the shared tables in
`gitops_sched.hardware` (the catalogue and NVIDIA's MIG placements), never restated here. The
fake behaves as the driver does where the agent depends on it: MIG instances only on
MIG-enabled GPUs, only at one of the profile's placements (else InvalidArgument), only when
the layout stays valid (else InsufficientResources, as NVML's
NVML_ERROR_INSUFFICIENT_RESOURCES), and an instance with a process on it is not destroyed
(InUse, as NVML_ERROR_IN_USE).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from gitops_sched.agent.errors import (
    InsufficientResources,
    InUse,
    InvalidArgument,
    NotFound,
    NotSupported,
)
from gitops_sched.agent.gpus import ComputeInstance, DeviceGpu, GpuInstance, GpuProcess, MigMode
from gitops_sched.hardware.gpus import MIB, GpuModel, known_gpu_model_names, lookup_gpu_model
from gitops_sched.hardware.mig import MigInstance, is_valid_layout, mig_profiles


@dataclass(frozen=True)
class FakeGpuSpec:
    """One fake GPU: a catalogue model (any alias) and whether MIG mode is on."""

    model: str
    mig: bool = False


def parse_fake_spec(text: str) -> tuple[FakeGpuSpec, ...]:
    """`MODEL:COUNT[:mig][,MODEL:COUNT[:mig]]` -> one spec per GPU, in order.

    `A100-80GB:2:mig,V100-32GB:4` is two MIG-enabled A100s (indexes 0, 1) then four V100s.
    Raises ValueError with the valid model names when a model is unknown.
    """
    specs: list[FakeGpuSpec] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        model, _, rest = item.partition(":")
        count_text, _, flag = rest.partition(":")
        gpu = lookup_gpu_model(model)
        if gpu is None:
            raise ValueError(
                f"unknown GPU model {model!r}; known: {', '.join(known_gpu_model_names())}"
            )
        try:
            count = int(count_text or "1")
        except ValueError:
            raise ValueError(f"{item!r}: the count after ':' must be a whole number") from None
        if count < 1:
            raise ValueError(f"{item!r}: the count must be at least 1")
        if flag not in ("", "mig"):
            raise ValueError(f"{item!r}: the only option after the count is ':mig'")
        if flag and not gpu.mig_capable:
            raise ValueError(f"{item!r}: {gpu.name} has no MIG")
        specs.extend(FakeGpuSpec(gpu.name, bool(flag)) for _ in range(count))
    if not specs:
        raise ValueError("no GPUs given; expected MODEL:COUNT[,MODEL:COUNT]")
    return tuple(specs)


@dataclass
class _FakeGpu:
    index: int
    uuid: str
    model: GpuModel
    mig: bool
    instances: dict[int, GpuInstance] = field(default_factory=dict)  # by start


def fake_gpu_uuid(node: str, index: int) -> str:
    """A fake GPU's UUID: stable per node and index, shaped like NVML's "GPU-<uuid>" (what
    the device plugin's stand-in in the tests hands out for the same GPU)."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'gitops-sched-fake/{node}/{index}')}"


class FakeBackend:
    """GPUs in memory; `run_process`/`end_process` stand in for CUDA programs."""

    def __init__(self, specs: Sequence[FakeGpuSpec], node: str = "fake") -> None:
        self._gpus: list[_FakeGpu] = []
        for index, spec in enumerate(specs):
            gpu = lookup_gpu_model(spec.model)
            if gpu is None:
                raise ValueError(f"unknown GPU model {spec.model!r}")
            if spec.mig and not gpu.mig_capable:
                raise ValueError(f"{gpu.name} has no MIG")
            self._gpus.append(_FakeGpu(index, fake_gpu_uuid(node, index), gpu, spec.mig))
        self._processes: dict[int, GpuProcess] = {}
        self._closed = False

    # --- the GpuBackend interface ---------------------------------------------------------

    def gpus(self) -> tuple[DeviceGpu, ...]:
        return tuple(self._describe(gpu) for gpu in self._gpus)

    def create_instance(self, gpu_index: int, profile: str, start: int) -> GpuInstance:
        gpu = self._mig_gpu(gpu_index)
        profiles = mig_profiles(gpu.model.name)
        if profile not in profiles:
            raise NotSupported(
                f"GPU {gpu_index} ({gpu.model.name}) has no MIG profile {profile!r}; "
                f"profiles: {', '.join(profiles)}",
                code="NVML_ERROR_NOT_SUPPORTED",
            )
        placements = profiles[profile].placements
        if start not in placements:
            raise InvalidArgument(
                f"GPU {gpu_index}: {profile} cannot start at slice {start}; "
                f"placements: {', '.join(map(str, placements))}",
                code="NVML_ERROR_INVALID_ARGUMENT",
            )
        layout = [MigInstance(i.profile, i.start) for i in gpu.instances.values()]
        if not is_valid_layout(gpu.model.name, [*layout, MigInstance(profile, start)]):
            raise InsufficientResources(
                f"GPU {gpu_index}: no room for {profile} at slice {start} beside "
                + (", ".join(f"{i.profile}@{i.start}" for i in layout) or "nothing"),
                code="NVML_ERROR_INSUFFICIENT_RESOURCES",
            )
        used_ids = {instance.id for instance in gpu.instances.values()}
        gi_id = min(set(range(1, len(used_ids) + 2)) - used_ids)
        slices = profiles[profile].compute_slices
        instance = GpuInstance(profile, start, gi_id, (ComputeInstance(0, slices, 0),))
        gpu.instances[start] = instance
        return instance

    def destroy_instance(self, gpu_index: int, start: int) -> None:
        gpu = self._mig_gpu(gpu_index)
        instance = gpu.instances.get(start)
        if instance is None:
            raise NotFound(
                f"GPU {gpu_index}: no MIG instance starts at slice {start}",
                code="NVML_ERROR_NOT_FOUND",
            )
        busy = sorted(
            p.pid
            for p in self._processes.values()
            if p.gpu_index == gpu_index and p.instance_start == start
        )
        if busy:
            raise InUse(
                f"GPU {gpu_index}: {instance.profile}@{start} is in use by "
                f"PID {', '.join(map(str, busy))}",
                code="NVML_ERROR_IN_USE",
            )
        del gpu.instances[start]

    def processes(self, gpu_index: int) -> tuple[GpuProcess, ...]:
        gpu = self._gpu(gpu_index)
        found = sorted(
            (p for p in self._processes.values() if p.gpu_index == gpu_index),
            key=lambda p: p.pid,
        )
        # like the driver: no per-process utilisation in MIG mode
        return tuple(replace(p, sm_util=None) if gpu.mig else p for p in found)

    def close(self) -> None:
        self._closed = True

    # --- test controls --------------------------------------------------------------------

    def run_process(
        self,
        gpu_index: int,
        pid: int,
        used_memory: int,
        *,
        instance_start: int | None = None,
        sm_util: float | None = 0.0,
    ) -> None:
        """Start (or update) a process using `used_memory` bytes on a GPU or MIG instance."""
        gpu = self._gpu(gpu_index)
        if gpu.mig and instance_start not in gpu.instances:
            raise ValueError(f"GPU {gpu_index} is in MIG mode: name an existing instance start")
        if not gpu.mig and instance_start is not None:
            raise ValueError(f"GPU {gpu_index} is not in MIG mode")
        self._processes[pid] = GpuProcess(pid, gpu_index, used_memory, instance_start, sm_util)

    def end_process(self, pid: int) -> None:
        self._processes.pop(pid, None)

    # --- helpers --------------------------------------------------------------------------

    def _gpu(self, gpu_index: int) -> _FakeGpu:
        if self._closed:
            raise RuntimeError("the fake backend was closed")
        if not 0 <= gpu_index < len(self._gpus):
            raise InvalidArgument(
                f"no GPU {gpu_index}: this node has {len(self._gpus)}",
                code="NVML_ERROR_INVALID_ARGUMENT",
            )
        return self._gpus[gpu_index]

    def _mig_gpu(self, gpu_index: int) -> _FakeGpu:
        gpu = self._gpu(gpu_index)
        if not gpu.model.mig_capable:
            raise NotSupported(
                f"GPU {gpu_index} ({gpu.model.name}) has no MIG", code="NVML_ERROR_NOT_SUPPORTED"
            )
        if not gpu.mig:
            raise NotSupported(
                f"GPU {gpu_index} ({gpu.model.name}): MIG mode is disabled",
                code="NVML_ERROR_NOT_SUPPORTED",
            )
        return gpu

    def _describe(self, gpu: _FakeGpu) -> DeviceGpu:
        used = sum(p.used_memory or 0 for p in self._processes.values() if p.gpu_index == gpu.index)
        mode: MigMode = (
            "unsupported" if not gpu.model.mig_capable else "enabled" if gpu.mig else "disabled"
        )
        return DeviceGpu(
            index=gpu.index,
            uuid=gpu.uuid,
            name=f"NVIDIA {gpu.model.name}",
            model=gpu.model.name,
            memory_total=gpu.model.memory_mib * MIB,
            memory_used=used,
            mig_mode=mode,
            instances=tuple(gpu.instances[start] for start in sorted(gpu.instances)),
        )
