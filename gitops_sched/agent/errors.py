"""Typed errors of a GPU backend, so callers never inspect NVML return codes.

The NVML backend maps each NVML return code to one of these (see `nvml.py`); the fake raises
the same classes for the same situations, so the agent handles both alike.
"""


class GpuError(Exception):
    """A GPU operation failed; `code` is the NVML return code name when NVML gave one."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class NvmlUnavailable(GpuError):
    """No NVIDIA driver or NVML library on this machine (or NVML cannot start)."""


class NotSupported(GpuError):
    """The GPU cannot do this: no MIG, MIG disabled, or the query is not supported."""


class InsufficientResources(GpuError):
    """The MIG instance does not fit: slices taken, or the profile's instance count reached."""


class InUse(GpuError):
    """The MIG instance still has processes (or compute instances) on it."""


class InvalidArgument(GpuError):
    """A bad GPU index, profile, or placement start for the profile."""


class NotFound(GpuError):
    """No such GPU or MIG instance."""


class NoPermission(GpuError):
    """MIG changes need a privileged process (root, CAP_SYS_ADMIN)."""
