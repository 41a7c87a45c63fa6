"""Jinja2 expressions: the plain-lookup fast path renders exactly what Jinja2 renders, and
hostile expressions fail with a limit error instead of hanging or eating memory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from jinja2 import TemplateError, TemplateRuntimeError, UndefinedError

from gitops_sched.config import templating
from gitops_sched.config.templating import (
    TemplateLimitError,
    context_for,
    render_value,
    renders_everywhere,
    unknown_names,
)
from gitops_sched.validate import check_repo
from testkit.config_builders import doc
from tests.test_checks import check, found, line_at

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "oci-a100"

SOURCES = [
    "{{ project.name }}-{{ workload.name }}",
    "--nnodes={{ workload.replicas }}\n",  # Jinja2 drops one trailing newline
    "a {{- project.name -}} b\r\nc",
    "{{ project.quota.gpu }} GPUs",  # a float, or None without a quota
    "{{ project.quota }}",  # a dict: Jinja2 prints it
    "{% raw %}{{ x }}{% endraw %}{{ workload.type }}",
    "{{ workload.priority }}{# a comment #}",
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


@pytest.mark.parametrize(
    "source", ["{{ project.items }}", "{{ joiner() }}", "{{ ['a'] | map('upper') }}"]
)
def test_an_object_with_no_value_of_its_own_is_not_printed(source: str) -> None:
    # it would print its memory address: a different render each run
    context = contexts()[0]
    for render in (render_value, jinja2):
        with pytest.raises(TemplateRuntimeError, match=r"prints a .* object, not a value"):
            render(source, context)


def test_no_filter_draws_lots() -> None:
    with pytest.raises(TemplateError, match="No filter named 'random'"):
        jinja2("{{ range(10) | random }}", contexts()[0])


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


# Each class of hostile expression, and the limit it meets. Every one fails in
# milliseconds: the limits refuse the operation before Python builds its result.
LIMIT = "template expression exceeds a limit: "
HOSTILE = {
    # parser and compiler recursion (within MAX_TOKENS: past it, the source is refused unparsed)
    "parens": ("{{ " + "(" * 2000 + "1" + ")" * 2000 + " }}", "expression nested too deeply"),
    "lists": ("{{ " + "[" * 2000 + "]" * 2000 + " }}", "expression nested too deeply"),
    "nots": ("{{ " + "not " * 2000 + "1 }}", "expression nested too deeply"),
    "filters": ("{{ 'x'" + "|upper" * 2000 + " }}", "expression nested too deeply"),
    "blocks": ("{% if 1 %}" * 400 + "{% endif %}" * 400, "expression nested too deeply"),
    "macro": (
        "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
        "calls nested too deeply (a macro or loop calling itself)",
    ),
    # memory
    "repeat": ("{{ 'a' * 10**9 }}", "'*' makes a string or list longer than 100,000"),
    "repeat-list": ("{{ 10**9 * [1] }}", "'*' makes a string or list longer than 100,000"),
    "center": ("{{ 'x'|center(10**9) }}", "'center' width of 1,000,000,000 is over 100,000"),
    "ljust": ("{{ 'x'.ljust(10**9) }}", "'ljust' width of 1,000,000,000 is over 100,000"),
    "indent": ("{{ 'x'|indent(10**9) }}", "'indent' width of 1,000,000,000 is over 100,000"),
    "format": ("{{ '%999999999d'|format(1) }}", "'format' width of 999,999,999 is over 100,000"),
    "percent": ("{{ '%*d' % (10**9, 1) }}", "'%' format width of 1,000,000,000 is over 100,000"),
    "str.format": (
        "{{ '{:{}}'.format(1, 10**9) }}",
        "'format' width of 1,000,000,000 is over 100,000",
    ),
    "indent-lines": (
        "{{ ('x\\n' * 50000)|indent(100000) }}",
        "'indent' makes a string longer than 100,000",
    ),
    "widths": (
        "{{ ('%99999s' * 100) % ((1,) * 100) }}",
        "'%' format widths add up to more than 100,000",
    ),
    "batch": ("{{ [1]|batch(10**9)|list }}", "'batch' size of 1,000,000,000 is over 100,000"),
    "replace": (
        "{{ ('a' * 1000)|replace('a', 'b' * 1000) }}",
        "'replace' makes a string longer than 100,000",
    ),
    "doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s }}",
        "'~' makes a string longer than 100,000",
    ),
    "captured": (
        "{% set ns = namespace(s='ab') %}{% for i in range(60) %}"
        "{% set ns.s %}{{ ns.s }}{{ ns.s }}{% endset %}{% endfor %}",
        "output longer than 100,000 characters",
    ),
    "shared": (  # small in memory, a million characters printed
        "{% set a = ['x' * 1000] * 10 %}{% set b = [a, a, a, a, a, a, a, a, a, a] %}"
        "{% set c = [b, b, b, b, b, b, b, b, b, b] %}{{ c }}",
        "a literal makes a string or list longer than 100,000",
    ),
    "join": ("{{ (['y'] * 10000)|join('z' * 100) }}", "'join' makes a string longer than 100,000"),
    "output": (
        "{% for i in range(9999) %}{{ 'x' * 99 }}{% endfor %}",
        "output longer than 100,000 characters",
    ),
    # CPU
    "power": ("{{ 2 ** 99999999 }}", "'**' makes an integer of more than 4,096 bits"),
    "product": ("{{ (10**1000) * (10**1000) }}", "'*' makes an integer of more than 4,096 bits"),
    "range": (
        "{% for i in range(10**9) %}{% endfor %}",
        "range() of 1,000,000,000 items is over 10,000",
    ),
    "loops": (
        "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
        "more than 100,000 loop iterations",
    ),
}


@pytest.mark.parametrize(("source", "message"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_expression_meets_a_limit(source: str, message: str) -> None:
    with pytest.raises(TemplateLimitError) as error:
        unknown_names(source)  # parsing, as the checks do first
        render_value(source, contexts()[0])
    assert str(error.value) == LIMIT + message


def test_a_render_that_runs_out_of_time_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templating, "MAX_SECONDS", -1.0)  # already over at the first step
    with pytest.raises(TemplateLimitError, match="rendering took more than -1 seconds"):
        render_value("{% for i in range(3) %}{{ i }}{% endfor %}", contexts()[0])


@pytest.mark.parametrize(
    ("source", "rendered"),
    [
        ("{{ 'ab' * 3 }}-{{ 2 ** 10 }}-{{ [0] * 2 }}", "ababab-1024-[0, 0]"),
        ("{{ '%05d'|format(7) }}-{{ '{:>3}'.format(1) }}-{{ 'x'|center(3) }}", "00007-  1- x "),
        ("{% for i in range(3) %}{{ i }}{% endfor %}-{{ workload.name ~ '!' }}", "012-w!"),
        ("{{ 'x' * 100000 }}", "x" * 100_000),  # at the limits, not over
    ],
)
def test_ordinary_expressions_are_within_the_limits(source: str, rendered: str) -> None:
    assert render_value(source, {"workload": {"name": "w"}}) == rendered


@pytest.fixture
def repo_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_render_limit_is_reported_at_the_expression(repo_dir: Path) -> None:
    template = doc("Template", "t", image="x", env={"PAD": "{{ 'x'|center(10**9) }}"})
    workload = doc("Workload", "w", project="vision", template="t")
    diagnostics = check(repo_dir, template, workload)
    message = "cannot render template expression: " + LIMIT + HOSTILE["center"][1]
    assert found(diagnostics) == [("Template/t", "error", message)]
    assert line_at(diagnostics[0]) == "'{{ ''x''|center(10**9) }}'"


def test_too_deep_an_expression_is_reported_once_at_it(repo_dir: Path) -> None:
    deep = HOSTILE["parens"][0]
    template = doc("Template", "t", image="x", command=["run", deep])
    workloads = [doc("Workload", name, project="vision", template="t") for name in ("a", "b")]
    diagnostics = check(repo_dir, template, *workloads)
    assert found(diagnostics) == [("Template/t", "error", LIMIT + "expression nested too deeply")]
    assert line_at(diagnostics[0]).startswith("'{{ (((")


# --- attributes: documented, and the nearest one suggested on a typo -----------------------


@pytest.mark.parametrize(
    ("source", "problems"),
    [
        ("{{ project.nmae }}", ["project has no attribute 'nmae'; did you mean 'name'?"]),
        (
            "{{ project.quota.gpus }}",
            ["project.quota has no attribute 'gpus'; did you mean 'gpu'?"],
        ),
        (
            '{{ cluster["schedulername"] }}',
            ["cluster has no attribute 'schedulername'; did you mean 'schedulerName'?"],
        ),
        (
            "{{ workload.tpye }}-{{ project.owner }}",  # in source order
            [
                "workload has no attribute 'tpye'; did you mean 'type'?",
                "project has no attribute 'owner' (it has: department, name, namespace, quota)",
            ],
        ),
        (
            "{{ project.nmae | upper }}{{ project.nmae.x }}",
            ["project has no attribute 'nmae'; did you mean 'name'?"],
        ),
        ("{{ project.name.upper() }}", []),  # past a value: the string's own methods
        ("{{ project.quota.gpu.real }}", []),
        ("{{ project.items }}", []),  # a dict method, as the sandbox reads it
        ("{% for project in [1] %}{{ project.x }}{% endfor %}", []),  # a name of its own
        ("{{ other.nmae }}", []),  # an unknown name: reported as such, not here
    ],
)
def test_unknown_attributes_name_the_nearest_one(source: str, problems: list[str]) -> None:
    assert list(templating.unknown_attributes(source)) == problems


def test_a_typo_is_reported_where_the_expression_is_written(repo_dir: Path) -> None:
    template = doc("Template", "t", image="x", workingDir="/data/{{ project.nmae }}")
    workloads = [doc("Workload", name, project="vision", template="t") for name in ("a", "b")]
    diagnostics = check(repo_dir, template, *workloads)
    message = "project has no attribute 'nmae'; did you mean 'name'?"
    assert found(diagnostics) == [("Template/t", "error", message)]  # once, not per workload
    assert [d.code.id for d in diagnostics if d.code] == ["GS705"]
    assert line_at(diagnostics[0]) == "/data/{{ project.nmae }}"


def _documented() -> list[str]:
    """The names the table in context_for's docstring lists."""
    return re.findall(r"^\s*\| `([a-zA-Z.]+)`", context_for.__doc__ or "", re.MULTILINE)


def _leaves(value: Any, prefix: str = "") -> list[str]:
    if not isinstance(value, dict):
        return [prefix]
    return [leaf for key, item in value.items() for leaf in _leaves(item, f"{prefix}{key}.")]


def test_the_documented_attributes_are_exactly_the_contexts() -> None:
    assert _documented() == [leaf.rstrip(".") for leaf in _leaves(templating._SHAPE)]
