import pytest

from gitops_sched.hardware.gpus import GPU_MODELS, GpuModel, known_gpu_model_names, lookup_gpu_model

REQUIRED_MODELS = {
    "V100-SXM2-16GB": 16384,
    "V100-SXM2-32GB": 32768,
    "A10": 23028,
    "A30": 24576,
    "A100-SXM4-40GB": 40960,
    "A100-SXM4-80GB": 81920,
    "H100-SXM5-80GB": 81559,
    "H200-SXM5-141GB": 143771,
    "L4": 23034,
    "L40S": 46068,
    "T4": 15360,
}


@pytest.mark.parametrize(("name", "memory_mib"), sorted(REQUIRED_MODELS.items()))
def test_catalogue_has_model_with_nvml_memory(name: str, memory_mib: int) -> None:
    model = GPU_MODELS[name]
    assert model.name == name
    assert model.memory_mib == memory_mib


def test_mig_capability_matches_slice_count() -> None:
    mig = {name: model.mig_slices for name, model in GPU_MODELS.items() if model.mig_capable}
    assert mig == {
        "A30": 4,
        "A100-SXM4-40GB": 7,
        "A100-SXM4-80GB": 7,
        "H100-SXM5-80GB": 7,
        "H200-SXM5-141GB": 7,
    }
    assert all(m.mig_slices == 0 for m in GPU_MODELS.values() if not m.mig_capable)


def test_gpu_model_is_frozen() -> None:
    with pytest.raises(AttributeError):
        GPU_MODELS["T4"].memory_mib = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("A100-80GB", "A100-SXM4-80GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("A100 80GB PCIe", "A100-SXM4-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-SXM4-80GB"),
        ("a100-80gb", "A100-SXM4-80GB"),
        ("A100-40GB", "A100-SXM4-40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-SXM4-40GB"),
        ("V100-32GB", "V100-SXM2-32GB"),
        ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
        ("Tesla-V100-SXM2-16GB", "V100-SXM2-16GB"),
        ("V100-16GB", "V100-SXM2-16GB"),
        ("H100-80GB", "H100-SXM5-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
        ("NVIDIA H100 PCIe", "H100-SXM5-80GB"),
        ("H200", "H200-SXM5-141GB"),
        ("NVIDIA H200", "H200-SXM5-141GB"),
        ("NVIDIA H200 NVL", "H200-SXM5-141GB"),
        ("A30", "A30"),
        ("NVIDIA A30", "A30"),
        ("A10", "A10"),
        ("NVIDIA A10", "A10"),
        ("Tesla T4", "T4"),
        ("nvidia l4", "L4"),
        ("NVIDIA L40S", "L40S"),
    ],
)
def test_lookup_resolves_aliases(alias: str, canonical: str) -> None:
    assert lookup_gpu_model(alias) == GPU_MODELS[canonical]


@pytest.mark.parametrize("name", sorted(REQUIRED_MODELS))
def test_lookup_canonical_names_any_case(name: str) -> None:
    assert lookup_gpu_model(name.lower()) is GPU_MODELS[name]
    assert lookup_gpu_model(f"  {name.upper()} ") is GPU_MODELS[name]


@pytest.mark.parametrize(
    "name",
    ["", "A100", "V100", "A10G", "H100 NVL", "L40", "NVIDIA", "A1000", "RTX 4090"],
)
def test_lookup_rejects_unknown_or_ambiguous_names(name: str) -> None:
    assert lookup_gpu_model(name) is None


def test_a10_and_a100_do_not_collide() -> None:
    a10 = lookup_gpu_model("A10")
    assert isinstance(a10, GpuModel)
    assert a10.name == "A10"
    assert not a10.mig_capable


def test_known_names_are_sorted_canonical_names() -> None:
    names = known_gpu_model_names()
    assert names == tuple(sorted(GPU_MODELS))
    assert set(REQUIRED_MODELS) <= set(names)
