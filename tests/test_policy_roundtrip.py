"""The policy ConfigMap read back: the scheduler's engine Policy is the one `simulate` uses."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.bridge.build import policy_from_repo
from gitops_sched.bridge.policy import policy_from_configmap, read_policy_document
from gitops_sched.compiler.policy import policy_document, render_policy
from gitops_sched.compiler.yamltext import dump_object
from gitops_sched.config.diagnostics import Diagnostics
from gitops_sched.config.loader import load_repo
from gitops_sched.config.model import Repo, build_repo
from gitops_sched.config.yamlbuild import load_text
from gitops_sched.contract.policy import POLICY_KEY, PolicyFormatError
from gitops_sched.engine.types import Policy
from testkit.config_builders import doc
from tests.conftest import examples

EXAMPLES = Path(__file__).parent.parent / "examples" / "clusters"


def example(name: str) -> Repo:
    diagnostics = Diagnostics()
    repo = build_repo(load_repo(EXAMPLES / name, diagnostics))
    assert not diagnostics.has_errors
    return repo


def repo_of(*documents: dict[str, Any]) -> Repo:
    diagnostics = Diagnostics()
    loaded = load_text(yaml.safe_dump_all(documents, sort_keys=False), "repo.yaml", diagnostics)
    assert not diagnostics.items, [d.text() for d in diagnostics.items]
    return build_repo(loaded)


def read_back(repo: Repo):
    return read_policy_document(yaml.safe_load(dump_object(policy_document(repo))))


@pytest.mark.parametrize("name", ["netapp-dgx", "oci-a100"])
def test_every_example_reads_back_to_the_policy_simulate_uses(name: str) -> None:
    repo = example(name)
    read = read_back(repo)
    assert read.policy == policy_from_repo(repo)
    assert read.scheduler_name == repo.cluster.scheduler_name
    assert read.system_namespace == repo.cluster.system_namespace
    assert read.cycle_period_s == repo.cluster.policy.cycle_period_s
    assert read.namespaces == {
        repo.cluster.project_namespace(p.name): p.name for p in repo.projects
    }
    for project in repo.projects:
        for wtype in ("train", "interactive", "inference"):
            assert read.projects[project.name].allowed_node_groups(
                wtype
            ) == project.allowed_node_groups(wtype)


def test_node_groups_read_back_with_their_selectors_gpus_and_mig_layouts() -> None:
    repo = example("oci-a100")
    read = {g.name: g for g in read_back(repo).node_groups}
    assert list(read) == sorted(read)
    for group in repo.node_groups:
        back = read[group.name]
        assert (back.role, back.node_selector) == (group.role, group.node_selector)
        assert (back.gpus_per_node, back.gpu_model, back.topology_label) == (
            group.gpus_per_node,
            group.gpu_model,
            group.topology_label,
        )
        assert back.gpu_memory_bytes == group.gpu_memory
        assert (back.mig_enabled, back.mig_static) == (group.mig_enabled, group.mig_static)
        for gpu in range(group.gpus_per_node):
            assert back.mig_layout(gpu) == (group.mig_layout(gpu) if group.mig_static else None)
    assert read["a100-serve"].mig_layout(7) != read["a100-serve"].mig_layout(0)  # byGpu kept


def test_the_rendered_configmap_is_what_the_scheduler_reads() -> None:
    repo = example("netapp-dgx")
    _, config_map = render_policy(repo)
    assert policy_from_configmap(config_map).policy == policy_from_repo(repo)


def test_queues_are_in_name_order_whatever_the_files_order() -> None:
    documents = [
        doc("Cluster", "lab"),
        doc("Department", "zeta", quota={"gpu": 2}),
        doc("Department", "alpha", quota={"gpu": 2}),
        doc("Project", "b", department="zeta", quota={"gpu": 1}),
        doc("Project", "a", department="alpha", quota={"gpu": 1}),
    ]
    policy = policy_from_repo(repo_of(*documents))
    assert [d.name for d in policy.departments] == ["alpha", "zeta"]
    assert [p.name for p in policy.projects] == ["a", "b"]
    # the files' order gives each queue only its age (the older first: zeta, b)
    assert [(d.name, d.age) for d in policy.departments] == [("alpha", 1), ("zeta", 0)]
    assert [(p.name, p.age) for p in policy.projects] == [("a", 1), ("b", 0)]
    flipped = policy_from_repo(repo_of(*reversed(documents)))
    assert [(p.name, p.age) for p in flipped.projects] == [("a", 0), ("b", 1)]
    assert _ageless(policy) == _ageless(flipped)


def _ageless(policy: Policy) -> Policy:
    return replace(
        policy,
        departments=tuple(replace(d, age=0) for d in policy.departments),
        projects=tuple(replace(p, age=0) for p in policy.projects),
    )


GPUS = st.one_of(st.integers(0, 64), st.sampled_from([0.5, 1.5, 2.25, 7.75]))
DURATIONS = st.one_of(st.none(), st.sampled_from(["90s", "30m", "8h", "2d"]))


@st.composite
def repos(draw: st.DrawFn) -> Repo:
    """Small repos that vary every value the engine's queues are made of."""
    policy = {
        "defaultOverQuotaWeight": draw(st.sampled_from(["quota", "equal"])),
        "reclaimThreshold": draw(st.sampled_from([0, 0.5, 2])),
        "consolidation": draw(st.booleans()),
        "staleGangGrace": draw(st.sampled_from(["0s", "45s", "5m"])),
        "cyclePeriod": draw(st.sampled_from(["1s", "10s"])),
    }
    if min_runtime := draw(min_runtimes()):
        policy["minRuntime"] = min_runtime
    if fairness := draw(st.one_of(st.none(), fairnesses())):
        policy["fairness"] = fairness
    documents = [doc("Cluster", "lab", namespacePrefix="ns-", policy=policy)]
    departments = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=3, unique=True))
    for name in departments:
        fields = queue_fields(draw)
        if min_runtime := draw(min_runtimes()):
            fields["minRuntime"] = min_runtime
        documents.append(doc("Department", f"dept-{name}", **fields))
    names = draw(st.lists(st.sampled_from("pqrstu"), min_size=1, max_size=5, unique=True))
    for name in names:
        extra: dict[str, Any] = {
            "department": f"dept-{draw(st.sampled_from(departments))}",
            "overQuota": draw(st.sampled_from(["allowed", "denied"])),
            "overQuotaRank": draw(st.integers(0, 3)),
        }
        for key in ("interactiveTimeLimit", "idleGpuTimeout"):
            if (value := draw(DURATIONS)) is not None:
                extra[key] = value
        if min_runtime := draw(min_runtimes()):
            extra["minRuntime"] = min_runtime
        if groups := draw(st.lists(st.sampled_from(["a100", "h100"]), max_size=2, unique=True)):
            extra["nodeGroupQuotas"] = {g: {"gpu": draw(GPUS)} for g in groups}
        documents.append(doc("Project", f"proj-{name}", **queue_fields(draw), **extra))
    return repo_of(*draw(st.permutations(documents)))


