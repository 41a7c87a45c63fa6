"""`gitops-sched plan` on temporary Git repos: each kind of change, stated exactly.

The Markdown of each case is compared with `tests/golden/plan/<case>.md`; after an
intended change to the output, regenerate and review:

    UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_plan.py
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gitops_sched.cli import main
from gitops_sched.compiler import render_repo
from gitops_sched.compiler.unchanged import same
from gitops_sched.validate import check_repo
from testkit.config_builders import doc, node_group

GOLDEN = Path(__file__).resolve().parent / "golden" / "plan"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


def train(name: str, project: str, gpu: int = 2) -> dict[str, Any]:
    return doc("Workload", name, project=project, type="train", gpu=gpu, image="pytorch:2")


def base_config() -> dict[str, list[dict[str, Any]]]:
    """16 GPUs, two departments, four projects; team-c runs over its quota."""
    return {
        "cluster.yaml": [
            doc(
                "Cluster",
                "lab",
                kubernetesVersion="1.32",
                systemNamespace="gitops-sched-system",
                policy={"allowOversubscription": True},
            )
        ],
        "node-groups/dgx.yaml": [
            node_group(
                "dgx",
                role="gpu-worker",
                nodeSelector={"matchLabels": {"pool": "dgx"}},
                nodeCount=2,
                gpusPerNode=8,
                gpu={"model": "A100-SXM4-80GB"},
            )
        ],
        "departments.yaml": [
            doc("Department", "research", quota={"gpu": 12}),
            doc("Department", "prod", quota={"gpu": 4}),
        ],
        "projects/team-a.yaml": [doc("Project", "team-a", department="research", quota={"gpu": 4})],
        "projects/team-b.yaml": [doc("Project", "team-b", department="research", quota={"gpu": 2})],
        "projects/team-c.yaml": [doc("Project", "team-c", department="research", quota={"gpu": 4})],
        "projects/team-d.yaml": [doc("Project", "team-d", department="prod", quota={"gpu": 2})],
        "workloads/team-a.yaml": [train("a-1", "team-a")],
        "workloads/team-b.yaml": [train("b-1", "team-b"), train("b-2", "team-b")],
        "workloads/team-c.yaml": [train(f"c-{i}", "team-c") for i in range(1, 6)],
        "workloads/team-d.yaml": [train("d-1", "team-d")],
    }


def write(root: Path, files: dict[str, list[dict[str, Any]]]) -> None:
    for name, docs in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def spec(files: dict, name: str, index: int = 0) -> dict[str, Any]:
    return files[name][index]["spec"]


def raise_quota(files: dict) -> None:
    spec(files, "projects/team-b.yaml")["quota"]["gpu"] = 4


def move_project(files: dict) -> None:
    spec(files, "projects/team-d.yaml")["department"] = "research"


def add_node_group(files: dict) -> None:
    files["node-groups/l40s.yaml"] = [
        node_group(
            "l40s",
            role="gpu-worker",
            nodeSelector={"matchLabels": {"pool": "l40s"}},
            nodeCount=1,
            gpusPerNode=4,
            gpu={"model": "L40S"},
        )
    ]


def shrink_capacity(files: dict) -> None:
    spec(files, "node-groups/dgx.yaml")["nodeCount"] = 1


def remove_project(files: dict) -> None:
    del files["projects/team-d.yaml"], files["workloads/team-d.yaml"]


def break_validation(files: dict) -> None:
    spec(files, "projects/team-b.yaml")["department"] = "nowhere"


CHANGES = {
    "raise-quota": raise_quota,
    "move-project": move_project,
    "add-node-group": add_node_group,
    "shrink-capacity": shrink_capacity,
    "remove-project": remove_project,
    "break-validation": break_validation,
}


def init_repo(repo: Path, folder: str = "cfg") -> Path:
    """A Git repo at `repo` whose `main` holds the base config in `folder` ("": the root)."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo / folder, base_config())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo


