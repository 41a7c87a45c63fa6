"""Hostile input through every command, by class: a clear message at the input's line and a
non-zero exit, never a traceback; names that would land in the system namespace or in
Kubernetes' own refused. What each class costs is the fuzz harness's to bound
(tests/fuzz): these tests check what a user sees."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import assume, given
from hypothesis import strategies as st

from gitops_sched.cli import main
from gitops_sched.config import loader, templating, yamlbuild
from gitops_sched.config.diagnostics import MAX_MESSAGE_CHARS, printable
from gitops_sched.config.ignore import MAX_PATTERN_CHARS, MAX_PATTERNS, IgnoreRules
from gitops_sched.plan import gitsource

EXAMPLE = Path(__file__).parent.parent / "examples" / "clusters" / "netapp-dgx"
WORKLOADS = "workloads/team-b.yaml"  # b-train-1 first: 1 GPU, team-b
PROJECT = "projects/team-a.yaml"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        result.exception,
        result.output[-2000:],
    )
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root)
    return root


def edit(root: Path, file: str, change: Callable[[list[Any]], None]) -> None:
    """Change the file's documents in place (comments are lost)."""
    path = root / file
    documents = list(yaml.safe_load_all(path.read_text()))
    change(documents)
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))


def replace_text(root: Path, file: str, old: str, new: str) -> None:
    path = root / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def codes_of(output: str) -> list[str]:
    return [word for line in output.splitlines() for word in line.split() if word[:2] == "GS"]


# --- a project's namespace is its own -----------------------------------------------------


def _namespace_repo(root: Path, prefix: str, name: str, system: str = "gitops-sched-system"):
    def cluster(documents: list[Any]) -> None:
        documents[0]["spec"]["namespacePrefix"] = prefix
        documents[0]["spec"]["systemNamespace"] = system

    def project(documents: list[Any]) -> None:
        documents[0]["metadata"]["name"] = name

    edit(root, "cluster.yaml", cluster)
    edit(root, PROJECT, project)
    shutil.rmtree(root / "workloads")  # they name team-a; the project's name is what counts
    shutil.rmtree(root / "scenarios")


@pytest.mark.parametrize(
    ("prefix", "name", "system", "taken"),
    [
        ("gitops-sched-", "system", "gitops-sched-system", "system namespace"),
        ("", "gitops-sched-system", "gitops-sched-system", "system namespace"),
        ("team-", "ops", "team-ops", "system namespace"),
        ("gitops-", "sched-system", "gitops-sched-system", "system namespace"),
        ("", "kube-system", "gitops-sched-system", "reserved by Kubernetes"),
        ("", "kube-public", "gitops-sched-system", "reserved by Kubernetes"),
        ("", "kube-node-lease", "gitops-sched-system", "reserved by Kubernetes"),
        ("kube-", "team-a", "gitops-sched-system", "reserved by Kubernetes"),
        ("ku", "be-x", "gitops-sched-system", "reserved by Kubernetes"),
        ("", "default", "gitops-sched-system", "reserved by Kubernetes"),
        ("def", "ault", "gitops-sched-system", "reserved by Kubernetes"),
        ("", "crds", "gitops-sched-system", "writes the CRDs to"),
        ("cr", "ds", "gitops-sched-system", "writes the CRDs to"),
        ("", "kueue-system", "gitops-sched-system", "where Kueue runs"),
        ("kueue-", "system", "gitops-sched-system", "where Kueue runs"),
        ("kai-", "scheduler", "gitops-sched-system", "where KAI Scheduler runs"),
    ],
)
def test_a_project_namespace_that_is_taken_is_an_error_at_the_project(
    repo: Path, prefix: str, name: str, system: str, taken: str
) -> None:
    _namespace_repo(repo, prefix, name, system)
    code, output = run("validate", str(repo))
    assert code == 1
    line = f"{repo}/{PROJECT}:4:9: error GS310 Project/{name}: the project's namespace"
    taken_lines = [x for x in output.splitlines() if "GS310" in x]
    assert any(x.startswith(line) for x in taken_lines)
    assert all(taken in x and "error GS310 Project/" in x for x in taken_lines)
    assert run("render", str(repo), "-o", "-")[0] == 1  # and nothing is rendered


NAMES = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
PREFIXES = st.sampled_from(
    ["", "kube-", "gitops-", "gitops-sched-", "project-", "de", "k", "cr", "kueue-", "kai-"]
)


