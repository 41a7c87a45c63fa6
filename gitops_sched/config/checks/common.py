"""Helpers the check modules share: diagnostics, and numbers as messages print them.

Every check reports a problem of one document at the value a path names (`error_at`, or
`diagnostic_at` with a severity), with its code from `gitops_sched.config.codes`, so an
editor or CI annotation points at the right line and CI can tell problems apart.
Messages print GPU counts, CPU counts and byte sizes the way a user writes them in the
repo (4, 0.5, 80Gi) and list the objects behind a sum, so they read naturally and stay
stable from run to run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal

from gitops_sched.config.codes import Code
from gitops_sched.config.diagnostics import Diagnostic, Severity
from gitops_sched.config.document import Document, Path_

Number = float | Decimal


def diagnostic_at(
    doc: Document, path: Path_, code: Code, message: str, severity: Severity
) -> Diagnostic:
    """A problem of `doc`, at the value `path` names (or its nearest existing ancestor)."""
    return Diagnostic(doc.location(path), message, doc.ref, severity, code)


def error_at(doc: Document, path: Path_, code: Code, message: str) -> Diagnostic:
    return diagnostic_at(doc, path, code, message, Severity.ERROR)


def key_error_at(doc: Document, path: Path_, code: Code, message: str) -> Diagnostic:
    """An error about a whole field (a list, a block): at its key rather than its first item."""
    return Diagnostic(doc.key_location(path), message, doc.ref, Severity.ERROR, code)


# --- formatting: numbers as a user would write them, so messages stay stable ---------------


def format_number(value: Number) -> str:
    """4, 0.5, 2.25: no float noise, no trailing zeros."""
    return format(Decimal(value).quantize(Decimal("0.0001")).normalize(), "f")


_MEMORY_UNITS = (
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
    ("T", 10**12),
    ("G", 10**9),
    ("M", 10**6),
    ("k", 10**3),
)


def format_memory(value: Number) -> str:
    """Bytes in the largest unit that divides them, as Kubernetes quantities are written."""
    exact = Decimal(value)
    for suffix, size in _MEMORY_UNITS:
        if exact >= size and exact % size == 0:
            return f"{format_number(exact / size)}{suffix}"
    return format_number(exact)


def itemized(items: Sequence[tuple[str, Number]], fmt: Callable[[Number], str]) -> str:
    """`a 8, b 4`: which objects make up a sum."""
    return ", ".join(f"{name} {fmt(value)}" for name, value in items)