@pytest.fixture
def config_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Git repo whose `main` holds the base config in `cfg/`; the cwd is the repo."""
    repo = init_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    return repo


def change(repo: Path, name: str, commit: bool = False, folder: str = "cfg") -> None:
    files = base_config()
    CHANGES[name](files)
    for path in (repo / folder).rglob("*.yaml"):
        path.unlink()
    write(repo / folder, files)
    if commit:
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", name)


def plan(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["plan", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


def plan_json(*args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = plan(*args, "--format", "json")
    return code, json.loads(out)


def quotas(data: dict) -> dict[str, dict]:
    return {
        f"{q['kind']}/{q['name']}": {"status": q["status"], **q["changes"]} for q in data["quotas"]
    }


def pair(before: Any, after: Any) -> dict[str, Any]:
    return {"before": before, "after": after}


# --- each change, stated exactly ---------------------------------------------------------


def test_raising_one_quota_states_the_quota_its_weight_and_share(config_repo: Path) -> None:
    change(config_repo, "raise-quota")
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0
    assert quotas(data) == {
        "Project/team-b": {
            "status": "changed",
            "quotaGpu": pair(2, 4),
            "clusterSharePct": pair(12.5, 25.0),
            "overQuotaWeight": pair(2.0, 4.0),
        }
    }
    changed = {(o["kind"], o["name"]): o for o in data["objects"]["items"]}
    assert set(changed) == {("ConfigMap", "gitops-sched-policy"), ("Project", "team-b")}
    assert changed[("Project", "team-b")]["fields"] == [
        {"path": "spec.quota.gpu", "before": 2, "after": 4}
    ]
    full = {p["name"]: p for p in data["fairness"]["fullDemand"]["projects"]}
    assert full["team-b"]["deserved"] == pair(2, 4)
    assert data["summary"].startswith("team-b +2 GPUs guaranteed")
    assert data["capacity"]["gpus"] == pair(16, 16)


def test_moving_a_project_states_both_departments(config_repo: Path) -> None:
    change(config_repo, "move-project")
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0
    assert quotas(data) == {
        "Project/team-d": {"status": "changed", "department": pair("prod", "research")}
    }
    full = {p["name"]: p for p in data["fairness"]["fullDemand"]["projects"]}
    assert full["team-d"]["department"] == pair("prod", "research")
    assert "team-d moves from prod to research" in data["summary"]


def test_adding_a_node_group_states_the_capacity(config_repo: Path) -> None:
    change(config_repo, "add-node-group")
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0
    assert quotas(data)["NodeGroup/l40s"] == {
        "status": "added",
        "role": pair(None, "gpu-worker"),
        "nodes": pair(None, 1),
        "gpusPerNode": pair(None, 4),
        "gpuModel": pair(None, "L40S"),
        "gpus": pair(None, 4),
    }
    assert data["capacity"]["gpus"] == pair(16, 20)
    assert data["capacity"]["oversubscribed"] == pair(False, False)
    added = {(o["kind"], o["name"]) for o in data["objects"]["items"] if o["action"] == "added"}
    assert ("NodeGroup", "l40s") in added


def test_shrinking_capacity_evicts_the_work_on_the_removed_node(config_repo: Path) -> None:
    change(config_repo, "shrink-capacity")
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0
    assert quotas(data)["NodeGroup/dgx"] == {
        "status": "changed",
        "nodes": pair(2, 1),
        "gpus": pair(16, 8),
    }
    assert data["capacity"] == {
        "gpus": pair(16, 8),
        "departmentQuotaGpus": pair(16, 16),
        "oversubscribed": pair(False, True),
    }
    evicted = data["fairness"]["workloads"]["evicted"]
    assert evicted and all(e["reason"] for e in evicted)
    assert sum(e["gpus"] for e in evicted) == 8  # the removed node's 8 GPUs were all in use
    kinds = {w["kind"] for w in data["warnings"]}
    assert {"department-over-capacity", "node-group-under-work"} <= kinds


def test_removing_a_project_with_workloads_warns_and_lists_its_jobs(config_repo: Path) -> None:
    change(config_repo, "remove-project")
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0
    assert quotas(data)["Project/team-d"]["status"] == "removed"
    warnings = [w for w in data["warnings"] if w["kind"] == "removed-project-with-workloads"]
    assert warnings == [
        {
            "kind": "removed-project-with-workloads",
            "subject": "Project/team-d",
            "message": "removed while it has 1 workload(s), 1 running",
        }
    ]
    evicted = data["fairness"]["workloads"]["evicted"]
    assert {
        "workload": "d-1",
        "project": "team-d",
        "reason": "removed from the repo",
        "gpus": 2.0,
    } in evicted
    removed = {(o["kind"], o["name"]) for o in data["objects"]["items"] if o["action"] == "removed"}
    assert {("Project", "team-d"), ("Namespace", "project-team-d"), ("Job", "d-1")} <= removed


def test_breaking_validation_exits_1_with_the_new_problem(config_repo: Path) -> None:
    change(config_repo, "break-validation")
    code, data = plan_json("cfg", "--base", "main")
    assert code == 1
    assert data["valid"] is False and data["compared"] is False
    new = data["validation"]["new"]
    assert [p["object"] for p in new if p["severity"] == "error"] == ["Project/team-b"]
    assert "nowhere" in new[0]["message"]
    code, out, err = plan("cfg", "--base", "main")
    assert code == 1 and "nowhere" in err and out.startswith("<!-- gitops-sched-plan -->")


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_markdown_matches_golden(config_repo: Path, name: str) -> None:
    change(config_repo, name, commit=True)
    code, text, _ = plan("cfg", "--base", "main~1", "--head", "main")
    assert code == (1 if name == "break-validation" else 0)
    golden = GOLDEN / f"{name}.md"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"no {golden.name}: run with UPDATE_GOLDEN=1 to create it"
    assert text == golden.read_text(encoding="utf-8")


def test_no_change_is_stated_as_none(config_repo: Path) -> None:
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0
    assert data["summary"] == "No change"
    assert data["objects"]["items"] == [] and data["quotas"] == [] and data["warnings"] == []


def test_formatting_and_order_are_no_change(config_repo: Path) -> None:
    """Keys reordered, flow style, a quantity spelt another way: nothing changes."""
    path = config_repo / "cfg" / "projects" / "team-a.yaml"
    path.write_text(
        "kind: Project\napiVersion: gitops-sched.io/v1alpha1\n"
        "spec: {quota: {gpu: 4}, department: research}\nmetadata: {name: team-a}\n"
    )
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0 and data["objects"]["items"] == [] and data["quotas"] == []


def test_workloads_whose_project_changes_are_rendered_again(config_repo: Path) -> None:
    """Only team-b's file changes, yet its jobs' env (from its quota) changes: stated."""
    files = base_config()
    template = doc("Template", "base", default=True, env={"QUOTA": "{{ project.quota.gpu }}"})
    files["templates.yaml"] = [template]
    write(config_repo / "cfg", files)
    git(config_repo, "add", "cfg")
    git(config_repo, "commit", "-q", "-m", "quota in env")
    raise_quota(files)
    write(config_repo / "cfg", files)
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0
    jobs = {o["name"]: o["fields"] for o in data["objects"]["items"] if o["kind"] == "Job"}
    env = "spec.template.spec.containers.0.env.0.value"
    assert jobs == {
        name: [{"path": env, "before": "2.0", "after": "4.0"}] for name in ("b-1", "b-2")
    }


def test_a_jobs_changed_pod_template_is_a_replacement_that_restarts_its_pods(
    config_repo: Path,
) -> None:
    """Kubernetes fixes a Job's pod template at creation: the reconciler replaces the Job,
    and the plan says so (and that its running pods restart)."""
    files = base_config()
    files["workloads/team-b.yaml"][0]["spec"]["image"] = "pytorch:3"
    write(config_repo / "cfg", files)
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0
    assert {k: v for k, v in data["objects"].items() if k != "items"} == {
        "added": 0,
        "changed": 1,  # the Workload object, in place
        "replaced": 1,
        "removed": 0,
    }
    actions = {(o["kind"], o["name"]): o["action"] for o in data["objects"]["items"]}
    assert actions == {("Job", "b-1"): "replaced", ("Workload", "b-1"): "changed"}
    assert data["summary"] == "1 workload replaced (running pods restart)"
    _, text, _ = plan("cfg", "--base", "main")
    assert "Kubernetes objects: 1 changed, 1 replaced" in text
    assert "| `project-team-b/b-1` | replaced (running pods restart) | `spec.template." in text


def test_a_jobs_deadline_changes_in_place(config_repo: Path) -> None:
    """An interactive Job's time limit (activeDeadlineSeconds) may change on a live Job."""
    files = base_config()
    files["workloads/team-a.yaml"] = [
        doc("Workload", "a-1", project="team-a", type="interactive", gpu=1, image="jupyter:1")
    ]
    spec(files, "projects/team-a.yaml")["interactiveTimeLimit"] = "8h"
    write(config_repo / "cfg", files)
    git(config_repo, "add", "cfg")
    git(config_repo, "commit", "-q", "-m", "interactive")
    spec(files, "projects/team-a.yaml")["interactiveTimeLimit"] = "12h"
    write(config_repo / "cfg", files)
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0
    jobs = [o for o in data["objects"]["items"] if o["kind"] == "Job"]
    assert [(o["action"], [f["path"] for f in o["fields"]]) for o in jobs] == [
        ("changed", ["spec.activeDeadlineSeconds"])
    ]
    assert "replaced" not in data["summary"]


