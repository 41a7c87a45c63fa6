"""NVIDIA MIG geometry: which GPU instance profiles a GPU offers and where they can be created.

The tables follow NVIDIA's MIG user guide ("Supported MIG Profiles": instance counts and
memory/SM fractions) and the placements `nvidia-smi mig -lgipp` prints as `{starts}:size`.
A GPU instance occupies the memory slices `[start, start + memory_slices)`: 8 memory slices
on the 7-compute-slice GPUs (A100, H100, H200), 4 on the A30. On every GPU here the
placement size nvidia-smi prints equals the profile's memory slices (7g: {0}:8, 3g: {0,4}:4,
1g.10gb on A100-40GB: {0,2,4,6}:2), so no separate size is stored.

Everything is pure and deterministic so the scheduler can plan MIG layouts offline from Git
state and get the same answer on every reconcile.
"""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

from gitops_sched.hardware.gpus import GPU_MODELS, known_gpu_model_names, lookup_gpu_model


@dataclass(frozen=True)
class MigProfile:
    """A GPU instance profile; `placements` are the memory-slice indexes it may start at."""

    name: str
    compute_slices: int
    memory_slices: int
    max_instances: int
    placements: tuple[int, ...]

    @property
    def media_extensions(self) -> bool:
        """Whether it takes the GPU's only JPEG/OFA engines, which "+me" profiles cannot share."""
        return self.name.endswith("+me")


@dataclass(frozen=True, slots=True)
class MigInstance:
    """A created (or planned) GPU instance: its profile name and first memory slice."""

    profile: str
    start: int


@dataclass(frozen=True)
class _Geometry:
    compute_slices: int
    memory_slices: int
    profiles: Mapping[str, MigProfile]


def _by_name(*profiles: MigProfile) -> dict[str, MigProfile]:
    return {profile.name: profile for profile in profiles}


