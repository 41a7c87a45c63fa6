"""Volume checks: the PersistentVolumeClaims the repo renders, and the volumes of each pod.

A `claim` is rendered once per project and volume name, so every workload of a project that
declares it must declare the same spec (size by value, StorageClass, access modes); a
difference is reported where the later declaration is written, naming the first. A claim's
own values are checked once, where they are written: a size of zero, a size without a unit
(bytes: almost certainly a missing `Gi`), no access mode. Per pod: volume names are unique,
`dshm` included when `sharedMemory` adds it, so are mount paths as rendered (`/dev/shm`
included, where `sharedMemory` mounts), and a ReadWriteOnce claim is not mounted by pods
that may run on several nodes. A `claimName` names a claim the user manages: its
existence is the user's responsibility, and nothing here checks it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from gitops_sched.config import codes
from gitops_sched.config.checks.common import diagnostic_at, error_at, key_error_at
from gitops_sched.config.checks.pods import field_source, own_pod_fields, rendered_volumes
from gitops_sched.config.diagnostics import Diagnostic, Severity
from gitops_sched.config.document import Document
from gitops_sched.config.model import (
    SHM_MOUNT_PATH,
    SHM_VOLUME,
    Repo,
    VolumeClaim,
    Workload,
    quantity,
)

MIN_CLAIM_SIZE = Decimal(2**20)  # below 1Mi a size is bytes someone forgot the unit of
SINGLE_NODE_MODES = frozenset({"ReadWriteOnce", "ReadWriteOncePod"})


def check_claim_values(repo: Repo) -> Iterator[Diagnostic]:
    """Each claim's size and access modes, once where they are written."""
    for doc, fields in own_pod_fields(repo):
        for i, volume in enumerate(fields.get("volumes", ())):
            claim = volume.get("claim")
            if claim is None:
                continue
            path = ("spec", "volumes", i, "claim")
            size = quantity(claim["size"])
            if size <= 0:
                message = f"claim size must be more than 0, got {claim['size']}"
                yield error_at(doc, (*path, "size"), codes.CLAIM_SIZE_ZERO, message)
            elif size < MIN_CLAIM_SIZE:
                yield diagnostic_at(
                    doc,
                    (*path, "size"),
                    codes.CLAIM_SIZE_NO_UNIT,
                    f"claim size {claim['size']} is {size} bytes (a quantity without a unit "
                    f"counts bytes: {claim['size']}Gi?)",
                    Severity.WARNING,
                )
            if claim.get("accessModes") == []:
                message = "accessModes is empty (default: [ReadWriteOnce])"
                yield key_error_at(doc, (*path, "accessModes"), codes.EMPTY_ACCESS_MODES, message)


def check_volume_names(repo: Repo) -> Iterator[Diagnostic]:
    """A pod's volumes have unique names; `sharedMemory` adds one named `dshm`."""
    reported: set[tuple[int, int]] = set()
    for workload in repo.workloads:
        spec = repo.pod_spec(workload)
        doc = field_source(repo, workload, ("volumes",))
        taken: dict[str, str] = {SHM_VOLUME: "sharedMemory"} if "sharedMemory" in spec else {}
        volumes = spec.get("volumes", [])
        for i, first in _repeated(volumes, "name", taken, lambda i: f"volumes[{i}]"):
            if _first_report(reported, doc, i):
                yield error_at(
                    doc,
                    ("spec", "volumes", i, "name"),
                    codes.DUPLICATE_VOLUME,
                    f"volume '{volumes[i]['name']}' of Workload/{workload.name} is declared "
                    f"twice (also spec.{first})",
                )


def check_mount_paths(repo: Repo) -> Iterator[Diagnostic]:
    """Kubernetes refuses a container with two volumes at one path, compared as rendered
    (`/data/{{ project.name }}` and `/data/{{ workload.name }}` may meet); `sharedMemory`
    mounts at /dev/shm."""
    reported: set[tuple[int, int]] = set()
    for workload in repo.workloads:
        spec = repo.pod_spec(workload)
        if not (volumes := rendered_volumes(repo, workload, spec.get("volumes", []))):
            continue
        doc = field_source(repo, workload, ("volumes",))
        taken = {SHM_MOUNT_PATH: "spec.sharedMemory's volume"} if "sharedMemory" in spec else {}

        def named(i: int, volumes: list[dict[str, Any]] = volumes) -> str:
            return f"volume '{volumes[i]['name']}' (spec.volumes[{i}])"

        for i, first in _repeated(volumes, "mountPath", taken, named):
            if _first_report(reported, doc, i):
                path, name = volumes[i]["mountPath"], volumes[i]["name"]
                yield error_at(
                    doc,
                    ("spec", "volumes", i, "mountPath"),
                    codes.MOUNT_PATH_TWICE,
                    f"'{path}' is mounted twice in the container of Workload/{workload.name}: "
                    f"volume '{name}' here and {first}",
                )