def min_runtimes() -> st.SearchStrategy[dict[str, str]]:
    """A `minRuntime:` setting nothing, one or both of its durations."""
    durations = st.sampled_from(["0s", "90s", "30m"])
    return st.fixed_dictionaries({}, optional={"preempt": durations, "reclaim": durations})


def fairnesses() -> st.SearchStrategy[dict[str, Any]]:
    """A `fairness:` setting any of its values, or none (its defaults)."""
    return st.fixed_dictionaries(
        {},
        optional={
            "historyWeight": st.sampled_from([0, 0.5, 1, 4]),
            "window": st.sampled_from(["1h", "8h", "7d", 600]),
            "halfLife": st.sampled_from(["0s", "30m", "2h"]),
        },
    )


def queue_fields(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {"quota": {"gpu": draw(GPUS)}}
    if draw(st.booleans()):
        fields["overQuotaWeight"] = draw(st.sampled_from([0, 1, 2.5, 0.1]))
    if draw(st.booleans()):
        fields["limit"] = {"gpu": draw(GPUS)}
    return fields


@settings(max_examples=examples(40))
@given(repos())
def test_generated_repos_read_back_to_the_policy_simulate_uses(repo: Repo) -> None:
    assert read_back(repo).policy == policy_from_repo(repo)


def document() -> dict[str, Any]:
    return yaml.safe_load(dump_object(policy_document(example("oci-a100"))))


def broken(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    return changed_at(document(), path, lambda _: value)


def changed_at(
    data: dict[str, Any], path: tuple[str | int, ...], change: Callable[[Any], Any]
) -> dict[str, Any]:
    """`data` (left as it is) with the value at `path` replaced by `change` of it (of None
    where a mapping has no such key yet: the value is added)."""
    data = copy.deepcopy(data)
    *parents, last = path
    at: Any = data
    for key in parents:
        at = at[key]
    at[last] = change(at.get(last) if isinstance(at, dict) else at[last])
    return data


def test_a_policy_written_with_node_labels_still_reads() -> None:
    """Policies rendered before nodeLabel was dropped carry one per group: ignored."""
    old = broken(("nodeGroups", 0, "nodeLabel"), {"key": "gitops-sched.io/node-group"})
    assert read_policy_document(old) == read_policy_document(document())


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            ("departments", 1, "projects", 0, "quota", "gpu"),
            "four",
            "departments[1].projects[0].quota.gpu: expected a number",
        ),
        (("departments", 0, "quota", "gpu"), True, "departments[0].quota.gpu: expected a number"),
        (("departments", 0, "projects"), {}, "departments[0].projects: expected a list"),
        (("consolidation",), "yes", "consolidation: expected true or false"),
        (("schedulerName",), None, "schedulerName: missing"),
        (
            ("nodeGroups", 2, "mig", "byGpu"),
            [{"gpus": ["6"]}],
            "nodeGroups[2].mig.byGpu[0].gpus[0]: expected an integer",
        ),
        (
            ("nodeGroups", 0, "nodeSelector"),
            {"pool": 1},
            "nodeGroups[0].nodeSelector.pool: expected a string",
        ),
        (("departments", 0), "research", "departments[0]: expected a mapping"),
    ],
)
def test_a_malformed_document_says_where(
    path: tuple[str | int, ...], value: Any, message: str
) -> None:
    with pytest.raises(PolicyFormatError) as error:
        read_policy_document(broken(path, value))
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("config_map", "message"),
    [
        ({"data": {}}, f"data.{POLICY_KEY}: missing"),
        ({"data": {POLICY_KEY: "a: [b"}}, f"data.{POLICY_KEY}: not YAML"),
        ({"data": {POLICY_KEY: "a: " + "[" * 1200}}, f"data.{POLICY_KEY}: not YAML"),
        ({"data": {POLICY_KEY: "a: " + "[" * 900 + "]" * 900}}, f"data.{POLICY_KEY}: not YAML"),
        ({"data": {POLICY_KEY: "- 1"}}, "policy: expected a mapping"),
    ],
)
def test_a_configmap_without_a_readable_policy_is_refused(
    config_map: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        policy_from_configmap(config_map)


def test_the_configmap_carries_each_projects_minimum_runtime_resolved() -> None:
    repo = repo_of(
        doc("Cluster", "lab", policy={"minRuntime": {"preempt": "5m", "reclaim": "1h"}}),
        doc("Department", "d", quota={"gpu": 4}, minRuntime={"reclaim": "30m"}),
        doc("Project", "own", department="d", quota={"gpu": 1}, minRuntime={"preempt": "2m"}),
        doc("Project", "inherits", department="d", quota={"gpu": 1}),
    )
    projects = policy_document(repo)["departments"][0]["projects"]
    assert [
        (p["name"], p["preemptMinRuntimeSeconds"], p["reclaimMinRuntimeSeconds"]) for p in projects
    ] == [("inherits", 300, 1800), ("own", 120, 1800)]
    queues = {q.name: q for q in read_back(repo).policy.projects}
    assert (queues["own"].preempt_min_runtime_s, queues["own"].reclaim_min_runtime_s) == (120, 1800)


def _leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    else:
        yield path


def _other(value: Any) -> Any:
    """A different value of the same type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    return f"{value}-other"


@pytest.mark.parametrize("name", ["netapp-dgx", "oci-a100"])
def test_every_field_the_document_carries_is_read(name: str) -> None:
    """The writer writes nothing the scheduler ignores: changing any one value of the
    document changes what the scheduler reads."""
    data = yaml.safe_load(dump_object(policy_document(example(name))))
    before = read_policy_document(data)
    unread = []
    for path in _leaves(data):
        if read_policy_document(changed_at(data, path, _other)) == before:
            unread.append(".".join(map(str, path)))
    assert unread == []


def test_the_configmap_carries_each_projects_quota_per_node_group() -> None:
    """The scheduler judges a project's quota per node group (engine.pools) as simulate
    does, so the document carries it; a project with one quota carries none."""
    repo = repo_of(
        doc("Cluster", "lab"),
        doc("Department", "d", quota={"gpu": 12}),
        doc(
            "Project",
            "pooled",
            department="d",
            nodeGroupQuotas={"h100": {"gpu": 8}, "a100": {"gpu": 4}},
        ),
        doc("Project", "single", department="d", quota={"gpu": 2}),
    )
    projects = {p["name"]: p for p in policy_document(repo)["departments"][0]["projects"]}
    assert projects["pooled"]["nodeGroupQuotas"] == {"a100": {"gpu": 4}, "h100": {"gpu": 8}}
    assert "nodeGroupQuotas" not in projects["single"]
    queues = {q.name: q for q in read_back(repo).policy.projects}
    assert queues["pooled"].pool_quotas == (("a100", 4.0), ("h100", 8.0))
    assert queues["pooled"].deserved == 12
    assert queues["single"].pool_quotas == ()


def test_every_fairness_field_the_document_carries_is_read() -> None:
    """Fairness over time reaches the scheduler: each of its values, changed in the
    document, changes the engine's policy; without it the document carries none."""
    fairness = {"historyWeight": 2, "window": "8h", "halfLife": "1h"}
    repo = repo_of(
        doc("Cluster", "lab", policy={"fairness": fairness}),
        doc("Department", "d", quota={"gpu": 4}),
        doc("Project", "a", department="d", quota={"gpu": 1}),
    )
    data = yaml.safe_load(dump_object(policy_document(repo)))
    assert data["fairness"] == {"historyWeight": 2, "windowSeconds": 28800, "halfLifeSeconds": 3600}
    before = read_policy_document(data)
    assert before.policy == policy_from_repo(repo)
    for key in data["fairness"]:
        changed = read_policy_document(changed_at(data, ("fairness", key), _other))
        assert changed.policy.fairness != before.policy.fairness, key
    plain = repo_of(doc("Cluster", "lab"), doc("Department", "d", quota={"gpu": 4}))
    assert "fairness" not in policy_document(plain)
    assert read_back(plain).policy.fairness is None
