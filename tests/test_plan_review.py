"""What a reviewer reads in a plan: why a pending job could start, a quota cut below a gang,
and the before/after chart of fair shares (every row shows both values)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testkit.config_builders import doc
from tests.test_plan import CHANGES, base_config, git, plan, plan_json, spec, train, write

Files = dict[str, list[dict[str, Any]]]


def plan_of(root: Path, edit_base: Callable[[Files], None], edit_head: Callable[[Files], None]):
    """The JSON and Markdown plans of `edit_head` over a base of base_config + `edit_base`."""
    files = base_config()
    edit_base(files)
    repo = root / "repo"
    git(root, "init", "-q", "-b", "main", str(repo))
    write(repo / "cfg", files)
    git(repo, "add", "cfg")
    git(repo, "commit", "-q", "-m", "base")
    edit_head(files)
    for path in (repo / "cfg").rglob("*.yaml"):
        path.unlink()
    write(repo / "cfg", files)
    code, data = plan_json(str(repo / "cfg"), "--base", "main")
    assert code == 0, data
    _, markdown, _ = plan(str(repo / "cfg"), "--base", "main")
    return data, markdown


def test_a_job_that_could_start_says_it_takes_the_gpus_an_eviction_frees(tmp_path: Path) -> None:
    def base(files: Files) -> None:
        files["workloads/team-d.yaml"].append(train("d-2", "team-d"))

    def head(files: Files) -> None:
        spec(files, "projects/team-c.yaml")["quota"]["gpu"] = 2
        spec(files, "projects/team-d.yaml")["quota"]["gpu"] = 4

    data, markdown = plan_of(tmp_path, base, head)
    moved = data["fairness"]["workloads"]
    assert moved["evicted"] == [
        {"workload": "c-4", "project": "team-c", "reason": "reclaim by b-2", "gpus": 2.0}
    ]
    assert moved["started"] == [
        {
            "workload": "b-2",
            "project": "team-b",
            "reason": "takes GPUs freed by evicting c-4 (reclaim)",
            "gpus": 2.0,
        }
    ]
    assert "| `b-2` | `team-b` | 2 | takes GPUs freed by evicting c-4 (reclaim) |" in markdown


def _only_workloads(files: Files, workloads: dict[str, list[dict[str, Any]]]) -> None:
    for name in [name for name in files if name.startswith("workloads/")]:
        del files[name]
    files.update(workloads)


def test_a_running_gang_moved_to_make_room_is_listed_with_the_job_it_makes_room_for(
    tmp_path: Path,
) -> None:
    # 5 + 1 GPUs on one node, the gang's 2 x 2 on the other: a new 4-GPU job fits only
    # once consolidation moves the gang, which keeps running but restarts
    gang = doc("Workload", "a-gang", project="team-a", type="train", gpu=2, replicas=2)

    def base(files: Files) -> None:
        workloads = {"team-a": [gang], "team-c": [train("c-1", "team-c", 5)]}
        workloads["team-d"] = [train("d-1", "team-d", 1)]
        _only_workloads(files, {f"workloads/{p}.yaml": w for p, w in workloads.items()})

    def head(files: Files) -> None:
        files["workloads/team-b.yaml"] = [train("b-big", "team-b", 4)]

    data, markdown = plan_of(tmp_path, base, head)
    moved = data["fairness"]["workloads"]
    assert moved["evicted"] == []
    assert moved["shrunk"] == [
        {
            "workload": "a-gang",
            "project": "team-a",
            "reason": "2 pods move (consolidate by b-big)",
            "gpus": 4.0,
        }
    ]
    assert moved["started"] == [
        {
            "workload": "b-big",
            "project": "team-b",
            "reason": "new; takes GPUs freed by evicting a-gang (consolidate)",
            "gpus": 4.0,
        }
    ]
    assert data["summary"] == "1 job of team-a would be moved or shrunk; 1 job could start"
    assert "| `a-gang` | `team-a` | 4 | 2 pods move (consolidate by b-big) |" in markdown


def test_an_elastic_job_that_gives_up_pods_is_listed_as_shrunk(tmp_path: Path) -> None:
    # team-c's elastic job fills the cluster beyond its quota; a new job within team-b's
    # quota reclaims one of its pods above the gang, and it runs on with the rest
    elastic = doc(
        "Workload", "c-elastic", project="team-c", type="train", gpu=2, replicas=7, minAvailable=2
    )

    def base(files: Files) -> None:
        workloads = {"team-c": [elastic], "team-a": [train("a-1", "team-a")]}
        _only_workloads(files, {f"workloads/{p}.yaml": w for p, w in workloads.items()})

    def head(files: Files) -> None:
        files["workloads/team-b.yaml"] = [train("b-1", "team-b")]

    data, _ = plan_of(tmp_path, base, head)
    moved = data["fairness"]["workloads"]
    assert moved["evicted"] == []
    assert moved["shrunk"] == [
        {
            "workload": "c-elastic",
            "project": "team-c",
            "reason": "shrinks from 7 to 6 pods (reclaim by b-1)",
            "gpus": 2.0,
        }
    ]
    assert [m["workload"] for m in moved["started"]] == ["b-1"]


def test_a_job_that_could_start_on_a_new_node_says_so(tmp_path: Path) -> None:
    data, _ = plan_of(tmp_path, lambda files: None, CHANGES["add-node-group"])
    assert data["fairness"]["workloads"]["started"] == [
        {
            "workload": "c-5",
            "project": "team-c",
            "reason": "runs on l40s-0, new in this change",
            "gpus": 2.0,
        }
    ]


def test_a_quota_cut_below_a_gang_warns_that_the_gang_can_never_run(tmp_path: Path) -> None:
    # a-gang (2 pods x 2 GPUs) fits team-a's quota of 4, not the new 3; a-big (3 x 2) fit
    # neither: not a warning of this change
    gangs = [
        doc("Workload", name, project="team-a", type="train", gpu=2, replicas=pods)
        for name, pods in (("a-gang", 2), ("a-big", 3))
    ]
    for gang in gangs:
        gang["spec"]["image"] = "pytorch:2"

    def base(files: Files) -> None:
        files["workloads/team-a.yaml"] += gangs
        spec(files, "projects/team-a.yaml")["overQuota"] = "denied"

    def head(files: Files) -> None:
        spec(files, "projects/team-a.yaml")["quota"]["gpu"] = 3

    data, markdown = plan_of(tmp_path, base, head)
    message = (
        "its gang needs 4 GPUs, more than the 3 of team-a (project may not go over quota): "
        "it can never run"
    )
    gang_warnings = [w for w in data["warnings"] if w["kind"] == "quota-below-gang"]
    assert gang_warnings == [
        {"kind": "quota-below-gang", "subject": "Workload/a-gang", "message": message}
    ]
    assert f"> - **Workload/a-gang**: {message}" in markdown


CELL = r"(?:`(█*[▏▎▍▌▋▊▉]?)` )?([\d.]+|—)"  # a bar, then its value; "—": no project
BAR_ROW = re.compile(rf"^\| `([^`]+)` \| {CELL} \| {CELL} \|$")
EIGHTHS = {c: i for i, c in enumerate(" ▏▎▍▌▋▊▉")}


def bar_length(bar: str | None) -> int:
    """A bar's length in eighths of a character."""
    bar = bar or ""
    tail = bar[-1] if bar and bar[-1] != "█" else ""
    return 8 * bar.count("█") + (EIGHTHS[tail] if tail else 0)


def value(cell: str) -> float | None:
    return None if cell == "—" else float(cell)


@pytest.mark.parametrize(
    "name", ["add-node-group", "move-project", "raise-quota", "remove-project"]
)
def test_the_chart_shows_both_values_of_every_row(tmp_path: Path, name: str) -> None:
    data, markdown = plan_of(tmp_path, lambda files: None, CHANGES[name])
    shares = {
        p["name"]: (p["fairShare"]["before"], p["fairShare"]["after"])
        for p in data["fairness"]["fullDemand"]["projects"]
    }
    moving = {n for n, (before, after) in shares.items() if before != after}
    rows = [m.groups() for line in markdown.splitlines() if (m := BAR_ROW.match(line))]
    assert {r[0] for r in rows} == moving
    top = max((v or 0.0 for n, pair in shares.items() if n in moving for v in pair), default=0)
    for project, before_bar, before, after_bar, after in rows:
        assert (value(before), value(after)) == shares[project]
        for bar, cell in ((before_bar, before), (after_bar, after)):
            assert abs(bar_length(bar) - (value(cell) or 0.0) / top * 160) <= 0.5, (project, bar)
