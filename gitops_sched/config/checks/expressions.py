"""Expression checks: the Jinja2 expressions in pod fields must parse and render.

Syntax errors, unknown names and attributes no context has (`project.nmae`, with the
nearest one there is) are reported once, where the expression is written;
then each workload's expressions are rendered as the compiler will render them (an
attribute that does not exist, a division by zero), and a failure is reported at the
document whose value the workload gets, as is a rendered value the field's schema refuses
(`image: "{{ '' }}"` renders an empty image): what an expression renders meets the rules
of a value written there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from functools import lru_cache
from typing import Any

from jinja2 import TemplateSyntaxError

from gitops_sched.config import codes
from gitops_sched.config.checks.common import error_at
from gitops_sched.config.checks.pods import field_source, own_pod_fields
from gitops_sched.config.codes import Code
from gitops_sched.config.diagnostics import Diagnostic
from gitops_sched.config.document import Path_
from gitops_sched.config.model import Repo, Workload
from gitops_sched.config.schema import rendered_problems
from gitops_sched.config.templating import (
    CONTEXT_NAMES,
    TemplateLimitError,
    TemplateTimeError,
    context_for,
    is_templated,
    render_value,
    renders_everywhere,
    unknown_attributes,
    unknown_names,
)


def _templated_strings(value: Any, path: Path_) -> Iterator[tuple[Path_, str]]:
    """Every string holding a Jinja2 expression inside a value, with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _templated_strings(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _templated_strings(item, (*path, i))
    elif is_templated(value):
        yield path, value


@lru_cache(maxsize=4096)  # the same few expressions come back for every workload
def _expression_problems(source: str) -> tuple[tuple[Code, str], ...]:
    """What is wrong with an expression whatever workload it is rendered for."""
    try:
        names = unknown_names(source)
    except TemplateSyntaxError as exc:
        return ((codes.TEMPLATE_SYNTAX, f"template syntax error: {exc.message}"),)
    except TemplateTimeError:
        raise  # the run's time, not this expression's problem: never cached
    except TemplateLimitError as exc:  # nested too deeply to parse, or too long
        return ((codes.TEMPLATE_LIMIT, str(exc)),)
    known = ", ".join(CONTEXT_NAMES)
    return tuple(
        (
            codes.TEMPLATE_UNKNOWN_NAME,
            f"unknown name '{name}' in template expression (known: {known})",
        )
        for name in names
    ) + tuple((codes.TEMPLATE_UNKNOWN_ATTRIBUTE, m) for m in unknown_attributes(source))


def check_template_expressions(repo: Repo) -> Iterator[Diagnostic]:
    """Syntax errors and unknown names, reported once where the expression is written."""
    for doc, fields in own_pod_fields(repo):
        for path, source in _templated_strings(fields, ("spec",)):
            try:
                problems = _expression_problems(source)
            except TemplateTimeError as exc:  # one error, at the first expression not checked
                yield error_at(doc, path, *_spent(exc))
                return
            for code, message in problems:
                yield error_at(doc, path, code, message)


def _merged_fields(repo: Repo, workload: Workload) -> Iterator[tuple[Path_, Any]]:
    """The workload's merged pod fields by path below `spec`; `env` one variable at a time."""
    for key, value in repo.pod_spec(workload).items():
        if key == "env" and isinstance(value, dict):
            for name, item in value.items():
                yield (key, name), item
        else:
            yield (key,), value


def check_template_rendering(repo: Repo) -> Iterator[Diagnostic]:
    """Render each workload's expressions as the compiler will (e.g. `project.nosuchattr`)."""
    # Most field values come from templates, shared by many workloads: each value is searched
    # once for the expressions that need rendering per workload (keyed by identity: the repo
    # keeps every value alive meanwhile).
    found: dict[int, list[tuple[Path_, str]]] = {}
    checked: Checked = {}
    try:
        for workload in repo.workloads:
            yield from _rendering_problems(repo, workload, found, checked)
    except _TimeSpent:  # reported at the render that ran out of time; no later one is tried
        return


class _TimeSpent(Exception):
    """The run's template time ran out (TemplateTimeError, once reported)."""


def _spent(exc: TemplateTimeError) -> tuple[Code, str]:
    return codes.TEMPLATE_LIMIT, f"{exc}; the expressions after this one are not checked"


# The schema problems of a rendered value, by document, path and value: the workloads of a
# project often render a template's expression alike.
Checked = dict[tuple[int, Path_, str], list[Diagnostic]]


def _rendering_problems(
    repo: Repo, workload: Workload, found: dict[int, list[tuple[Path_, str]]], checked: Checked
) -> Iterator[Diagnostic]:
    context = None
    for field, value in _merged_fields(repo, workload):
        if (sources := found.get(id(value))) is None:
            try:
                sources = found[id(value)] = _to_render(value)
            except TemplateTimeError as exc:
                yield error_at(field_source(repo, workload, field), ("spec", *field), *_spent(exc))
                raise _TimeSpent from exc
        for path, source in sources:
            if context is None:
                context = context_for(repo.cluster, repo.project(workload.project), workload)
            doc, where = field_source(repo, workload, field), ("spec", *field, *path)
            try:
                value = render_value(source, context)
            except Exception as exc:  # user expressions may raise anything (1/0, bad types)
                limit = isinstance(exc, TemplateLimitError)
                code = codes.TEMPLATE_LIMIT if limit else codes.TEMPLATE_RENDER
                message = f"cannot render template expression: {exc}"
                yield error_at(doc, where, code, message)
                if isinstance(exc, TemplateTimeError):
                    raise _TimeSpent from exc
                continue
            if (problems := checked.get(key := (id(doc), where, value))) is None:
                problems = checked[key] = rendered_problems(doc, where, value)
            for problem in problems:
                message = f"{problem.message} (rendered from '{source}' for {workload.doc.ref})"
                yield replace(problem, message=message)


def _to_render(value: Any) -> list[tuple[Path_, str]]:
    """The expressions in `value` whose rendering may fail for some workload.

    Not those with problems of their own (check_template_expressions reports them), nor
    those that only print names every context has.
    """
    return [
        (path, source)
        for path, source in _templated_strings(value, ())
        if not _expression_problems(source) and not renders_everywhere(source)
    ]
