"""Hypothesis profiles: `ci` (the default: the example counts each property names, what
the suite's time budget allows) and `thorough` (ten times as many, for `make thorough`).

A property asks for its examples through `examples(n)`, a seeded fault test on the real
control plane for its seeds through `seeds(first)`, so one switch scales them all.
"""

from __future__ import annotations

import os
import sys

import pytest
import yaml
from hypothesis import HealthCheck, settings

from gitops_sched.agent.cluster import NodeApi
from gitops_sched.reconciler.sync import Syncer
from gitops_sched.scheduler.actuate import Actuator
from gitops_sched.scheduler.loop import Scheduler
from gitops_sched.scheduler.status import StatusWriter
from testkit.control_plane.accounts import refuse_admin
from tests import scheduling

# The suite keeps compiled bytecode even where the environment asks for none (this
# project's machines set PYTHONDONTWRITEBYTECODE=1): otherwise each xdist worker compiles
# and assertion-rewrites every test module again (about 7 CPU-s a worker on 2 cores), and
# every CLI subprocess compiles the package. Workers and subprocesses inherit the change.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
SCALE = {"ci": 1, "thorough": 10}[PROFILE]

settings.register_profile("ci", deadline=None)
settings.register_profile("thorough", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """How many examples a property runs: `n` under `ci`, more under `thorough`."""
    return n * SCALE


def seeds(first: int) -> list[int]:
    """The seeds a seeded fault test on the real control plane runs: `first` under `ci`,
    it and the next four under `thorough` (each seed is a run of several seconds)."""
    return list(range(first, first + (5 if PROFILE == "thorough" else 1)))


# the real control plane (kube-apiserver, etcd, kube-controller-manager, kwok) for the
# in-cluster tests: see testkit/control_plane
from testkit.control_plane.fixtures import (  # noqa: E402, F401
    bare_cluster,
    control_plane,
    real_client,
    real_cluster,
    uninstalled,
)
from testkit.control_plane.report import (  # noqa: E402, F401
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_terminal_summary,
)

# the classes through which each in-cluster part talks to the API server
PARTS = (Syncer, Scheduler, Actuator, StatusWriter, NodeApi)


@pytest.fixture(autouse=True)
def parts_run_as_their_service_accounts(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the real control plane the reconciler, the scheduler and the node agent run as
    their ServiceAccounts, as in a cluster: a test that builds one on the admin's token fails,
    unless marked `as_admin` (an admin running the part from outside, on a bare cluster)."""
    if request.node.get_closest_marker("as_admin") is None:
        for part in PARTS:
            monkeypatch.setattr(part, "__init__", refuse_admin(part))


@pytest.fixture(params=["libyaml", "pure"])
def each_yaml_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with PyYAML's C parser (libyaml) and with its pure-Python one: which one a
    machine has depends on the wheel it got, and the loader must answer the same with both.
    Without libyaml (a PyYAML built without it) the C run is skipped."""
    from gitops_sched.config import yamlbuild

    if request.param == "libyaml":
        if not yaml.__with_libyaml__:
            pytest.skip("this PyYAML is built without libyaml")
        monkeypatch.setattr(yamlbuild, "_Loader", yaml.CSafeLoader)
    else:
        monkeypatch.setattr(yamlbuild, "_Loader", yaml.SafeLoader)
    return str(request.param)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown where xdist does not schedule
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Which worker runs which test: see tests/scheduling.py."""
    return scheduling.make_scheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    scheduling.check_in_cluster(items)
    scheduling.longest_first(items)
