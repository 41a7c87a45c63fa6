"""Which files of a config repo are left out: `.gitops-schedignore` and `--exclude GLOB`.

The ignore file sits at the repo's root and uses gitignore syntax (negation, folder
patterns, `**`, `[a-z]` classes); each `--exclude` is one more line of the same syntax,
after the file's, so it can override it. Paths are matched relative to the repo root with
`/` separators, folders with a trailing `/`; the last pattern that matches the path itself
decides, else the last that matches a folder above it (the precedence of the `pathspec`
library's GitIgnoreSpec, which this replaces).

Both are untrusted input, so matching costs time linear in the path for each pattern, never
exponential: a pattern is split at `/` into segments, `**` segments match any number of
path components (a set of positions, no backtracking), and each other segment matches one
component through a regular expression whose stars are atomic (`(?>.*?piece)`, as
`fnmatch` does), which cannot backtrack past a piece once found. The rules are bounded too
(`MAX_PATTERNS` patterns of at most `MAX_PATTERN_CHARS`); a malformed pattern (a reversed
range `[z-a]`, a `[` without its `]`, an unknown `[:class:]`, a trailing backslash) is a
`BadPattern`, reported as GS103 (Git would silently match nothing).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum

IGNORE_FILE = ".gitops-schedignore"
MAX_PATTERNS = 500  # patterns (not comments or blank lines) of the file and --exclude
MAX_PATTERN_CHARS = 256
MAX_RULES_CHARS = 16_384  # all patterns together
_ANY = "**"
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "\\x21-\\x7e",
    "lower": "a-z",
    "print": "\\x20-\\x7e",
    "punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}


class BadPattern(ValueError):
    """A line of the ignore file (or an --exclude) that is no gitignore pattern; `line`,
    the ignore file's line it was found on."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


class Match(IntEnum):
    """How a pattern matched a path: through a folder above it, or the path itself."""

    FOLDER = 1
    PATH = 2


class _Pattern:
    """One gitignore line, compiled: a regex per path component, or `_ANY` for `**`.

    Matching runs over the path's components, keeping the set of segment positions reached
    as bits of an int (bit k: the first k segments matched so far) plus one bit, `seen`,
    for "all segments matched some components ago" (a folder above the path matched).
    States are passed down a folder tree, so a path costs one step per pattern, not one
    per component above it.
    """

    __slots__ = (
        *("any", "descendants", "done", "end", "excludes", "folder_pattern", "globs"),
        *("seen", "single", "special", "start"),
    )

    def __init__(
        self,
        excludes: bool,
        segments: list[str],
        folder_pattern: bool,
        special: str,
        line: str,
    ) -> None:
        self.excludes = excludes  # False for a `!` negation
        self.folder_pattern = folder_pattern  # written with a trailing `/`
        self.special = special  # "all", "nested", "nested-folder": by the path's shape
        # ends with `/` or `/**`: matches only what is below a folder the rest matched
        self.descendants = bool(segments) and segments[-1] == _ANY
        core = segments[:-1] if self.descendants else segments
        self.globs = {k: _segment(p, line) for k, p in enumerate(core) if p != _ANY}
        self.any = sum(1 << k for k, p in enumerate(core) if p == _ANY)
        self.end = 1 << len(core)
        self.seen = self.end << 1
        self.done = self.end | self.seen
        self.single = (self.end - 1) & ~self.any  # the positions before a one-component glob
        self.start = self._closure(1)

    def _closure(self, state: int) -> int:
        """`**` matches no component too: a position before one also stands after it (two
        `**` are never adjacent, so one shift is the whole closure)."""
        return state | ((state & self.any) << 1)

    def step(self, state: int, component: str) -> int:
        """The state after one more component."""
        seen = self.seen if state & self.done else 0
        following = state & self.any
        active = state & self.single
        while active:
            low = active & -active
            active ^= low
            if self.globs[low.bit_length() - 1].fullmatch(component):
                following |= low << 1
        return self._closure(following) | seen

    def match(self, state: int, components: int) -> Match | None:
        """How the path of `components` components, ending in `state`, matches."""
        if self.special:
            if self.special == "all":
                return Match.PATH
            if components < 2:
                return None
            return Match.FOLDER if self.special == "nested-folder" else Match.PATH
        if self.descendants:
            if not state & self.seen:
                return None
            return Match.FOLDER if self.folder_pattern else Match.PATH
        if state & self.end:
            return Match.PATH
        return Match.FOLDER if state & self.seen else None


