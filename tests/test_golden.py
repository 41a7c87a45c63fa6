"""Each example's rendered stream, byte for byte, against `tests/golden/<example>.yaml`.

A change to the compiler or an example shows up here as a readable diff of Kubernetes YAML.
When the change is intended, regenerate the files and review them in the commit:

    UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_golden.py     (or: make golden)
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from gitops_sched.compiler import render_repo
from gitops_sched.compiler.output import write_stream
from gitops_sched.validate import check_repo

ROOT = Path(__file__).resolve().parent
CLUSTERS = ROOT.parent / "examples" / "clusters"
GOLDEN = ROOT / "golden"
EXAMPLES = sorted(p.name for p in CLUSTERS.iterdir() if p.is_dir() and p.name != "broken")


def rendered(example: str) -> str:
    repo, diagnostics = check_repo(CLUSTERS / example)
    assert repo is not None, [d.text() for d in diagnostics.sorted()]
    stream = io.StringIO()
    write_stream(render_repo(repo), stream)
    return stream.getvalue()


@pytest.mark.parametrize("example", EXAMPLES)
def test_rendered_stream_matches_golden(example: str) -> None:
    text = rendered(example)
    golden = GOLDEN / f"{example}.yaml"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"no {golden.name}: run with UPDATE_GOLDEN=1 to create it"
    assert text == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("example", EXAMPLES)
def test_rendering_twice_gives_the_same_bytes(example: str) -> None:
    assert rendered(example) == rendered(example)
