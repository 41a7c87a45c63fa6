"""Fuzzing the CLI: mutated example repos and Simulation files through validate, render,
simulate, test and explain, in process. Whatever the input, each command exits 0, 1 or 2,
prints no traceback, and finishes within a bounded time.

Mutations: a value replaced (wrong types, huge or non-finite numbers, strings with a trailing
newline, deep nesting, hostile Jinja2), a key or list item deleted, a kind renamed, a
document dropped or duplicated, a file cut short or given YAML no dump writes (tags,
anchors, merge keys, tabs). `make fuzz` runs many more examples
(the `thorough` hypothesis profile).
"""

from __future__ import annotations

import copy
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gitops_sched.cli import main
from tests.conftest import examples

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "clusters"
SCENARIOS = Path(__file__).resolve().parent / "scenarios"
SCENARIO = "scenarios/idle-quota-is-lent.yaml"
EXPLAINED = ("bert-finetune", "llama-8b-pretrain")  # a workload of each example repo
SECONDS_PER_EXAMPLE = 60  # generous: a loaded CI machine; a hang is what this catches

Files = dict[str, list[Any]]  # relative path -> the file's documents


def _read(root: Path) -> Files:
    return {
        path.relative_to(root).as_posix(): list(yaml.safe_load_all(path.read_text()))
        for path in sorted(root.rglob("*.yaml"))
    }


REPOS: dict[str, Files] = {name: _read(EXAMPLES / name) for name in ("netapp-dgx", "oci-a100")}


def _scenarios() -> dict[str, tuple[Files, list[Any]]]:
    """Simulation files with the repo each runs against: the example's, and the scenario
    suite's (explicit nodes, MIG, running gangs, time limits), whose first line names it."""
    found = {"netapp-dgx": (REPOS["netapp-dgx"], REPOS["netapp-dgx"][SCENARIO])}
    for path in sorted(SCENARIOS.glob("*.yaml")):
        repo = path.read_text().splitlines()[0].removeprefix("# repo: ")
        found[path.stem] = (_read(SCENARIOS / repo), list(yaml.safe_load_all(path.read_text())))
    return found


SIMULATIONS = _scenarios()


def _nested(depth: int) -> Any:
    value: Any = "x"
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


HOSTILE = [
    {},
    [],
    None,
    True,
    "",
    "x",
    "5Gi\n",
    "team-a\n",
    "1h\n",
    "60.0",
    -1,
    0,
    2.0,
    1.5,
    10**400,
    -(10**400),
    float("inf"),
    float("-inf"),
    float("nan"),
    1e308,
    1_000_000_000,
    "{{ project.nmae }}",
    "{{ 'a' * 10**9 }}",
    "{{ 2 ** 99999999 }}",
    "{{ " + "(" * 300 + "1" + ")" * 300 + " }}",
    "{% for i in range(10**9) %}x{% endfor %}",
    "{{ x }",
    _nested(80),
    "Simulation",
    "Workload",
]
# YAML that no dump writes: tags, anchors, merge keys, tabs, flow nesting, stray documents
RAW_YAML = [
    "x: !!int abc\n",
    "a: &a [*a]\n",
    "<<: {a: 1}\n",
    "\tkey: value\n",
    "---\n",
    "--- ~\n",
    "- " + "[" * 100 + "]" * 100 + "\n",
    "k: &x {a: 1}\nj: *x\n",
    "? [complex]\n: key\n",
    "dup: 1\ndup: 2\n",
    "s: !!binary aGVsbG8=\n",
    "t: 2024-01-01\n",
    "n: 0x_\n",
    "%YAML 1.1\n",
]
KINDS = ["Cluster", "NodeGroup", "Department", "Project", "Template", "Workload", "Simulation"]
# values a config may well hold, so that some mutated repos stay valid and reach every command
PLAUSIBLE = [
    *("team-a", "team-d", "dgx1", "a100", "notebook", "ai-research", "research", "resnet50-ddp"),
    *("train", "interactive", "inference", "allowed", "denied", "static", "dynamic"),
    *("1Gi", "500m", "10Gi", "5m", "1h", "0s", "1g.10gb", "3g.40gb", "A100-SXM4-80GB"),
]
# a drawn value is copied before use: mutations edit it in place, and `HOSTILE` is shared
values = st.one_of(
    st.sampled_from(HOSTILE),
    st.sampled_from(PLAUSIBLE),
    st.integers(0, 70),
    st.integers(),
    st.floats(0, 20).map(lambda x: round(x, 1)),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(KINDS),
).map(copy.deepcopy)


@st.composite
def paths(draw: st.DrawFn, document: Any) -> list[Any]:
    """A path into `document`, from its root down to some value."""
    path: list[Any] = []
    value = document
    while isinstance(value, dict | list) and value and draw(st.integers(0, 3)) > 0:
        key = draw(st.sampled_from(list(value) if isinstance(value, dict) else range(len(value))))
        path.append(key)
        value = value[key]
    return path