@pytest.mark.parametrize("name", ["netapp-dgx", "oci-a100"])
def test_the_policy_compared_as_data_is_what_its_text_says(name: str) -> None:
    """The diff takes the policy document from the render instead of parsing it back."""
    repo, _ = check_repo(Path(__file__).parent.parent / "examples" / "clusters" / name)
    assert repo is not None
    written: dict[str, Any] = {}
    render_repo(repo, written=written)
    [(text, document)] = written.items()
    assert same(yaml.safe_load(text), document, {})  # same types, same order


# --- the numbers are simulate's ------------------------------------------------------------


def simulate_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["simulate", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def by_name(items: list[dict]) -> dict[str, dict]:
    return {item["name"]: item for item in items}


def test_fairness_numbers_equal_simulate_for_the_same_config_and_state(
    config_repo: Path, tmp_path: Path
) -> None:
    base_dir = tmp_path / "base"
    write(base_dir, base_config())
    change(config_repo, "raise-quota")
    _, data = plan_json("cfg", "--base", "main")
    rows = by_name(data["fairness"]["workloads"]["projects"])
    before = simulate_json(str(base_dir))
    for project in before["projects"]:
        row = rows[project["name"]]
        assert row["fairShare"]["before"] == project["fairShare"]
        assert row["allocated"]["before"] == project["allocated"]
    # the head from the base's state: `simulate --events` seeded with the base's workloads
    events = tmp_path / "state.yaml"
    events.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "gitops-sched.io/v1alpha1",
                "kind": "Simulation",
                "metadata": {"name": "state"},
                "running": [
                    {k: v for k, v in w.items() if k in ("name", "status", "pods")}
                    for w in before["workloads"]
                ],
            }
        )
    )
    after = simulate_json("cfg", "--events", str(events))
    for project in after["projects"]:
        row = rows[project["name"]]
        assert row["fairShare"]["after"] == project["fairShare"]
        assert row["allocated"]["after"] == project["allocated"]
    evicted = {e["workload"] for e in data["fairness"]["workloads"]["evicted"]}
    ran = {w["name"] for w in before["workloads"] if w["status"] == "running"}
    runs = {w["name"] for w in after["workloads"] if w["status"] == "running"}
    assert evicted == ran - runs


