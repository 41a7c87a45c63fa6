"""The run's summary line for the real control plane: the kube-apiserver the in-cluster
tests ran against and how many of them ran on it, with their outcomes. A worker's own
terminal output is not shown under xdist, so each test's reports carry the version they
ran against (a user property, which xdist sends on to the controller) and the process that
reports (the xdist controller, or the only process) counts them. Hooks: `tests/conftest.py`
imports them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from typing import Any

import pytest

PROPERTY = "kube-apiserver"
# (version, outcome) -> tests, in the reporting process
_seen: Counter[tuple[str, str]] = Counter()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    """Tag the reports of a test that ran on the session's control plane with its version."""
    report = yield
    plane = getattr(item, "funcargs", {}).get("control_plane")
    if plane is not None and PROPERTY not in dict(item.user_properties):
        item.user_properties.append((PROPERTY, plane.version))  # the reports share the list
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count tagged tests as pytest's own summary does: by their call's outcome, a failed
    setup or teardown as an error, a skip in setup as skipped."""
    version = dict(report.user_properties).get(PROPERTY)
    if version is None:
        return
    if report.when == "call":
        _seen[(str(version), report.outcome)] += 1
    elif report.failed or (report.when == "setup" and report.skipped):
        _seen[(str(version), "error" if report.failed else "skipped")] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for version in sorted({v for v, _ in _seen}):
        outcomes = {o: n for (v, o), n in sorted(_seen.items()) if v == version}
        told = ", ".join(f"{n} {o}" for o, n in outcomes.items())
        terminalreporter.write_line(
            f"real control plane: kube-apiserver {version} (etcd, kube-controller-manager, "
            f"kwok): {sum(outcomes.values())} tests ran on it ({told})"
        )
