"""The GPU backend over NVML, through nvidia-ml-py (imported as `pynvml`).

Every pynvml call goes through `_call`, which turns `pynvml.NVMLError` into the typed errors
of `errors.py` with what was being done, so no NVML return code leaks past this module.

MIG profiles are found the way nvidia-smi finds them: every GPU instance profile constant is
asked for its info and the unsupported ones are skipped. A profile is named from the shared
tables (`hardware/mig.py`) when the GPU model is known, so the agent and the scheduler use
one vocabulary; otherwise by the driver's own name ("MIG 1g.10gb" -> "1g.10gb"). Creating an
instance checks the start against the driver's possible placements, creates the GPU
instance there, then one compute instance spanning it (as `nvidia-smi mig -cgi P -C`).
"""

import ctypes
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pynvml

from gitops_sched.agent.errors import (
    GpuError,
    InsufficientResources,
    InUse,
    InvalidArgument,
    NoPermission,
    NotFound,
    NotSupported,
    NvmlUnavailable,
)
from gitops_sched.agent.gpus import ComputeInstance, DeviceGpu, GpuInstance, GpuProcess, MigMode
from gitops_sched.hardware.gpus import lookup_gpu_model
from gitops_sched.hardware.mig import MigProfile, mig_profiles

T = TypeVar("T")

_TYPED: dict[int, type[GpuError]] = {
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: NvmlUnavailable,
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED: NvmlUnavailable,
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: NvmlUnavailable,
    pynvml.NVML_ERROR_NOT_SUPPORTED: NotSupported,
    pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES: InsufficientResources,
    pynvml.NVML_ERROR_IN_USE: InUse,
    pynvml.NVML_ERROR_INVALID_ARGUMENT: InvalidArgument,
    pynvml.NVML_ERROR_NOT_FOUND: NotFound,
    pynvml.NVML_ERROR_NO_PERMISSION: NoPermission,
}

# Codes that mean "this GPU has no such profile" while probing profile constants.
_ABSENT = (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_INVALID_ARGUMENT)
_NO_MIG_PROCESS = 0xFFFFFFFF  # gpuInstanceId of a process outside MIG


def _code_name(value: int) -> str:
    for name in dir(pynvml):
        if name.startswith("NVML_ERROR_") and getattr(pynvml, name) == value:
            return name
    return f"NVML error {value}"


def typed_error(exc: pynvml.NVMLError, doing: str) -> GpuError:
    """The typed error for an NVMLError, its message saying what failed and NVML's code.

    The text comes from the code's name, not nvmlErrorString: that needs the library, and
    pynvml has no text for IN_USE or INSUFFICIENT_RESOURCES.
    """
    code = _code_name(exc.value)
    text = code.removeprefix("NVML_ERROR_").replace("_", " ").lower()
    if exc.value in (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED):
        text = f"no NVIDIA driver ({text})"
    return _TYPED.get(exc.value, GpuError)(f"{doing}: {text} ({code})", code=code)


@contextmanager
def _nvml(doing: str) -> Iterator[None]:
    try:
        yield
    except pynvml.NVMLError as exc:
        raise typed_error(exc, doing) from exc


def _call(doing: str, fn: Callable[..., T], *args: Any) -> T:
    with _nvml(doing):
        return fn(*args)


def _text(value: str | bytes) -> str:
    """pynvml returns str since 11.x and bytes before (and from some struct fields)."""
    return value.decode() if isinstance(value, bytes) else value


def _gi_profile_constant(profile: MigProfile) -> int | None:
    """NVML's GPU instance profile constant for a table profile.

    +me profiles are the REV1 variant of their slice count (1g.10gb+me, A30's 2g.12gb+me);
    a one-slice profile with two memory slices is REV2 (1g.20gb on A100-80GB).
    """
    suffix = (
        "_REV1"
        if profile.media_extensions
        else "_REV2"
        if profile.compute_slices == 1 and profile.memory_slices == 2
        else ""
    )
    name = f"NVML_GPU_INSTANCE_PROFILE_{profile.compute_slices}_SLICE{suffix}"
    return getattr(pynvml, name, None)


