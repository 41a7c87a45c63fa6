"""Past usage (fairness over time) through `simulate --format json` and back: printed as
each project's buckets beside the clock, read back by a Simulation's `time:` and `usage:`,
checked at its line; nothing printed where the Cluster configures no fairness."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gitops_sched.cli import main
from gitops_sched.contract.labels import API_VERSION as API

REPO = Path(__file__).parent / "scenarios" / "repos" / "fairness-over-time"
POOLS = Path(__file__).parent / "scenarios" / "repos" / "pool-fairness-over-time"
TRAIN_A = {"apiVersion": API, "kind": "Workload", "metadata": {"name": "train-a"}}
TRAIN_A |= {"spec": {"project": "team-a", "gpu": 8}}


def simulate_json(repo: Path, events: Path) -> tuple[int, Any]:
    args = ["simulate", str(repo), "--events", str(events), "--format", "json"]
    result = CliRunner().invoke(main, args)
    return result.exit_code, json.loads(result.output) if result.exit_code == 0 else result.output


def simulation(path: Path, **body: Any) -> Path:
    document = {"apiVersion": API, "kind": "Simulation", "metadata": {"name": "t"}, **body}
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def test_usage_is_printed_and_a_continuation_starts_with_it(tmp_path: Path) -> None:
    steps = [{"submit": [TRAIN_A]}, {"advance": "1h"}]
    code, first = simulate_json(REPO, simulation(tmp_path / "a.yaml", steps=steps))
    assert code == 0
    assert first["time"] == 3600
    # 8 GPUs for an hour, in the 4h window's 20-minute buckets
    assert first["usage"] == {
        "team-a": {"buckets": [{"start": s, "gpuSeconds": 9600} for s in (0, 1200, 2400)]},
        "team-b": {"buckets": []},
    }
    again = {"running": first["workloads"], "time": first["time"], "usage": first["usage"]}
    code, second = simulate_json(REPO, simulation(tmp_path / "b.yaml", **again))
    assert code == 0
    assert (second["time"], second["usage"], second["log"]) == (3600, first["usage"], [])


def test_usage_per_node_group_is_printed_and_read_back(tmp_path: Path) -> None:
    """A project with per-group quotas: its usage in each group it held GPUs in is
    printed beside its total, and a continuation starts with it (same shares, so the
    same decisions: nothing to do)."""
    train = {**TRAIN_A, "spec": {"project": "team-a", "gpu": 8, "nodeGroup": "h100"}}
    steps = [{"submit": [train]}, {"advance": "1h"}]
    code, first = simulate_json(POOLS, simulation(tmp_path / "a.yaml", steps=steps))
    assert code == 0
    hour = [{"start": s, "gpuSeconds": 9600} for s in (0, 1200, 2400)]
    assert first["usage"]["team-a"] == {"buckets": hour, "nodeGroups": {"h100": {"buckets": hour}}}
    assert first["usage"]["team-b"] == {"buckets": []}
    again = {"running": first["workloads"], "time": first["time"], "usage": first["usage"]}
    code, second = simulate_json(POOLS, simulation(tmp_path / "b.yaml", **again))
    assert code == 0
    assert (second["usage"], second["projects"], second["log"]) == (
        first["usage"],
        first["projects"],
        [],
    )


def test_usage_without_fairness_is_a_warning_at_its_line(tmp_path: Path) -> None:
    """`usage:` where the Cluster configures no fairness would count for nothing: said,
    with the line, and the run goes on."""
    repo = tmp_path / "repo"
    repo.mkdir()
    text = (REPO / "cluster.yaml").read_text(encoding="utf-8")
    (repo / "cluster.yaml").write_text(text.replace("    fairness:", "    reclaimThreshold: 0 #"))
    path = simulation(tmp_path / "sim.yaml", usage={"team-a": {"buckets": []}})
    result = CliRunner().invoke(main, ["simulate", str(repo), "--events", str(path)])
    assert result.exit_code == 0
    assert "sim.yaml:6:" in result.output
    assert "warning GS806 Simulation/t: past usage counts for nothing" in result.output


def test_without_fairness_nothing_is_printed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for source in REPO.iterdir():
        docs = [d for d in yaml.safe_load_all(source.read_text(encoding="utf-8")) if d]
        for d in docs:
            if d["kind"] == "Cluster":
                d["spec"]["policy"].pop("fairness")  # the same repo without fairness
        (repo / source.name).write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    steps = [{"submit": [TRAIN_A]}, {"advance": "1h"}]
    code, output = simulate_json(repo, simulation(tmp_path / "a.yaml", steps=steps))
    assert code == 0
    assert "usage" not in output


@pytest.mark.parametrize(
    ("usage", "line", "message"),
    [
        ({"team-z": {"buckets": []}}, 8, "error GS806 Simulation/t: no project 'team-z'"),
        (
            {"team-a": {"buckets": [{"start": 0, "gpuSeconds": 1}, {"start": 0, "gpuSeconds": 2}]}},
            11,
            "error GS806 Simulation/t: a bucket starting at 0 listed twice",
        ),
        (
            {"team-a": {"buckets": [{"start": 1200, "gpuSeconds": 1}]}},
            9,
            "error GS806 Simulation/t: a bucket of past usage starts at 1200, after `time` (600)",
        ),
        (
            {"team-a": {"buckets": [], "nodeGroups": {"h100": {"buckets": []}}}},
            11,
            "error GS806 Simulation/t: project 'team-a' has no `nodeGroupQuotas`: one usage",
        ),
        (
            {"team-a": {"buckets": [{"start": 0, "gpuSeconds": -1}]}},
            10,
            "error GS206 Simulation/t: usage.team-a.buckets[0].gpuSeconds: -1 is less than",
        ),
        (
            {"team-a": {"buckets": [{"start": s, "gpuSeconds": 1} for s in range(25)]}},
            8,
            "error GS206 Simulation/t: usage.team-a.buckets: a list of 25 items is too long",
        ),
    ],
)
def test_bad_usage_is_reported_at_its_line(
    tmp_path: Path, usage: dict, line: int, message: str
) -> None:
    path = simulation(tmp_path / "sim.yaml", time=600, usage=usage)
    code, output = simulate_json(REPO, path)
    assert code == 1
    assert f"sim.yaml:{line}:" in output
    assert message in output


@pytest.mark.parametrize(
    ("groups", "line", "message"),
    [
        ({"v100": {"buckets": []}}, 11, "error GS806 Simulation/t: no node group 'v100'"),
        (
            {"h100": {"buckets": [{"start": 1200, "gpuSeconds": 1}]}},
            12,
            "error GS806 Simulation/t: a bucket of past usage starts at 1200, after `time` (600)",
        ),
    ],
)
def test_bad_usage_per_node_group_is_reported_at_its_line(
    tmp_path: Path, groups: dict, line: int, message: str
) -> None:
    usage = {"team-a": {"buckets": [], "nodeGroups": groups}}
    code, output = simulate_json(POOLS, simulation(tmp_path / "sim.yaml", time=600, usage=usage))
    assert code == 1
    assert f"sim.yaml:{line}:" in output
    assert message in output
