"""The API emulator behaves like an API server where gitops-sched relies on it, driven
through the official client over HTTP."""

from __future__ import annotations

import os
import time

import kubernetes
import pytest
from kubernetes.dynamic import DynamicClient

from gitops_sched.cluster import ApiFailure, ClusterClient, Conflict, NotFound, ObjectRef
from tests.kube_emulator import Fault, KubeEmulator
from tests.kube_emulator.fixtures import client, connect, kube
from tests.kube_emulator.quantity import canonical

__all__ = ["client", "kube"]


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def config_map(name: str, data: dict, labels: dict | None = None, ns: str = "a") -> dict:
    meta = {"name": name, "namespace": ns, **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def job(resources: dict) -> dict:
    container = {"name": "main", "image": "pytorch:2.3", "resources": resources}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "a"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.io"},
    "spec": {
        "group": "example.io",
        "names": {"kind": "Widget", "plural": "widgets"},
        "scope": "Cluster",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                            "status": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                        },
                    }
                },
            }
        ],
    },
}
WIDGET = {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w"}}


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("12000m", "12"),
        ("1024Mi", "1Gi"),
        ("0.5", "500m"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("1.5Gi", "1536Mi"),
        ("100", "100"),
        (1, "1"),
        ("512Ki", "512Ki"),
        ("1e3", "1e3"),
    ],
)
def test_quantities_are_stored_canonically(given, stored) -> None:
    assert canonical(given) == stored


def test_the_official_dynamic_client_discovers_and_uses_the_emulator(kube, tmp_path) -> None:
    api = kubernetes.client.ApiClient(kube.configuration())
    dynamic = DynamicClient(api, cache_file=os.path.join(tmp_path, "discovery.json"))
    assert dynamic.version["kubernetes"]["gitVersion"] == "v1.32.0"
    namespaces = dynamic.resources.get(api_version="v1", kind="Namespace")
    dynamic.create(namespaces, body=namespace("a"))
    jobs = dynamic.resources.get(api_version="batch/v1", kind="Job")
    applied = dynamic.server_side_apply(jobs, body=job({}), field_manager="me")
    assert applied.metadata.generation == 1
    listed = dynamic.get(jobs, namespace="a")
    assert [j.metadata.name for j in listed.items] == ["train"]
    assert kube.api.counts()["discovery"] >= 3


