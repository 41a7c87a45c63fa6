"""How the suite spreads over its workers (tests/scheduling.py): one worker of four never
gets a test on the control plane, and every test is still sent once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.scheduling import IN_CLUSTER, ModulesWhole, check_in_cluster, make_scheduling

CLUSTER_MODULE = sorted(IN_CLUSTER)[0]
COLLECTION = [
    *(f"{CLUSTER_MODULE}::test_{i}" for i in range(6)),
    *(f"tests/test_offline.py::test_{i}" for i in range(8)),
    *(f"tests/test_scheduler_e2e.py::test_{i}" for i in range(3)),  # a whole module
    *(f"tests/test_render.py::test_{i}" for i in range(4)),
]


class Worker:
    """What the scheduler sees of an xdist worker: the indexes of the tests it is sent."""

    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent += indexes

    def shutdown(self) -> None:
        self.shutting_down = True


def run(workers: int) -> list[Worker]:
    """Schedule `COLLECTION` on `workers` workers, each ending its tests one at a time in
    turn, until none has any left."""
    config = SimpleNamespace(
        getvalue=lambda name: [f"{workers}*popen"],  # `-n workers`
        getoption=lambda name, default=None: "load",  # `--dist load`, the default
        option=SimpleNamespace(),
    )
    scheduler = make_scheduling(config, None)  # type: ignore[arg-type]
    assert isinstance(scheduler, ModulesWhole)
    nodes = [Worker(f"gw{i}") for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)  # type: ignore[arg-type]
        scheduler.add_node_collection(node, COLLECTION)  # type: ignore[arg-type]
    scheduler.schedule()
    done = {node: 0 for node in nodes}
    while any(done[n] < len(n.sent) for n in nodes):
        for node in nodes:
            if done[node] < len(node.sent):
                scheduler.mark_test_complete(node, node.sent[done[node]])  # type: ignore[arg-type]
                done[node] += 1
    assert scheduler.tests_finished
    return nodes


def on_cluster(node: Worker) -> list[str]:
    return [COLLECTION[i] for i in node.sent if COLLECTION[i].split("::")[0] in IN_CLUSTER]


def test_of_four_workers_the_last_never_gets_a_test_on_the_control_plane():
    nodes = run(4)
    assert on_cluster(nodes[-1]) == [] and nodes[-1].sent
    assert sorted(i for n in nodes for i in n.sent) == list(range(len(COLLECTION)))


def test_of_three_workers_each_may_get_one():
    nodes = run(3)
    assert sorted(i for n in nodes for i in n.sent) == list(range(len(COLLECTION)))
    assert all(on_cluster(n) for n in nodes)


def test_a_module_on_the_control_plane_must_be_listed():
    listed = SimpleNamespace(nodeid=f"{CLUSTER_MODULE}::t", fixturenames=["control_plane"])
    offline = SimpleNamespace(nodeid="tests/test_new.py::t", fixturenames=["tmp_path"])
    check_in_cluster([listed, offline])  # type: ignore[list-item]
    new = SimpleNamespace(
        nodeid="tests/test_new.py::t", fixturenames=["real_cluster", "control_plane"]
    )
    with pytest.raises(pytest.UsageError, match=r"tests/test_new\.py: tests on the control plane"):
        check_in_cluster([listed, new])  # type: ignore[list-item]
