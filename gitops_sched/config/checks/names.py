"""Name checks: names Kubernetes derives from the repo must still be valid Kubernetes names.

A project's namespace (the cluster's prefix and the project's name) is a DNS-1123 label,
a workload's name becomes its Job's name and so a pod label value, and node group labels
are put on and matched against nodes. Kubernetes would reject the rendered objects
otherwise, so these are caught before anything is applied.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gitops_sched.config import codes
from gitops_sched.config.checks.common import _error
from gitops_sched.config.diagnostics import Diagnostic
from gitops_sched.config.model import Repo

MAX_NAMESPACE_LENGTH = 63  # a namespace is a DNS-1123 label
# A Job's name becomes the `job-name` label value of its pods (63 characters at most) and
# Kubernetes appends suffixes to it, so workloads keep the margin CronJobs use.
MAX_WORKLOAD_NAME_LENGTH = 52
MAX_LABEL_VALUE_LENGTH = 63
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def check_derived_names(repo: Repo) -> Iterator[Diagnostic]:
    """Names the compiler derives must still be valid Kubernetes names."""
    if repo.cluster is not None:
        for project in repo.projects:
            namespace = repo.cluster.project_namespace(project.name)
            if len(namespace) > MAX_NAMESPACE_LENGTH:
                yield _error(
                    project.doc,
                    ("metadata", "name"),
                    codes.NAME_TOO_LONG,
                    f"namespace '{namespace}' is {len(namespace)} characters, more than the "
                    f"{MAX_NAMESPACE_LENGTH} Kubernetes allows",
                )
    for workload in repo.workloads:
        if len(workload.name) > MAX_WORKLOAD_NAME_LENGTH:
            yield _error(
                workload.doc,
                ("metadata", "name"),
                codes.NAME_TOO_LONG,
                f"workload name is {len(workload.name)} characters, more than "
                f"{MAX_WORKLOAD_NAME_LENGTH} (its Job name becomes a pod label value)",
            )


def _valid_label_value(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= MAX_LABEL_VALUE_LENGTH
        and LABEL_VALUE.fullmatch(value) is not None
    )


def check_node_labels(repo: Repo) -> Iterator[Diagnostic]:
    """Node group labels are put on and matched against nodes; Kubernetes rejects bad values."""
    for group in repo.node_groups:
        labels = [(("spec", "nodeLabel", "value"), group.node_label[1])] + [
            (("spec", "nodeSelector", "matchLabels", key), value)
            for key, value in group.node_selector.items()
        ]
        for path, value in labels:
            if not _valid_label_value(value):
                yield _error(
                    group.doc,
                    path,
                    codes.BAD_LABEL_VALUE,
                    f"invalid label value '{value}' (at most {MAX_LABEL_VALUE_LENGTH} characters: "
                    "alphanumerics, '-', '_' and '.', beginning and ending with an alphanumeric)",
                )