@given(prefix=PREFIXES, name=NAMES)
def test_gs310_exactly_when_the_namespace_is_taken(prefix: str, name: str) -> None:
    """The rule, for any prefix and name: the system namespace, `default` and `kube-*`."""
    from gitops_sched.config.checks.names import check_derived_names
    from gitops_sched.config.document import Document
    from gitops_sched.config.model import build_repo
    from testkit.config_builders import doc

    def document(data: dict[str, Any]) -> Document:
        return Document("x.yaml", 0, data, {(): (1, 1)})

    cluster = doc("Cluster", "lab", namespacePrefix=prefix)
    project = doc("Project", name, department="d", quota={"gpu": 1})
    found = list(check_derived_names(build_repo([document(cluster), document(project)])))
    namespace = prefix + name
    taken = namespace in (
        "gitops-sched-system",
        "default",
        "crds",
        "kueue-system",
        "kai-scheduler",
    ) or namespace.startswith("kube-")
    assert [d.code.id for d in found if d.code and d.code.id == "GS310"] == (
        ["GS310"] if taken else []
    )


# --- numbers at the edges -----------------------------------------------------------------

HUGE_INTEGERS = [
    "0x" + "f" * 5000,  # hexadecimal: parsed past Python's 4,300-digit limit
    "-0x" + "f" * 5000,
    "+0x" + "9" * 5000,
    "0" + "7" * 6000,  # YAML 1.1 octal
    "0b" + "1" * 20000,
    "1" + ":59" * 3000,  # YAML 1.1 base 60
    "0x" + "f_" * 3000 + "f",
    "!!int 0x" + "a" * 4500,
]


# base-60 floats past the largest float (each `:` multiplies by 60)
HUGE_FLOATS = ["1" + ":59" * 200 + ".5", "!!float 1" + ":59" * 200, "-1" + ":0" * 3000 + ".0"]


@pytest.mark.parametrize(
    ("value", "tag"),
    [*((v, "int") for v in HUGE_INTEGERS), *((v, "float") for v in HUGE_FLOATS)],
    ids=lambda v: v[:8],
)
def test_a_number_too_long_to_print_is_an_error_at_its_value(
    repo: Path, value: str, tag: str
) -> None:
    replace_text(repo, PROJECT, "    gpu: 4\n", f"    gpu: {value}\n")
    code, output = run("validate", str(repo))
    assert code == 1
    problem = next(x for x in output.splitlines() if "GS111" in x)
    assert problem.startswith(f"{repo}/{PROJECT}:9:10: error GS111:")
    assert f"is not a valid tag:yaml.org,2002:{tag}" in problem
    assert len(problem) < MAX_MESSAGE_CHARS + 200  # the value's start, not all of it


@pytest.mark.parametrize(
    "value", ["0x" + "f" * 998, "1" + ":59" * 333, "9" * 1000, "0b" + "1" * 998]
)
def test_an_integer_within_the_limit_is_a_range_error_quoting_its_start(
    repo: Path, value: str
) -> None:
    replace_text(repo, PROJECT, "    gpu: 4\n", f"    gpu: {value}\n")
    code, output = run("validate", str(repo))
    assert code == 1
    problem = next(x for x in output.splitlines() if f"{PROJECT}:9:10" in x)
    assert "error GS206 Project/team-a: spec.quota.gpu: " in problem
    assert "is greater than the maximum" in problem or "more characters" in problem


@pytest.mark.parametrize("fraction", ["4.9e-324", "5.0e-324", "1.0e-310", "2.5e-320", "1.5e-315"])
def test_a_fraction_at_the_float_edge_runs_through_every_command(repo: Path, fraction: str) -> None:
    replace_text(repo, WORKLOADS, "  gpu: 1\n", f"  gpu: {fraction}\n")
    assert run("validate", str(repo))[0] == 0  # a fraction in (0, 1): valid
    assert run("simulate", str(repo), "--format", "json")[0] == 0
    assert run("explain", str(repo), "b-train-1")[0] == 0
    assert run("test", str(repo))[0] in (0, 1)  # the scenario's numbers may change


@pytest.mark.parametrize("memory", ["0", "0Mi", "0Gi"])
def test_a_gpu_memory_of_zero_runs_through_every_command(repo: Path, memory: str) -> None:
    replace_text(repo, WORKLOADS, "  gpu: 1\n", f"  gpuMemory: {memory}\n")
    assert run("validate", str(repo))[0] == 0  # no memory asked: fits on any GPU
    assert run("simulate", str(repo), "--format", "json")[0] == 0
    assert run("explain", str(repo), "b-train-1")[0] == 0