_CACHED_FOLDERS = 1_024  # folders whose states are kept (a walk needs the parent's)


@dataclass(frozen=True)
class IgnoreRules:
    """The ignore file's lines plus the `--exclude` patterns, in order."""

    patterns: tuple[_Pattern, ...]
    _folders: dict[str, tuple[int, ...]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, ignore_text: str = "", excludes: Iterable[str] = ()) -> IgnoreRules:
        """Raises BadPattern for a malformed pattern or past the bounds."""
        patterns, chars = [], 0
        lines = ignore_text.splitlines()
        for number, line in enumerate([*lines, *excludes]):
            try:
                pattern = _compile(line)
            except BadPattern as exc:
                if number < len(lines):
                    raise BadPattern(str(exc), number + 1) from None
                raise BadPattern(f"--exclude {exc}") from None
            if pattern is None:
                continue
            patterns.append(pattern)
            chars += len(line)
            at = min(number, len(lines)) + 1  # past the file's lines: the --exclude's
            if len(patterns) > MAX_PATTERNS:
                raise BadPattern(f"more than {MAX_PATTERNS} patterns", at)
            if chars > MAX_RULES_CHARS:
                raise BadPattern(f"patterns longer than {MAX_RULES_CHARS} characters together", at)
        return cls(tuple(patterns))

    def ignores(self, relative: str, folder: bool = False) -> bool:
        """Whether the file (or folder) at `relative`, below the repo root, is left out."""
        if not self.patterns:
            return False
        if folder:
            parent, last, depth = relative, "", relative.count("/") + 2
        else:
            parent, _, last = relative.rpartition("/")
            depth = relative.count("/") + 1
        states = self._states(parent)
        folder_verdict: bool | None = None
        # the last match of the path itself decides, else the last of a folder above it
        for pattern, state in zip(reversed(self.patterns), reversed(states), strict=True):
            found = pattern.match(pattern.step(state, last), depth)
            if found is Match.PATH:
                return pattern.excludes
            if found is Match.FOLDER and folder_verdict is None:
                folder_verdict = pattern.excludes
        return bool(folder_verdict)

    def leaves_out(self, relative: str, folder: bool = False) -> bool:
        """As a folder walk decides: the path, or any folder above it, left out."""
        parts = relative.split("/")
        above = ("/".join(parts[: i + 1]) for i in range(len(parts) - 1))
        return any(self.ignores(f, folder=True) for f in above) or self.ignores(relative, folder)

    def _states(self, folder: str) -> tuple[int, ...]:
        """Each pattern's state after the components of `folder` ("" for the root)."""
        missing = []
        while folder and folder not in self._folders:
            folder, _, name = folder.rpartition("/")
            missing.append(name)
        states = self._folders.get(folder) if folder else None
        if states is None:
            states = tuple(p.start for p in self.patterns)
        for name in reversed(missing):
            folder = f"{folder}/{name}" if folder else name
            states = tuple(p.step(s, name) for p, s in zip(self.patterns, states, strict=True))
            if len(self._folders) >= _CACHED_FOLDERS:
                self._folders.clear()
            self._folders[folder] = states
        return states


