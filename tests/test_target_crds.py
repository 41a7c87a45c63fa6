"""Every example rendered `--target kai|kueue` against KAI's and Kueue's own CRDs, fetched from
their Go modules at test time (tests/target_crds.py): each custom resource valid against its
CRD's openAPIV3Schema, and the whole render accepted by the real control plane with those CRDs
installed (custom resources created, workloads by a server-side dry run: no scheduler of
theirs runs here to take their pods)."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gitops_sched.compiler.targets import render_target
from gitops_sched.validate import check_repo
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.install import apply_rendered, kubectl, wait_established
from testkit.target_crds import crds_or_skip, kinds, schema_errors

CLUSTERS = Path(__file__).resolve().parent.parent / "examples" / "clusters"
EXAMPLES = sorted(p.name for p in CLUSTERS.iterdir() if p.is_dir() and p.name != "broken")
TARGETS = ("kai", "kueue")
WORKLOADS = ("Job", "Deployment")


@cache
def rendered(example: str, target: str) -> list[dict[str, Any]]:
    repo, diagnostics = check_repo(CLUSTERS / example)
    assert repo is not None, [d.text() for d in diagnostics.sorted()]
    return render_target(repo, target).objects


def custom_resources(example: str, target: str) -> list[dict[str, Any]]:
    ours = kinds(target)
    return [o for o in rendered(example, target) if (o["apiVersion"], o["kind"]) in ours]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_every_custom_resource_is_valid_against_the_targets_crd(example: str, target: str) -> None:
    objects = custom_resources(example, target)
    expected = {"kai": {"Queue"}, "kueue": {"ResourceFlavor", "Cohort", "ClusterQueue"}}[target]
    assert expected <= {o["kind"] for o in objects}
    assert [e for o in objects for e in schema_errors(target, o)] == []


@pytest.mark.parametrize("target", TARGETS)
def test_a_misspelt_or_mistyped_field_breaks_the_schema(target: str) -> None:
    """The check can fail: the apiserver would prune an unknown field, the schema refuses it."""
    obj = copy.deepcopy(custom_resources(EXAMPLES[0], target)[0])
    obj["spec"]["quotaa"] = 1
    errors = schema_errors(target, obj)
    assert any("quotaa" in e for e in errors), errors


@pytest.mark.parametrize("target", TARGETS)
def test_the_render_applies_to_a_real_control_plane_with_the_targets_crds(
    real_cluster: ControlPlane, target: str
) -> None:
    used = {o["kind"] for example in EXAMPLES for o in custom_resources(example, target)}
    # the CRDs of the kinds rendered (Kueue's Workload CRD alone is 1.5 MB of schema)
    crds = [c for c in crds_or_skip(target) if c["spec"]["names"]["kind"] in used]
    apply_rendered(real_cluster, crds)
    wait_established(real_cluster, crds)
    for example in EXAMPLES:
        objects = rendered(example, target)
        apply_rendered(real_cluster, [o for o in objects if o["kind"] not in WORKLOADS])
        apply_rendered(
            real_cluster, [o for o in objects if o["kind"] in WORKLOADS], "--dry-run=server"
        )
        live = _live(real_cluster, custom_resources(example, target))
        for obj in custom_resources(example, target):
            meta = obj["metadata"]
            stored = live[(obj["kind"], meta.get("namespace", ""), meta["name"])]
            assert _within(obj.get("spec", {}), stored.get("spec", {})), (obj, stored)


def _live(plane: ControlPlane, objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], Any]:
    """The stored objects of the kinds of `objects`, by kind, namespace and name: one list
    per kind."""
    kinds = sorted({f"{o['kind'].lower()}.{o['apiVersion'].split('/')[0]}" for o in objects})
    items = json.loads(kubectl(plane, "get", ",".join(kinds), "-A", "-o", "json"))["items"]
    return {
        (i["kind"], i["metadata"].get("namespace", ""), i["metadata"]["name"]): i for i in items
    }


def _within(rendered: Any, live: Any) -> bool:
    """Every rendered field is in the live object with its value (the server adds defaults)."""
    if isinstance(rendered, dict):
        return isinstance(live, dict) and all(
            k in live and _within(v, live[k]) for k, v in rendered.items()
        )
    if isinstance(rendered, list):
        return (
            isinstance(live, list)
            and len(rendered) == len(live)
            and all(_within(r, v) for r, v in zip(rendered, live, strict=True))
        )
    return rendered == live
