"""Port checks: a container's ports must be told apart.

Kubernetes refuses a container with two ports of one name, and a Service with two ports of
one name or of one port and protocol; interactive and inference workloads get a Service of
their container's ports. An unnamed port is named after its number (`port-8080`), so it
clashes with a port named so, and two unnamed ports of one number clash by name too. A
workload's ports come whole from one template or its own spec, so each list is checked
once, where it is written.
"""

from __future__ import annotations

from collections.abc import Iterator

from gitops_sched.config import codes
from gitops_sched.config.checks.common import error_at
from gitops_sched.config.checks.pods import own_pod_fields
from gitops_sched.config.diagnostics import Diagnostic
from gitops_sched.config.model import Repo, port_name, port_protocol


def check_ports(repo: Repo) -> Iterator[Diagnostic]:
    """Port names, and containerPort with protocol, are unique in a container."""
    for doc, fields in own_pod_fields(repo):
        names: dict[str, int] = {}
        numbers: dict[tuple[int, str], int] = {}
        for i, port in enumerate(fields.get("ports", ())):
            path = ("spec", "ports", i)
            name, number = port_name(port), (port["containerPort"], port_protocol(port))
            if (first := numbers.setdefault(number, i)) != i:  # its name clashes too, often
                message = (
                    f"port {number[0]}/{number[1]} is declared twice: also spec.ports[{first}]"
                )
                yield error_at(doc, (*path, "containerPort"), codes.PORT_TWICE, message)
            elif (first := names.setdefault(name, i)) != i:
                how = "" if "name" in port else f" (an unnamed port is named '{name}')"
                message = f"port name '{name}' is used twice{how}: also spec.ports[{first}]"
                yield error_at(doc, (*path, "name"), codes.PORT_TWICE, message)
