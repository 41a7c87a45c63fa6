"""Where tables are printed: the terminal, or piped output (CI logs, step summaries, a file).

Piped output is as wide as `COLUMNS` says, else 160 columns (not rich's 80: UUIDs and
reasons would be cut), and its lines carry no trailing spaces (rich pads every cell).
"""

from __future__ import annotations

import io
import os
import sys
from typing import TextIO, cast

from rich.console import Console

PIPED_WIDTH = 160


class _Trimmed(io.TextIOBase):
    """A text stream that writes each line without its trailing spaces (a line not ended
    yet waits for its end; flushed unended, it is written as it is)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream
        self.partial = ""

    def write(self, text: str) -> int:
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            self.stream.write(line.rstrip() + "\n")
        return len(text)

    def flush(self) -> None:
        if self.partial:
            self.stream.write(self.partial)
            self.partial = ""
        self.stream.flush()


def output_console() -> Console:
    """A console for stdout: the terminal's own, or one for piped output (see module doc)."""
    console = Console()
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
    return Console(width=width, file=cast(TextIO, _Trimmed(sys.stdout)))
