"""Hints for the YAML syntax errors people actually make: a tab, a key indented wrong.

The parser's own words ("mapping values are not allowed in this context", "did not find
expected key") say what it met, not what to change. Most of these errors are one line
indented with a tab, or one key indented a level too deep or between two levels; the text
around the error says which, so the hint names the lines and the key to line it up with.
The hint reads only the text (both of PyYAML's parsers word their errors differently).
"""

from __future__ import annotations

from dataclasses import dataclass

_DEEPER = "mapping values are not allowed"  # libyaml: "in this context", pure Python: "here"


@dataclass(frozen=True)
class _Line:
    number: int  # 1-based
    indent: int  # spaces before the first character
    text: str  # without the indentation

    @property
    def label(self) -> str:
        """`quota:` for a key, else the start of the line."""
        key, colon, _ = self.text.partition(":")
        shown = f"{key}:" if colon else self.text
        return f"`{shown[:40]}`"


def syntax_hint(text: str, line: int, problem: str | None) -> str | None:
    """What to change for a syntax error at 0-based `line` of `text`, if it is a common one."""
    lines = text.splitlines()
    if not 0 <= line < len(lines):
        return None
    here = lines[line]
    indentation = here[: len(here) - len(here.lstrip(" \t"))]
    if "\t" in indentation:
        return f"line {line + 1} is indented with a tab: YAML indents with spaces only"
    at = _Line(line + 1, len(indentation), here.strip())
    open_keys = _open_keys(lines, line)
    if not open_keys or at.indent in {key.indent for key in open_keys}:
        return None
    above = open_keys[0]  # the line before, whose indentation `at` should follow
    if at.indent > above.indent and problem and problem.startswith(_DEEPER):
        parent = f" (under {open_keys[1].label})" if len(open_keys) > 1 else ""
        return (
            f"{at.label} is indented deeper than {above.label} on line {above.number}, which "
            f"already has a value: indent it like {above.label}{parent}?"
        )
    deeper = [key for key in open_keys if key.indent > at.indent]
    shallower = [key for key in open_keys if key.indent < at.indent]
    if not deeper or not shallower:
        return None
    inner, outer = deeper[-1], shallower[0]
    parent = f" (under {shallower[1].label})" if len(shallower) > 1 else ""
    spaces = f"{at.indent} space{'s' * (at.indent != 1)}"
    return (
        f"line {at.number} is indented {spaces}, between {outer.label} "
        f"({outer.indent}) and {inner.label} ({inner.indent}): indent it like {inner.label} "
        f"(under {outer.label}) or like {outer.label}{parent}?"
    )


def _open_keys(lines: list[str], line: int) -> list[_Line]:
    """The lines whose blocks are open at `line`: the line before it, then each line
    less indented than the last one found, back to the document's start (innermost first)."""
    found: list[_Line] = []
    for number in range(line - 1, -1, -1):
        text = lines[number]
        stripped = text.strip()
        if stripped.startswith(("---", "...")) and not text[0].isspace():
            break
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(text) - len(text.lstrip(" "))
        if not found or indent < found[-1].indent:
            found.append(_Line(number + 1, indent, stripped))
            if indent == 0:
                break
    return found
