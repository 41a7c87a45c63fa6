"""The rules tests/test_kubernetes_rules.py holds `validate` to are Kubernetes' own: each of
its repos, rendered with the checks skipped, gives objects the real kube-apiserver refuses
(a server-side apply, dry run: 422 Invalid naming the field, or, for two items of one key
in a list Kubernetes merges by that key, a 500 before validation, which the reconciler
would retry for good), and the valid repo gives none.

Two cases are refused by `validate` only: a malformed topology label reaches the cluster
in the policy ConfigMap's text, which the API server does not parse (the scheduler would
look for a label no node can carry), and a member name with spaces at its ends, which a
RoleBinding takes but no user's name matches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gitops_sched.cluster.errors import ApiFailure
from gitops_sched.compiler import render_repo
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.loader import load_repo
from gitops_sched.config.model import build_repo
from tests.test_kubernetes_rules import ACCEPTED, CASES, write_repo

# what the API server's refusal says, by case
REFUSED = {
    "mount path twice": 'duplicate entries for key [mountPath="/data"]',
    "a volume at /dev/shm beside sharedMemory": 'duplicate entries for key [mountPath="/dev/shm"]',
    "mount paths that meet once rendered": 'duplicate entries for key [mountPath="/x/vision"]',
    "port name twice": "ports[1].name: Duplicate value",
    "an unnamed port and one named after its number": "ports[1].name: Duplicate value",
    "containerPort and protocol twice": "duplicate entries for key [containerPort=80",
    "node selector key": 'Invalid value: "gpu type"',
    "node selector key with a bad prefix": "prefix part",
    "node selector value": "must be no more than 63 bytes",
    "a document's own label key": 'metadata.labels: Invalid value: "team name"',
    "a templated label value": 'metadata.labels: Invalid value: "{{ project.name }}"',
    "an annotation key": 'metadata.annotations: Invalid value: "example.com/"',
    "schedulerName": "schedulerName: Invalid value",
    "an empty member": "subjects[1].name: Required value",
    "an empty admin": "subjects[0].name: Required value",
    "a template rendering an empty image": "image: Required value",
    "a workload rendering an empty claim name": "claimName: Required value",
}
ONLY_VALIDATE = {"topology label", "a member of spaces"}


def test_every_case_is_shown_refused_or_said_to_be_ours_alone() -> None:
    assert set(REFUSED) | ONLY_VALIDATE == set(CASES)


def refusals(real_client: Any, path: Path) -> list[str]:
    """What the API server says of each object the repo at `path` renders, checks skipped
    (namespaced objects in `default`: the project namespaces are not there)."""
    repo = build_repo(load_repo(path, Diagnostics()))
    said = []
    for obj in render_repo(repo):
        if obj["kind"] == "CustomResourceDefinition":
            continue  # the session's control plane has ours
        if "namespace" in obj["metadata"]:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": "default"}}
        try:
            real_client.apply(obj, "gitops-sched", dry_run=True)
        except ApiFailure as failure:
            # refused as invalid; a list with two items of one key cannot even be applied
            typed = failure.status == 500 and "failed to create typed patch" in failure.message
            assert failure.status == 422 or typed, failure
            said.append(f"{obj['kind']}/{obj['metadata']['name']}: {failure.message}")
    return said


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_api_server_refuses_what_validate_refuses(
    case: str, real_client: Any, tmp_path: Path
) -> None:
    write_repo(tmp_path / "repo", CASES[case][0])
    said = refusals(real_client, tmp_path / "repo")
    assert any(REFUSED[case] in message for message in said), said


def test_the_api_server_takes_what_validate_takes(real_client: Any, tmp_path: Path) -> None:
    write_repo(tmp_path / "repo", ACCEPTED)
    assert refusals(real_client, tmp_path / "repo") == []
