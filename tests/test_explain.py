"""`gitops-sched explain` on the example repos: placed, pending for quota, fair share, a gang,
fragmentation, never fit; the same words as simulate; and the usage errors."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from gitops_sched.cli import main
from gitops_sched.engine.fairshare import Trace, fair_shares
from gitops_sched.engine.types import QueueSpec
from gitops_sched.sim.explain import ExplainError, find_workload
from gitops_sched.sim.run import simulate
from gitops_sched.validate import check_repo
from testkit.config_builders import API
from tests.readme_blocks import check

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "clusters"
NETAPP = str(EXAMPLES / "netapp-dgx")
OCI = str(EXAMPLES / "oci-a100")
NETAPP_WORKLOADS = [
    "resnet50-ddp",
    "bert-finetune",
    "b-train-1",
    "b-train-2",
    "notebook-1",
    "notebook-3",
    "c-train-1",
    "c-train-2",
    "notebook-2",
    "notebook-4",
    "notebook-5",
]


def workload(name: str, project: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": spec | {"project": project},
    }


def events(tmp_path: Path, *steps: dict[str, Any]) -> str:
    document = {"apiVersion": API, "kind": "Simulation", "metadata": {"name": "why"}}
    path = tmp_path / "events.yaml"
    path.write_text(yaml.safe_dump({**document, "steps": list(steps)}, sort_keys=False))
    return str(path)


@pytest.fixture
def busy(tmp_path: Path) -> str:
    """netapp-dgx full, then 1h30m later: team-b's notebook over its quota, team-a over its
    fair share, a pod that fits no node; team-d reclaims its quota last."""
    return events(
        tmp_path,
        {"submit": NETAPP_WORKLOADS},
        {"advance": "1h30m"},
        {
            "submit": [
                workload("b-notebook-big", "team-b", type="interactive", gpu=2),
                workload("a-more", "team-a", gpu=2),
                workload("huge", "team-d", gpu=16),
            ]
        },
        {"submit": [workload("d-train", "team-d", gpu=4)]},
    )


def explain(*args: str) -> Result:
    return CliRunner().invoke(main, ["explain", *args])


FRAGMENTATION = str(EXAMPLES.parent / "events" / "fragmentation.yaml")


def test_the_readme_shows_what_explain_prints_for_the_fragmentation_example() -> None:
    result = explain(NETAPP, "big", "--events", FRAGMENTATION)
    assert result.exit_code == 0
    check("explain-example", f"```\n{result.output}```\n")


def test_a_placed_workload_says_where_and_why_there() -> None:
    result = explain(NETAPP, "resnet50-ddp")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "team-a/resnet50-ddp: running"
    assert (
        "  node groups it may use: dgx1 (no setting: every node group that runs workloads)" in lines
    )
    runs_on = next(line for line in lines if line.startswith("Runs on: "))
    assert runs_on.startswith("Runs on: dgx1-0 GPUs") and runs_on.endswith("(2 pods)")
    assert any(line.startswith("  bin packing: whole GPUs go to the fullest") for line in lines)
    assert any(line.startswith("  step 0 at 0s: bind dgx1-0") for line in lines)
    assert "Fair share of team-a: " in result.output
    assert "  split of department ai-research's share among its projects:" in lines


def test_pending_over_quota(busy: str) -> None:
    result = explain(NETAPP, "b-notebook-big", "--events", busy)
    assert result.exit_code == 0, result.output
    assert (
        "Why pending: over quota: non-preemptible work must fit in the project's deserved "
        "quota (3.1 > 2 GPUs)"
    ) in result.output
    assert "project team-b: deserved 2, holds 2.1 (1.1 non-preemptible)" in result.output


def test_pending_for_fair_share_shows_its_history(busy: str) -> None:
    result = explain(NETAPP, "team-a/a-more", "--events", busy)
    assert result.exit_code == 0, result.output
    assert (
        "Why pending: fair share reached: team-a holds 6 of its fair share of 4 GPUs; "
        "it needs 2 GPUs and the nodes it may use have 0 free"
    ) in result.output
    # placed on the last free GPUs, then reclaimed by team-d, whose quota is guaranteed
    assert "  step 3 at 1h30m: bind dgx1-1 GPUs 6-7" in result.output
    assert "  step 4 at 1h30m: evict reclaim for team-d/d-train, from dgx1-1 GPUs 6-7" in (
        result.output
    )
    assert "Fair share of team-a: 4 GPUs" in result.output


def test_never_fit(busy: str) -> None:
    result = explain(NETAPP, "huge", "--events", busy, "--format", "json")
    assert result.exit_code == 0, result.output
    pending = json.loads(result.output)["pending"]
    assert pending["kind"] == "never-fit"
    assert pending["reason"] == (
        "can never fit: a pod needs 16 GPUs, the largest node it may use has 8 "
        "(dgx1: 2 nodes x 8 GPUs); at most 8 GPUs per pod fit"
    )


def test_a_gang_waits_for_room_for_all_its_pods(tmp_path: Path) -> None:
    gang = workload("pair", "team-d", gpu=8, replicas=2)
    path = events(tmp_path, {"submit": ["notebook-1"]}, {"submit": [gang]})
    result = explain(NETAPP, "pair", "--events", path)
    assert result.exit_code == 0, result.output
    assert "Why pending: waiting for gang: 1 of 2 pods fit now" in result.output
    assert "free whole GPUs per node it may use: dgx1-1 8, dgx1-0 7" in result.output


def test_fragmentation_says_where_the_free_gpus_are() -> None:
    result = explain(NETAPP, "big", "--events", FRAGMENTATION)
    assert result.exit_code == 0, result.output
    assert (
        "Why pending: fragmentation: 8 GPUs free on the nodes it may use, but scattered: "
        "only 0 of 1 pods fit"
    ) in result.output
    assert "  it asks for 8 GPUs now (1 pod)\n" in result.output
    assert "  free whole GPUs per node it may use: dgx1-1 4, dgx1-0 4\n" in result.output


def test_a_gang_runs_once_consolidation_moves_what_keeps_it_out() -> None:
    # llama-8b-pretrain's 4 x 4 GPUs: consolidation moves vit-large-train and llama-8b-eval
    # together (moving the first alone leaves it nowhere to go)
    result = explain(OCI, "llama-8b-pretrain")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("llm-pretrain/llama-8b-pretrain: running\n")
    assert "Runs on: a100-0 GPUs 0-7 (2 pods); a100-1 GPUs 0-7 (2 pods)" in result.output


def test_the_rounds_of_spare_gpus() -> None:
    result = explain(OCI, "llama-8b-pretrain")
    # rank 1 is served first: the whole-GPU round hands llm-pretrain the spare GPUs
    assert "    round at rank 1, 2 spare GPUs by weight: llm-pretrain +2 (part 2)" in (
        result.output
    )


def test_simulate_prints_the_same_pending_reasons(busy: str) -> None:
    out = CliRunner().invoke(main, ["simulate", NETAPP, "--events", busy, "--format", "json"])
    pending = {w["name"]: w["reason"] for w in json.loads(out.output)["workloads"] if w["reason"]}
    assert set(pending) == {"a-more", "b-notebook-big", "b-train-2", "huge"}
    for name, reason in pending.items():
        result = explain(NETAPP, name, "--events", busy, "--format", "json")
        assert json.loads(result.output)["pending"]["reason"] == reason


def test_an_unknown_workload_is_a_usage_error_with_did_you_mean() -> None:
    result = explain(NETAPP, "resnet50")
    assert result.exit_code == 2
    assert "unknown workload 'resnet50' (did you mean 'resnet50-ddp'?)" in result.output
    result = explain(NETAPP, "team-b/resnet50-ddp")
    assert result.exit_code == 2
    assert "did you mean 'team-a/resnet50-ddp'" in result.output


def test_an_ambiguous_name_lists_the_candidates() -> None:
    repo, _ = check_repo(Path(NETAPP))
    assert repo is not None
    result = simulate(repo)
    state = find_workload(result, "bert-finetune")
    twin = replace(state, workload=replace(state.workload, project="team-b"))
    both = replace(result, workloads=(*result.workloads, twin))
    with pytest.raises(
        ExplainError, match="in several projects: team-a/bert-finetune, team-b/bert-finetune"
    ):
        find_workload(both, "bert-finetune")
    assert find_workload(both, "team-b/bert-finetune") is twin


def test_the_trace_changes_no_share_and_accounts_for_every_gpu() -> None:
    departments = (QueueSpec("d", 4, 4), QueueSpec("e", 2, 2))
    projects = (
        QueueSpec("a", 1, 3, parent="d"),
        QueueSpec("b", 3, 1, parent="d", over_quota_rank=1),
        QueueSpec("c", 2, 2, parent="e"),
    )
    demand = {"a": 9, "b": 9, "c": 1}
    trace = Trace()
    shares = fair_shares(13, departments, projects, demand, trace)
    assert shares == fair_shares(13, departments, projects, demand)
    for level, members in (("", ("d", "e")), ("d", ("a", "b")), ("e", ("c",))):
        given = {m: 0.0 for m in members}
        for step in trace.steps:
            if step.level == level:
                for give in step.gives:
                    given[give.queue] += give.given
        assert given == pytest.approx({m: shares[m] for m in members})
    kinds = [(s.level, s.kind, s.rank) for s in trace.steps if s.level == "d"]
    assert kinds[0] == ("d", "deserved", 0) and ("d", "round", 1) in kinds


def test_no_mig_slot(tmp_path: Path) -> None:
    node = {
        "name": "m0",
        "nodeGroup": "a100-mig",
        "gpus": 1,
        "model": "A100-80GB",
        "memory": "80Gi",
        "mig": {"enabled": True},
    }
    whole = workload("whole-slice", "sandbox", nodeGroup="a100-mig", mig="7g.80gb")
    path = tmp_path / "events.yaml"
    document = {"apiVersion": API, "kind": "Simulation", "metadata": {"name": "mig"}}
    steps = [{"submit": ["mig-experiment"]}, {"submit": [whole]}]
    path.write_text(yaml.safe_dump({**document, "nodes": [node], "steps": steps}))
    result = explain(OCI, "whole-slice", "--events", str(path))
    assert result.exit_code == 0, result.output
    # the 1g.10gb instance of mig-experiment is busy: no 7g.80gb can be made beside it
    assert (
        "Why pending: no MIG slot: no free 7g.80gb instance, and no room to create one on the "
        "MIG GPUs it may use"
    ) in result.output


def test_a_running_job_says_until_when_its_minimum_runtime_protects_it(tmp_path: Path) -> None:
    scenarios = Path(__file__).resolve().parent / "scenarios"
    text = (scenarios / "min-runtime.yaml").read_text()
    early = tmp_path / "early.yaml"  # up to 5m in: team-a's work started at 0s
    early.write_text(text.split("  - expect:")[0])
    result = explain(str(scenarios / "repos" / "min-runtime"), "a-1", "--events", str(early))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = lines.index("Minimum runtime:")
    assert lines[at + 1 : at + 3] == [
        "  protected from preempt until 10m (started at 0s, minimum runtime 10m)",
        "  protected from reclaim until 30m (started at 0s, minimum runtime 30m)",
    ]
    answer = explain(
        str(scenarios / "repos" / "min-runtime"), "a-1", "--events", str(early), "--format", "json"
    )
    assert json.loads(answer.output)["protection"] == [
        line.strip() for line in lines[at + 1 : at + 3]
    ]


def test_an_empty_list_for_its_type_is_not_named_as_the_setting(tmp_path: Path) -> None:
    """`byType.train: []` gives train work no list of its own: every group, as the
    model decides, and explain says so rather than naming the empty list."""
    repo = tmp_path / "repo"
    shutil.copytree(NETAPP, repo)
    project = repo / "projects" / "team-a.yaml"
    text = project.read_text().replace(
        "  overQuota: allowed\n",
        "  overQuota: allowed\n  nodeGroups:\n    byType:\n      train: []\n",
    )
    project.write_text(text)
    result = explain(str(repo), "resnet50-ddp")
    assert result.exit_code == 0, result.output
    assert (
        "  node groups it may use: dgx1 (no setting: every node group that runs workloads)"
        in result.output.splitlines()
    )


FAIRNESS_REPO = Path(__file__).parent / "scenarios" / "repos" / "fairness-over-time"


def test_explain_shows_past_usage_and_the_split_it_changed(tmp_path: Path) -> None:
    """With fairness over time, explain gives each queue's past usage, and the rounds it
    shows are the ones the engine took: team-a, which held the node for an hour, gets the
    smaller part of the spare GPUs."""

    def workload(name: str, project: str) -> dict[str, Any]:
        return {
            "apiVersion": API,
            "kind": "Workload",
            "metadata": {"name": name},
            "spec": {"project": project, "gpu": 8},
        }

    events = {
        "apiVersion": API,
        "kind": "Simulation",
        "metadata": {"name": "turns"},
        "steps": [
            {"submit": [workload("a", "team-a")]},
            {"advance": "1m"},
            {"submit": [workload("b", "team-b")]},
            {"advance": "1h"},
        ],
    }
    path = tmp_path / "events.yaml"
    path.write_text(yaml.safe_dump(events))
    args = ["explain", str(FAIRNESS_REPO), "b", "--events", str(path)]
    text = CliRunner().invoke(main, args).output
    assert (
        "fairness over time (historyWeight 2, window 4h, half-life 1h): past usage, a share "
        "of what the cluster gave in the window: lab 0.54, team-a 0.54, team-b 0.00"
    ) in text
    assert "team-a +1 (part 1.7529: whole GPUs only), team-b +6 (part 6.2471" in text
    data = json.loads(CliRunner().invoke(main, [*args, "--format", "json"]).output)
    fairness = data["fairShare"]["fairness"]
    assert (fairness["historyWeight"], fairness["windowSeconds"]) == (2, 14400)
    assert fairness["usage"]["team-b"] == 0
    assert 0.5 < fairness["usage"]["team-a"] < 0.6
    assert data["fairShare"]["fairShare"] == 6


def test_explain_says_nothing_of_past_usage_without_fairness() -> None:
    data = json.loads(explain(NETAPP, "resnet50-ddp", "--format", "json").output)
    assert data["fairShare"]["fairness"] is None


def test_explain_shows_past_usage_per_node_group(tmp_path: Path) -> None:
    """A project with per-group quotas: its usage of each group beside its numbers there,
    the usage its over-quota share in the group goes by."""
    repo = Path(__file__).parent / "scenarios" / "repos" / "pool-fairness-over-time"
    train = {"apiVersion": API, "kind": "Workload"}
    events = {
        "apiVersion": API,
        "kind": "Simulation",
        "metadata": {"name": "turns"},
        "steps": [
            {
                "submit": [
                    {
                        **train,
                        "metadata": {"name": "a"},
                        "spec": {"project": "team-a", "gpu": 8, "nodeGroup": "h100"},
                    }
                ]
            },
            {"advance": "1h"},
            {
                "submit": [
                    {
                        **train,
                        "metadata": {"name": "b"},
                        "spec": {"project": "team-b", "gpu": 8, "nodeGroup": "h100"},
                    }
                ]
            },
        ],
    }
    path = tmp_path / "events.yaml"
    path.write_text(yaml.safe_dump(events))
    args = ["explain", str(repo), "a", "--events", str(path)]
    text = CliRunner().invoke(main, args).output
    assert "h100: deserved 0, fair share 2, holds 8, asks for 0 more, past usage there 0.53" in text
    data = json.loads(CliRunner().invoke(main, [*args, "--format", "json"]).output)
    h100 = data["fairShare"]["nodeGroups"]["h100"]
    assert 0.5 < h100["usage"] < 0.6
