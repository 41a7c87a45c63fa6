"""Jinja2 in template string fields: sandboxed, strict about undefined names.

Only strings holding `{{`/`{%` are rendered, so plain values cost nothing. The same
environment serves the checks (which report unknown names) and the compiler.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateError, meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from gitops_sched.config.model import Cluster, Project, Workload

CONTEXT_NAMES = ("project", "workload", "cluster")

_ENV = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


def is_templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


@lru_cache(maxsize=4096)
def _compile(source: str):
    return _ENV.from_string(source)


def unknown_names(source: str) -> list[str]:
    """Top-level names an expression uses that the context will not have."""
    names = meta.find_undeclared_variables(_ENV.parse(source))
    return sorted(n for n in names if n not in CONTEXT_NAMES)


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


def render_value(value: Any, context: dict[str, Any]) -> Any:
    """Render every templated string inside `value` (lists and dicts walked)."""
    if isinstance(value, dict):
        return {k: render_value(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, context) for v in value]
    if is_templated(value):
        return _compile(value).render(context)
    return value


__all__ = [
    "CONTEXT_NAMES",
    "TemplateError",
    "context_for",
    "is_templated",
    "render_value",
    "unknown_names",
]
