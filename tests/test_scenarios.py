"""The Run:ai / NetApp behaviours as simulations with `expect:`, run through the CLI.

Each tests/scenarios/*.yaml names its config repo in a `# repo:` comment. A scenario
passes when `gitops-sched simulate` meets every expectation (exit 0); the tests below
also pin the order of decisions, which expectations cannot express.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitops_sched.cli import main

SCENARIOS = Path(__file__).parent / "scenarios"


def run_scenario(name: str) -> dict:
    events = SCENARIOS / f"{name}.yaml"
    repo = re.search(r"^# repo: (\S+)", events.read_text(), re.M)
    assert repo, f"{events} names no repo"
    result = CliRunner().invoke(
        main, ["simulate", str(SCENARIOS / repo[1]), "--events", str(events), "--format", "json"]
    )
    output = json.loads(result.stdout)
    assert output["expectations"]["failed"] == []
    assert result.exit_code == 0
    return output


def decisions(output: dict, action: str, step: int | None = None) -> list[dict]:
    return [
        entry
        for entry in output["log"]
        if entry["action"] == action and (step is None or entry["step"] == step)
    ]


@pytest.mark.parametrize("name", sorted(p.stem for p in SCENARIOS.glob("*.yaml")))
def test_scenario_meets_its_expectations(name):
    assert run_scenario(name)["expectations"]["checked"] > 0


def test_reclaim_alternates_between_over_quota_teams_and_spares_notebooks():
    output = run_scenario("netapp-fairness")
    evictions = decisions(output, "evict")
    assert [e["reason"] for e in evictions] == ["reclaim"] * 4
    # team-b and team-c are equal in every measure: the newer queue (team-c, declared
    # after team-b) gives up work first, as KAI breaks ties by creation time
    assert [e["workload"][0] for e in evictions] == ["c", "b", "c", "b"]
    assert {e["by"] for e in evictions} <= {"d-1", "d-2", "d-3", "d-4"}
    shared = [
        sorted(w["share"] for w in gpu["workloads"])
        for node in output["nodes"]
        for gpu in node["gpus"]
        if len(gpu["workloads"]) > 1
    ]
    assert sorted(shared) == [[0.2, 0.3, 0.5], [0.4, 0.6]]


def test_mig_instance_is_created_once_and_reused():
    output = run_scenario("gang-consolidation-mig-timelimit")
    binds = {e["workload"]: e for e in decisions(output, "bind")}
    creates = decisions(output, "mig-create")
    assert [e["step"] for e in creates] == [binds["mig-1"]["step"]]
    assert not decisions(output, "mig-destroy")
    assert binds["mig-1"]["pods"][0]["mig"] == binds["mig-2"]["pods"][0]["mig"]


def test_consolidation_moves_one_job_and_loses_none():
    output = run_scenario("consolidation")
    assert [(e["workload"], e["reason"]) for e in decisions(output, "evict")] == [
        ("pair-b", "consolidate")
    ]
    assert {w["name"]: w["status"] for w in output["workloads"]} == {
        "big": "running",
        "pair-a": "running",
        "pair-b": "running",
    }


def test_consolidation_moves_the_next_job_too_when_the_first_would_find_no_place():
    output = run_scenario("consolidation-moves-more")
    # in victim order, youngest first: j1, which alone leaves itself nowhere, then j2
    assert [(e["workload"], e["reason"]) for e in decisions(output, "evict")] == [
        ("j1", "consolidate"),
        ("j2", "consolidate"),
    ]
    assert [e["workload"] for e in decisions(output, "bind")] == ["gang", "j2", "j1"]


def test_unmet_expectation_exits_1_with_expected_and_actual(tmp_path):
    events = (SCENARIOS / "quota-three-to-one.yaml").read_text()
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(
        events.replace(
            "big: {deserved: 3, fairShare: 6, allocated: 6",
            "big: {deserved: 3, fairShare: 6, allocated: 5",
        )
    )
    result = CliRunner().invoke(
        main, ["simulate", str(SCENARIOS / "repos/two-projects"), "--events", str(wrong)]
    )
    assert result.exit_code == 1
    assert "allocated" in result.output
    assert "5" in result.output and "6" in result.output


def test_a_gang_in_flight_gets_its_missing_pod_first_and_a_stale_one_is_evicted_whole():
    output = run_scenario("gang-in-flight")
    placed = [
        (e["workload"], [(p["node"], p["gpus"], p["index"]) for p in e["pods"]])
        for e in decisions(output, "bind", step=0)
    ]
    assert placed == [("gang-a", [("v100-0", [2, 3], 0)])]  # only the missing pod, beside pod 1
    evictions = [
        (e["step"], e["time"], e["workload"], e["reason"], len(e["pods"]))
        for e in decisions(output, "evict")
    ]
    assert evictions == [(4, 60.0, "gang-b", "stale-gang", 1)]  # not at 59s: at the grace


def test_work_within_its_minimum_runtime_is_not_reclaimed_until_it_has_run_it():
    output = run_scenario("min-runtime")
    evictions = decisions(output, "evict")
    assert [(e["workload"], e["reason"]) for e in evictions] == [
        ("a-4", "reclaim"),
        ("a-3", "reclaim"),
    ]
    # at 30m (the department's minimum, over the cluster's 1h), not at 5m or 29m
    assert {e["time"] for e in evictions} == {1800.0}


def test_a_pool_quota_is_reclaimed_in_its_pool_and_buys_nothing_in_another():
    output = run_scenario("node-pool-quotas")
    evictions = decisions(output, "evict")
    # vision takes back exactly the 2 A100s nlp holds over its A100 quota, and its unused
    # H100 quota takes no third A100 from nlp
    assert [(e["workload"], e["reason"], e["by"]) for e in evictions] == [
        ("nlp-a4", "reclaim", "vision-a1"),
        ("nlp-a3", "reclaim", "vision-a2"),
    ]
    (any_pool,) = [w for w in output["workloads"] if w["name"] == "vision-any"]
    assert {pod["node"] for pod in any_pool["pods"]} == {"h100-0"}
    (nlp,) = [p for p in output["projects"] if p["name"] == "nlp"]
    assert nlp["nodeGroups"]["a100"] == {
        "name": "a100",
        "deserved": 2,
        "fairShare": 2,
        "allocated": 2,
        "queued": 2,
    }


def test_two_teams_that_each_want_the_whole_cluster_take_turns():
    """Fairness over time: the node goes back and forth by reclaim, never to one team for
    ever (tests/scenarios/fairness-over-time.yaml)."""
    output = run_scenario("fairness-over-time")
    evictions = decisions(output, "evict")
    assert [(e["workload"], e["reason"], e["by"]) for e in evictions] == [
        ("train-a", "reclaim", "train-b"),
        ("train-b", "reclaim", "train-a"),
        ("train-a", "reclaim", "train-b"),
    ]
    assert [e["workload"] for e in decisions(output, "bind")] == ["train-a", "train-b"] * 2


def test_two_teams_take_turns_on_one_pool_by_their_usage_of_it():
    """Fairness over time per node pool: each team uses only half of the cluster, yet the
    H100 node changes hands by reclaim as often as on a one-pool cluster, because a
    team's usage of the pool lowers its share of the pool
    (tests/scenarios/pool-fairness-over-time.yaml)."""
    output = run_scenario("pool-fairness-over-time")
    evictions = decisions(output, "evict")
    assert [(e["workload"], e["reason"], e["by"], e["time"]) for e in evictions] == [
        ("train-a", "reclaim", "train-b", 5460.0),
        ("train-b", "reclaim", "train-a", 12660.0),
        ("train-a", "reclaim", "train-b", 19860.0),
    ]
    assert all(p["fairShare"] == 8 for p in output["projects"])  # over the cluster: even


def test_without_fairness_over_time_the_first_team_keeps_the_cluster(tmp_path: Path):
    """The same repo and steps with no `fairness:`: team-a's run is never reclaimed."""
    text = (SCENARIOS / "repos" / "fairness-over-time" / "cluster.yaml").read_text()
    assert "fairness:" in text
    (tmp_path / "cluster.yaml").write_text(re.sub(r"\n  policy:\n    fairness: .*\n", "\n", text))
    events = str(SCENARIOS / "fairness-over-time.yaml")
    result = CliRunner().invoke(
        main, ["simulate", str(tmp_path), "--events", events, "--format", "json"]
    )
    output = json.loads(result.stdout)
    assert decisions(output, "evict") == []
    assert [e["workload"] for e in decisions(output, "bind")] == ["train-a"]
    assert output["expectations"]["failed"]  # the turns the scenario expects never come
