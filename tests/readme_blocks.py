"""Tables the README shows between `<!-- NAME: begin -->` and `<!-- NAME: end -->`, which
tests generate: `check(name, text)` fails when the README's block differs, and rewrites it
instead under `UPDATE_README=1`."""

from __future__ import annotations

import os
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def check(name: str, wanted: str) -> None:
    text = README.read_text(encoding="utf-8")
    begin, end = f"<!-- {name}: begin -->\n", f"<!-- {name}: end -->"
    head, rest = text.split(begin)
    body, tail = rest.split(end)
    if os.environ.get("UPDATE_README"):
        README.write_text(head + begin + wanted + end + tail, encoding="utf-8")
        return
    assert body == wanted, f"README's {name!r} block is not what the test derives"