def test_state_file_seeds_both_sides(config_repo: Path, tmp_path: Path) -> None:
    base_dir = tmp_path / "base"
    write(base_dir, base_config())
    state = tmp_path / "state.json"
    state.write_text(json.dumps(simulate_json(str(base_dir))))
    change(config_repo, "raise-quota")
    code, with_state = plan_json("cfg", "--base", "main", "--state", str(state))
    _, without = plan_json("cfg", "--base", "main")
    assert code == 0 and with_state["fairness"]["workloads"]["source"] == "state"
    # the state is what the base settles to, so the plan's numbers are the same
    assert (
        with_state["fairness"]["workloads"]["projects"]
        == without["fairness"]["workloads"]["projects"]
    )


def test_full_demand_equals_the_engine_with_every_project_asking_for_everything(
    config_repo: Path,
) -> None:
    from gitops_sched.bridge.build import nodes_from_repo, policy_from_repo
    from gitops_sched.plan.impact import full_demand_shares
    from gitops_sched.sim.run import simulate
    from gitops_sched.validate import check_repo

    change(config_repo, "raise-quota")
    repo, _ = check_repo(Path("cfg"))
    assert repo is not None
    # every project asks for the whole cluster: 2 pods of 8 GPUs each, never all running
    greedy = [w for p in repo.projects for w in [_greedy(repo, p.name)]]
    from dataclasses import replace

    result = simulate(replace(repo, workloads=greedy))
    shares = full_demand_shares(policy_from_repo(repo), nodes_from_repo(repo))
    assert {q.name: q.fair_share for q in result.projects} == {
        p.name: shares[p.name] for p in repo.projects
    }