@given(st.floats(min_value=0, max_value=1, exclude_min=True, exclude_max=True))
def test_the_fit_check_takes_any_fraction(fraction: float) -> None:
    from gitops_sched.engine.fit import never_fits
    from tests.engine_builders import job, nodes

    gang = job("j", "p", gpu=fraction, pods=3, node_groups=("g",))
    fits = never_fits(gang, nodes("g", 1, gpus=1))
    assert fits is None if fraction * 3 <= 1 + 1e-9 else fits is not None


# --- the ignore file and --exclude ---------------------------------------------------------

BAD_PATTERNS = [
    ("[z-a].yaml", "bad character range z-a"),
    ("x[9-0]", "bad character range 9-0"),
    ("[b-a]/", "bad character range b-a"),
    ("!ci/[Z-A]*", "bad character range Z-A"),
    ("[unclosed", "'[' without its ']'"),
    ("a/[!x", "'[' without its ']'"),
    ("[[:nosuch:]]", "unknown character class"),
    ("trailing\\", "lone backslash"),
    ("x" * (MAX_PATTERN_CHARS + 1), f"longer than {MAX_PATTERN_CHARS} characters"),
]


@pytest.mark.parametrize(("pattern", "why"), BAD_PATTERNS, ids=lambda v: str(v)[:12])
def test_a_malformed_ignore_pattern_is_gs103(repo: Path, pattern: str, why: str) -> None:
    (repo / ".gitops-schedignore").write_text(f"ci/\n{pattern}\n")
    code, output = run("validate", str(repo))
    assert code == 1
    # at the pattern's own line
    assert output.startswith(f"{repo}/.gitops-schedignore:2:1: error GS103: bad pattern: ")
    assert why in output


def test_a_newline_in_a_file_name_cannot_forge_a_diagnostic_line(repo: Path) -> None:
    (repo / "x\nrepo.yaml:1:1: warning GS113: forged.yaml").write_text("kind: Nope\n")
    code, output = run("validate", str(repo))
    assert code == 1
    lines = output.splitlines()
    assert not any(line.startswith("repo.yaml:1:1: warning GS113: forged") for line in lines)
    assert any("x\\nrepo.yaml:1:1: warning GS113: forged.yaml:1:1: error" in line for line in lines)


def test_more_excludes_than_the_bound_is_a_usage_error(repo: Path) -> None:
    excludes = [arg for i in range(MAX_PATTERNS + 1) for arg in ("--exclude", f"a{i}")]
    code, output = run("validate", str(repo), *excludes)
    assert code == 2  # not a GS103 at an ignore file the folder may not have
    assert f"Invalid value for '--exclude': more than {MAX_PATTERNS} patterns" in output


@pytest.mark.parametrize("lines", [MAX_PATTERNS + 1, 100_000, 400_000])
def test_an_ignore_file_past_the_pattern_limit_is_gs103(repo: Path, lines: int) -> None:
    (repo / ".gitops-schedignore").write_text("".join(f"p{i}\n" for i in range(lines)))
    code, output = run("validate", str(repo))
    assert code == 1
    assert f"GS103: bad pattern: more than {MAX_PATTERNS} patterns" in output


def test_comments_and_blank_lines_do_not_count_against_the_limit(repo: Path) -> None:
    lines = "# a comment\n\n" * 50_000 + "".join(f"p{i}.yaml\n" for i in range(MAX_PATTERNS))
    (repo / ".gitops-schedignore").write_text(lines)
    assert run("validate", str(repo))[0] == 0


GLOBS = st.text(st.sampled_from("ab*?/!-#[]"), min_size=1, max_size=7)
PATHS = st.lists(st.text(st.sampled_from("ab[]!-"), min_size=1, max_size=3), min_size=1, max_size=4)


def _range_over_slash(pattern: str) -> bool:
    """Whether a bracket may hold a range from below '/' to above it (`[--?]`). The library
    turns it into a regex range that matches '/': a path's separator, or the '/' it marks
    a folder with (`?[--?]` ignores the folder `[`), where Git's wildmatch lets no bracket
    match a '/'."""
    return "[" in pattern and any(a <= "/" <= b for a, b in re.findall(r"(.)-(.)", pattern))


def test_a_bracket_range_over_the_slash_never_matches_a_separator_or_a_folder() -> None:
    # as Git's wildmatch: the range '-'..'0' holds '/', which no bracket matches in a path
    assert not IgnoreRules.of("a[--0]b").ignores("a/b", False)
    assert IgnoreRules.of("a[--0]b").ignores("a.b", False)
    assert not IgnoreRules.of("?[--?]").ignores("[", True)


