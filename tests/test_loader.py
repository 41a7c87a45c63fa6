"""The loader: every document with positions, and every file problem reported, not raised."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_sched.config import codes, loader, yamlbuild
from gitops_sched.config.diagnostics import Diagnostics, Location
from gitops_sched.config.document import Document
from gitops_sched.config.loader import load_repo
from testkit.config_builders import diagnostic_line

CLUSTER = """\
apiVersion: gitops-sched.io/v1alpha1
kind: Cluster
metadata:
  name: demo
"""


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def load(root: Path, files: dict[str, str | bytes]) -> tuple[list[Document], list[str]]:
    """Documents and diagnostic lines of a repo made of `files`, paths relative to `root`."""
    write(root, files)
    diagnostics = Diagnostics()
    documents = load_repo(root, diagnostics)
    prefix = f"{root.as_posix()}/"
    return documents, [diagnostic_line(d).removeprefix(prefix) for d in diagnostics.sorted()]


def line_col(location: Location) -> tuple[int, int]:
    return location.line, location.col


def test_positions_are_one_based_line_and_column(tmp_path: Path) -> None:
    (doc,), problems = load(tmp_path, {"c.yaml": CLUSTER + "spec:\n  policy: {cyclePeriod: 5s}\n"})
    assert problems == []
    assert doc.location(("metadata", "name")) == Location(f"{tmp_path.as_posix()}/c.yaml", 4, 9)
    assert line_col(doc.location(("spec", "policy", "cyclePeriod"))) == (6, 25)


def test_key_location_points_at_the_key_not_the_value(tmp_path: Path) -> None:
    (doc,), _ = load(tmp_path, {"c.yaml": CLUSTER + "spec:\n  policy:\n    consolidation: true\n"})
    assert line_col(doc.key_location(("spec", "policy"))) == (6, 3)
    assert line_col(doc.location(("spec", "policy"))) == (7, 5)  # a mapping: its first key


def test_location_of_a_missing_path_falls_back_to_the_nearest_ancestor(tmp_path: Path) -> None:
    (doc,), _ = load(tmp_path, {"c.yaml": CLUSTER})
    assert doc.location(("metadata", "labels", "team")) == doc.location(("metadata",))


def test_duplicate_key_is_reported_at_the_second_occurrence(tmp_path: Path) -> None:
    text = CLUSTER + "spec:\n  namespacePrefix: a-\n  namespacePrefix: b-\n"
    documents, problems = load(tmp_path, {"c.yaml": text})
    assert documents == []
    assert problems == ["c.yaml:7:3: duplicate key 'namespacePrefix' (first at line 6)"]


def test_a_bad_document_does_not_hide_the_next_ones_in_its_file(tmp_path: Path) -> None:
    text = "a: 1\na: 2\n---\n" + CLUSTER
    documents, problems = load(tmp_path, {"c.yaml": text})
    assert [d.name for d in documents] == ["demo"]
    assert problems == ["c.yaml:2:1: duplicate key 'a' (first at line 1)"]


@pytest.mark.usefixtures("each_yaml_parser")  # libyaml: "did not find expected ',' or ']'"
def test_yaml_syntax_error_points_at_the_problem(tmp_path: Path) -> None:
    documents, problems = load(tmp_path, {"c.yaml": CLUSTER + "spec:\n  admins: [a, b\n"})
    assert documents == []
    [problem] = problems
    assert problem.startswith("c.yaml:7:1: YAML syntax error: while parsing a flow sequence, ")
    assert "expected ',' or ']'" in problem


def test_non_utf8_bytes_are_reported_at_their_line_and_column(tmp_path: Path) -> None:
    raw = CLUSTER.encode() + b"spec:\n  namespacePrefix: caf\xe9-\n"
    documents, problems = load(tmp_path, {"c.yaml": raw})
    assert documents == []
    assert problems == ["c.yaml:6:23: file is not valid UTF-8 (byte 0xe9)"]


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    (doc,), problems = load(tmp_path, {"c.yaml": "\ufeff" + CLUSTER})
    assert problems == []
    assert doc.location(("kind",)).line == 2


def test_alias_bomb_is_stopped(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    documents, problems = load(tmp_path, {"bomb.yaml": "\n".join(lines) + "\n"})
    assert documents == []
    (problem,) = problems
    assert problem.startswith("bomb.yaml:")
    assert problem.endswith(
        f"document expands to more than {yamlbuild.MAX_EXPANDED_NODES} values "
        "through aliases (alias bomb?)"
    )


def test_modest_aliases_are_expanded(tmp_path: Path) -> None:
    text = CLUSTER + "  labels: &l {team: a}\n  annotations: *l\n"
    (doc,), problems = load(tmp_path, {"c.yaml": text})
    assert problems == []
    assert doc.data["metadata"]["annotations"] == {"team": "a"}


def test_merge_keys_are_rejected(tmp_path: Path) -> None:
    text = "base: &b {x: 1}\nother:\n  <<: *b\n"
    _, problems = load(tmp_path, {"c.yaml": text})
    assert problems == ["c.yaml:3:3: merge keys (<<) are not supported"]


def test_oversized_file_is_skipped_with_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loader, "MAX_FILE_BYTES", 20)
    documents, problems = load(tmp_path, {"big.yaml": CLUSTER, "ok.yaml": "a: 1\n"})
    assert [d.data for d in documents] == [{"a": 1}]
    assert problems == [f"big.yaml:1:1: file is {len(CLUSTER)} bytes, over the 20-byte limit"]


def test_empty_documents_are_warnings(tmp_path: Path) -> None:
    documents, problems = load(tmp_path, {"c.yaml": "---\n---\n" + CLUSTER, "empty.yaml": ""})
    assert [d.name for d in documents] == ["demo"]
    (problem,) = problems
    assert problem.startswith("c.yaml:")
    assert problem.endswith(": warning: empty document ignored")


def test_a_document_must_be_a_mapping(tmp_path: Path) -> None:
    documents, problems = load(tmp_path, {"c.yaml": CLUSTER + "---\n- a\n- b\n"})
    assert [d.name for d in documents] == ["demo"]
    assert problems == [
        "c.yaml:6:1: a document must be a mapping with apiVersion, kind, metadata and spec"
    ]


def test_multi_document_files_keep_each_documents_own_lines(tmp_path: Path) -> None:
    second = CLUSTER.replace("demo", "second")
    documents, _ = load(tmp_path, {"c.yaml": CLUSTER + "---\n" + second})
    assert [d.index for d in documents] == [0, 1]
    assert [d.location(("metadata", "name")).line for d in documents] == [4, 9]


def test_scalars_keep_their_yaml_types_and_dates_stay_strings(tmp_path: Path) -> None:
    text = "a: 1\nb: 1.5\nc: true\nd: null\ne: 2024-01-01\nf: '1'\n"
    (doc,), _ = load(tmp_path, {"c.yaml": text})
    assert doc.data == {"a": 1, "b": 1.5, "c": True, "d": None, "e": "2024-01-01", "f": "1"}


def test_files_come_in_name_order_a_folders_files_before_its_subfolders(tmp_path: Path) -> None:
    paths = ("b.yaml", "a/z.yml", "a/b/c.yaml", "a.yaml", "c/notes.txt", "c/d/e.yaml")
    documents, problems = load(tmp_path, {path: f"name: {path}\n" for path in paths})
    assert problems == []
    assert [d.data["name"] for d in documents] == [
        "a.yaml",
        "b.yaml",
        "a/z.yml",
        "a/b/c.yaml",
        "c/d/e.yaml",
    ]


def test_hidden_folders_and_files_are_skipped(tmp_path: Path) -> None:
    files = {
        ".git/x.yaml": "a: [",
        ".hidden.yaml": "a: [",
        "sub/.cache/y.yaml": "a: [",
        "ok.yaml": "a: 1\n",
    }
    documents, problems = load(tmp_path, files)
    assert problems == []
    assert [d.data for d in documents] == [{"a": 1}]


def test_a_single_file_can_be_loaded(tmp_path: Path) -> None:
    write(tmp_path, {"c.yaml": CLUSTER})
    diagnostics = Diagnostics()
    (doc,) = load_repo(tmp_path / "c.yaml", diagnostics)
    assert doc.ref == "Cluster/demo"
    assert doc.file == f"{tmp_path.as_posix()}/c.yaml"


# --- building from parser events ------------------------------------------------------------


def test_every_value_and_key_has_its_position_aliases_at_their_anchor(tmp_path: Path) -> None:
    text = "a: &x\n  b: [1, {c: d}]\ne: *x\n'f': ~\n"
    (doc,), problems = load(tmp_path, {"c.yaml": text})
    assert problems == []
    assert doc.data == {"a": {"b": [1, {"c": "d"}]}, "e": {"b": [1, {"c": "d"}]}, "f": None}
    assert doc.data["a"] is not doc.data["e"]  # an alias repeats a copy, as before
    assert dict(doc.positions) == {
        (): (1, 1),
        ("a",): (1, 4),  # a node starts at its anchor
        ("a", "b"): (2, 6),
        ("a", "b", 0): (2, 7),
        ("a", "b", 1): (2, 10),
        ("a", "b", 1, "c"): (2, 14),
        ("e",): (1, 4),
        ("e", "b"): (2, 6),
        ("e", "b", 0): (2, 7),
        ("e", "b", 1): (2, 10),
        ("e", "b", 1, "c"): (2, 14),
        ("f",): (4, 6),
    }
    assert dict(doc.key_positions) == {
        ("a",): (1, 1),
        ("a", "b"): (2, 3),
        ("a", "b", 1, "c"): (2, 11),
        ("e",): (3, 1),
        ("e", "b"): (2, 3),
        ("e", "b", 1, "c"): (2, 11),
        ("f",): (4, 1),
    }


def test_an_alias_inside_its_own_anchor_is_an_endless_expansion(tmp_path: Path) -> None:
    documents, problems = load(tmp_path, {"c.yaml": "a: &a [*a]\n---\n" + CLUSTER})
    assert [d.name for d in documents] == ["demo"]
    assert problems == [
        f"c.yaml:1:8: document expands to more than {yamlbuild.MAX_EXPANDED_NODES} values "
        "through aliases (alias bomb?)"
    ]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("!!int abc", "1:4: 'abc' is not a valid tag:yaml.org,2002:int"),
        ("!!bool maybe", "1:4: 'maybe' is not a valid tag:yaml.org,2002:bool"),
        ("0x_", "1:4: '0x_' is not a valid tag:yaml.org,2002:int"),
    ],
)
def test_a_value_its_tag_cannot_read_is_reported(tmp_path: Path, value: str, problem: str) -> None:
    documents, problems = load(tmp_path, {"c.yaml": f"a: {value}\n---\n" + CLUSTER})
    assert [d.name for d in documents] == ["demo"]
    assert problems == [f"c.yaml:{problem}"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: *nope\n", "6:4: YAML syntax error: found undefined alias"),
        (
            "a: &x 1\nb: &x 2\n",
            "7:4: YAML syntax error: found duplicate anchor; first occurrence, second occurrence",
        ),
        # the composer's error wins over the duplicate key before it, as it always did
        ("a: 1\na: 2\nb: *nope\n", "8:4: YAML syntax error: found undefined alias"),
    ],
)
def test_composer_errors_end_the_file(tmp_path: Path, text: str, problem: str) -> None:
    documents, problems = load(tmp_path, {"c.yaml": CLUSTER + "---\n" + text + "---\n" + CLUSTER})
    assert [d.name for d in documents] == ["demo"]  # the first document only
    assert problems == [f"c.yaml:{problem}"]


def test_an_alias_of_a_scalar_may_be_a_key(tmp_path: Path) -> None:
    (doc,), problems = load(tmp_path, {"c.yaml": "a: &k b\n*k : 2\n"})
    assert problems == []
    assert doc.data == {"a": "b", "b": 2}
    assert doc.key_location(("b",)).line == 1  # the anchored scalar's own position


# --- the file walk: what is read, what is refused, what is left out -------------------------


def test_an_empty_folder_says_no_yaml_files_found(tmp_path: Path) -> None:
    _, problems = load(tmp_path, {"README.md": "# nothing here\n"})
    assert problems == [
        f"{tmp_path.as_posix()}:1:1: no YAML files found under {tmp_path.as_posix()}"
    ]


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")  # opening it for reading would wait for a writer
    _, problems = load(tmp_path, {"c.yaml": CLUSTER})
    assert problems == ["pipe.yaml:1:1: a FIFO, not a regular file: only files are read"]


def test_a_socket_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a short relative name: socket paths are limited to 108 bytes
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("sock.yaml")
        _, problems = load(tmp_path, {"c.yaml": CLUSTER})
    assert problems == ["sock.yaml:1:1: a socket, not a regular file: only files are read"]


def test_a_symlink_to_dev_zero_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    _, problems = load(tmp_path, {"c.yaml": CLUSTER})
    assert problems == ["zero.yaml:1:1: symlink leads outside the repo (to /dev/zero): refused"]


def test_a_device_is_refused_even_where_no_repo_bounds_the_link(tmp_path: Path) -> None:
    # a single file (as a Simulation is read) has no repo to stay inside: the type still counts
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    assert loader.read_capped(tmp_path / "zero.yaml") == loader.Unreadable(
        "a character device, not a regular file: only files are read"
    )


def test_dangling_and_looping_symlinks_are_named(tmp_path: Path) -> None:
    (tmp_path / "gone.yaml").symlink_to("nowhere.yaml")
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    _, problems = load(tmp_path, {"c.yaml": CLUSTER})
    assert problems == [
        "gone.yaml:1:1: dangling symlink: its target 'nowhere.yaml' does not exist",
        "loop.yaml:1:1: symlink loop: the link never leads to a file",
    ]


def test_symlinks_leading_outside_the_repo_are_refused_inside_ones_read(tmp_path: Path) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "elsewhere"
    write(outside, {"secret.yaml": CLUSTER})
    write(repo, {"real/c.yaml": CLUSTER})
    (repo / "out.yaml").symlink_to(outside / "secret.yaml")
    (repo / "outdir").symlink_to(outside)
    (repo / "in.yaml").symlink_to(repo / "real" / "c.yaml")
    documents, problems = load(repo, {})
    assert problems == [
        f"out.yaml:1:1: symlink leads outside the repo (to {outside.resolve()}/secret.yaml): "
        "refused",
        f"outdir:1:1: symlink leads outside the repo (to {outside.resolve()}): refused",
    ]
    assert [d.file.rsplit("/", 1)[1] for d in documents] == ["in.yaml", "c.yaml"]


def test_an_unreadable_file_is_an_error_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # works as root too: the open fails as it would for a user without read permission
    real_open = os.open

    def deny(path: Any, flags: int, *args: Any) -> int:
        if str(path).endswith("secret.yaml"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(loader.os, "open", deny)
    _, problems = load(tmp_path, {"c.yaml": CLUSTER, "secret.yaml": "a: 1\n"})
    assert problems == ["secret.yaml:1:1: cannot be read: Permission denied"]


def test_an_unreadable_folder_is_an_error_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # works as root too: listing the folder fails as it would without read permission
    real_scandir = os.scandir

    def deny(path: Any = ".") -> Any:
        if str(path).endswith("workloads"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", deny)
    _, problems = load(tmp_path, {"c.yaml": CLUSTER, "workloads/w.yaml": "a: 1\n"})
    assert problems == ["workloads:1:1: folder cannot be read: Permission denied"]


@pytest.mark.skipif(
    os.geteuid() == 0, reason="running as root: file permissions do not stop root from reading"
)
def test_permissions_that_deny_reading_are_reported(tmp_path: Path) -> None:
    write(tmp_path, {"c.yaml": CLUSTER, "secret.yaml": "a: 1\n", "locked/w.yaml": "a: 1\n"})
    (tmp_path / "secret.yaml").chmod(0)
    (tmp_path / "locked").chmod(0)
    try:
        _, problems = load(tmp_path, {})
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert problems == [
        "locked:1:1: folder cannot be read: Permission denied",
        "secret.yaml:1:1: cannot be read: Permission denied",
    ]


def test_the_size_cap_does_not_trust_st_size(tmp_path: Path) -> None:
    # /proc files report a size of 0 and have content: at most cap + 1 bytes are read
    status = Path("/proc/self/status")
    if not status.exists():
        pytest.skip("no /proc on this system")
    assert status.stat().st_size == 0
    assert loader.read_capped(status, cap=10) == loader.Unreadable(
        "file is over the 10-byte limit", codes.FILE_TOO_LARGE
    )
    write(tmp_path, {"ten.yaml": "a: 123456\n"})
    assert loader.read_capped(tmp_path / "ten.yaml", cap=10) == b"a: 123456\n"


def test_the_ignore_file_leaves_out_files_and_folders_in_gitignore_syntax(tmp_path: Path) -> None:
    ignore = "# CI and rendered output\nci/\n*.rendered.yaml\n!keep.rendered.yaml\n/top.yaml\n"
    files = {
        ".gitops-schedignore": ignore,
        "c.yaml": CLUSTER,
        "ci/pipeline.yaml": "{{ not yaml",
        "deep/ci/x.yaml": "{{ not yaml",
        "a.rendered.yaml": "{{ not yaml",
        "keep.rendered.yaml": "a: 1\n",
        "top.yaml": "{{ not yaml",
        "sub/top.yaml": "b: 2\n",
    }
    documents, problems = load(tmp_path, files)
    assert problems == []
    read = [d.file.removeprefix(f"{tmp_path.as_posix()}/") for d in documents]
    assert read == ["c.yaml", "keep.rendered.yaml", "sub/top.yaml"]


def test_excludes_add_to_the_ignore_file_and_may_override_it(tmp_path: Path) -> None:
    write(tmp_path, {".gitops-schedignore": "old/\n", "c.yaml": CLUSTER})
    write(tmp_path, {"old/a.yaml": "a: 1\n", "new/b.yaml": "b: 1\n", "new/c.yaml": "c: 1\n"})
    diagnostics = Diagnostics()
    documents = load_repo(tmp_path, diagnostics, excludes=["new/b.yaml", "!old/"])
    read = [d.file.removeprefix(f"{tmp_path.as_posix()}/") for d in documents]
    assert read == ["c.yaml", "new/c.yaml", "old/a.yaml"]
    assert not diagnostics.has_errors


def test_a_folder_whose_every_file_is_ignored_says_so(tmp_path: Path) -> None:
    _, problems = load(tmp_path, {".gitops-schedignore": "*.yaml\n", "a.yaml": "a: 1\n"})
    root = tmp_path.as_posix()
    assert problems == [
        f"{root}:1:1: no YAML files found under {root} (1 left out by .gitops-schedignore or "
        "--exclude)"
    ]


# --- nesting depth -------------------------------------------------------------------------


def _nested(depth: int) -> str:
    """A Cluster whose `spec` holds flow sequences nested so the document is `depth` deep."""
    levels = depth - 1  # the document's own mapping is the first level
    return CLUSTER + "spec: " + "[" * levels + "]" * levels + "\n"


@pytest.mark.usefixtures("each_yaml_parser")
def test_nesting_up_to_the_limit_loads(tmp_path: Path) -> None:
    documents, problems = load(tmp_path, {"c.yaml": _nested(yamlbuild.MAX_DEPTH)})
    assert [d.name for d in documents] == ["demo"] and problems == []


@pytest.mark.usefixtures("each_yaml_parser")
@pytest.mark.parametrize("depth", [yamlbuild.MAX_DEPTH + 1, 3_000, 100_000])
def test_nesting_past_the_limit_is_reported_at_the_first_level_too_deep(
    tmp_path: Path, depth: int
) -> None:
    # libyaml alone takes minutes over 100,000 levels: the loader stops reading at level 65
    text = CLUSTER + "---\n" + _nested(depth) + "---\n" + CLUSTER
    documents, problems = load(tmp_path, {"c.yaml": text})
    assert [d.name for d in documents] == ["demo"]  # the first document only: the file ends
    col = len("spec: ") + yamlbuild.MAX_DEPTH
    assert problems == [f"c.yaml:10:{col}: mappings and sequences nested more than 64 deep"]


@pytest.mark.usefixtures("each_yaml_parser")
def test_deep_block_nesting_is_bounded_too(tmp_path: Path) -> None:
    text = CLUSTER + "spec:\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(1, 70))
    documents, problems = load(tmp_path, {"c.yaml": text})
    assert documents == []
    # `k64:` (line 69, indented 128) opens the 65th mapping, the document's being the first
    assert problems == ["c.yaml:69:129: mappings and sequences nested more than 64 deep"]


@pytest.mark.usefixtures("each_yaml_parser")
@pytest.mark.parametrize("after", ["@", "[" * 2_000], ids=["bad-character", "libyaml-limit"])
def test_an_error_the_scanner_reads_ahead_to_does_not_hide_a_level_too_deep_before_it(
    tmp_path: Path, after: str
) -> None:
    # The scanner reads up to 1,024 characters of a line ahead of the events (is this `[` a
    # key?), so it meets a character no token starts with, or libyaml's own limit of 1,000
    # flow levels (PyYAML 6.0.4), before the parser gives the event for level 65.
    text = CLUSTER + "spec: " + "[" * 70 + after + "\n"
    documents, problems = load(tmp_path, {"c.yaml": text})
    assert documents == []
    col = len("spec: ") + yamlbuild.MAX_DEPTH
    assert problems == [f"c.yaml:5:{col}: mappings and sequences nested more than 64 deep"]


@pytest.mark.usefixtures("each_yaml_parser")
def test_nesting_past_the_limit_ends_a_document_that_has_already_failed_too(
    tmp_path: Path,
) -> None:
    # a failed document keeps no values, but its events are still read: unbounded, the
    # duplicate key would leave libyaml minutes of work over 100,000 levels
    text = CLUSTER + "kind: Cluster\nspec: " + "[" * 100_000 + "]" * 100_000 + "\n"
    documents, problems = load(tmp_path, {"c.yaml": text})
    assert documents == []
    col = len("spec: ") + yamlbuild.MAX_DEPTH
    assert problems == [f"c.yaml:6:{col}: mappings and sequences nested more than 64 deep"]


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="this PyYAML is built without libyaml")
@pytest.mark.parametrize(
    ("nested", "at"),
    [
        ("spec: " + "[" * 3_000, "5:1006"),  # libyaml's 1,001st level
        ("spec:\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(1, 1_100)), "1004:2003"),
    ],
    ids=["flow", "block"],
)
def test_libyaml_s_own_nesting_limit_is_nesting_too_deep_as_well(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nested: str, at: str
) -> None:
    # libyaml stops at 1,000 levels itself: with a limit of ours above that (or a libyaml
    # built with a lower one) its error is the one that answers, and it is still GS108
    monkeypatch.setattr(yamlbuild, "_Loader", yaml.CSafeLoader)
    monkeypatch.setattr(yamlbuild, "MAX_DEPTH", 5_000)
    write(tmp_path, {"c.yaml": CLUSTER + nested + "\n"})
    diagnostics = Diagnostics()
    assert load_repo(tmp_path, diagnostics) == []
    [problem] = diagnostics.sorted()
    assert problem.code == codes.TOO_DEEP
    message = "mappings and sequences nested deeper than the YAML parser allows"
    assert diagnostic_line(problem) == f"{tmp_path.as_posix()}/c.yaml:{at}: {message}"