def _compile(line: str) -> _Pattern | None:
    """One line as a pattern; None for a blank line or comment."""
    text = line if line.endswith("\\ ") else line.rstrip()
    if not text or text.startswith("#") or text == "/":
        return None
    if len(text) > MAX_PATTERN_CHARS:
        raise BadPattern(f"pattern longer than {MAX_PATTERN_CHARS} characters: {text[:40]!r}...")
    excludes = not text.startswith("!")
    body = text if excludes else text[1:]
    parts = body.split("/")
    folder_pattern = parts[-1] == ""
    if parts[0] == "":
        del parts[0]  # `/x`: anchored at the root
    elif (len(parts) == 1 or (len(parts) == 2 and folder_pattern)) and parts[0] != _ANY:
        parts.insert(0, _ANY)  # no `/` inside: at any depth
    if not parts:
        raise BadPattern(f"{line!r} matches nothing")
    if parts[-1] == "":
        parts[-1] = _ANY
    collapsed = [p for i, p in enumerate(parts) if not (p == _ANY and i and parts[i - 1] == _ANY)]
    special = _special(collapsed, folder_pattern)
    return _Pattern(excludes, [] if special else collapsed, folder_pattern, special, line)


def _special(parts: list[str], folder_pattern: bool) -> str:
    """Patterns that match by the path's shape alone: `**`, `*`, `**/`, `*/`."""
    if parts in ([_ANY], [_ANY, "*"]):
        return "nested-folder" if folder_pattern and parts == [_ANY] else "all"
    if parts == [_ANY, "*", _ANY]:
        return "nested-folder" if folder_pattern else "nested"
    return ""


def _segment(glob: str, line: str) -> re.Pattern[str]:
    """A regex matching one path component as the glob does; every star is atomic."""
    pieces: list[list[str]] = [[]]
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "*":
            if pieces[-1] or len(pieces) == 1:
                pieces.append([])
        elif char == "?":
            pieces[-1].append(".")
        elif char == "\\":
            if i + 1 == len(glob):
                raise BadPattern(f"{line!r} ends with a lone backslash")
            i += 1
            pieces[-1].append(re.escape(glob[i]))
        elif char == "[":
            regex, i = _class(glob, i, line)
            pieces[-1].append(regex)
        else:
            pieces[-1].append(re.escape(char))
        i += 1
    if not glob:
        return re.compile("(?!)")  # `a//b`: no component is empty
    if glob.strip("*") == "":
        return re.compile(".+", re.DOTALL)  # `*` alone: a whole, non-empty component
    first, *middle = ("".join(p) for p in pieces)
    if not middle:
        return re.compile(first, re.DOTALL)
    *inner, last = middle
    atomic = "".join(f"(?>.*?{piece})" for piece in inner)
    return re.compile(f"{first}{atomic}.*{last}", re.DOTALL)


def _class(glob: str, start: int, line: str) -> tuple[str, int]:
    """The bracket expression at `start` as a regex class and the index of its `]`."""
    i = start + 1
    negate = i < len(glob) and glob[i] in "!^"
    i += negate
    members: list[str] = []
    first = True
    while i < len(glob):
        char = glob[i]
        if char == "]" and not first:
            body = "".join(members)
            return (f"[^{body}]" if negate else f"[{body}]"), i
        first = False
        if char == "[" and glob.startswith("[:", i):
            end = glob.find(":]", i + 2)
            if end != -1:
                name = glob[i + 2 : end]
                if name not in _POSIX_CLASSES:
                    raise BadPattern(f"{line!r}: unknown character class [:{name}:]")
                members.append(_POSIX_CLASSES[name])
                i = end + 2
                continue
        if char == "\\":
            i += 1
            if i == len(glob):
                break
            char = glob[i]
        low = char
        if glob.startswith("-", i + 1) and i + 2 < len(glob) and glob[i + 2] != "]":
            high = glob[i + 2]
            i += 2
            if high == "\\":
                i += 1
                if i == len(glob):
                    break
                high = glob[i]
            if high < low:
                raise BadPattern(f"{line!r}: bad character range {low}-{high}")
            members.append(f"{_in_class(low)}-{_in_class(high)}")
        else:
            members.append(_in_class(low))
        i += 1
    raise BadPattern(f"{line!r}: '[' without its ']' (write \\[ for the character)")


def _in_class(char: str) -> str:
    return f"\\{char}" if char in "\\]^-[" else char


NO_RULES = IgnoreRules.of()
