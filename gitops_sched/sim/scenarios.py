"""The repo's own tests: its Simulation documents (`gitops-sched test`).

A config repo may hold `kind: Simulation` documents anywhere (e.g. `scenarios/`). They are
never compiled; `validate` checks each against the repo as `simulate --events` would, and
`test` runs each, through the same parser and run as `simulate --events FILE`, and
reports every `expect:` step: passed, or which values differ from what happened.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gitops_sched.config.diagnostics import Diagnostic, Diagnostics, Location
from gitops_sched.config.document import Document
from gitops_sched.config.model import Repo
from gitops_sched.sim.events import Expect, Simulation, parse_simulation
from gitops_sched.sim.report import failure_json, shown
from gitops_sched.sim.run import ExpectationFailure, simulate


@dataclass(frozen=True)
class ExpectResult:
    """One `expect:` step: the values it names, and those that differ from what happened."""

    step: int
    location: Location  # of the `expect:` key
    checked: int
    failures: tuple[ExpectationFailure, ...]

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class ScenarioResult:
    """One Simulation document run to its end."""

    name: str
    location: Location  # of the document
    expectations: tuple[ExpectResult, ...]

    @property
    def passed(self) -> bool:
        return all(expect.passed for expect in self.expectations)

    @property
    def ref(self) -> str:
        return f"Simulation/{self.name}"


def check_simulations(repo: Repo) -> list[Diagnostic]:
    """Every problem of the repo's Simulation documents against the repo (the schema was
    checked with the other documents)."""
    diagnostics = Diagnostics()
    for doc in repo.simulations:
        parse_simulation(doc, repo, diagnostics)
    return diagnostics.items


def run_scenarios(repo: Repo, diagnostics: Diagnostics) -> list[ScenarioResult]:
    """Each Simulation document's run, in path order; one that does not parse is left out,
    its problems in `diagnostics` (`validate` reports them first)."""
    results = []
    for doc in repo.simulations:
        simulation = parse_simulation(doc, repo, diagnostics)
        if simulation is not None:
            results.append(run_scenario(doc, repo, simulation))
    return results


def run_scenario(doc: Document, repo: Repo, simulation: Simulation) -> ScenarioResult:
    result = simulate(repo, simulation)
    expectations = tuple(
        ExpectResult(
            step.number,
            step.location,
            _values(step.action),
            tuple(f for f in result.failures if f.step == step.number),
        )
        for step in simulation.steps
        if isinstance(step.action, Expect)
    )
    return ScenarioResult(simulation.name, doc.location(), expectations)


def _values(expect: Expect) -> int:
    """How many values an `expect:` step compares."""
    return sum(map(len, expect.projects.values())) + sum(map(len, expect.workloads.values()))


# --- reports -------------------------------------------------------------------------------


def describe(failure: ExpectationFailure) -> str:
    """`FILE:LINE:COL: project team-a allocated: expected 4, got 8`."""
    return (
        f"{failure.location}: {failure.subject} {failure.name} {failure.field}: "
        f"expected {shown(failure.expected)}, got {shown(failure.actual)}"
    )


def text_report(results: list[ScenarioResult]) -> Iterator[str]:
    """Per scenario a PASS/FAIL line, then each `expect:` step and each value that differs."""
    for scenario in results:
        verdict = "PASS" if scenario.passed else "FAIL"
        steps = len(scenario.expectations)
        yield f"{verdict} {scenario.ref} ({scenario.location.file}): {_count(steps, 'expect step')}"
        for expect in scenario.expectations:
            where = f"step {expect.step} at {expect.location}"
            if expect.passed:
                yield f"  ok   {where}: {_count(expect.checked, 'value')} as expected"
                continue
            yield f"  FAIL {where}: {len(expect.failures)} of {expect.checked} values differ"
            yield from (f"       {describe(failure)}" for failure in expect.failures)
    failed = sum(not scenario.passed for scenario in results)
    yield f"{_count(len(results), 'scenario')}: {len(results) - failed} passed, {failed} failed"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def json_report(results: list[ScenarioResult]) -> dict[str, Any]:
    failed = sum(not scenario.passed for scenario in results)
    return {
        "scenarios": [
            {
                "name": scenario.name,
                "file": scenario.location.file,
                "line": scenario.location.line,
                "passed": scenario.passed,
                "expectations": [
                    {
                        "step": expect.step,
                        "line": expect.location.line,
                        "checked": expect.checked,
                        "passed": expect.passed,
                        "failures": [failure_json(f) for f in expect.failures],
                    }
                    for expect in scenario.expectations
                ],
            }
            for scenario in results
        ],
        "passed": len(results) - failed,
        "failed": failed,
    }
