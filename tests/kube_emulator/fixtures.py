"""pytest fixtures: an emulator per test and a ClusterClient connected to it.

Import them into a test module: `from tests.kube_emulator.fixtures import kube, client`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gitops_sched.cluster import Backoff, ClusterClient
from tests.kube_emulator.server import KubeEmulator

FAST_BACKOFF = Backoff(attempts=6, base=0.01, cap=0.05)


@pytest.fixture
def kube() -> Iterator[KubeEmulator]:
    with KubeEmulator(crd_establish_delay=0.05) as emulator:
        yield emulator


def connect(kube: KubeEmulator, timeout: float = 5.0) -> ClusterClient:
    return ClusterClient(kube.configuration(), backoff=FAST_BACKOFF, timeout=timeout)


@pytest.fixture
def client(kube: KubeEmulator) -> Iterator[ClusterClient]:
    c = connect(kube)
    yield c
    c.close()
