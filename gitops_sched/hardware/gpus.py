"""Catalogue of the GPU models the scheduler knows, with the names operators and drivers use.

Node inventories, policies in Git and NVML all spell GPU models differently ("Tesla T4",
"NVIDIA-A100-SXM4-80GB", "A100-80GB"), so every lookup goes through one alias table here
instead of string comparisons scattered over the engine.
"""

import re
from dataclasses import dataclass
from decimal import Decimal

MIB = 1024 * 1024  # bytes: GPU memory is counted in MiB throughout


@dataclass(frozen=True)
class GpuModel:
    """One GPU board; memory is what NVML reports as total memory, in MiB."""

    name: str
    memory_mib: int
    mig_capable: bool
    mig_slices: int  # compute slices: 7 for A100/H100/H200, 4 for A30, 0 otherwise


GPU_MODELS: dict[str, GpuModel] = {
    model.name: model
    for model in (
        GpuModel("V100-SXM2-16GB", 16384, False, 0),
        GpuModel("V100-SXM2-32GB", 32768, False, 0),
        GpuModel("T4", 15360, False, 0),
        GpuModel("A10", 23028, False, 0),
        GpuModel("A30", 24576, True, 4),
        GpuModel("A100-SXM4-40GB", 40960, True, 7),
        GpuModel("A100-SXM4-80GB", 81920, True, 7),
        GpuModel("H100-SXM5-80GB", 81559, True, 7),
        GpuModel("H200-SXM5-141GB", 143771, True, 7),
        GpuModel("L4", 23034, False, 0),
        GpuModel("L40S", 46068, False, 0),
    )
}

# Extra spellings per canonical name: short forms used in policies, NVML product names and
# PCIe/NVL boards whose memory and MIG geometry match the canonical board. Ambiguous short
# names ("A100", "V100") are deliberately absent: guessing the memory size would be wrong
# for half the fleet.
_ALIASES: dict[str, tuple[str, ...]] = {
    "V100-SXM2-16GB": ("V100-16GB", "V100-PCIE-16GB"),
    "V100-SXM2-32GB": ("V100-32GB", "V100-PCIE-32GB"),
    "T4": ("T4-16GB",),
    "A10": ("A10-24GB",),
    "A30": ("A30-24GB",),
    "A100-SXM4-40GB": ("A100-40GB", "A100-PCIE-40GB", "A100 40GB PCIe"),
    "A100-SXM4-80GB": ("A100-80GB", "A100-PCIE-80GB", "A100 80GB PCIe"),
    "H100-SXM5-80GB": ("H100", "H100-80GB", "H100 80GB HBM3", "H100 PCIe", "H100-PCIE-80GB"),
    "H200-SXM5-141GB": ("H200", "H200-141GB", "H200 NVL"),
    "L4": ("L4-24GB",),
    "L40S": ("L40S-48GB",),
}

_VENDOR_PREFIX = re.compile(r"^(?:(?:nvidia|tesla)[\s_-]*)+")


def _normalize(name: str) -> str:
    """Reduce a model name to lowercase alphanumerics without the NVIDIA/Tesla brand prefix.

    This makes "NVIDIA A100-SXM4-80GB" (NVML), "NVIDIA-A100-SXM4-80GB" (node label) and
    "a100 sxm4 80gb" the same key.
    """
    return re.sub(r"[^a-z0-9]", "", _VENDOR_PREFIX.sub("", name.strip().lower()))


_INDEX: dict[str, GpuModel] = {
    _normalize(spelling): GPU_MODELS[canonical]
    for canonical, aliases in _ALIASES.items()
    for spelling in (canonical, *aliases)
}


def lookup_gpu_model(name: str) -> GpuModel | None:
    """The catalogue entry for a canonical name or alias (case-insensitive), or None."""
    return _INDEX.get(_normalize(name))


def gpu_memory_bytes(model: str | None, declared: Decimal | int | None) -> Decimal | None:
    """Memory per GPU of a node group, in bytes: as declared, else the catalogue's for the
    model; None when neither says (the one rule config's checks and the engine's input use)."""
    if declared is not None:
        return Decimal(declared)
    known = lookup_gpu_model(model) if model else None
    return Decimal(known.memory_mib * MIB) if known else None


def gpu_memory_mib(model: str | None, declared: Decimal | int | None) -> int:
    """`gpu_memory_bytes` in whole MiB, rounded down (a GPU never has more memory than it
    says), 0 when unknown."""
    memory = gpu_memory_bytes(model, declared)
    return 0 if memory is None else int(memory // MIB)


def known_gpu_model_names() -> tuple[str, ...]:
    """Canonical model names, sorted, for error messages that list the valid choices."""
    return tuple(sorted(GPU_MODELS))


GPU_DECIMALS = 4  # places every report and message gives a GPU amount


def rounded_gpus(value: float) -> float:
    """A GPU amount as every report gives it (`simulate`'s, `plan`'s, the queues' status):
    GPU_DECIMALS places, never -0.0."""
    return round(value, GPU_DECIMALS) + 0.0


def gpus_text(value: float) -> str:
    """A GPU amount as messages write it: 4, 0.5, 0.3333."""
    return f"{rounded_gpus(value):g}"
