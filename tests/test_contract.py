"""The wire contract: what one side writes, the other reads back as it was meant.

The node agent's inventory as the scheduler's parser reads it, a placement annotation as a
restarted scheduler reads it, and a MIG answer's error as the scheduler reports it.
"""

from __future__ import annotations

import pytest

from gitops_sched.agent.fake import FakeBackend, parse_fake_spec
from gitops_sched.agent.inventory import node_inventory
from gitops_sched.contract.inventory import encode_inventory, parse_inventory
from gitops_sched.contract.mig import GpuAnswer, answered_error, encode_request, encode_status
from gitops_sched.contract.mig import request_digest as digest
from gitops_sched.contract.pods import encode_placement, parse_placement
from gitops_sched.engine.codec import pod_from_dict, pod_to_dict
from gitops_sched.engine.types import PodPlacement
from gitops_sched.hardware.mig import MigInstance


def test_the_inventory_an_agent_publishes_is_what_the_scheduler_reads() -> None:
    backend = FakeBackend(parse_fake_spec("A100-SXM4-80GB:2:mig,V100-SXM2-32GB:1"), node="n")
    backend.create_instance(0, "1g.10gb", 0)
    gpus = parse_inventory(encode_inventory(node_inventory(backend.gpus())))
    assert [(g.index, g.memory_mib, g.mig) for g in gpus] == [
        (0, 81920, "enabled"),
        (1, 81920, "enabled"),
        (2, 32768, "unsupported"),
    ]
    assert gpus[0].mig_instances() == [MigInstance("1g.10gb", 0)]
    assert gpus[0].model == "A100-SXM4-80GB"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"gpus": [{"index": 1, "memoryMiB": 1}]}', "GPUs not indexed 0, 1, ..."),
        ('{"gpus": [{"index": 0, "memoryMiB": -1}]}', "memoryMiB"),
        ('{"gpus": [{"index": 0, "memoryMiB": true}]}', "memoryMiB"),
    ],
)
def test_an_inventory_with_wrong_indexes_or_memory_is_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_inventory(text)


@pytest.mark.parametrize(
    "pod",
    [
        PodPlacement("n", (0, 1)),
        PodPlacement("n", (2,), fraction=0.25, index=3),
        PodPlacement("n", (1,), mig=MigInstance("3g.40gb", 4)),
    ],
)
def test_a_placement_annotation_reads_back_as_the_placement_written(pod: PodPlacement) -> None:
    fields = parse_placement(encode_placement(pod_to_dict(pod)))
    assert pod_from_dict({**fields, "node": pod.node}) == pod


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[]", "expected a JSON object"),
        ('{"gpus": [-1]}', "gpus must be a list of GPU indexes"),
        ('{"gpus": [0], "fraction": 1.5}', r"fraction must be a number in \(0, 1\]"),
        ('{"gpus": [0], "mig": {"profile": "1g.10gb"}}', "mig must be"),
        ('{"gpus": [0], "index": "a"}', "index must be a pod index"),
    ],
)
def test_a_placement_annotation_another_process_garbled_is_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_placement(text)


def test_the_agent_s_error_is_read_only_for_the_request_it_answers() -> None:
    request = encode_request({0: [MigInstance("7g.80gb", 0)]})
    answer = encode_status(digest(request), [GpuAnswer(0, "error", "MIG mode is disabled")])
    assert answered_error(request, answer, 0) == "MIG mode is disabled"
    assert answered_error(request, answer, 1) == ""
    newer = encode_request({0: []})
    assert answered_error(newer, answer, 0) == ""  # an answer to an older request
    assert answered_error(request, "not json", 0) == ""
