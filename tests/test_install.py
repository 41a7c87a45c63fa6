"""Reproducible installs: `constraints.txt` pins every package the test install brings, and
every documented install command uses it (a fresh clone gets the builds the suite passed with)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            match = _PIN.match(line.strip())
            assert match, f"not an exact pin: {line!r}"
            pins[canonicalize_name(match[1])] = match[2]
    return pins


def _installed_closure(name: str, extras: frozenset[str]) -> dict[str, str]:
    """Every distribution `name[extras]` needs here, transitively, with its installed version."""
    found: dict[str, str] = {}
    todo = [(name, extras)]
    while todo:
        current, wanted = todo.pop()
        dist = metadata.distribution(current)
        for text in dist.requires or ():
            requirement = Requirement(text)
            markers = requirement.marker
            if markers is not None and not any(
                markers.evaluate({"extra": extra}) for extra in (wanted or {""})
            ):
                continue
            key = canonicalize_name(requirement.name)
            if key not in found:
                found[key] = metadata.version(requirement.name)
                todo.append((requirement.name, frozenset(requirement.extras)))
    return found


def test_constraints_pin_everything_the_test_install_brings() -> None:
    # (names only: which versions this machine got is not the suite's business)
    needed = _installed_closure("gitops-sched", frozenset({"test", "agent"}))
    pins = _pins()
    assert "gitops-sched" not in pins  # the package itself is installed from the checkout
    assert sorted(set(needed) - set(pins)) == []  # nothing left to the resolver's mood


def test_the_pins_are_inside_pyproject_s_ranges() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    pins = _pins()
    for text in [*project["dependencies"], *extras["test"], *extras["agent"]]:
        requirement = Requirement(text)
        pinned = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(pinned), (text, pinned)


def test_every_documented_install_uses_the_constraints() -> None:
    readme = (ROOT / "README.md").read_text()
    setup = readme[readme.index("## Set up") :]
    setup = setup[: setup.index("\n## ", 1)]
    commands = re.findall(r"```sh\n(.*?)\n```", setup, re.S)
    assert len(commands) == 2  # install and simulate; install and test
    [make_install] = re.findall(r"^install:\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M)
    ci = (ROOT / ".github/workflows/ci.yml").read_text()
    for text in [*commands, (ROOT / ".ci/run").read_text(), make_install, ci]:
        installs = re.findall(r"pip install [^&\n]*", text)
        assert installs and all("-c constraints.txt" in i for i in installs), installs