@given(st.lists(GLOBS, min_size=1, max_size=3), PATHS, st.booleans())
def test_ignore_rules_decide_as_git_ignore_spec_does(
    patterns: list[str], parts: list[str], folder: bool
) -> None:
    """The matcher that cannot backtrack gives the pathspec library's answers (for the
    patterns it accepts: it refuses a malformed one, which the library drops silently;
    not where the library's bracket ranges match a '/', which Git's never do)."""
    assume(not any(_range_over_slash(p) for p in patterns))
    import warnings

    from pathspec import GitIgnoreSpec

    from gitops_sched.config.ignore import BadPattern

    try:
        rules = IgnoreRules.of("\n".join(patterns))
    except BadPattern:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the library's regex of `[[` warns
        spec = GitIgnoreSpec.from_lines(patterns)
    path = "/".join(parts)
    assert rules.ignores(path, folder) == spec.match_file(f"{path}/" if folder else path)


# --- templates -----------------------------------------------------------------------------


def _template(root: Path, *sources: str) -> None:
    args = ", ".join(json.dumps(s) for s in sources)
    replace_text(
        root, WORKLOADS, '  command: ["python", "train.py", "--lr", "3e-4"]', f"  command: [{args}]"
    )


@pytest.mark.parametrize(
    "source",
    [
        "{{ 5 | round(-100000000) }}",
        "{{ 12345 | round(-99999999, 'floor') }}",
        "{{ (1).to_bytes(1000000000, 'big') | length }}",
        "{{ 'x'.encode().ljust(10**9) | length }}",
        "{{ 'x'.encode().center(10**9) | length }}",
        "{{ 'x'.encode().zfill(10**9) | length }}",
        "{{ 'x'.encode().rjust(10**9, 'y'.encode()) | length }}",
    ],
)
def test_an_argument_that_would_compute_without_bound_is_gs704(repo: Path, source: str) -> None:
    _template(repo, source)
    code, output = run("validate", str(repo))
    assert code == 1
    assert "GS704 Workload/b-train-1: cannot render template expression" in output
    assert "width" in output or "precision" in output


@pytest.mark.parametrize(
    "source",
    [
        '{{ "\\ud800" }}',
        '{{ "\\udfff" }}',
        '{{ "x" ~ "\\udc80" ~ "y" }}',
        '{{ "%c" % 55296 }}',
        '{{ "\\ud83d" }}{{ "\\ude00" }}',  # a pair split in two prints two lone halves
        "{{ '\\ud800'.upper() }}",
    ],
)
def test_a_lone_surrogate_from_an_expression_is_an_error_at_it(repo: Path, source: str) -> None:
    _template(repo, "python", source)
    code, output = run("validate", str(repo))
    assert code == 1
    assert f"{repo}/{WORKLOADS}:11:" in output and "GS703" in output and "surrogate" in output
    assert run("render", str(repo), "-o", "-")[0] == 1


