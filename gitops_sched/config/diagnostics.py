"""Diagnostics: every problem found in a run, with the place it points at and its code.

Like a compiler, the loader and the checks keep going after a problem and collect
all of them; the CLI prints them sorted and exits by the worst severity. Each carries a
stable code (`gitops_sched.config.codes`) that every output format shows, so CI and
`plan` can tell problems apart by code and object rather than by wording.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from gitops_sched.config.codes import Code

# Characters that would act on a terminal or a CI log instead of showing (ESC, BEL, C1
# controls, bidirectional overrides), and lone surrogates (a file name that is not UTF-8,
# which no UTF-8 writer prints): input text echoed in a message shows them escaped.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e"
    "\u2066-\u2069\ufeff\ud800-\udfff]"
)
# In a name or a path, which a line of output shows before the message, a newline or a tab
# would start what reads as another diagnostic: escaped there too
_CONTROL_IN_NAME = re.compile(f"[\n\t{_CONTROL.pattern[1:-1]}]")
MAX_MESSAGE_CHARS = 2000  # a message quoting a megabyte-long value shows its start only


def printable(text: str) -> str:
    """`text` with its control characters escaped (`\\x1b`); newlines and tabs stay."""
    return _CONTROL.sub(_escaped, text)


def printable_name(text: str) -> str:
    """printable, and newlines and tabs escaped too: for an object's name or a path."""
    return _CONTROL_IN_NAME.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    return ascii(match.group())[1:-1]


def _bounded(text: str, escape: Callable[[str], str] = printable) -> str:
    if len(text) <= MAX_MESSAGE_CHARS:
        return escape(text)
    cut = len(text) - MAX_MESSAGE_CHARS
    return f"{escape(text[:MAX_MESSAGE_CHARS])}... ({cut} more characters)"


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, order=True)
class Location:
    """A 1-based line and column in a file (paths as given, relative to the repo root)."""

    file: str
    line: int = 1
    col: int = 1

    def __str__(self) -> str:
        return f"{printable_name(self.file)}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Diagnostic:
    location: Location
    message: str
    obj: str = ""  # "Kind/name" of the object the problem belongs to, if known
    severity: Severity = Severity.ERROR
    code: Code | None = None  # every diagnostic has one; None only while a check lacks it

    def __post_init__(self) -> None:
        # messages and names quote the input: escaped and cut to a size here, once
        object.__setattr__(self, "message", _bounded(self.message))
        object.__setattr__(self, "obj", _bounded(self.obj, printable_name))

    def sort_key(self) -> tuple:
        return (self.location, self.obj, self.message)

    def text(self) -> str:
        """`FILE:LINE:COL: error GS301 Kind/name: message`, as compilers print them."""
        head = " ".join(str(part) for part in (self.severity.value, self.code, self.obj) if part)
        return f"{self.location}: {head}: {self.message}"

    def as_dict(self) -> dict:
        return {
            "file": self.location.file,
            "line": self.location.line,
            "col": self.location.col,
            "code": self.code.id if self.code else None,
            "object": self.obj,
            "severity": self.severity.value,
            "message": self.message,
        }

    def github(self) -> str:
        """A GitHub Actions workflow command, which GitHub shows as an annotation on the line."""
        loc = self.location
        title = " ".join(str(part) for part in (self.code, self.obj) if part) or "gitops-sched"
        return (
            f"::{self.severity.value} file={_gh_escape_property(printable(loc.file))},"
            f"line={loc.line},"
            f"col={loc.col},title={_gh_escape_property(title)}::{_gh_escape_data(self.message)}"
        )


def _gh_escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_escape_property(value: str) -> str:
    return _gh_escape_data(value).replace(":", "%3A").replace(",", "%2C")


@dataclass
class Diagnostics:
    """An append-only collection; sorted output makes runs comparable."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(
        self, location: Location, message: str, obj: str = "", code: Code | None = None
    ) -> None:
        self.items.append(Diagnostic(location, message, obj, Severity.ERROR, code))

    def warning(
        self, location: Location, message: str, obj: str = "", code: Code | None = None
    ) -> None:
        self.items.append(Diagnostic(location, message, obj, Severity.WARNING, code))

    def extend(self, other: Iterable[Diagnostic]) -> None:
        self.items.extend(other)

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.items)

    def sorted(self) -> list[Diagnostic]:
        return sorted(set(self.items), key=Diagnostic.sort_key)


def format_diagnostics(diagnostics: Iterable[Diagnostic], fmt: str) -> str:
    """Render diagnostics as `text` (one per line), `json` or `github` annotations."""
    items = list(diagnostics)
    if fmt == "json":
        errors = sum(d.severity is Severity.ERROR for d in items)
        payload = {
            "valid": errors == 0,
            "errors": errors,
            "warnings": len(items) - errors,
            "diagnostics": [d.as_dict() for d in items],
        }
        return json.dumps(payload, indent=2) + "\n"
    render = Diagnostic.github if fmt == "github" else Diagnostic.text
    return "".join(render(d) + "\n" for d in items)