def _greedy(repo: Any, project: str) -> Any:
    from gitops_sched.config.document import Document
    from gitops_sched.config.model import build_workload

    data = doc("Workload", f"{project}-all", project=project, type="train", gpu=8, replicas=2)
    return build_workload(Document("greedy.yaml", 0, data, {(): (1, 1)}))


# --- where the config folder is and how it is named ------------------------------------------


@pytest.mark.parametrize(
    ("folder", "cwd", "given"),
    [
        pytest.param("", "", ".", id="root-dot"),  # the usual config repo: the config is the repo
        pytest.param("", "", "./", id="root-dot-slash"),
        pytest.param("", "", "<absolute>", id="root-absolute"),
        pytest.param("cfg", "", "cfg", id="subfolder"),
        pytest.param("cfg", "", "./cfg/", id="subfolder-dot-slash"),
        pytest.param("cfg", "", "<absolute>", id="subfolder-absolute"),
        pytest.param("cfg", "cfg", ".", id="inside-the-subfolder"),
    ],
)
@pytest.mark.parametrize("head", [None, "HEAD"])
def test_the_config_may_be_the_repo_root_or_a_subfolder_named_any_way(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    folder: str,
    cwd: str,
    given: str,
    head: str | None,
) -> None:
    repo = init_repo(tmp_path / "repo", folder)
    git(repo, "checkout", "-q", "-b", "pull-request")
    change(repo, "raise-quota", commit=head is not None, folder=folder)
    monkeypatch.chdir(repo / cwd)
    path = str(repo / folder) if given == "<absolute>" else given
    code, data = plan_json(path, *(["--head", head] if head else []), "--base", "main")
    assert code == 0, data
    assert data["base"]["valid"] and data["head"]["valid"] and data["compared"]
    assert quotas(data)["Project/team-b"]["quotaGpu"] == pair(2, 4)


# --- bad input -------------------------------------------------------------------------------


def test_unknown_ref_is_a_usage_error(config_repo: Path) -> None:
    code, out, err = plan("cfg", "--base", "no-such-branch")
    assert code == 2 and out == ""
    assert (
        err
        == "Error: unknown Git ref 'no-such-branch' (not a branch, tag or commit of "
        + str(config_repo.resolve())
        + ")\n"
    )


