"""A stand-in for libnvidia-ml behind pynvml's functions, for tests of the NVML backend.

`RecordedNvml.install(monkeypatch)` replaces pynvml's `nvml*` functions (the module boundary
the backend calls through) with methods answering as the driver does, in the real shapes:
pynvml's own ctypes structures (`c_nvmlMemory_t` with .total/.free/.used, placements, GPU
instance info), handles that are real ctypes pointers, arrays and `byref` counts filled in
place, names as str (pynvml >= 11) or bytes (older pynvml), process lists as pynvml's
"friendly objects", and failures as `pynvml.NVMLError(code)` instances with `.value`.

The MIG numbers below are recorded from drivers (`nvidia-smi mig -lgip` / `-lgipp`), kept
apart from `gitops_sched/hardware/mig.py` on purpose: the interface tests then check the
shared tables against what the driver says. The driver's rules are its own: a start must be
one of the profile's placements (INVALID_ARGUMENT), memory slices must not overlap, a
profile's instance count and the GPU's compute slices must not be exceeded
(INSUFFICIENT_RESOURCES), and instances with processes or compute instances on them are
not destroyed (IN_USE).
"""

import ctypes
from dataclasses import dataclass, field

import pynvml

NOT_MIG = 0xFFFFFFFF


@dataclass(frozen=True)
class RecordedProfile:
    constant: int  # NVML_GPU_INSTANCE_PROFILE_*
    id: int
    name: str
    slices: int
    instance_count: int
    memory_mb: int
    placements: tuple[tuple[int, int], ...]  # (start, size)


def _profiles(rows):
    return tuple(
        RecordedProfile(getattr(pynvml, f"NVML_GPU_INSTANCE_PROFILE_{const}"), *rest)
        for const, *rest in rows
    )


def _spread(starts, size):
    return tuple((start, size) for start in starts)


# nvidia-smi mig -lgip / -lgipp on an A100-SXM4-80GB (driver 535)
A100_80GB_PROFILES = _profiles(
    [
        ("1_SLICE", 19, "MIG 1g.10gb", 1, 7, 9728, _spread(range(7), 1)),
        ("1_SLICE_REV1", 20, "MIG 1g.10gb+me", 1, 1, 9728, _spread(range(7), 1)),
        ("1_SLICE_REV2", 15, "MIG 1g.20gb", 1, 4, 19968, _spread((0, 2, 4, 6), 2)),
        ("2_SLICE", 14, "MIG 2g.20gb", 2, 3, 19968, _spread((0, 2, 4), 2)),
        ("3_SLICE", 9, "MIG 3g.40gb", 3, 2, 40192, _spread((0, 4), 4)),
        ("4_SLICE", 5, "MIG 4g.40gb", 4, 1, 40192, _spread((0,), 4)),
        ("7_SLICE", 0, "MIG 7g.80gb", 7, 1, 80640, _spread((0,), 8)),
    ]
)
A100_COMPUTE_SLICES = 7

# A GPU the catalogue does not know: the backend must use the driver's own profile names.
UNKNOWN_MODEL_PROFILES = _profiles(
    [
        ("1_SLICE", 19, "MIG 1g.23gb", 1, 7, 23552, _spread(range(7), 1)),
        ("7_SLICE", 0, "MIG 7g.180gb", 7, 1, 184320, _spread((0,), 8)),
    ]
)

MIB = 1024 * 1024


@dataclass
class _Gi:
    id: int
    profile: RecordedProfile
    start: int
    size: int
    struct: object
    cis: dict = field(default_factory=dict)  # id -> (slices, struct)


@dataclass
class DriverGpu:
    """One GPU as the driver sees it; `mig` None means the GPU has no MIG at all."""

    name: str
    uuid: str
    total: int
    mig: tuple[int, int] | None = None  # (current, pending)
    profiles: tuple[RecordedProfile, ...] = ()
    compute_slices: int = A100_COMPUTE_SLICES
    gis: dict = field(default_factory=dict)
    processes: dict = field(default_factory=dict)  # pid -> (used, gi id, sm samples)
    handle: object = None