def _repeated(
    volumes: list[dict[str, Any]], field: str, taken: dict[str, str], where: Callable[[int], str]
) -> Iterator[tuple[int, str]]:
    """Each volume (its index) whose `field` a volume before it, or `taken`, has already,
    with where that first one is (`taken`'s text, or `where` of its index)."""
    for i, volume in enumerate(volumes):
        value = volume[field]
        if value in taken:
            yield i, taken[value]
        taken.setdefault(value, where(i))


def _first_report(reported: set[tuple[int, int]], doc: Document, i: int) -> bool:
    """Whether volume `i` of `doc` is reported now: once, though every workload of a
    template repeats the template's volumes."""
    if (id(doc), i) in reported:
        return False
    reported.add((id(doc), i))
    return True


def check_claims_agree(repo: Repo) -> Iterator[Diagnostic]:
    """The workloads of a project that declare one claim declare the same spec."""
    first: dict[tuple[str, str], tuple[Document, int, VolumeClaim]] = {}
    reported: set[tuple[int, int, int, int]] = set()
    for workload in repo.workloads:
        doc = field_source(repo, workload, ("volumes",))
        for i, claim in repo.volume_claims(workload):
            key = (workload.project, claim.name)
            if key not in first:
                first[key] = (doc, i, claim)
                continue
            first_doc, first_i, first_claim = first[key]
            seen = (id(doc), i, id(first_doc), first_i)
            if claim.same_spec(first_claim) or seen in reported:
                continue
            reported.add(seen)
            where = first_doc.key_location(("spec", "volumes", first_i, "claim"))
            yield key_error_at(
                doc,
                ("spec", "volumes", i, "claim"),
                codes.CLAIMS_DISAGREE,
                f"claim '{claim.name}' of project '{workload.project}' is declared differently "
                f"by {first_doc.ref} at {where} ({_difference(claim, first_claim)}); the "
                "project's workloads share one claim per volume name",
            )


def _difference(claim: VolumeClaim, other: VolumeClaim) -> str:
    """`size 2Ti here, 1Ti there`, and so on for each field that differs."""
    differences = []
    if quantity(claim.size) != quantity(other.size):
        differences.append(f"size {claim.size} here, {other.size} there")
    if claim.storage_class != other.storage_class:
        differences.append(
            f"storageClass {_show(claim.storage_class)} here, {_show(other.storage_class)} there"
        )
    if set(claim.access_modes) != set(other.access_modes):
        differences.append(
            f"accessModes [{', '.join(claim.access_modes)}] here, "
            f"[{', '.join(other.access_modes)}] there"
        )
    return "; ".join(differences)


def _show(value: Any) -> str:
    return "(the cluster's default)" if value is None else str(value)


def check_single_node_claims(repo: Repo) -> Iterator[Diagnostic]:
    """A ReadWriteOnce claim mounts on one node: a workload whose pods may spread cannot
    start them all (a warning: the scheduler may still put them on one node)."""
    for workload in repo.workloads:
        if workload.replicas < 2:
            continue
        doc = field_source(repo, workload, ("volumes",))
        for i, claim in repo.volume_claims(workload):
            if set(claim.access_modes) <= SINGLE_NODE_MODES and claim.access_modes:
                where = doc.key_location(("spec", "volumes", i, "claim"))
                message = _single_node_message(workload, claim)
                yield Diagnostic(where, message, doc.ref, Severity.WARNING, codes.SINGLE_NODE_CLAIM)


def _single_node_message(workload: Workload, claim: VolumeClaim) -> str:
    modes = ", ".join(claim.access_modes)
    return (
        f"claim '{claim.name}' is {modes}, but the {workload.replicas} pods of "
        f"Workload/{workload.name} may run on different nodes, and only one node can mount it "
        "(use accessModes: [ReadWriteMany])"
    )
