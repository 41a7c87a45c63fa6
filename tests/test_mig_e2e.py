"""Dynamic MIG through the scheduler and the node agent on the real control plane: the
oci-a100 example installed by the reconciler's Syncer, its `a100-mig` node a kwok node
carrying only its NodeGroup's selector labels and GPU Feature Discovery's, the agent on fake
GPUs, the scheduler and the reconciler each running as its ServiceAccount with its shipped
RBAC, and NVIDIA's device plugin played
by `testkit.control_plane.migplugin`.

A pod asks for a MIG profile no GPU has yet; the scheduler writes the node's MIG request and
waits; the agent creates the instance, deletes the device plugin's pod and answers; the pod
stays unbound while the node does not advertise the profile; once the restarted plugin
advertises it, the pod is bound and kwok runs it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitops_sched.agent.cluster import NodeApi
from gitops_sched.agent.fake import FakeBackend, FakeGpuSpec
from gitops_sched.agent.node import NodeAgent
from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.compiler import render_repo
from gitops_sched.contract.pods import NODE_MIG_REQUEST, NODE_MIG_STATUS, PLACEMENT
from gitops_sched.reconciler.sync import Syncer
from gitops_sched.scheduler.loop import Scheduler, Settings
from gitops_sched.validate import check_repo
from testkit.control_plane.accounts import (
    RECONCILER,
    SCHEDULER,
    account_client,
    install_agent,
    make_namespace,
)
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.install import apply_kustomization
from testkit.control_plane.migplugin import MigDevicePlugin
from testkit.control_plane.nodes import group_nodes
from testkit.control_plane.waiting import wait

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "oci-a100"
GROUP = "a100-mig"
PROFILE = "1g.10gb"
Obj = dict[str, Any]


def mig_pod(namespace: str) -> Obj:
    limits = {f"nvidia.com/mig-{PROFILE}": 1}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sweep", "namespace": namespace},
        "spec": {
            "schedulerName": "gitops-sched",
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "c:1", "resources": {"limits": limits}}],
        },
    }


def node_ready(node: Obj | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_a_mig_request_is_made_by_the_agent_then_the_pod_is_bound(
    real_cluster: ControlPlane, real_client: ClusterClient
) -> None:
    client = real_client
    repo, diagnostics = check_repo(EXAMPLE)
    assert repo is not None, diagnostics
    make_namespace(client, "gpu-operator")
    for folder in ("reconciler", "scheduler"):
        apply_kustomization(real_cluster, folder)
    rest = [o for o in render_repo(repo) if o["kind"] not in ("Job", "Deployment")]
    reconciler = account_client(real_cluster, *RECONCILER)
    assert not Syncer(reconciler, "gitops-sched", RECONCILER[0], "test").sync(rest, "r1").errors
    reconciler.close()
    install_agent(real_cluster)

    (group,) = [g for g in repo.node_groups if g.name == GROUP]
    (node_obj,) = group_nodes(group)  # its selector's labels and GFD's, mixed strategy
    assert node_obj["metadata"]["labels"].items() >= group.node_selector.items()
    assert not any(k.startswith("gitops-sched.io/") for k in node_obj["metadata"]["labels"])
    name = node_obj["metadata"]["name"]
    node_ref = ObjectRef("v1", "Node", "", name)
    client.create(node_obj)
    wait("the node Ready", lambda: node_ready(client.get(node_ref)))

    backend = FakeBackend([FakeGpuSpec("A100-80GB", mig=True)] * 8, node=name)
    plugin = MigDevicePlugin(client, name, backend)
    plugin.start()
    first = wait("the device plugin serving", plugin.step)
    agent_client = account_client(real_cluster)
    agent = NodeAgent(backend, NodeApi(agent_client, name, dry_run=False, say=lambda _: None))
    scheduler = Scheduler(
        account_client(real_cluster, *SCHEDULER), Settings(namespace=repo.cluster.system_namespace)
    )
    try:
        namespace = repo.project_namespace("sandbox")
        wait(
            f"{namespace}'s default ServiceAccount",
            lambda: client.get(ObjectRef("v1", "ServiceAccount", namespace, "default")),
        )
        client.create(mig_pod(namespace))
        pod_ref = ObjectRef("v1", "Pod", namespace, "sweep")
        agent.tick()  # the node's GPUs published: MIG mode, no instances

        report = scheduler.sync_once()  # no instance anywhere: the scheduler asks for one
        assert report is not None and not report.outcome.errors
        annotations = client.get(node_ref)["metadata"]["annotations"]
        request = json.loads(annotations[NODE_MIG_REQUEST])
        (wanted,) = request["gpus"]
        assert [i["profile"] for i in wanted["instances"]] == [PROFILE]
        assert not client.get(pod_ref)["spec"].get("nodeName")

        agent.tick()  # the agent makes it and deletes the device plugin's pod
        annotations = client.get(node_ref)["metadata"]["annotations"]
        assert json.loads(annotations[NODE_MIG_STATUS])["gpus"][0]["state"] == "done"
        assert [(i.profile, i.start) for i in backend.gpus()[wanted["index"]].instances] == [
            (PROFILE, wanted["instances"][0]["start"])
        ]
        # the plugin's pod deleted: kwok stops it, then it goes
        assert all(p["metadata"].get("deletionTimestamp") for p in plugin.pods())

        # the instance exists, but the node does not advertise it until the plugin restarts
        report = scheduler.sync_once()
        assert report is not None and not report.outcome.errors
        assert not client.get(pod_ref)["spec"].get("nodeName")
        assert list(report.outcome.waiting_reasons.values()) == [
            f"waiting for {name} to advertise nvidia.com/mig-{PROFILE}"
        ]

        # the DaemonSet makes a new pod once the old is gone; the plugin then reports
        wait("the device plugin restarted", lambda: plugin.restarted(first))
        node = client.get(node_ref)
        assert node["status"]["allocatable"][f"nvidia.com/mig-{PROFILE}"] == "1"
        assert node["metadata"]["labels"][f"nvidia.com/mig-{PROFILE}.count"] == "1"

        report = scheduler.sync_once()
        assert report is not None and not report.outcome.errors
        bound = client.get(pod_ref)
        assert bound["spec"]["nodeName"] == name
        placed = json.loads(bound["metadata"]["annotations"][PLACEMENT])
        assert placed["gpus"] == [wanted["index"]] and placed["mig"]["profile"] == PROFILE
        wait(
            "kwok running the pod", lambda: client.get(pod_ref)["status"].get("phase") == "Running"
        )
    finally:
        scheduler.client.close()
        agent_client.close()