def _seven_slice_profiles(
    one: str, one_double_memory: str, two: str, three: str, four: str, seven: str
) -> dict[str, MigProfile]:
    """A100, H100 and H200 share one layout; only the memory per slice in the names differs."""
    return _by_name(
        MigProfile(one, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
        MigProfile(f"{one}+me", 1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        MigProfile(one_double_memory, 1, 2, 4, (0, 2, 4, 6)),
        MigProfile(two, 2, 2, 3, (0, 2, 4)),
        MigProfile(three, 3, 4, 2, (0, 4)),
        MigProfile(four, 4, 4, 1, (0,)),
        MigProfile(seven, 7, 8, 1, (0,)),
    )


_A30_PROFILES = _by_name(
    MigProfile("1g.6gb", 1, 1, 4, (0, 1, 2, 3)),
    MigProfile("1g.6gb+me", 1, 1, 1, (0, 1, 2, 3)),
    MigProfile("2g.12gb", 2, 2, 2, (0, 2)),
    MigProfile("2g.12gb+me", 2, 2, 1, (0, 2)),
    MigProfile("4g.24gb", 4, 4, 1, (0,)),
)

# Canonical GPU model name -> (memory slices, profiles); compute slices come from the catalogue.
_TABLES: dict[str, tuple[int, dict[str, MigProfile]]] = {
    "A30": (4, _A30_PROFILES),
    "A100-SXM4-40GB": (
        8,
        _seven_slice_profiles("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    ),
    "A100-SXM4-80GB": (
        8,
        _seven_slice_profiles("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    ),
    "H100-SXM5-80GB": (
        8,
        _seven_slice_profiles("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    ),
    "H200-SXM5-141GB": (
        8,
        _seven_slice_profiles("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    ),
}

_GEOMETRIES: dict[str, _Geometry] = {
    name: _Geometry(GPU_MODELS[name].mig_slices, memory_slices, profiles)
    for name, (memory_slices, profiles) in _TABLES.items()
}


@lru_cache(maxsize=256)
def _geometry(model: str) -> _Geometry | None:
    gpu = lookup_gpu_model(model)
    return None if gpu is None else _GEOMETRIES.get(gpu.name)


def mig_profiles(gpu_model_name: str) -> dict[str, MigProfile]:
    """The MIG profiles of a GPU model (aliases accepted); empty if it has no MIG or is unknown."""
    geometry = _geometry(gpu_model_name)
    return {} if geometry is None else dict(geometry.profiles)


def _is_valid(geometry: _Geometry, instances: Iterable[MigInstance]) -> bool:
    used: set[int] = set()
    counts: Counter[str] = Counter()
    compute = 0
    media = 0
    for instance in instances:
        profile = geometry.profiles.get(instance.profile)
        if profile is None or instance.start not in profile.placements:
            return False
        span = range(instance.start, instance.start + profile.memory_slices)
        if not used.isdisjoint(span):
            return False
        used.update(span)
        counts[profile.name] += 1
        compute += profile.compute_slices
        media += profile.media_extensions
    return (
        all(n <= geometry.profiles[name].max_instances for name, n in counts.items())
        and compute <= geometry.compute_slices
        and media <= 1
    )


def is_valid_layout(model: str, instances: Iterable[MigInstance]) -> bool:
    """Whether the GPU can hold these instances at once.

    Each must sit at one of its profile's placements, memory slices must not overlap, per-profile
    counts must stay within max_instances, at most one "+me" instance may exist, and compute
    slices must not exceed the GPU's. A GPU without MIG only admits the empty layout.
    """
    geometry = _geometry(model)
    if geometry is None:
        return not tuple(instances)
    return _is_valid(geometry, instances)


def _room_left(geometry: _Geometry, layout: tuple[MigInstance, ...]) -> int:
    """How many (profile, start) pairs could still be created one at a time next to `layout`."""
    return sum(
        _is_valid(geometry, (*layout, MigInstance(profile.name, start)))
        for profile in geometry.profiles.values()
        for start in profile.placements
    )


def _best_start(geometry: _Geometry, existing: tuple[MigInstance, ...], profile: str) -> int | None:
    target = geometry.profiles.get(profile)
    if target is None:
        return None
    fits = [
        start
        for start in target.placements
        if _is_valid(geometry, (*existing, MigInstance(profile, start)))
    ]
    if not fits:
        return None
    return max(
        fits,
        key=lambda start: (_room_left(geometry, (*existing, MigInstance(profile, start))), start),
    )


def in_layout_order(instances: Iterable[MigInstance]) -> tuple[MigInstance, ...]:
    """A GPU's instances as every layout lists them, by first slice: one layout, however it
    was built (declared, created cycle by cycle, read back from running pods), is one value."""
    return tuple(sorted(instances, key=lambda instance: (instance.start, instance.profile)))


def find_placement(model: str, existing: Sequence[MigInstance], profile: str) -> int | None:
    """The start index at which to create `profile` beside `existing`, or None if it cannot fit.

    Rule: among the placements that keep the layout valid, take the one after which the most
    (profile, start) creations remain possible; ties go to the highest start. 4g and 7g can
    only start at slice 0, so packing smaller instances towards the end keeps the large
    profiles available longest: on an empty A100 a 1g goes to slice 6 and a 3g to slice 4,
    which leaves room for a 4g at 0. Unknown profiles and models, or an invalid `existing`,
    give None.
    """
    return _cached_placement(model, in_layout_order(existing), profile)


@lru_cache(maxsize=65536)
def _cached_placement(model: str, layout: tuple[MigInstance, ...], profile: str) -> int | None:
    """The scheduler asks about the same few layouts on thousands of GPUs: answer once."""
    geometry = _geometry(model)
    return None if geometry is None else _best_start(geometry, layout, profile)


@lru_cache(maxsize=1024)
def compute_share(model: str, profile: str) -> float:
    """The instance's fraction of the GPU's compute slices (3g on an A100 = 3/7).

    This is what a MIG instance counts for against a GPU quota expressed in whole GPUs.
    """
    geometry = _geometry(model)
    if geometry is None:
        raise ValueError(
            f"{model!r} is not a MIG-capable GPU model; known models: "
            + ", ".join(known_gpu_model_names())
        )
    if profile not in geometry.profiles:
        raise ValueError(
            f"{model!r} has no MIG profile {profile!r}; profiles: " + ", ".join(geometry.profiles)
        )
    return geometry.profiles[profile].compute_slices / geometry.compute_slices


def layout_with(
    model: str,
    existing: Sequence[MigInstance],
    profile: str,
    removable: Sequence[MigInstance],
) -> tuple[int, tuple[MigInstance, ...]] | None:
    """Where to create `profile`, and which idle instances must be destroyed first.

    Returns (start, victims): the fewest instances from `removable` whose removal lets the
    profile fit (no victims if it fits already), with ties broken by fewest compute slices
    destroyed and then by the victims' (start, profile) order, so idle capacity is reclaimed
    as sparingly as possible. The start follows find_placement's rule on the reduced layout.
    None if the profile cannot fit even after removing every removable instance, or if the
    model, profile or `existing` layout is not valid. `removable` must be a subset of
    `existing`.
    """
    geometry = _geometry(model)
    existing = tuple(existing)
    if geometry is None or profile not in geometry.profiles or not _is_valid(geometry, existing):
        return None
    pool = sorted(set(removable), key=lambda instance: (instance.start, instance.profile))
    if not set(pool) <= set(existing):
        raise ValueError("removable instances must be part of the existing layout")
    for count in range(len(pool) + 1):
        options = []
        for victims in combinations(pool, count):
            kept = tuple(instance for instance in existing if instance not in victims)
            start = _best_start(geometry, kept, profile)
            if start is not None:
                freed = sum(geometry.profiles[victim.profile].compute_slices for victim in victims)
                order = tuple((victim.start, victim.profile) for victim in victims)
                options.append((freed, order, victims, start))
        if options:
            _, _, victims, start = min(options)
            return start, victims
    return None
