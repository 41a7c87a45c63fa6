"""Jinja2 in template string fields: sandboxed, strict about undefined names.

Only strings holding `{{`/`{%` are rendered, so plain values cost nothing. The same
environment serves the checks (which report unknown names) and the compiler.

Most expressions only print context values (`{{ project.name }}-{{ workload.name }}`);
a large repo renders them tens of thousands of times, and a Jinja2 render call costs far
more than the lookups themselves. So each source is also compiled to a plain lookup plan
when Jinja2's own parse of it is only text and attribute chains; the plan does what the
sandboxed environment does for plain dicts, and hands anything else (a missing name, a
value other than a string or number) to Jinja2, which renders it or raises as ever.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateError, meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from gitops_sched.config.model import Cluster, Project, Workload

CONTEXT_NAMES = ("project", "workload", "cluster")

_ENV = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
# What a plan prints as Jinja2 does (with `str`); other values take Jinja2's own path.
_PRINTABLE = (str, int, float, bool)

Render = Callable[[dict[str, Any]], str]
Plan = tuple[str | tuple[str, ...], ...]  # text, or a name and its attribute chain


def is_templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


@lru_cache(maxsize=4096)
def _compile(source: str) -> Render:
    render = _ENV.from_string(source).render
    plan = _plan(source)
    if plan is None:
        return render
    return lambda context: _run_plan(plan, context, render)


@lru_cache(maxsize=4096)
def _plan(source: str) -> Plan | None:
    """The template as text and attribute lookups, or None when it does anything else."""
    parts: list[str | tuple[str, ...]] = []
    for output in _ENV.parse(source).body:
        if not isinstance(output, nodes.Output):
            return None
        for node in output.nodes:
            if isinstance(node, nodes.TemplateData):
                parts.append(node.data)
            elif (chain := _attribute_chain(node)) is not None:
                parts.append(chain)
            else:
                return None
    return tuple(parts)


def _attribute_chain(node: nodes.Node) -> tuple[str, ...] | None:
    """`project.quota.gpu` as ("project", "quota", "gpu"), when a dict item is what it reads.

    The sandbox reads `obj.attr` as the attribute when `obj` has one, else as the item:
    names of dict attributes (`items`, `keys`, ...) are left to Jinja2.
    """
    chain: list[str] = []
    while isinstance(node, nodes.Getattr):
        if hasattr(dict, node.attr):
            return None
        chain.append(node.attr)
        node = node.node
    if not isinstance(node, nodes.Name) or not chain:
        return None
    return (node.name, *reversed(chain))


def _run_plan(plan: Plan, context: dict[str, Any], render: Render) -> str:
    out: list[str] = []
    for part in plan:
        if isinstance(part, str):
            out.append(part)
            continue
        value: Any = context
        for name in part:
            if type(value) is not dict or name not in value:
                return render(context)  # Jinja2 decides: another type, or an undefined name
            value = value[name]
        if not isinstance(value, _PRINTABLE):
            return render(context)
        out.append(str(value))
    return "".join(out)


def renders_everywhere(source: str) -> bool:
    """True when `source` renders for every workload: text and lookups of names every
    context has (`{{ project.name }}`), so no workload's values can make it fail."""
    plan = _plan(source)
    return plan is not None and all(isinstance(part, str) or _always_defined(part) for part in plan)


def _always_defined(chain: tuple[str, ...]) -> bool:
    shape: Any = _SHAPE
    for name in chain:
        if not isinstance(shape, dict) or name not in shape:
            return False
        shape = shape[name]
    return True


@lru_cache(maxsize=4096)
def unknown_names(source: str) -> tuple[str, ...]:
    """Top-level names an expression uses that the context will not have."""
    names = meta.find_undeclared_variables(_ENV.parse(source))
    return tuple(sorted(n for n in names if n not in CONTEXT_NAMES))


def context_for(cluster: Cluster | None, project: Project | None, workload: Workload) -> dict:
    """What template expressions may refer to: `project.*`, `workload.*`, `cluster.*`."""
    prefix = cluster.namespace_prefix if cluster else "project-"
    project_ctx = {
        "name": workload.project,
        "namespace": f"{prefix}{workload.project}",
        "department": project.department if project else "",
        "quota": {"gpu": project.quota.gpu if project else None},
    }
    workload_ctx = {
        "name": workload.name,
        "type": workload.type,
        "project": workload.project,
        "replicas": workload.replicas,
        "priority": workload.priority,
    }
    cluster_ctx = {
        "name": cluster.name if cluster else "",
        "schedulerName": cluster.scheduler_name if cluster else "gitops-sched",
        "systemNamespace": cluster.system_namespace if cluster else "gitops-sched-system",
    }
    return {"project": project_ctx, "workload": workload_ctx, "cluster": cluster_ctx}


# Every context has the same names, whatever the cluster, project and workload (or their
# absence): the context of a placeholder workload shows them.
_SHAPE = context_for(
    None,
    None,
    Workload(
        name="",
        project="",
        type="train",
        template=None,
        overrides={},
        replicas=1,
        min_available=1,
        priority=0,
        preemptible=True,
        node_group=None,
        doc=None,  # type: ignore[arg-type]  # never read: a context needs no document
    ),
)


def render_value(value: Any, context: dict[str, Any]) -> Any:
    """Render every templated string inside `value` (lists and dicts walked)."""
    if isinstance(value, dict):
        return {k: render_value(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, context) for v in value]
    if is_templated(value):
        return _compile(value)(context)
    return value


__all__ = [
    "CONTEXT_NAMES",
    "TemplateError",
    "context_for",
    "is_templated",
    "render_value",
    "renders_everywhere",
    "unknown_names",
]
