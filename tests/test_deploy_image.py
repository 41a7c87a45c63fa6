"""One image for every deploy folder: one Dockerfile whose entrypoint is the `gitops-sched`
CLI, and every container of `reconciler/`, `scheduler/` and `scheduler/agent/` runs that
image with its subcommand first in `args`, as written and as kustomize builds it."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from gitops_sched.cli import main as cli
from tests.deploy_manifests import IMAGE, ROOT, kustomize, manifests, needs_kubectl, parse_cli

DEPLOYS = {
    "reconciler": "reconcile",
    "scheduler": "scheduler",
    "scheduler/agent": "agent",
}
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "Job")


def containers(objects: list[dict]) -> list[dict]:
    return [
        c
        for o in objects
        if o["kind"] in WORKLOADS
        for c in o["spec"]["template"]["spec"].get("initContainers", [])
        + o["spec"]["template"]["spec"]["containers"]
    ]


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) of each line that starts one (continuations and comments left out)."""
    lines = [line for line in path.read_text().splitlines() if line and line[0].isupper()]
    return [(line.split(" ", 1)[0], line.split(" ", 1)[1]) for line in lines]


def test_one_dockerfile_whose_entrypoint_is_the_cli() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert [f for f in tracked if Path(f).name.startswith("Dockerfile")] == ["Dockerfile"]
    instructions = dockerfile_instructions(ROOT / "Dockerfile")
    (entrypoint,) = [rest for name, rest in instructions if name == "ENTRYPOINT"]
    assert not [rest for name, rest in instructions if name == "CMD"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert json.loads(entrypoint) == ["gitops-sched"]
    assert scripts["gitops-sched"] == "gitops_sched.cli:main"
    # what each process needs: the agent's extra, git for the reconciler's clone
    text = (ROOT / "Dockerfile").read_text()
    assert "'.[agent]'" in text and " git " in text


@pytest.mark.parametrize(("folder", "subcommand"), DEPLOYS.items())
def test_each_container_names_the_image_and_starts_with_its_subcommand(
    folder: str, subcommand: str
) -> None:
    (container,) = containers(manifests(ROOT / folder))
    assert container["image"] == "gitops-sched"
    assert "command" not in container  # the image's entrypoint, `gitops-sched`, stays
    assert container["args"][0] == subcommand
    assert subcommand in cli.commands
    parse_cli(container["args"])  # the flags that follow are the subcommand's


def test_every_kustomization_makes_the_image_the_same_one() -> None:
    images = [
        yaml.safe_load((ROOT / folder / "kustomization.yaml").read_text())["images"]
        for folder in DEPLOYS
    ]
    name, tag = IMAGE.rsplit(":", 1)
    assert images == [[{"name": "gitops-sched", "newName": name, "newTag": tag}]] * len(DEPLOYS)


@needs_kubectl
def test_kustomize_builds_every_container_on_the_one_image() -> None:
    built = {folder: containers(kustomize(ROOT / folder)) for folder in DEPLOYS}
    assert {folder: [c["image"] for c in found] for folder, found in built.items()} == {
        folder: [IMAGE] for folder in DEPLOYS
    }
    for folder, (container,) in built.items():
        assert container["args"][0] == DEPLOYS[folder]
