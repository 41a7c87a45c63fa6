"""What the files that did not load may define: their objects are unknown, not missing.

A file with a YAML syntax error (or any other loading error: a duplicate key, a document
that is not a mapping) still holds the objects its author meant. Reporting every reference
to them as "unknown Project 'vision'" would bury the one real error under its echoes in
other files, so, precisely:

- a name counts as possibly defined when it appears as a word (letters, digits, `.`, `_`,
  `-`: every name the schemas allow is one) anywhere in the text of such a file;
- a kind counts as possibly incomplete when its name appears there as a word, so checks
  that add a kind up (quotas, capacity) and "no Cluster document" wait for the file too;
- a path read without any text (unreadable, over the size limit) may define anything.

A reference to a name that appears in no broken file is still reported: that name is
missing wherever the broken files' objects turn out to be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gitops_sched.config.loader import Unreadable

_WORD = re.compile(rb"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Unread:
    """The words of the files that did not load, or `anything` when one had no text."""

    words: frozenset[str] = frozenset()
    anything: bool = False

    @staticmethod
    def of(raw: bytes | Unreadable) -> Unread:
        """What one file that did not load (in whole or in part) may define."""
        if isinstance(raw, Unreadable):
            return Unread(anything=True)
        return Unread(frozenset(word.decode("ascii") for word in _WORD.findall(raw)))

    def __or__(self, other: Unread) -> Unread:
        return Unread(self.words | other.words, self.anything or other.anything)

    def may_define(self, word: str) -> bool:
        """Whether a name (or a kind) may be defined in what could not be loaded."""
        return self.anything or word in self.words


NOTHING_UNREAD = Unread()