def test_a_templated_string_past_the_size_limit_is_gs704(repo: Path) -> None:
    _template(repo, "{{ 1 }}" * (templating.MAX_SOURCE // 7 + 1))
    code, output = run("validate", str(repo))
    assert code == 1
    assert "GS704" in output and "templated string longer than" in output


@pytest.mark.parametrize("workloads", [5, 20])
def test_the_time_limit_is_one_budget_for_the_whole_run(
    repo: Path, monkeypatch: pytest.MonkeyPatch, workloads: int
) -> None:
    """Spent at once (a limit of 0 s): one error, not one per workload and expression."""
    monkeypatch.setattr(templating, "MAX_SECONDS", 0.0)
    extra = [
        {
            "apiVersion": "gitops-sched.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": f"w{i}"},
            "spec": {
                "project": "team-b",
                "type": "train",
                "gpu": 1,
                "command": ["{{ workload.name }}{{ 1 + 1 }}", "{{ workload.replicas * 2 }}"],
            },
        }
        for i in range(workloads)
    ]
    (repo / "workloads" / "many.yaml").write_text(yaml.safe_dump_all(extra))
    code, output = run("validate", str(repo))
    assert code == 1
    spent = [x for x in output.splitlines() if "took more than 0 seconds" in x]
    assert 1 <= len(spent) <= 2  # the syntax check's and the render check's
    assert all("not checked" in x for x in spent)


def test_the_time_limit_counts_template_time_only(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Time the other checks take, or a machine too busy to run us, is no template's: a
    valid repo validates however long the rest of the run took (on a loaded CI runner the
    10,000-workload benchmark repo failed GS704 when the limit was wall-clock time)."""
    import time

    from gitops_sched.config import validate

    checks = validate.run_checks

    def slow_checks(*args: Any, **kwargs: Any) -> None:
        time.sleep(0.3)  # the machine busy elsewhere
        end = time.thread_time() + 0.3
        while time.thread_time() < end:  # checks that are not templates
            pass
        checks(*args, **kwargs)

    monkeypatch.setattr(templating, "MAX_SECONDS", 0.25)
    monkeypatch.setattr(validate, "run_checks", slow_checks)
    _template(repo, "{{ workload.name }}-{{ project.name }}")
    code, output = run("validate", str(repo))
    assert code == 0, output


def test_a_render_past_the_time_budget_after_validation_is_a_message(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """validate spent its own budget; render has one of its own, which may run out too."""
    from gitops_sched.compiler import workloads

    def out_of_time(value: Any, context: dict[str, Any]) -> Any:
        monkeypatch.setattr(templating, "MAX_SECONDS", 0.0)  # render's own time spent
        templating.spend()
        return value

    monkeypatch.setattr(workloads, "render_value", out_of_time)
    for args in (
        ["render", str(repo), "-o", "-"],
        ["render", str(repo), "-o", str(tmp_path / "o")],
    ):
        code, output = run(*args)
        assert code == 1
        assert output.startswith("gitops-sched: cannot render a template expression: ")
        assert "rendering took more than" in output


# --- many documents, deep trees, large documents -------------------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("---\n" * (yamlbuild.MAX_DOCUMENTS + 1), yamlbuild.MAX_DOCUMENTS + 1),
        ("---\n" * 1_000_000, yamlbuild.MAX_DOCUMENTS + 1),
        ("a: 1\n---\n" * (yamlbuild.MAX_DOCUMENTS + 5), 2 * yamlbuild.MAX_DOCUMENTS),
        ("--- ~\n" * 500_000, yamlbuild.MAX_DOCUMENTS + 1),
        ("--- x\n" * 20_000, yamlbuild.MAX_DOCUMENTS + 1),
    ],
    ids=["just-over", "a-million-empty", "tiny", "nulls", "scalars"],
)
def test_a_file_of_too_many_documents_stops_at_the_limit(repo: Path, text: str, line: int) -> None:
    (repo / "many.yaml").write_text(text)
    code, output = run("validate", str(repo))
    assert code == 1
    limit = f"{repo}/many.yaml:{line}:1: error GS104: more than {yamlbuild.MAX_DOCUMENTS} documents"
    assert limit in output
    assert (
        sum(f"{repo}/many.yaml" in x for x in output.splitlines())
        <= 2 * yamlbuild.MAX_DOCUMENTS + 1
    )


@pytest.mark.parametrize(
    "text",
    [
        "- a\n" * (yamlbuild.MAX_EXPANDED_NODES + 1),
        "- a\n" * 1_000_000,
        "k:\n" + "  - 1\n" * (yamlbuild.MAX_EXPANDED_NODES + 10),
        "".join(f"k{i}: {i}\n" for i in range(yamlbuild.MAX_EXPANDED_NODES)),
    ],
    ids=["list", "a-million-lines", "nested-list", "keys"],
)
def test_a_large_document_without_aliases_is_no_alias_bomb(repo: Path, text: str) -> None:
    (repo / "large.yaml").write_text(text)
    code, output = run("validate", str(repo))
    assert code == 1
    assert "GS109" not in output and "alias" not in output
    assert f"GS104: document holds more than {yamlbuild.MAX_EXPANDED_NODES} values" in output


def test_an_alias_bomb_is_still_one(repo: Path) -> None:
    bomb = 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]\n'
    for level in "bcdefgh":
        previous = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [{', '.join(['*' + previous] * 10)}]\n"
    (repo / "bomb.yaml").write_text(bomb)
    code, output = run("validate", str(repo))
    assert code == 1 and "GS109" in output and "alias bomb" in output


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _deep_folders(root: Path, depth: int) -> None:
    """`root/d/d/.../d` (made one level at a time through descriptors: the path outgrows
    PATH_MAX, and os.makedirs recurses)."""
    fd = os.open(root, _FOLDER)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", _FOLDER, dir_fd=fd)
        os.close(fd)
        fd = inner
    with open(os.open("x.yaml", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as f:
        f.write(b"a: 1\n")  # closes fd's file, not fd
    os.close(fd)


def _remove_deep(root: Path) -> None:
    """Remove `root/d` and below without recursion (pytest's cleanup recurses)."""
    stack = [(os.open(root, _FOLDER), "")]
    while stack:
        fd, name = stack[-1]
        below = None
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    below = entry.name
                elif len(stack) > 1:
                    os.unlink(entry.name, dir_fd=fd)
        if below is not None and (len(stack) > 1 or below == "d"):
            stack.append((os.open(below, _FOLDER, dir_fd=fd), below))
            continue
        os.close(fd)
        stack.pop()
        if stack:
            os.rmdir(name, dir_fd=stack[-1][0])


@pytest.mark.parametrize("depth", [1_100, 1_500])
def test_a_folder_tree_thousands_deep_is_read(repo: Path, depth: int) -> None:
    _deep_folders(repo, depth)
    try:
        code, output = run("validate", str(repo))
    finally:
        _remove_deep(repo)
    assert code == 1
    assert "d/d/x.yaml:1:1: error GS201" in output  # found, at the bottom, and checked


def test_a_folder_tree_past_the_longest_path_is_an_error(repo: Path) -> None:
    _deep_folders(repo, 2_500)  # "d/" 2,500 times: over PATH_MAX (4,096)
    try:
        code, output = run("validate", str(repo))
    finally:
        _remove_deep(repo)
    assert code == 1
    assert "error GS101: folder cannot be read: File name too long" in output


# --- what messages show --------------------------------------------------------------------


@pytest.mark.parametrize("control", ["\x1b[31m", "\x07", "\x1b]0;title\x07", "\x9b", "\u202e"])
def test_control_characters_from_the_input_are_escaped(repo: Path, control: str) -> None:
    def department(documents: list[Any]) -> None:
        documents[0]["spec"]["department"] = f"ai{control}research"

    edit(repo, PROJECT, department)
    for fmt in ("text", "github", "json"):
        code, output = run("validate", str(repo), "--format", fmt)
        assert code == 1
        assert control not in output
        assert printable(control) in output.replace("\\\\", "\\")


def test_a_file_name_with_control_characters_is_escaped(repo: Path) -> None:
    (repo / "bad\x1b[2J.yaml").write_text("a: 1\n")
    code, output = run("validate", str(repo))
    assert code == 1
    assert "\x1b" not in output and "bad\\x1b[2J.yaml:1:1: error GS201" in output


# --- plan --state and the Git tree plan reads ----------------------------------------------


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def git_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "git"
    shutil.copytree(EXAMPLE, root / "cfg")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "cfg")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    monkeypatch.chdir(root)
    return root


STATES = [
    ('{"workloads": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested more than 64 deep"),
    ('{"workloads": [' + "[" * 70 + "]" * 70 + "]}", "nested more than 64 deep"),
    ('{"workloads": [], "x": ' + "9" * 5000 + "}", "an integer of more than 100 digits"),
    ('{"workloads": [{"name": "a", "pods": ' + "1" * 101 + "}]}", "more than 100 digits"),
    ('{"workloads": [{"name": "a", "pods": NaN}]}', "NaN is not a number"),
    ('{"workloads": [], "x": -Infinity}', "-Infinity is not a number"),
    ('{"workloads": [], "x": 1e999}', "past the largest number"),
    ('{"workloads": [{"name": "\\ud800"}]}', "lone surrogate"),
    ('{"workloads": [], "\\udfff": 1}', "lone surrogate"),
    ('{"workloads": [' + ", ".join(["{}"] * 100_001) + "]}", "more than 100,000 workloads"),
]


@pytest.mark.parametrize(("text", "why"), STATES, ids=lambda v: str(v)[:16])
def test_a_hostile_state_is_a_usage_error_saying_why(git_repo: Path, text: str, why: str) -> None:
    state = git_repo / "state.json"
    state.write_text(text)
    code, output = run("plan", "cfg", "--base", "main", "--state", str(state))
    assert code == 2
    assert output.startswith(f"Error: {state}: ") and why in output


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_as_the_state_is_refused_unread(git_repo: Path, device: str) -> None:
    code, output = run("plan", "cfg", "--base", "main", "--state", device)
    assert code == 2
    assert "a character device, not a regular file" in output


def test_a_blob_over_the_size_limit_is_never_read(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap = max(p.stat().st_size for p in (git_repo / "cfg").rglob("*.yaml"))
    (git_repo / "cfg" / "big.yaml").write_text("#" * (cap + 1))
    git(git_repo, "add", "cfg")
    git(git_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "big")
    monkeypatch.setattr(gitsource, "MAX_FILE_BYTES", cap)
    read: list[str] = []
    real = gitsource._contents
    monkeypatch.setattr(
        gitsource, "_contents", lambda f, blobs: read.extend(blobs) or real(f, blobs)
    )
    folder = gitsource.git_folder(Path("cfg"))
    files = dict(gitsource.ref_files(folder, gitsource.resolve(folder, "main")))
    assert files["cfg/big.yaml"] == loader.Unreadable(
        f"file is {cap + 1} bytes, over the {cap}-byte limit", loader.codes.FILE_TOO_LARGE
    )
    assert len(read) == len(files) - 1  # every other blob, not the large one


@pytest.mark.parametrize("name", [b"bad\xff.yaml", b"\xc3\x28.yaml", b"ok\xe2\x82.yaml"])
def test_a_file_name_that_is_not_utf8_in_the_git_tree(git_repo: Path, name: bytes) -> None:
    path = os.path.join(b"cfg", name)
    with open(path, "wb") as f:
        f.write(b"a: 1\n")
    git(git_repo, "add", "cfg")
    git(git_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "name")
    code, output = run("plan", "cfg", "--base", "main", "--head", "main")
    assert code == 1  # the file is read, and is no config document
    shown = printable(os.fsdecode(name))
    assert f"cfg/{shown}:1:1: error GS201" in output
    assert run("plan", "cfg", "--base", "main~0", "--format", "json")[0] == 1


# --- round 2: variants of the classes above --------------------------------------------------


@pytest.mark.parametrize("pattern", ["[z-a]", "[", "x/[[:nosuch:]]", "a\\"])
@pytest.mark.parametrize(
    "command", [["validate"], ["simulate"], ["render", "-o", "-"], ["explain", "x"], ["test"]]
)
def test_a_malformed_exclude_is_a_usage_error_naming_the_option(
    repo: Path, pattern: str, command: list[str]
) -> None:
    # a command-line value, not a line of a file: no diagnostic at an ignore file that may
    # not exist, whether or not the folder has one
    for ignore_file in (False, True):
        if ignore_file:
            (repo / ".gitops-schedignore").write_text("ci/\n")
        code, output = run(command[0], str(repo), *command[1:], "--exclude", pattern)
        assert code == 2
        assert f"Invalid value for '--exclude': {pattern!r}" in output
        assert "GS103" not in output


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\n",
        "kind: Workload\n",
        "apiVersion: gitops-sched.io/v1alpha1\nkind: Nope\nmetadata: {name: s}\nx: 1\n",
        "apiVersion: gitops-sched.io/v1alpha1\nkind: Simulation\nmetadata: {name: s}\nspek: 1\n",
    ],
    ids=["no-kind", "another-kind", "unknown-kind", "unknown-field"],
)
def test_an_events_file_of_another_shape_is_an_error_not_a_traceback(
    repo: Path, tmp_path: Path, text: str
) -> None:
    events = tmp_path / "events.yaml"
    events.write_text(text)
    for command in (["simulate"], ["explain", "b-train-1"]):
        code, output = run(command[0], str(repo), *command[1:], "--events", str(events))
        assert code == 1
        assert f"{events}:" in output and "error GS2" in output


def test_plan_compares_a_users_yaml_looking_string_as_a_string(git_repo: Path) -> None:
    """An env value holding an alias bomb is never parsed: plan shows the string's change."""
    bomb = 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]\n'
    for level in "bcdefghi":
        bomb += f"{level}: &{level} [{', '.join(['*' + chr(ord(level) - 1)] * 10)}]\n"
    before = "  gpu: 1\n"
    for value in ("a: 1\nb: 2\n", bomb):
        after = f"  gpu: 1\n  env:\n    X: {json.dumps(value)}\n"
        replace_text(git_repo / "cfg", WORKLOADS, before, after)
        git(git_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "env")
        before = after
    code, output = run("plan", "cfg", "--base", "main~1", "--head", "main")
    assert code == 0
    assert "`spec.env.X`" in output and "a: &a" in output.replace("&amp;", "&")


@pytest.mark.parametrize("control", ["\x1b]0;title\x07", "\x1b[2J", "\x07", "\x9b1m"])
def test_control_characters_in_a_state_or_an_argument_are_escaped(
    git_repo: Path, control: str
) -> None:
    state = git_repo / "state.json"
    state.write_text(json.dumps({"workloads": [{"name": f"w{control}", "pods": 1}]}))
    outputs = [
        run("plan", "cfg", "--base", "main", "--state", str(state)),
        run("explain", "cfg", f"w{control}"),
        run("render", "cfg", "-o", str(git_repo.parent / f"out{control}")),
        run("validate", "cfg", "--exclude", f"{control}[z-a]"),
    ]
    assert not any(control in output for _, output in outputs)
    assert [code for code, _ in outputs] == [2, 2, 0, 2]  # a bad --exclude: usage
    assert all(printable(control) in output for _, output in outputs)


@pytest.mark.parametrize("system", ["kube-system", "kube-gitops", "default", "crds"])
def test_a_system_namespace_that_is_taken_is_an_error_at_it(repo: Path, system: str) -> None:
    def cluster(documents: list[Any]) -> None:
        documents[0]["spec"]["systemNamespace"] = system

    edit(repo, "cluster.yaml", cluster)
    code, output = run("validate", str(repo))
    assert code == 1
    assert (
        f"{repo}/cluster.yaml:7:20: error GS310 Cluster/netapp-dgx: the system namespace" in output
    )
    assert run("render", str(repo), "-o", "-")[0] == 1


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ('{{ range(9999) | map("string") | join("x" * 99999) }}', "'join' makes a string"),
        ('{{ ("x" * 9999).join(range(9999) | map("string")) }}', "'join' makes a string"),
        ('{{ ("{a}" * 33333).format(a="x" * 99999) }}', "'format' makes a string"),
        ('{{ ("{0}{0}" * 1000).format("x" * 999) }}', "'format' makes a string"),
        ('{{ ("%(a)s" * 10000) % {"a": "x" * 999} }}', "'%' format makes a string"),
        ('{{ ("%(a)s" * 10000) | format(a="x" * 999) }}', "'format' makes a string"),
        ('{{ ("\\t" * 99999).expandtabs(99999) }}', "'expandtabs' makes a string"),
        ('{{ ("\\t" * 9999).encode().expandtabs(99) }}', "'expandtabs' makes a string"),
        ("{{ {" + "1: 1, " * 2000 + "} }}", "more than 5,000 tokens"),
        ("{{ [" + "1," * 5000 + "] }}", "more than 5,000 tokens"),
    ],
    ids=lambda v: str(v)[:24],
)
def test_an_expression_that_builds_or_compiles_without_bound_is_gs704(
    repo: Path, source: str, why: str
) -> None:
    """Each refused before it allocates (gigabytes) or compiles (a minute for 100,000
    characters of a dict literal)."""
    _template(repo, source)
    code, output = run("validate", str(repo))
    assert code == 1
    assert "GS704 Workload/b-train-1: " in output and why in output


