"""Dynamic MIG through the cluster, scheduler and node agent together, against the API
emulator: a pod asks for a MIG profile no GPU has yet; the scheduler writes the node's MIG
request and waits; the agent (fake GPUs) creates the instance, restarts the device plugin's
pod and answers; once the restarted plugin advertises the profile, the pod is bound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitops_sched.agent.cluster import NodeApi
from gitops_sched.agent.fake import FakeBackend, FakeGpuSpec
from gitops_sched.agent.node import NodeAgent
from gitops_sched.cluster import ObjectRef
from gitops_sched.compiler import render_repo
from gitops_sched.compiler.contract import NODE_MIG_REQUEST, NODE_MIG_STATUS, PLACEMENT
from gitops_sched.config.validate import check_repo
from gitops_sched.reconciler.sync import Syncer
from gitops_sched.scheduler.loop import Scheduler, Settings
from tests.kube_emulator.fixtures import connect
from tests.kube_emulator.server import KubeEmulator

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "oci-a100"
NODE = "a100-mig-0"
PROFILE = "1g.10gb"


def obj(kind: str, name: str, namespace: str = "", **rest: Any) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, **rest}


@pytest.fixture
def cluster():
    repo, diagnostics = check_repo(EXAMPLE)
    assert repo is not None, diagnostics
    with KubeEmulator() as kube:
        client = connect(kube)
        client.create(obj("Namespace", "gitops-sched"))
        client.create(obj("Namespace", "gpu-operator"))
        rest = [o for o in render_repo(repo) if o["kind"] not in ("Job", "Deployment")]
        assert not Syncer(client, "e2e", "gitops-sched", "test").sync(rest, "r1").errors
        labels = {
            "node.kubernetes.io/instance-type": "BM.GPU.A100-v2.8",
            "gpu.example.com/mig": "enabled",
        }
        node = obj("Node", NODE)
        node["metadata"]["labels"] = labels
        client.create(node)
        advertise(client, 0)
        plugin = obj(
            "Pod",
            f"nvidia-device-plugin-{NODE}",
            "gpu-operator",
            spec={"nodeName": NODE, "containers": [{"name": "p", "image": "plugin:1"}]},
        )
        plugin["metadata"]["labels"] = {"app": "nvidia-device-plugin-daemonset"}
        client.create(plugin)
        yield kube, client, repo
        client.close()


def advertise(client, instances: int) -> None:
    """What the NVIDIA device plugin reports for the node (mixed strategy)."""
    amounts = {"cpu": "255", "memory": "2000Gi", "pods": "110"}
    if instances:
        amounts[f"nvidia.com/mig-{PROFILE}"] = str(instances)
    status = {
        "capacity": amounts,
        "allocatable": amounts,
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    client.patch(ObjectRef("v1", "Node", "", NODE), {"status": status}, subresource="status")


def node_annotations(client) -> dict[str, str]:
    return client.get(ObjectRef("v1", "Node", "", NODE))["metadata"]["annotations"]


def mig_pod(namespace: str) -> dict[str, Any]:
    limits = {f"nvidia.com/mig-{PROFILE}": 1}
    return obj(
        "Pod",
        "sweep",
        namespace,
        spec={
            "schedulerName": "gitops-sched",
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "c:1", "resources": {"limits": limits}}],
        },
    )


def test_a_mig_request_is_made_by_the_agent_then_the_pod_is_bound(cluster):
    kube, client, repo = cluster
    backend = FakeBackend([FakeGpuSpec("A100-80GB", mig=True)] * 8, node=NODE)
    agent = NodeAgent(backend, NodeApi(client, NODE, dry_run=False, say=lambda _: None))
    scheduler = Scheduler(connect(kube), Settings(namespace=repo.cluster.system_namespace))
    namespace = repo.project_namespace("sandbox")
    client.create(mig_pod(namespace))
    agent.tick()  # the node's GPUs published: MIG mode, no instances

    report = scheduler.sync_once()  # no instance anywhere: the scheduler asks for one
    assert report is not None and not report.outcome.errors
    request = json.loads(node_annotations(client)[NODE_MIG_REQUEST])
    (wanted,) = request["gpus"]
    assert [i["profile"] for i in wanted["instances"]] == [PROFILE]
    pod = ObjectRef("v1", "Pod", namespace, "sweep")
    assert not client.get(pod)["spec"].get("nodeName")

    agent.tick()  # the agent makes it and restarts the device plugin
    node = client.get(ObjectRef("v1", "Node", "", NODE))
    assert (
        json.loads(node["metadata"]["annotations"][NODE_MIG_STATUS])["gpus"][0]["state"] == "done"
    )
    assert [(i.profile, i.start) for i in backend.gpus()[wanted["index"]].instances] == [
        (PROFILE, wanted["instances"][0]["start"])
    ]
    assert client.list("v1", "Pod", namespace="gpu-operator") == []  # plugin pod deleted

    scheduler.sync_once()  # the instance exists, but the plugin does not advertise it yet
    assert not client.get(pod)["spec"].get("nodeName")

    advertise(client, 1)  # the restarted plugin reports the new layout
    scheduler.sync_once()
    bound = client.get(pod)
    assert bound["spec"]["nodeName"] == NODE
    placed = json.loads(bound["metadata"]["annotations"][PLACEMENT])
    assert placed["gpus"] == [wanted["index"]] and placed["mig"]["profile"] == PROFILE
    scheduler.client.close()