def _parent(document: Any, path: list[Any]) -> Any:
    for key in path[:-1]:
        document = document[key]
    return document


@st.composite
def mutated(draw: st.DrawFn, files: Files) -> dict[str, str]:
    """The files' text after one to three mutations."""
    files = copy.deepcopy(files)
    cut: dict[str, float] = {}
    inserted: dict[str, tuple[float, str]] = {}
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(files)))
        documents = files[name]
        if not documents:
            continue
        index = draw(st.integers(0, len(documents) - 1))
        kinds = ["set", "set", "delete", "kind", "drop", "copy", "cut", "insert"]
        match draw(st.sampled_from(kinds)):
            case "set":
                path = draw(paths(documents[index]))
                if path:
                    _parent(documents[index], path)[path[-1]] = draw(values)
                else:
                    documents[index] = draw(values)
            case "delete":
                path = draw(paths(documents[index]))
                if path:
                    del _parent(documents[index], path)[path[-1]]
            case "kind" if isinstance(documents[index], dict):
                documents[index]["kind"] = draw(st.sampled_from([*KINDS, "Queue", {}]))
            case "drop":
                del documents[index]
            case "copy":
                files[draw(st.sampled_from(sorted(files)))].append(copy.deepcopy(documents[index]))
            case "cut":
                cut[name] = draw(st.floats(0, 1))
            case "insert":
                inserted[name] = (draw(st.floats(0, 1)), draw(st.sampled_from(RAW_YAML)))
    texts = {name: yaml.safe_dump_all(docs, sort_keys=False) for name, docs in files.items()}
    for name, fraction in cut.items():
        texts[name] = texts[name][: int(len(texts[name]) * fraction)]
    for name, (fraction, snippet) in inserted.items():
        lines = texts[name].splitlines(keepends=True)
        at = int(len(lines) * fraction)
        texts[name] = "".join([*lines[:at], snippet, *lines[at:]])
    return texts


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Fail (rather than hang the suite) when an example runs past `seconds`."""

    def stop(signum: int, frame: Any) -> None:
        raise TimeoutError(f"an example ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run(*args: str) -> int:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args,
        result.exception,
        result.output[-2000:],
    )
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output, (args, result.output[-2000:])
    return result.exit_code


def write(root: Path, texts: dict[str, str]) -> None:
    for name, text in texts.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def exercise(repo: dict[str, str], events: str | None) -> None:
    """Each command on the repo (and the events file): validate first; the others only when
    it passes, since on an invalid repo they stop at the same check."""
    with tempfile.TemporaryDirectory() as tmp, time_limit(SECONDS_PER_EXAMPLE):
        root = Path(tmp) / "repo"
        write(root, repo)
        valid = run("validate", str(root)) == 0
        event("the repo is valid" if valid else "the repo is invalid")
        if not valid:
            return
        run("render", str(root), "-o", "-")
        run("simulate", str(root), "--format", "json")
        run("test", str(root), "--junit", f"{tmp}/junit.xml")
        for name in EXPLAINED:  # exit 2 where the repo has no such workload
            run("explain", str(root), name)
        if events is not None:
            (Path(tmp) / "events.yaml").write_text(events)
            run("simulate", str(root), "--events", f"{tmp}/events.yaml", "--format", "json")
            run("explain", str(root), EXPLAINED[0], "--events", f"{tmp}/events.yaml")


FUZZ = settings(
    max_examples=examples(75),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(st.sampled_from(sorted(REPOS)).flatmap(lambda name: mutated(REPOS[name])))
def test_mutated_repos_never_crash(repo: dict[str, str]) -> None:
    exercise(repo, None)


@FUZZ
@given(st.data())
def test_mutated_simulation_files_never_crash(data: st.DataObject) -> None:
    """A mutated scenario both in the repo (validate, test) and as `simulate --events`."""
    repo, scenario = SIMULATIONS[data.draw(st.sampled_from(sorted(SIMULATIONS)))]
    events = data.draw(mutated({SCENARIO: scenario}))
    texts = {name: yaml.safe_dump_all(docs) for name, docs in repo.items()}
    exercise({**texts, **events}, events[SCENARIO])


def _unmutated() -> dict[str, Files]:
    inputs = {name: {**repo, SCENARIO: scenario} for name, (repo, scenario) in SIMULATIONS.items()}
    return {**REPOS, **inputs}


@pytest.mark.parametrize(("name", "files"), sorted(_unmutated().items()))
def test_the_unmutated_inputs_pass_every_command(name: str, files: Files) -> None:
    """The baseline the mutations start from: valid, so the fuzz reaches every command."""
    texts = {path: yaml.safe_dump_all(docs) for path, docs in files.items()}
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), texts)
        assert run("validate", tmp) == 0
        assert run("test", tmp) == 0