def _ci_profile_constant(slices: int) -> int:
    constant = getattr(pynvml, f"NVML_COMPUTE_INSTANCE_PROFILE_{slices}_SLICE", None)
    if constant is None:
        raise NotSupported(f"no compute instance profile with {slices} slices")
    return constant


class _Profile:
    """A GPU instance profile as this driver reports it, under the name the agent uses."""

    def __init__(self, name: str, info: Any) -> None:
        self.name = name
        self.id: int = info.id
        self.slices: int = info.sliceCount
        self.instance_count: int = info.instanceCount


class NvmlBackend:
    """GPUs through NVML. Construction calls nvmlInit; `close` calls nvmlShutdown.

    Raises NvmlUnavailable when there is no driver or NVML library.
    """

    def __init__(self) -> None:
        _call("starting NVML", pynvml.nvmlInit)
        self._profiles: dict[int, list[_Profile]] = {}
        self._last_sample: dict[int, int] = {}  # GPU index -> newest utilisation timestamp

    # --- the GpuBackend interface ---------------------------------------------------------

    def gpus(self) -> tuple[DeviceGpu, ...]:
        count = _call("counting GPUs", pynvml.nvmlDeviceGetCount)
        return tuple(self._describe(index) for index in range(count))

    def create_instance(self, gpu_index: int, profile: str, start: int) -> GpuInstance:
        handle = self._handle(gpu_index)
        doing = f"GPU {gpu_index}: creating {profile} at slice {start}"
        target = self._profile(gpu_index, handle, profile)
        placement = self._placement(handle, target, start, doing)
        gi = _call(
            doing,
            pynvml.nvmlDeviceCreateGpuInstanceWithPlacement,
            handle,
            target.id,
            ctypes.byref(placement),
        )
        try:
            ci_info = _call(
                f"{doing}: compute instance profile",
                pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo,
                gi,
                _ci_profile_constant(target.slices),
                pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
            )
            _call(
                f"{doing}: compute instance",
                pynvml.nvmlGpuInstanceCreateComputeInstance,
                gi,
                ci_info.id,
            )
        except GpuError:
            # a GPU instance without a compute instance is unusable: take it back
            _call(f"{doing}: rollback", pynvml.nvmlGpuInstanceDestroy, gi)
            raise
        info = _call(doing, pynvml.nvmlGpuInstanceGetInfo, gi)
        return GpuInstance(profile, info.placement.start, info.id, self._compute_instances(gi))

    def destroy_instance(self, gpu_index: int, start: int) -> None:
        handle = self._handle(gpu_index)
        for profile, gi, info in self._gpu_instances(gpu_index, handle):
            if info.placement.start != start:
                continue
            doing = f"GPU {gpu_index}: destroying {profile.name} at slice {start}"
            for ci in self._compute_instance_handles(gi):
                _call(doing, pynvml.nvmlComputeInstanceDestroy, ci)
            _call(doing, pynvml.nvmlGpuInstanceDestroy, gi)
            return
        raise NotFound(
            f"GPU {gpu_index}: no MIG instance starts at slice {start}",
            code="NVML_ERROR_NOT_FOUND",
        )

    def processes(self, gpu_index: int) -> tuple[GpuProcess, ...]:
        handle = self._handle(gpu_index)
        doing = f"GPU {gpu_index}: listing processes"
        running = _call(doing, pynvml.nvmlDeviceGetComputeRunningProcesses, handle)
        starts = {}
        if any(getattr(p, "gpuInstanceId", _NO_MIG_PROCESS) != _NO_MIG_PROCESS for p in running):
            starts = {
                info.id: info.placement.start
                for _, _, info in self._gpu_instances(gpu_index, handle)
            }
        utilisation = self._utilisation(gpu_index, handle)
        result = []
        for process in running:
            gi_id = getattr(process, "gpuInstanceId", _NO_MIG_PROCESS)
            result.append(
                GpuProcess(
                    pid=process.pid,
                    gpu_index=gpu_index,
                    used_memory=process.usedGpuMemory,
                    instance_start=None if gi_id == _NO_MIG_PROCESS else starts.get(gi_id),
                    sm_util=None if utilisation is None else utilisation.get(process.pid, 0.0),
                )
            )
        return tuple(sorted(result, key=lambda p: p.pid))

    def close(self) -> None:
        _call("stopping NVML", pynvml.nvmlShutdown)

    # --- reading ----------------------------------------------------------------------------

    def _handle(self, gpu_index: int) -> Any:
        return _call(f"GPU {gpu_index}", pynvml.nvmlDeviceGetHandleByIndex, gpu_index)

    def _describe(self, index: int) -> DeviceGpu:
        handle = self._handle(index)
        doing = f"GPU {index}"
        name = _text(_call(doing, pynvml.nvmlDeviceGetName, handle))
        memory = _call(doing, pynvml.nvmlDeviceGetMemoryInfo, handle)
        known = lookup_gpu_model(name)
        mode, pending = self._mig_mode(handle, doing)
        instances: tuple[GpuInstance, ...] = ()
        if mode == "enabled":
            instances = tuple(
                sorted(
                    (
                        GpuInstance(
                            profile.name,
                            info.placement.start,
                            info.id,
                            self._compute_instances(gi),
                        )
                        for profile, gi, info in self._gpu_instances(index, handle)
                    ),
                    key=lambda instance: instance.start,
                )
            )
        return DeviceGpu(
            index=index,
            uuid=_text(_call(doing, pynvml.nvmlDeviceGetUUID, handle)),
            name=name,
            model=known.name if known else name,
            memory_total=memory.total,
            memory_used=memory.used,
            mig_mode=mode,
            mig_pending=pending,
            instances=instances,
        )

    @staticmethod
    def _mig_mode(handle: Any, doing: str) -> tuple[MigMode, MigMode | None]:
        try:
            current, pending = pynvml.nvmlDeviceGetMigMode(handle)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_NOT_SUPPORTED:
                return "unsupported", None
            raise typed_error(exc, doing) from exc
        names: dict[int, MigMode] = {
            pynvml.NVML_DEVICE_MIG_ENABLE: "enabled",
            pynvml.NVML_DEVICE_MIG_DISABLE: "disabled",
        }
        return names[current], None if pending == current else names[pending]

    def _profiles_of(self, index: int, handle: Any) -> list[_Profile]:
        """The GPU's instance profiles; asked once per GPU (they never change)."""
        if index in self._profiles:
            return self._profiles[index]
        name = _text(_call(f"GPU {index}", pynvml.nvmlDeviceGetName, handle))
        table = {
            constant: profile.name
            for profile in mig_profiles(name).values()
            if (constant := _gi_profile_constant(profile)) is not None
        }
        found = []
        count = getattr(pynvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", 0x12)
        for constant in range(count):
            try:
                info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, constant)
            except pynvml.NVMLError as exc:
                if exc.value in _ABSENT:
                    continue
                raise typed_error(exc, f"GPU {index}: MIG profile {constant}") from exc
            driver_name = _text(getattr(info, "name", b"")).removeprefix("MIG ")
            label = table.get(constant) or driver_name or f"profile-{info.id}"
            found.append(_Profile(label, info))
        self._profiles[index] = found
        return found

    def _profile(self, index: int, handle: Any, name: str) -> _Profile:
        profiles = self._profiles_of(index, handle)
        for profile in profiles:
            if profile.name == name:
                return profile
        raise NotSupported(
            f"GPU {index} has no MIG profile {name!r}; profiles: "
            + (", ".join(p.name for p in profiles) or "none"),
            code="NVML_ERROR_NOT_SUPPORTED",
        )

    @staticmethod
    def _placement(handle: Any, profile: _Profile, start: int, doing: str) -> Any:
        """The driver's placement of `profile` at `start` (size included), or InvalidArgument.

        Asked twice, as NVML documents: with no array for the count, then to fill one.
        """
        count = ctypes.c_uint(0)
        fn = pynvml.nvmlDeviceGetGpuInstancePossiblePlacements
        _call(doing, fn, handle, profile.id, None, ctypes.byref(count))
        array = (pynvml.c_nvmlGpuInstancePlacement_t * count.value)()
        _call(doing, fn, handle, profile.id, array, ctypes.byref(count))
        placements = list(array[: count.value])
        for placement in placements:
            if placement.start == start:
                return placement
        raise InvalidArgument(
            f"{doing}: {profile.name} cannot start there; placements: "
            + ", ".join(str(p.start) for p in placements),
            code="NVML_ERROR_INVALID_ARGUMENT",
        )

    def _gpu_instances(self, index: int, handle: Any) -> Iterator[tuple[_Profile, Any, Any]]:
        """(profile, GPU instance handle, nvmlGpuInstanceGetInfo) of each GPU instance."""
        for profile in self._profiles_of(index, handle):
            doing = f"GPU {index}: listing {profile.name} instances"
            array = (pynvml.c_nvmlGpuInstance_t * max(profile.instance_count, 1))()
            count = ctypes.c_uint(0)
            _call(
                doing,
                pynvml.nvmlDeviceGetGpuInstances,
                handle,
                profile.id,
                array,
                ctypes.byref(count),
            )
            for gi in array[: count.value]:
                yield profile, gi, _call(doing, pynvml.nvmlGpuInstanceGetInfo, gi)

    def _compute_instance_handles(self, gi: Any) -> Iterator[Any]:
        for _, ci, _ in self._compute_instance_entries(gi):
            yield ci

    def _compute_instance_entries(self, gi: Any) -> Iterator[tuple[Any, Any, Any]]:
        """(profile info, handle, nvmlComputeInstanceGetInfo) of each compute instance."""
        count = getattr(pynvml, "NVML_COMPUTE_INSTANCE_PROFILE_COUNT", 0x9)
        for constant in range(count):
            try:
                info = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                    gi, constant, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
                )
            except pynvml.NVMLError as exc:
                if exc.value in _ABSENT:
                    continue
                raise typed_error(exc, "listing compute instance profiles") from exc
            array = (pynvml.c_nvmlComputeInstance_t * max(info.instanceCount, 1))()
            found = ctypes.c_uint(0)
            doing = "listing compute instances"
            _call(
                doing,
                pynvml.nvmlGpuInstanceGetComputeInstances,
                gi,
                info.id,
                array,
                ctypes.byref(found),
            )
            for ci in array[: found.value]:
                yield info, ci, _call(doing, pynvml.nvmlComputeInstanceGetInfo, ci)

    def _compute_instances(self, gi: Any) -> tuple[ComputeInstance, ...]:
        return tuple(
            sorted(
                (
                    ComputeInstance(ci_info.id, profile.sliceCount, ci_info.placement.start)
                    for profile, _, ci_info in self._compute_instance_entries(gi)
                ),
                key=lambda ci: (ci.start, ci.id),
            )
        )

    def _utilisation(self, index: int, handle: Any) -> dict[int, float] | None:
        """Mean SM utilisation per PID over the samples since the last call.

        None when the driver cannot tell (NOT_SUPPORTED, e.g. in MIG mode); a PID without a
        sample was idle over the period (the driver records samples for active processes).
        """
        since = self._last_sample.get(index, 0)
        try:
            samples = pynvml.nvmlDeviceGetProcessUtilization(handle, since)
        except pynvml.NVMLError as exc:
            # SUCCESS on the sizing call and NOT_FOUND both mean: no sample since `since`
            if exc.value in (pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_NOT_FOUND):
                return {}
            if exc.value == pynvml.NVML_ERROR_NOT_SUPPORTED:
                return None
            raise typed_error(exc, f"GPU {index}: process utilisation") from exc
        per_pid: dict[int, list[int]] = {}
        for sample in samples:
            per_pid.setdefault(sample.pid, []).append(sample.smUtil)
            self._last_sample[index] = max(self._last_sample.get(index, 0), sample.timeStamp)
        return {pid: sum(values) / len(values) for pid, values in per_pid.items()}