def test_a_repo_with_no_commit_yet_says_to_commit_the_base_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "fresh"
    write(repo / "cfg", base_config())
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    monkeypatch.chdir(repo)
    code, out, err = plan("cfg", "--base", "HEAD")
    assert code == 2 and out == ""
    assert err == (
        f"Error: unknown Git ref 'HEAD': {repo.resolve()} has no commit yet; commit the base "
        "config first (git add -A && git commit), then plan the change against it\n"
    )


def test_a_config_folder_new_in_the_change_is_stated_as_new(config_repo: Path) -> None:
    write(config_repo / "clusters" / "prod", base_config())
    code, data = plan_json("clusters/prod", "--base", "main")
    assert code == 0
    assert data["base"]["absent"] is True and data["compared"] is False
    assert data["summary"] == "A new config: clusters/prod is not in the base main"
    assert data["validation"]["fixed"] == []  # the base's missing Cluster is no fix
    _, markdown, _ = plan("clusters/prod", "--base", "main")
    assert "does not validate" not in markdown and "GS301" not in markdown


def test_invalid_base_is_stated_and_the_head_still_decides_the_exit_code(config_repo: Path) -> None:
    change(config_repo, "break-validation", commit=True)
    git(config_repo, "checkout", "-q", "-b", "fix", "main")
    change(config_repo, "raise-quota")
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0
    assert data["base"]["valid"] is False and data["compared"] is False
    assert "does not validate" in data["summary"]
    assert [p["object"] for p in data["validation"]["fixed"]] == ["Project/team-b"]


def test_a_symlink_committed_in_the_config_is_an_error_at_a_ref_not_skipped(
    config_repo: Path,
) -> None:
    (config_repo / "cfg" / "dup.yaml").symlink_to("departments.yaml")
    (config_repo / "cfg" / "outside.yaml").symlink_to("/etc/hostname")
    git(config_repo, "add", "-A")
    git(config_repo, "commit", "-q", "-m", "links")
    code, out, _ = plan("cfg", "--base", "main~1", "--head", "main")
    assert code == 1
    for name in ("dup.yaml", "outside.yaml"):
        assert (
            f"cfg/{name}:1:1: error GS101: a symlink in the Git tree: plan reads only regular "
            "files at a ref"
        ) in out


def test_invalid_head_ref_exits_1(config_repo: Path) -> None:
    change(config_repo, "break-validation", commit=True)
    code, data = plan_json("cfg", "--base", "main~1", "--head", "main")
    assert code == 1 and data["head"]["valid"] is False


def test_not_a_git_repo_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "cfg", base_config())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    code, out, err = plan("cfg", "--base", "main")
    assert code == 2 and out == ""
    assert err == "Error: cfg: not inside a Git repository (plan compares Git refs)\n"


