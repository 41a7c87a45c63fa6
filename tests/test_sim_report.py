"""simulate's table output: decisions step by step, durations, 80 columns; JSON keys kept."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.sim.events import load_simulation
from gitops_sched.sim.report import duration, print_table, to_json
from gitops_sched.sim.run import SimulationResult, simulate
from gitops_sched.validate import check_repo
from testkit.config_builders import API

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "clusters"


def run(name: str, steps: list | None = None, tmp_path: Path | None = None) -> SimulationResult:
    events = None
    if steps is not None and tmp_path is not None:
        events = tmp_path / "events.yaml"
        document = {"apiVersion": API, "kind": "Simulation", "metadata": {"name": "t"}}
        events.write_text(yaml.safe_dump({**document, "steps": steps}))
    return run_events(name, events)


def run_events(name: str, events: Path | None) -> SimulationResult:
    """The example `name` run on its own, or through an events file."""
    repo, _ = check_repo(EXAMPLES / name)
    assert repo is not None
    simulation = None
    if events is not None:
        diagnostics = Diagnostics()
        simulation = load_simulation(events, repo, diagnostics)
        assert simulation is not None, [d.text() for d in diagnostics.items]
    return simulate(repo, simulation)


def rendered(result: SimulationResult, width: int = 80) -> list[str]:
    out = io.StringIO()
    print_table(result, Console(file=out, width=width, color_system=None))
    return out.getvalue().splitlines()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45, "45s"), (60, "1m"), (5400, "1h30m"), (90061, "1d1h1m1s"), (7200.4, "2h")],
)
def test_durations(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_reclaim_is_shown_with_its_beneficiary_at_80_columns(tmp_path: Path) -> None:
    steps = [
        {"submit": ["resnet50-ddp", "bert-finetune", "b-train-1", "b-train-2", "c-train-1"]},
        {"advance": "1h30m"},
        {
            "submit": [
                {
                    "apiVersion": API,
                    "kind": "Workload",
                    "metadata": {"name": "d-train"},
                    "spec": {"project": "team-d", "gpu": 8},
                }
            ]
        },
    ]
    lines = rendered(run("netapp-dgx", steps, tmp_path))
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "Decisions" in text
    evictions = [line.split() for line in lines if " evict " in line]
    assert evictions, text
    # step 3, at 1h30m: each victim gives way to team-d's job, named with its project
    assert all(row[:3] == ["3", "1h30m", "evict"] for row in evictions)
    assert "reclaim for team-d/d-train" in text
    assert any(line.split()[:3] == ["3", "1h30m", "bind"] and "d-train" in line for line in lines)


def test_mig_changes_and_pending_reasons_fit_80_columns() -> None:
    lines = rendered(run("oci-a100"))
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "mig create" in text and "1g.10gb at slice 6 on" in text
    fragmented = run_events("netapp-dgx", EXAMPLES.parent / "events" / "fragmentation.yaml")
    lines_pending = rendered(fragmented)
    assert max(len(line) for line in lines_pending) <= 80
    assert "Not running" in [line.strip() for line in lines_pending] and any(
        line.split()[:2] == ["big", "fragmentation:"] for line in lines_pending
    )
    # every workload keeps its full name, however narrow the terminal
    for name in ("assistant-embeddings", "llama-8b-pretrain", "sandbox-notebook"):
        assert any(
            line.split()[:1] == [name] for line in lines if "running" in line or "pending" in line
        )


def test_wide_terminals_show_the_workload_type() -> None:
    narrow, wide = rendered(run("oci-a100")), rendered(run("oci-a100"), width=160)
    header = "Workload  Project  Type"
    assert not any(line.split()[:3] == header.split() for line in narrow)
    assert any(line.split()[:3] == ["Workload", "Project", "Type"] for line in wide)


def test_json_keeps_its_keys() -> None:
    data = to_json(run("netapp-dgx"))
    assert set(data) >= {
        "simulation",
        "time",
        "departments",
        "projects",
        "workloads",
        "nodes",
        "log",
        "expectations",
    }
    assert set(data["workloads"][0]) >= {
        "name",
        "project",
        "type",
        "status",
        "reason",
        "pods",
        "workload",
    }
    assert set(data["log"][0]) >= {
        "step",
        "cycle",
        "time",
        "action",
        "workload",
        "reason",
        "by",
        "pods",
    }
