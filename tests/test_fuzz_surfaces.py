"""A fuzz target per input surface: the config folder, the ignore file, a Simulation file,
`plan --state` and the Git tree plan reads. Each drawn case runs the command in a process of
its own, and the harness (tests/fuzz_harness.py) asserts the bounds per case: it ends by
itself within MAX_SECONDS, under MAX_RSS_MIB of memory, with exit code 0, 1 or 2 and no
traceback. `make fuzz` runs FUZZ_EXAMPLES cases of each (the suite skips them: each case starts a
process); tests/test_fuzz_harness.py checks the harness itself in the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz_harness import assert_bounded
from tests.test_fuzz import REPOS, SCENARIO, SIMULATIONS, mutated

# a case is a process of its own (a second or two): the targets run under `make fuzz` only
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0"))
TARGET = settings(
    max_examples=max(FUZZ_EXAMPLES, 1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
pytestmark = pytest.mark.skipif(not FUZZ_EXAMPLES, reason="run by `make fuzz` (FUZZ_EXAMPLES)")

# whole files no dump writes, one per class of hostile input
HOSTILE_FILES = [
    "---\n" * 1_000_000,
    "a: 1\n---\n" * 400_000,
    "- a\n" * 1_000_000,
    "x: 0x" + "f" * 1_000_000 + "\n",
    "x: 1" + ":59" * 500_000 + "\n",
    "x: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "a: &a [" + ", ".join(["x"] * 50) + "]\n" + "b: [" + ", ".join(["*a"] * 50_000) + "]\n",
    "k: \x1b[31m\x07\n",
    'k: "' + "\\x1b" * 100_000 + '"\n',
    "x: 1" + ":59" * 500 + ".5\n",  # a base-60 float past the largest
    "[" + "1," * 1_900_000 + "]\n",
    "a: 1\n",  # a document of no kind (a Simulation file of another shape)
]
TEMPLATES = [
    "{{ 5 | round(-100000000) }}",
    "{{ (1).to_bytes(10**9, 'big') }}",
    '{{ "\\ud800" }}',
    "{{ 1 }}" * 60_000,
    "{% for i in range(10000) %}{% for j in range(10) %}{{ i }}{% endfor %}{% endfor %}",
    '{{ range(9999) | map("string") | join("x" * 99999) }}',
    '{{ ("{a}" * 33333).format(a="x" * 99999) }}',
    '{{ ("\\t" * 99999).expandtabs(99999) }}',
    "{{ {" + "1: 1, " * 20_000 + "} }}",
    "{{ 2.0 ** 10000 }}{{ (2 ** 4000) | filesizeformat }}",
]


def _write(root: Path, texts: dict[str, str | bytes]) -> None:
    for name, text in texts.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "replace"))


def _template_workload(source: str, project: str) -> str:
    workload = {
        "apiVersion": "gitops-sched.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "hostile"},
        "spec": {"project": project, "type": "train", "gpu": 1, "command": [source]},
    }
    return yaml.safe_dump(workload)


@st.composite
def config_folders(draw: st.DrawFn) -> dict[str, str]:
    """A mutated example repo, sometimes with one hostile file or template beside it."""
    name = draw(st.sampled_from(sorted(REPOS)))
    texts = draw(mutated(REPOS[name]))
    match draw(st.integers(0, 2)):
        case 1:
            texts["hostile.yaml"] = draw(st.sampled_from(HOSTILE_FILES))
        case 2:
            project = "team-a" if name == "netapp-dgx" else "vision"
            texts["hostile.yaml"] = _template_workload(draw(st.sampled_from(TEMPLATES)), project)
    return texts


@TARGET
@given(config_folders())
def test_fuzz_the_config_folder(texts: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _write(Path(tmp) / "repo", texts)
        outcome = assert_bounded("validate", "repo", cwd=Path(tmp))
        if outcome.code == 0:
            assert_bounded("render", "repo", "-o", "out", cwd=Path(tmp))


PATTERN_CHARS = "ab*?/![]-\\#: ^z."
CATASTROPHIC = [
    "*a" * 40 + "b",
    "**/a" * 30 + "/b",
    "[a-z]*" * 40 + "!",
    "[z-a]",
    "[[:nosuch:]]",
    "a" * 300,
]


@TARGET
@given(
    st.lists(
        st.text(st.sampled_from(PATTERN_CHARS), min_size=1, max_size=40)
        | st.sampled_from(CATASTROPHIC),
        max_size=30,
    ),
    st.integers(0, 2_000),
    st.lists(st.sampled_from(CATASTROPHIC), max_size=2),
    st.booleans(),
)
def test_fuzz_the_ignore_file(
    patterns: list[str], copies: int, excludes: list[str], no_file: bool
) -> None:
    """Patterns (repeated up to thousands of lines) against long and deep file names; or no
    ignore file, only `--exclude` patterns."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        texts: dict[str, str | bytes] = {
            name: yaml.safe_dump_all(docs) for name, docs in REPOS["oci-a100"].items()
        }
        if not no_file:
            texts[".gitops-schedignore"] = "\n".join(patterns * max(1, copies // 10)) + "\n"
        texts["a" * 200 + ".yaml"] = "a: 1\n"
        texts["/".join(["ab"] * 60) + "/x.yaml"] = "a: 1\n"
        _write(repo, texts)
        args = [arg for pattern in excludes for arg in ("--exclude", pattern)]
        assert_bounded("validate", "repo", *args, cwd=Path(tmp))


@TARGET
@given(st.data())
def test_fuzz_the_simulation_file(data: st.DataObject) -> None:
    repo, scenario = SIMULATIONS[data.draw(st.sampled_from(sorted(SIMULATIONS)))]
    events = data.draw(mutated({SCENARIO: scenario}))[SCENARIO]
    if data.draw(st.booleans()):
        events += data.draw(st.sampled_from(HOSTILE_FILES))
    with tempfile.TemporaryDirectory() as tmp:
        _write(Path(tmp) / "repo", {n: yaml.safe_dump_all(d) for n, d in repo.items()})
        _write(Path(tmp), {"events.yaml": events})
        assert_bounded(
            "simulate", "repo", "--events", "events.yaml", "--format", "json", cwd=Path(tmp)
        )


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _commit(root: Path, message: str) -> None:
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=f", "-c", "user.email=f@f", "commit", "-q", "-m", message)


def _git_repo(tmp: Path) -> Path:
    root = tmp / "git"
    _write(root / "cfg", {n: yaml.safe_dump_all(d) for n, d in REPOS["oci-a100"].items()})
    _git(root, "init", "-q", "-b", "main")
    _commit(root, "base")
    return root


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["running", "pending", "a100-0", "llama-8b-pretrain", "\ud800"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=30,
)
STATE_TEXTS = [
    '{"workloads": ' + "[" * 200_000 + "]" * 200_000 + "}",
    '{"workloads": [], "x": ' + "9" * 100_000 + "}",
    '{"workloads": [{"name": "a", "pods": NaN}]}',
    "\xff\xfe{",
    '{"workloads": [{"name": "\\u001b]0;title\\u0007\\u009b", "pods": 1}]}',
    '{"workloads": [' + ", ".join(['{"name": "w", "pods": 1}'] * 300_000) + "]}",
    '{"workloads": [' + ", ".join(["{}"] * 2_000_000) + "]}",
]


@st.composite
def states(draw: st.DrawFn) -> str | bytes:
    if draw(st.booleans()):
        return draw(st.sampled_from(STATE_TEXTS))
    workloads = draw(st.lists(JSON, max_size=5))
    state: dict[str, Any] = {
        "workloads": workloads,
        **draw(st.dictionaries(st.text(max_size=5), JSON, max_size=3)),
    }
    return json.dumps(state, allow_nan=True)


@TARGET
@given(states())
def test_fuzz_the_state(state: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = _git_repo(Path(tmp))
        _write(root, {"state.json": state})
        assert_bounded("plan", "cfg", "--base", "main", "--state", "state.json", cwd=root)


def _env_bomb() -> bytes:
    """A Workload whose env value is a YAML alias bomb: plan compares it as a string."""
    bomb = 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]\n'
    for level in "bcdefghi":
        bomb += f"{level}: &{level} [{', '.join(['*' + chr(ord(level) - 1)] * 10)}]\n"
    workload = yaml.safe_load(_template_workload("run", "llm-pretrain"))
    workload["spec"]["env"] = {"X": bomb}
    return yaml.safe_dump(workload).encode()


ENV_BOMB = _env_bomb()
NAME_BYTES = st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\0" not in b)


@TARGET
@given(
    st.lists(
        st.tuples(
            NAME_BYTES,
            st.sampled_from([b"a: 1\n", b"", b"\xff", b"---\n" * 50_000, ENV_BOMB]),
        ),
        max_size=4,
    ),
    st.sampled_from([b"", b"[z-a]\n", b"*.yaml\n!keep.yaml\n", b"**/" * 80 + b"x\n"]),
)
def test_fuzz_the_git_tree(files: list[tuple[bytes, bytes]], ignore: bytes) -> None:
    """Files of any name (not UTF-8, control characters) and content at the head ref."""
    with tempfile.TemporaryDirectory() as tmp:
        root = _git_repo(Path(tmp))
        folder = os.path.join(os.fsencode(root), b"cfg")
        for name, content in files:
            with open(os.path.join(folder, name + b".yaml"), "wb") as f:
                f.write(content)
        with open(os.path.join(folder, b".gitops-schedignore"), "wb") as f:
            f.write(ignore)
        _commit(root, "head")
        assert_bounded("plan", "cfg", "--base", "main~1", "--head", "main", cwd=root)