def test_shallow_clone_without_the_base_says_so(
    config_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    change(config_repo, "raise-quota", commit=True)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{config_repo}", str(clone))
    monkeypatch.chdir(clone)
    code, _, err = plan("cfg", "--base", "main~1")
    assert code == 2
    assert "shallow clone" in err and "fetch-depth: 0" in err
    assert "Traceback" not in err


def test_state_that_does_not_fit_is_a_usage_error(config_repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps({"workloads": [{"name": "ghost", "status": "running", "pods": []}]})
    )
    code, _, err = plan("cfg", "--base", "main", "--state", str(state))
    assert code == 2 and "ghost" in err and "Traceback" not in err
    state.write_text("not json")
    code, _, err = plan("cfg", "--base", "main", "--state", str(state))
    assert code == 2 and "not a JSON state" in err


def test_the_working_tree_and_index_are_untouched(config_repo: Path) -> None:
    change(config_repo, "raise-quota")
    status = git(config_repo, "status", "--porcelain")
    plan("cfg", "--base", "main")
    assert git(config_repo, "status", "--porcelain") == status
    assert git(config_repo, "rev-parse", "HEAD") == git(config_repo, "rev-parse", "main")


def test_a_ref_and_a_folder_load_the_same(config_repo: Path) -> None:
    from gitops_sched.config.loader import folder_files
    from gitops_sched.plan.gitsource import git_folder, ref_files, resolve

    (config_repo / "cfg" / "z.yaml").write_text("# nothing\n")
    (config_repo / "cfg" / ".hidden").mkdir()
    (config_repo / "cfg" / ".hidden" / "x.yaml").write_text("a: 1\n")
    git(config_repo, "add", "cfg")
    git(config_repo, "commit", "-q", "-m", "more files")
    folder = git_folder(Path("cfg"))
    assert list(ref_files(folder, resolve(folder, "HEAD"))) == list(folder_files(Path("cfg")))


# --- --target: the diff of another scheduler's objects ------------------------------------


def test_plan_for_kai_diffs_kais_queues_and_finds_no_difference_to_warn_of(
    config_repo: Path,
) -> None:
    change(config_repo, "raise-quota")
    code, data = plan_json("cfg", "--base", "main", "--target", "kai")
    assert code == 0
    changed = {(o["kind"], o["name"]): o for o in data["objects"]["items"]}
    assert set(changed) == {("Queue", "team-b")}
    fields = changed[("Queue", "team-b")]["fields"]
    assert {(f["path"], f["before"], f["after"]) for f in fields} == {
        ("spec.resources.gpu.quota", 2, 4),
        ("spec.resources.gpu.overQuotaWeight", 2, 4),
        ("spec.resources.cpu.overQuotaWeight", 2, 4),
        ("spec.resources.memory.overQuotaWeight", 2, 4),
    }
    assert (data["target"], data["targetDifferences"]) == ("kai", [])
    _, markdown, _ = plan("cfg", "--base", "main", "--target", "kai")
    assert "(for KAI Scheduler)" in markdown
    assert "KAI Scheduler expresses this config in full" in markdown


def test_plan_for_kueue_names_where_kueue_may_decide_otherwise(config_repo: Path) -> None:
    change(config_repo, "raise-quota")
    code, data = plan_json("cfg", "--base", "main", "--target", "kueue")
    assert code == 0
    changed = {(o["kind"], o["name"]) for o in data["objects"]["items"]}
    assert changed == {("ClusterQueue", "team-b")}
    codes = {(d["code"], d["object"]) for d in data["targetDifferences"]}
    assert codes == {("GS910", "Department/prod"), ("GS912", "NodeGroup/dgx")}
    [difference] = [d for d in data["targetDifferences"] if d["code"] == "GS910"]
    assert difference["location"].startswith("cfg/departments.yaml:")
    _, markdown, _ = plan("cfg", "--base", "main", "--target", "kueue")
    section = markdown.split("#### Where Kueue may decide otherwise", 1)[1]
    assert "warning GS910 Department/prod: Kueue's cohort guarantees" in section


def test_a_string_holding_yaml_nested_past_any_parser_is_compared_as_text(
    config_repo: Path,
) -> None:
    # a user's multi-line string holding YAML nested past what PyYAML takes (libyaml: an
    # error; its Python parts: a RecursionError) is compared as the text it is
    deep = "[" * 1200 + "]" * 1200

    def settings(value: str) -> str:
        files = base_config()
        spec(files, "workloads/team-a.yaml")["env"] = {"SETTINGS": f"a: {value}\nb: {deep}"}
        write(config_repo / "cfg", files)
        return f"a: {value}\nb: {deep}"

    before = settings("1")
    git(config_repo, "commit", "-q", "-am", "settings")
    after = settings("2")
    code, data = plan_json("cfg", "--base", "main")
    assert code == 0, data
    changed = {(o["kind"], o["name"]): o for o in data["objects"]["items"]}
    assert changed[("Job", "a-1")]["fields"] == [
        {"path": "spec.template.spec.containers.0.env.0.value", "before": before, "after": after}
    ]