def a100_80gb(uuid: str, mig: bool = True) -> DriverGpu:
    mode = pynvml.NVML_DEVICE_MIG_ENABLE if mig else pynvml.NVML_DEVICE_MIG_DISABLE
    return DriverGpu("NVIDIA A100-SXM4-80GB", uuid, 81920 * MIB, (mode, mode), A100_80GB_PROFILES)


def v100_32gb(uuid: str) -> DriverGpu:
    return DriverGpu("Tesla V100-SXM2-32GB", uuid, 32768 * MIB)


def _error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class RecordedNvml:
    """The driver for a set of GPUs; `fail(name, code)` makes the next call to `name` fail."""

    FUNCTIONS = (
        "nvmlInit",
        "nvmlShutdown",
        "nvmlDeviceGetCount",
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetGpuInstanceProfileInfo",
        "nvmlDeviceGetGpuInstancePossiblePlacements",
        "nvmlDeviceCreateGpuInstanceWithPlacement",
        "nvmlDeviceGetGpuInstances",
        "nvmlGpuInstanceGetInfo",
        "nvmlGpuInstanceDestroy",
        "nvmlGpuInstanceGetComputeInstanceProfileInfo",
        "nvmlGpuInstanceCreateComputeInstance",
        "nvmlGpuInstanceGetComputeInstances",
        "nvmlComputeInstanceGetInfo",
        "nvmlComputeInstanceDestroy",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetProcessUtilization",
    )

    def __init__(self, gpus: list[DriverGpu], *, bytes_names: bool = False) -> None:
        self.gpus = gpus
        self.bytes_names = bytes_names
        self.failures: dict[str, int] = {}
        self.calls: list[str] = []
        self.initialised = False
        self.clock = 1_000_000
        for gpu in gpus:
            gpu.handle = pynvml.c_nvmlDevice_t(pynvml.struct_c_nvmlDevice_t())

    def install(self, monkeypatch) -> None:
        for name in self.FUNCTIONS:
            monkeypatch.setattr(pynvml, name, self._wrap(name, getattr(self, name)))

    def fail(self, function: str, code: int) -> None:
        self.failures[function] = code

    def _wrap(self, name, method):
        def call(*args):
            self.calls.append(name)
            if name in self.failures:
                raise _error(self.failures.pop(name))
            if name != "nvmlInit" and not self.initialised:
                raise _error(pynvml.NVML_ERROR_UNINITIALIZED)
            return method(*args)

        return call

    # --- test controls ----------------------------------------------------------------------

    def run_process(self, index, pid, used, *, instance_start=None, sm_util=0.0):
        gpu = self.gpus[index]
        gi_id = NOT_MIG
        if instance_start is not None:
            gi_id = next(gi.id for gi in gpu.gis.values() if gi.start == instance_start)
        self.clock += 1000
        samples = [] if not sm_util else [(self.clock, int(sm_util))]
        gpu.processes[pid] = (used, gi_id, samples)

    def end_process(self, pid):
        for gpu in self.gpus:
            gpu.processes.pop(pid, None)

    # --- library ---------------------------------------------------------------------------

    def nvmlInit(self):
        self.initialised = True

    def nvmlShutdown(self):
        self.initialised = False

    def _gpu(self, handle) -> DriverGpu:
        address = ctypes.addressof(handle.contents)
        for gpu in self.gpus:
            if ctypes.addressof(gpu.handle.contents) == address:
                return gpu
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def _gi(self, handle) -> tuple[DriverGpu, _Gi]:
        address = ctypes.addressof(handle.contents)
        for gpu in self.gpus:
            for gi in gpu.gis.values():
                if ctypes.addressof(gi.struct) == address:
                    return gpu, gi
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def _ci(self, handle):
        address = ctypes.addressof(handle.contents)
        for gpu in self.gpus:
            for gi in gpu.gis.values():
                for ci_id, (slices, struct) in gi.cis.items():
                    if ctypes.addressof(struct) == address:
                        return gpu, gi, ci_id, slices
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def _text(self, value: str):
        return value.encode() if self.bytes_names else value

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        if not 0 <= index < len(self.gpus):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.gpus[index].handle

    def nvmlDeviceGetName(self, handle):
        return self._text(self._gpu(handle).name)

    def nvmlDeviceGetUUID(self, handle):
        return self._text(self._gpu(handle).uuid)

    def nvmlDeviceGetMemoryInfo(self, handle):
        gpu = self._gpu(handle)
        used = sum(used for used, _, _ in gpu.processes.values())
        return pynvml.c_nvmlMemory_t(gpu.total, gpu.total - used, used)

    def nvmlDeviceGetMigMode(self, handle):
        gpu = self._gpu(handle)
        if gpu.mig is None:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return list(gpu.mig)

    def _profile(self, gpu, *, constant=None, profile_id=None) -> RecordedProfile:
        for profile in gpu.profiles:
            if profile.constant == constant or profile.id == profile_id:
                return profile
        raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle, constant, version=2):
        profile = self._profile(self._gpu(handle), constant=constant)
        info = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
        info.id = profile.id
        info.sliceCount = profile.slices
        info.instanceCount = profile.instance_count
        info.memorySizeMB = profile.memory_mb
        info.name = profile.name.encode()  # a c_char array: pynvml hands back bytes
        return info

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, handle, profile_id, array, count_ref):
        profile = self._profile(self._gpu(handle), profile_id=profile_id)
        count = count_ref._obj
        if array is None:
            count.value = len(profile.placements)
            return pynvml.NVML_SUCCESS
        if count.value < len(profile.placements):
            raise _error(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
        for i, (start, size) in enumerate(profile.placements):
            array[i].start, array[i].size = start, size
        count.value = len(profile.placements)
        return pynvml.NVML_SUCCESS

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle, profile_id, placement_ref):
        gpu = self._gpu(handle)
        if gpu.mig is None or gpu.mig[0] != pynvml.NVML_DEVICE_MIG_ENABLE:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        profile = self._profile(gpu, profile_id=profile_id)
        start = placement_ref._obj.start
        sizes = dict(profile.placements)
        if start not in sizes:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        span = set(range(start, start + sizes[start]))
        taken = {s for gi in gpu.gis.values() for s in range(gi.start, gi.start + gi.size)}
        same = sum(gi.profile.id == profile.id for gi in gpu.gis.values())
        compute = sum(gi.profile.slices for gi in gpu.gis.values())
        if (
            span & taken
            or same >= profile.instance_count
            or compute + profile.slices > gpu.compute_slices
        ):
            raise _error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        gi_id = min(set(range(1, len(gpu.gis) + 2)) - set(gpu.gis))
        struct = pynvml.struct_c_nvmlGpuInstance_t()
        gpu.gis[gi_id] = _Gi(gi_id, profile, start, sizes[start], struct)
        return pynvml.c_nvmlGpuInstance_t(struct)

    def nvmlDeviceGetGpuInstances(self, handle, profile_id, array, count_ref):
        gpu = self._gpu(handle)
        found = [gi for gi in gpu.gis.values() if gi.profile.id == profile_id]
        if len(found) > len(array):
            raise _error(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
        for i, gi in enumerate(found):
            array[i] = pynvml.c_nvmlGpuInstance_t(gi.struct)
        count_ref._obj.value = len(found)
        return pynvml.NVML_SUCCESS

    def nvmlGpuInstanceGetInfo(self, handle):
        _, gi = self._gi(handle)
        info = pynvml.c_nvmlGpuInstanceInfo_t()
        info.id, info.profileId = gi.id, gi.profile.id
        info.placement.start, info.placement.size = gi.start, gi.size
        return info

    def nvmlGpuInstanceDestroy(self, handle):
        gpu, gi = self._gi(handle)
        if gi.cis or any(g == gi.id for _, g, _ in gpu.processes.values()):
            raise _error(pynvml.NVML_ERROR_IN_USE)
        del gpu.gis[gi.id]
        return pynvml.NVML_SUCCESS

    # compute instance profiles: constant N_SLICE (id == constant on A100) for N <= GI slices
    _CI_SLICES = {
        pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE: 1,
        pynvml.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE: 2,
        pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE: 3,
        pynvml.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE: 4,
        pynvml.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE: 7,
    }

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, handle, constant, engine, version=2):
        _, gi = self._gi(handle)
        slices = self._CI_SLICES.get(constant)
        if slices is None or slices > gi.profile.slices or (gi.profile.slices % slices):
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = pynvml.c_nvmlComputeInstanceProfileInfo_v2_t()
        info.id, info.sliceCount = constant, slices
        info.instanceCount = gi.profile.slices // slices
        return info

    def nvmlGpuInstanceCreateComputeInstance(self, handle, profile_id):
        _, gi = self._gi(handle)
        slices = self._CI_SLICES[profile_id]
        if sum(s for s, _ in gi.cis.values()) + slices > gi.profile.slices:
            raise _error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        ci_id = len(gi.cis)
        struct = pynvml.struct_c_nvmlComputeInstance_t()
        gi.cis[ci_id] = (slices, struct)
        return pynvml.c_nvmlComputeInstance_t(struct)

    def nvmlGpuInstanceGetComputeInstances(self, handle, profile_id, array, count_ref):
        _, gi = self._gi(handle)
        slices = self._CI_SLICES.get(profile_id)
        found = [struct for s, struct in gi.cis.values() if s == slices]
        for i, struct in enumerate(found):
            array[i] = pynvml.c_nvmlComputeInstance_t(struct)
        count_ref._obj.value = len(found)
        return pynvml.NVML_SUCCESS

    def nvmlComputeInstanceGetInfo(self, handle):
        _, _gi, ci_id, slices = self._ci(handle)
        info = pynvml.c_nvmlComputeInstanceInfo_t()
        info.id = ci_id
        info.profileId = next(c for c, s in self._CI_SLICES.items() if s == slices)
        info.placement.start, info.placement.size = 0, slices
        return info

    def nvmlComputeInstanceDestroy(self, handle):
        gpu, gi, ci_id, _ = self._ci(handle)
        if any(g == gi.id for _, g, _ in gpu.processes.values()):
            raise _error(pynvml.NVML_ERROR_IN_USE)
        del gi.cis[ci_id]
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._gpu(handle)
        result = []
        for pid, (used, gi_id, _) in gpu.processes.items():
            struct = pynvml.c_nvmlProcessInfo_v3_t()
            struct.pid, struct.usedGpuMemory = pid, used
            struct.gpuInstanceId = gi_id
            struct.computeInstanceId = NOT_MIG if gi_id == NOT_MIG else 0
            result.append(pynvml.nvmlStructToFriendlyObject(struct))
        return result

    def nvmlDeviceGetProcessUtilization(self, handle, since):
        gpu = self._gpu(handle)
        if gpu.mig is not None and gpu.mig[0] == pynvml.NVML_DEVICE_MIG_ENABLE:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        samples = []
        for pid, (_, _, recorded) in gpu.processes.items():
            for stamp, util in recorded:
                if stamp > since:
                    sample = pynvml.c_nvmlProcessUtilizationSample_t()
                    sample.pid, sample.timeStamp, sample.smUtil = pid, stamp, util
                    samples.append(sample)
        if not samples:
            raise _error(pynvml.NVML_ERROR_NOT_FOUND)
        return samples
