"""Imports run down the stated layering (README, "Layout"), never up or sideways.

    __main__ -> cli -> {plan, reconciler, scheduler, agent} -> validate -> sim
        -> {compiler, bridge, cluster} -> {engine, config} -> contract
        -> {hardware, quantity, gcpause, lazy, console}

A module may import its own package and any package of a lower layer. Every import counts:
at the top of a module, under TYPE_CHECKING and inside a function (ruff's PLC0415 keeps
those to cli.py, which imports each command's modules when it runs).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gitops_sched"

# top to bottom; a package's place is its index
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"__main__"}),
    frozenset({"cli"}),
    frozenset({"plan", "reconciler", "scheduler", "agent"}),
    frozenset({"validate"}),
    frozenset({"sim"}),
    frozenset({"compiler", "bridge", "cluster"}),
    frozenset({"engine", "config"}),
    frozenset({"contract"}),
    frozenset({"hardware", "quantity", "gcpause", "lazy", "console", "__init__"}),
)
LAYER = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}


def package_of(module: str) -> str:
    """`gitops_sched.config.checks.fit` -> `config`; `gitops_sched` itself -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of ours in the file, wherever it is written."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "gitops_sched":  # `from gitops_sched import x`: x is a package
                found += [(node.lineno, f"gitops_sched.{alias.name}") for alias in node.names]
            elif node.module.startswith("gitops_sched."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            ours = [a.name for a in node.names if a.name.startswith("gitops_sched")]
            found += [(node.lineno, name) for name in ours]
    return sorted(found)


def against_layering(module: str, imports: list[tuple[int, str]]) -> list[str]:
    """Each of `module`'s imports (line, module) that goes up or sideways, with its line."""
    source = package_of(module)
    wrong = []
    for line, target in imports:
        to = package_of(target)
        if to != source and LAYER[to] <= LAYER[source]:
            wrong.append(f"{line}: {source} -> {to} ({target})")
    return wrong


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_package_has_a_layer() -> None:
    packages = {package_of(module_name(path)) for path in MODULES}
    assert packages <= set(LAYER), f"add to LAYERS (and the README): {packages - set(LAYER)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_down_the_layers(path: Path) -> None:
    assert against_layering(module_name(path), imported(path)) == []


def test_imports_up_or_sideways_are_what_it_reports() -> None:
    imports = [
        (1, "gitops_sched.config.model"),  # its own package
        (2, "gitops_sched.hardware.mig"),  # down
        (3, "gitops_sched.engine.fit"),  # sideways: engine and config share a layer
        (4, "gitops_sched.sim.scenarios"),  # up
    ]
    assert against_layering("gitops_sched.config.checks.fit", imports) == [
        "3: config -> engine (gitops_sched.engine.fit)",
        "4: config -> sim (gitops_sched.sim.scenarios)",
    ]


def test_function_local_and_type_checking_imports_count(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from gitops_sched.plan import build\n"
        "def f() -> None:\n    import gitops_sched.reconciler.diff\n"
        "from gitops_sched import sim\n"
    )
    assert imported(module) == [
        (3, "gitops_sched.plan"),
        (5, "gitops_sched.reconciler.diff"),
        (6, "gitops_sched.sim"),
    ]


TEST_CODE = [PACKAGE.parent / d for d in ("tests", "testkit", "benchmarks")]


def test_test_helpers_are_imported_one_way() -> None:
    """A module of tests/ imported bare (`from engine_builders import`) as well as
    `tests.engine_builders` would load twice, and only resolves when pytest's rootdir
    insertion happens to put tests/ on the path: every import of one names `tests.`."""
    local = {p.stem for p in (PACKAGE.parent / "tests").glob("*.py")}
    bare = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {name}"
        for folder in TEST_CODE
        for path in sorted(folder.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        for name in (
            [node.module]
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
            else [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        if name.split(".")[0] in local
    ]
    assert bare == []


def test_no_module_of_the_engine_imports_one_that_imports_it_back() -> None:
    """The engine's modules form no cycle (a type-only import included): each can be read
    knowing only the ones below it."""
    engine = {module_name(p): p for p in sorted((PACKAGE / "engine").rglob("*.py"))}
    edges = {m: {i for _, i in imported(p) if i in engine and i != m} for m, p in engine.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            n == goal or (n not in seen and not seen.add(n) and reaches(n, goal, seen))
            for n in edges[start]
        )

    cycles = sorted(m for m in engine if reaches(m, m, set()))
    assert cycles == []
