"""Jinja2 expressions: the plain-lookup fast path renders exactly what Jinja2 renders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jinja2 import UndefinedError

from gitops_sched.config import templating
from gitops_sched.config.templating import context_for, render_value, renders_everywhere
from gitops_sched.config.validate import check_repo

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "oci-a100"

SOURCES = [
    "{{ project.name }}-{{ workload.name }}",
    "--nnodes={{ workload.replicas }}\n",  # Jinja2 drops one trailing newline
    "a {{- project.name -}} b\r\nc",
    "{{ project.quota.gpu }} GPUs",  # a float, or None without a quota
    "{{ project.quota }}",  # a dict: Jinja2 prints it
    "{% raw %}{{ x }}{% endraw %}{{ workload.type }}",
    "{{ workload.priority }}{# a comment #}",
    "{{ project.items }}",  # a dict method: the sandbox reads the attribute
    "{{ cluster.name | upper }}",
    "{% if workload.replicas > 1 %}multi{% endif %}",
]


def contexts() -> list[dict[str, Any]]:
    repo, diagnostics = check_repo(EXAMPLE)
    assert repo is not None, [d.text() for d in diagnostics.sorted()]
    return [context_for(repo.cluster, repo.project(w.project), w) for w in repo.workloads] + [
        context_for(None, None, repo.workloads[0])
    ]


def jinja2(source: str, context: dict[str, Any]) -> str:
    return templating._ENV.from_string(source).render(context)


@pytest.mark.parametrize("source", SOURCES)
def test_rendering_is_exactly_jinja2s(source: str) -> None:
    for context in contexts():
        assert render_value(source, context) == jinja2(source, context)


def test_an_undefined_name_raises_as_jinja2_does() -> None:
    context = contexts()[0]
    with pytest.raises(UndefinedError) as fast:
        render_value("x-{{ project.nosuchattr }}", context)
    with pytest.raises(UndefinedError) as slow:
        jinja2("x-{{ project.nosuchattr }}", context)
    assert str(fast.value) == str(slow.value) == "'dict object' has no attribute 'nosuchattr'"


@pytest.mark.parametrize(
    ("source", "everywhere"),
    [
        ("{{ project.name }}-{{ workload.name }}", True),
        ("/ckpt/{{ project.namespace }}/{{ cluster.schedulerName }}", True),
        ("{{ project.quota.gpu }}", True),
        ("{{ project.owner }}", False),  # fails for every workload: the check reports it
        ("{{ project.quota.gpu.real }}", False),  # past a value: rendered per workload
        ("{{ workload.name | upper }}", False),
        ("{{ 10 / workload.replicas }}", False),
    ],
)
def test_renders_everywhere(source: str, everywhere: bool) -> None:
    assert renders_everywhere(source) is everywhere


def keys(value: Any) -> Any:
    return {k: keys(v) for k, v in value.items()} if isinstance(value, dict) else None


def test_every_context_has_the_same_names() -> None:
    for context in contexts():
        assert keys(context) == keys(templating._SHAPE)