@pytest.mark.parametrize(
    ("source", "printed"),
    [
        ('{{ range(3) | map("string") | join(",") }}', "0,1,2"),
        ('{{ ",".join(range(3) | map("string")) }}', "0,1,2"),
        ('{{ "%s-%s" | format("a", workload.name) }}', "a-b-train-1"),
        ('{{ "{0}/{0}".format(workload.name) }}', "b-train-1/b-train-1"),
        ('{{ "a\\tb".expandtabs(2) }}', "a b"),
        ("{{ (" + " ~ ".join(["workload.name"] * 300) + ") | length }}", "2700"),
    ],
    ids=lambda v: str(v)[:24],
)
def test_the_same_operations_within_bounds_render(repo: Path, source: str, printed: str) -> None:
    _template(repo, source)
    code, output = run("render", str(repo), "-o", "-")
    assert code == 0, output[-1000:]
    assert printed in output.replace("'", "").replace('"', "")


def test_a_state_of_many_malformed_workloads_stops_at_the_problem_limit(git_repo: Path) -> None:
    from gitops_sched.config.schema import MAX_SCHEMA_PROBLEMS

    state = git_repo / "state.json"
    entries = [{"name": f"w{i}", "pods": 1} for i in range(20 * MAX_SCHEMA_PROBLEMS)]
    state.write_text(json.dumps({"workloads": entries}))
    code, output = run("plan", "cfg", "--base", "main", "--state", str(state))
    assert code == 2
    assert f"{state}: more than {MAX_SCHEMA_PROBLEMS} problems: the rest is not checked" in output
    assert len(output.splitlines()) <= MAX_SCHEMA_PROBLEMS + 5