def test_defaults_and_canonical_quantities_of_a_job(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    limits = {"cpu": "12000m", "memory": "1024Mi", "nvidia.com/gpu": 1}
    stored = client.apply(job({"limits": limits}), "me")
    spec = stored["spec"]
    container = spec["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"cpu": "12", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert spec["backoffLimit"] == 6 and spec["completionMode"] == "NonIndexed"
    assert "batch.kubernetes.io/controller-uid" in spec["selector"]["matchLabels"]
    assert spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    namespace_labels = client.get(ObjectRef("v1", "Namespace", "", "a"))["metadata"]["labels"]
    assert namespace_labels == {"kubernetes.io/metadata.name": "a"}


def test_resource_version_preconditions_conflict(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    created = client.create(config_map("x", {"k": "1"}))
    first = dict(created, data={"k": "2"})
    second = dict(created, data={"k": "3"})
    updated = client.replace(first)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    with pytest.raises(Conflict):
        client.replace(second)  # carries the old resourceVersion
    with pytest.raises(ApiFailure) as exists:
        client.create(config_map("x", {}))
    assert exists.value.reason == "AlreadyExists"


def test_generation_counts_spec_changes_only(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    first = client.apply(job({}), "me")
    relabelled = job({})
    relabelled["metadata"]["labels"] = {"x": "y"}
    assert client.apply(relabelled, "me")["metadata"]["generation"] == 1
    changed = job({})
    changed["spec"]["parallelism"] = 2  # a Job's pod template cannot change: its size can
    assert client.apply(changed, "me")["metadata"]["generation"] == 2
    assert first["metadata"]["generation"] == 1


def indexed_job(image: str, replicas: int) -> dict:
    container = {"name": "main", "image": image}
    spec = {"restartPolicy": "Never", "containers": [container]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "a", "labels": {"team": "x"}},
        "spec": {
            "parallelism": replicas,
            "completions": replicas,
            "completionMode": "Indexed",
            "template": {"metadata": {"labels": {"app": "train"}}, "spec": spec},
        },
    }


def test_a_job_keeps_its_pod_template_and_completions_for_life(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    created = client.apply(indexed_job("pytorch:2.3", 2), "me")
    with pytest.raises(ApiFailure) as refused:
        client.apply(indexed_job("pytorch:2.4", 2), "me")
    error = refused.value
    assert error.status == 422 and error.reason == "Invalid"
    assert error.message.startswith('Job.batch "train" is invalid: spec.template: Invalid value: ')
    assert error.message.endswith(": field is immutable")
    details = error.body["details"]
    assert (details["name"], details["group"], details["kind"]) == ("train", "batch", "Job")
    assert [(c["reason"], c["field"]) for c in details["causes"]] == [
        ("FieldValueInvalid", "spec.template")
    ]
    assert kube_job(client)["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    with pytest.raises(ApiFailure):  # a dry run is validated the same way
        client.apply(indexed_job("pytorch:2.4", 2), "me", dry_run=True)
    # what may change: labels, parallelism with completions (Indexed), the deadline, suspend
    elastic = indexed_job("pytorch:2.3", 3)
    elastic["metadata"]["labels"]["team"] = "y"
    elastic["spec"].update(activeDeadlineSeconds=600, suspend=True, backoffLimit=2)
    assert client.apply(elastic, "me")["spec"]["completions"] == 3
    lopsided = indexed_job("pytorch:2.3", 3)
    lopsided["spec"]["completions"] = 4
    with pytest.raises(ApiFailure) as tandem:
        client.apply(lopsided, "me")
    assert "can only be modified in tandem with spec.parallelism" in tandem.value.message
    # the defaults the server added (selector, controller-uid labels) are kept by an apply
    stored = kube_job(client)
    assert stored["spec"]["template"]["metadata"]["labels"]["job-name"] == "train"


def test_a_suspended_job_that_never_started_may_change_its_scheduling_directives(
    client: ClusterClient,
) -> None:
    client.apply(namespace("a"), "me")
    suspended = indexed_job("pytorch:2.3", 1)
    suspended["spec"]["suspend"] = True
    client.apply(suspended, "me")
    suspended["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "a100"}
    suspended["spec"]["template"]["metadata"]["labels"]["queue"] = "q"
    assert client.apply(suspended, "me")["spec"]["template"]["spec"]["nodeSelector"]
    suspended["spec"]["template"]["spec"]["containers"][0]["image"] = "pytorch:2.4"
    with pytest.raises(ApiFailure) as refused:
        client.apply(suspended, "me")
    assert refused.value.status == 422


def test_a_non_indexed_job_keeps_its_completions(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    plain = job({})
    plain["spec"]["completions"] = 2
    client.apply(plain, "me")
    plain["spec"]["completions"] = 3
    with pytest.raises(ApiFailure) as refused:
        client.apply(plain, "me")
    assert "spec.completions: Invalid value: 3: field is immutable" in refused.value.message


def kube_job(client: ClusterClient) -> dict:
    found = client.get(ObjectRef("batch/v1", "Job", "a", "train"))
    assert found is not None
    return found


def owned_pod(name: str, owner: dict, finalizers: list[str] | None = None) -> dict:
    reference = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    meta = {"name": name, "namespace": "a", "ownerReferences": [reference]}
    if finalizers:
        meta["finalizers"] = finalizers
    container = {"name": "main", "image": "pytorch:2.3"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [container]},
    }


def test_a_foreground_deletion_waits_for_the_dependents() -> None:
    with KubeEmulator(pod_termination="graceful") as kube:
        client = connect(kube)
        client.apply(namespace("a"), "me")
        owner = client.apply(indexed_job("pytorch:2.3", 1), "me")
        client.create(owned_pod("train-0", owner))
        kube.api.call(
            "POST",
            "/api/v1/namespaces/a/pods/train-0/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "train-0"},
                "target": {"kind": "Node", "name": "n1"},
            },
        )
        ref = ObjectRef("batch/v1", "Job", "a", "train")
        assert client.delete(ref, propagation="Foreground")
        marked = client.get(ref)
        assert marked is not None and marked["metadata"]["deletionTimestamp"]
        assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
        pod = kube.api.find("v1", "Pod", "train-0", "a")
        assert pod["metadata"]["deletionTimestamp"]  # stopping: its kubelet's turn
        assert kube.api.finish_terminating() == ["a/train-0"]
        assert client.get(ref) is None  # its last dependent went: so did the Job
        client.close()


def test_a_foreground_deletion_without_dependents_removes_at_once(
    kube: KubeEmulator, client: ClusterClient
) -> None:
    client.apply(namespace("a"), "me")
    client.apply(indexed_job("pytorch:2.3", 1), "me")
    ref = ObjectRef("batch/v1", "Job", "a", "train")
    assert client.delete(ref, propagation="Foreground")
    assert client.get(ref) is None
    # a background deletion leaves the dependents to the garbage collector (the stand-ins)
    owner = client.apply(indexed_job("pytorch:2.3", 1), "me")
    client.create(owned_pod("train-0", owner, finalizers=["example.io/hold"]))
    assert client.delete(ref)
    assert client.get(ref) is None
    assert kube.api.find("v1", "Pod", "train-0", "a") is not None


def test_an_unchanged_apply_keeps_the_resource_version(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    first = client.apply(config_map("x", {"k": "1"}), "me")
    again = client.apply(config_map("x", {"k": "1"}), "me")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_label_and_field_selectors(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    client.apply(namespace("b"), "me")
    client.apply(config_map("one", {}, {"team": "x", "tier": "gpu"}), "me")
    client.apply(config_map("two", {}, {"team": "y"}), "me")
    client.apply(config_map("three", {}, {"team": "x"}, ns="b"), "me")

    def names(selector: str, ns: str | None = None) -> list[str]:
        return sorted(o["metadata"]["name"] for o in client.list("v1", "ConfigMap", selector, ns))

    assert names("team=x") == ["one", "three"]
    assert names("team=x", "a") == ["one"]
    assert names("team!=x") == ["two"]
    assert names("team in (x,y),tier") == ["one"]
    assert names("!tier") == ["three", "two"]
    assert names("team notin (x)") == ["two"]
    with pytest.raises(ApiFailure) as bad:
        client.list("v1", "ConfigMap", "team in x")
    assert bad.value.status == 400


def test_list_at_a_resource_version(kube: KubeEmulator, client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    path = "/api/v1/namespaces"
    body = client._request("GET", path)
    current = int(body["metadata"]["resourceVersion"])
    assert client._request("GET", path, query=[("resourceVersion", "0")])["items"]
    with pytest.raises(ApiFailure) as too_new:
        client._request("GET", path, query=[("resourceVersion", str(current + 5))])
    assert too_new.value.status == 504
    client.apply(namespace("b"), "me")
    old = [("resourceVersion", str(current)), ("resourceVersionMatch", "Exact")]
    with pytest.raises(ApiFailure) as expired:
        client._request("GET", path, query=old)
    assert expired.value.status == 410


def test_apply_conflicts_with_another_manager_unless_forced(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    client.apply(config_map("x", {"k": "1", "mine": "yes"}), "alice")
    with pytest.raises(Conflict) as conflict:
        client.apply(config_map("x", {"k": "2"}), "bob", force=False)
    assert conflict.value.is_field_conflict
    # the same value is shared ownership, not a conflict
    client.apply(config_map("x", {"k": "1"}), "bob", force=False)
    forced = client.apply(config_map("x", {"k": "2"}), "bob", force=True)
    assert forced["data"] == {"k": "2", "mine": "yes"}
    owners = {e["manager"]: e["fieldsV1"] for e in forced["metadata"]["managedFields"]}
    assert owners["bob"] == {"f:data": {"f:k": {}}}
    assert owners["alice"] == {"f:data": {"f:mine": {}}}


def test_apply_removes_fields_the_manager_no_longer_applies(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    client.apply(config_map("x", {"k": "1", "old": "1"}), "me")
    client.apply(config_map("x", {"extra": "1"}), "other")
    after = client.apply(config_map("x", {"k": "1"}), "me")
    assert after["data"] == {"k": "1", "extra": "1"}


def test_an_update_takes_ownership_of_the_fields_it_changes(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    live = client.apply(config_map("x", {"k": "1"}), "me")
    live["data"]["k"] = "edited"
    edited = client.replace(live, field_manager="kubectl-edit")
    owners = {e["manager"]: e["fieldsV1"] for e in edited["metadata"]["managedFields"]}
    assert owners == {"kubectl-edit": {"f:data": {"f:k": {}}}}


def test_dry_run_changes_nothing(kube: KubeEmulator, client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    preview = client.apply(config_map("x", {"k": "1"}), "me", dry_run=True)
    assert preview["data"] == {"k": "1"}
    assert kube.api.find("v1", "ConfigMap", "x", "a") is None


def test_namespaced_objects_need_their_namespace(client: ClusterClient) -> None:
    with pytest.raises(NotFound) as missing:
        client.apply(config_map("x", {}), "me")
    assert 'namespaces "a" not found' in missing.value.message


def test_unknown_fields_of_builtin_kinds_are_rejected(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    bad = config_map("x", {})
    bad["spec"] = {"oops": 1}
    with pytest.raises(ApiFailure) as invalid:
        client.apply(bad, "me")
    assert invalid.value.status == 422


def test_custom_resources_are_served_once_their_crd_is_established() -> None:
    with KubeEmulator(crd_establish_delay=1.0) as kube:
        client = connect(kube)
        client.apply(CRD, "me")
        assert client.resource("example.io/v1", "Widget") is None  # not Established yet
        with pytest.raises(NotFound):
            client._request("GET", "/apis/example.io/v1/widgets")
        ref = ObjectRef(
            "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", CRD["metadata"]["name"]
        )
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            conditions = client.get(ref).get("status", {}).get("conditions", [])
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                break
            time.sleep(0.05)
        widget = {**WIDGET, "spec": {"size": 3, "unknown": "pruned"}, "status": {"ok": True}}
        stored = client.apply(widget, "me")
        assert stored["spec"] == {"size": 3}  # unknown fields pruned, status ignored
        assert "status" not in stored
        status = client.apply({**WIDGET, "status": {"ok": True}}, "me", subresource="status")
        assert status["status"] == {"ok": True} and status["spec"] == {"size": 3}
        client.delete(ref)
        with pytest.raises(NotFound):  # the custom resources went with their CRD
            client._request("GET", "/apis/example.io/v1/widgets")
        client.close()


def test_deleting_a_namespace_deletes_its_objects(
    kube: KubeEmulator, client: ClusterClient
) -> None:
    client.apply(namespace("a"), "me")
    client.apply(config_map("x", {}), "me")
    assert client.delete(ObjectRef("v1", "Namespace", "", "a"))
    assert kube.api.find("v1", "ConfigMap", "x", "a") is None
    assert not client.delete(ObjectRef("v1", "Namespace", "", "a"))


def test_injected_faults_and_request_counts(kube: KubeEmulator, client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    kube.api.reset_counts()
    kube.api.add_fault(Fault(429, method="PATCH", retry_after=0))
    kube.api.add_fault(Fault(500, method="PATCH"))
    kube.api.add_fault(Fault(409, method="PATCH"))
    client.apply(config_map("x", {"k": "1"}), "me")  # retried three times, then applied
    assert kube.api.counts()["write"] == 4
    assert [r.code for r in kube.api.requests if r.method == "PATCH"] == [429, 500, 409, 201]


def test_a_timeout_after_the_write_is_retried_safely(kube: KubeEmulator) -> None:
    client = connect(kube, timeout=0.3)
    client.apply(namespace("a"), "me")
    kube.api.add_fault(Fault("timeout", method="PATCH", after=True, delay=0.6))
    applied = client.apply(config_map("x", {"k": "1"}), "me")
    assert applied["data"] == {"k": "1"}
    assert [r.code for r in kube.api.requests if r.method == "PATCH"][-2:] == [0, 200]
    client.close()


def test_leases_are_plain_objects_with_optimistic_concurrency(client: ClusterClient) -> None:
    client.apply(namespace("a"), "me")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l", "namespace": "a"},
        "spec": {"holderIdentity": "x", "leaseDurationSeconds": 15},
    }
    created = client.create(lease)
    client.replace({**created, "spec": {"holderIdentity": "y"}})
    with pytest.raises(Conflict):
        client.replace({**created, "spec": {"holderIdentity": "z"}})
