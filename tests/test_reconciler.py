"""The reconciler on a real control plane (kube-apiserver, etcd, kube-controller-manager
making pods from Jobs, kwok for nodes): the real client, a real Git repo, the real CLI and
kubectl. Every test starts on the session's baseline, the product's CRDs as the reconciler's
first sync leaves them (`real_cluster` wipes back to it after each), but those about a bare
cluster, which ask for `bare_cluster`: the first sync, `reconcile` before anything is
installed, kubectl applying the rendered folder, CRDs first. The harness installs the
shipped manifests and runs the reconciler as its ServiceAccount, with their RBAC, but where
a test is about a bare cluster (an admin's `reconcile` from outside).

"Writes nothing" is the reconciler's own client's count of write requests; the order of its
requests is read from the same client (`Harness.sent`). The faults a real server cannot be
made to produce on demand (injected 409/429/5xx and timeouts, a process killed between any
two requests) are in `test_reconciler_faults.py`, on the API emulator.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gitops_sched.cluster import ApiFailure, ObjectRef
from gitops_sched.cluster.leader import LeaderElector
from gitops_sched.reconciler import OWNER_LABEL, Reconciler, Settings
from testkit import fast_yaml
from testkit.control_plane.accounts import RECONCILER, account_client, account_kubeconfig
from testkit.control_plane.client import connect
from testkit.control_plane.cluster import ControlPlane, free_port
from testkit.control_plane.fixtures import uninstall
from testkit.control_plane.install import apply_kustomization, kubectl
from testkit.control_plane.nodes import gpu_node
from testkit.control_plane.waiting import wait as wait_for
from testkit.loops import running
from testkit.reconciler_harness import API, HOLD, SYSTEM, Harness, commit, config

CLI = str(Path(sys.executable).with_name("gitops-sched"))
JOB = ("batch/v1", "Job", "vision-train", "gpu-vision")


@pytest.fixture
def harness(real_cluster: ControlPlane, tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    """`harness(repo=tmp_path/"repo", name="gitops-sched", installed=True)`: a Harness on
    the real cluster. Installed (`kubectl apply -k reconciler/`, its Deployment aside: the
    session's baseline), the reconciler runs as its ServiceAccount; on a cluster without it
    (`uninstall`), as an admin would from outside."""
    made: list[Harness] = []

    def make(repo: Path | None = None, name: str = "gitops-sched", installed: bool = True):
        reconciler = None
        if installed:
            apply_kustomization(real_cluster, "reconciler")
            reconciler = lambda: account_client(real_cluster, *RECONCILER)  # noqa: E731
        elif not made:
            uninstall(real_cluster)  # as the `uninstalled` fixture
        folder = repo or tmp_path / "repo"
        made.append(Harness(lambda: connect(real_cluster), folder, name, reconciler))
        return made[-1]

    yield make
    for h in made:
        h.close()


def versions(live: dict[str, dict[str, Any]], but: str = "Cluster/") -> dict[str, str]:
    """resourceVersion by object, but the objects whose key starts with `but`."""
    return {k: v["metadata"]["resourceVersion"] for k, v in live.items() if not k.startswith(but)}


def events(h: Harness) -> list[dict[str, Any]]:
    return h.look.list("v1", "Event", namespace=SYSTEM) or []


def job_pods(h: Harness, uid: str) -> list[dict[str, Any]]:
    pods = h.look.list("v1", "Pod", f"batch.kubernetes.io/controller-uid={uid}", "gpu-vision")
    return pods or []


def run_cli(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


# --- creating, changing, pruning ------------------------------------------------------


@pytest.mark.usefixtures("bare_cluster")  # the first sync on a new cluster: its CRDs too
def test_first_sync_creates_everything_in_order_and_the_second_writes_nothing(harness):
    h = harness()
    revision = commit(h.repo, config({"vision": 8, "nlp": 4}))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    # everything made but the system namespace: the scheduler's manifests made that one,
    # annotated to be adopted (both parts are installed before the first sync)
    assert outcome.result.adopted == ["Namespace/gitops-sched-system"]
    # nothing of ours was there before it (a loop of an earlier test still syncing would be)
    assert sorted(map(str, outcome.result.live)) == []
    assert outcome.result.objects == len(outcome.result.created) + 1 > 20
    # the order the reconciler sent its applies in; a real server would have refused a
    # custom resource before its CRD was served, or an object before its namespace
    applied = [w for w in h.sent if w.startswith("PATCH") and "inventory" not in w]
    kinds = [w.split("/")[-2] for w in applied if "/status" not in w]
    first_custom = min(i for i, k in enumerate(kinds) if k in ("projects", "clusters", "workloads"))
    last_crd = max(i for i, k in enumerate(kinds) if k == "customresourcedefinitions")
    namespaced = [i for i, w in enumerate(applied) if re.search("/namespaces/gpu-[^/]+/", w)]
    namespaces = [i for i, k in enumerate(kinds) if k == "namespaces"]
    assert last_crd < first_custom
    assert max(namespaces) < min(namespaced)
    assert set(h.live()) == h.listed()
    # the server took the Event: about the inventory, in the reconciler's namespace
    told = [(e["reason"], e["involvedObject"]["name"]) for e in events(h)]
    assert told == [("Synced", "gitops-sched-inventory-gitops-sched")]

    h.reset()
    again = h.sync()
    assert again.ok and not again.result.changed
    assert h.writes == 0
    assert h.client.requests["read"] <= 20  # the inventory, and one list per kind

    # the server stored canonical quantities; that is no difference
    job = h.get(*JOB)
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["cpu"] == "12" and limits["memory"] == "1Gi"
    status = h.get(API, "Cluster", "lab")["status"]
    assert status["syncedCommit"] == revision and status["errors"] == []


def test_a_quota_change_patches_only_what_changed_and_a_removed_project_is_pruned(harness):
    h = harness()
    commit(h.repo, config({"vision": 8, "nlp": 4}))
    assert h.sync().ok
    notes = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "notes",
            "namespace": "gpu-vision",
            "labels": {"app.kubernetes.io/managed-by": "gitops-sched"},
        },
        "data": {},
    }
    h.look.create(notes)
    commit(h.repo, config({"vision": 6, "nlp": 4}))
    h.reset()
    outcome = h.sync()
    assert outcome.ok
    assert sorted(outcome.result.updated) == [
        "ConfigMap/gitops-sched-system/gitops-sched-policy",
        "Project/vision",
    ]
    assert not outcome.result.created and not outcome.result.pruned and not outcome.result.drift
    # the two applies, the inventory (their new digests), the Cluster's status, an Event
    assert sorted(h.written()) == [
        "PATCH /api/v1/namespaces/gitops-sched-system/configmaps/gitops-sched-policy",
        "PATCH /api/v1/namespaces/gitops-sched/configmaps/gitops-sched-inventory-gitops-sched",
        "PATCH /apis/gitops-sched.io/v1alpha1/clusters/lab/status",
        "PATCH /apis/gitops-sched.io/v1alpha1/projects/vision",
        "POST /api/v1/namespaces/gitops-sched/events",
    ]

    commit(h.repo, config({"vision": 6}))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    pruned = set(outcome.result.pruned)
    assert {"Project/nlp", "Namespace/gpu-nlp", "Workload/gpu-nlp/nlp-train"} <= pruned
    assert "Job/gpu-nlp/nlp-train" in pruned
    # the namespace is finalised by kube-controller-manager: wait until it has gone
    wait_for("gpu-nlp gone", lambda: h.get("v1", "Namespace", "gpu-nlp") is None)
    assert not [k for k in h.live() if "nlp" in k]
    # carries our generic managed-by label, but not this reconciler's owner label: untouched
    assert h.get("v1", "ConfigMap", "notes", "gpu-vision") is not None
    assert set(h.live()) == h.listed()
    h.reset()
    assert not h.sync().result.changed and h.writes == 0


def test_a_namespace_being_deleted_is_not_pruned_again(harness):
    """A pruned namespace stays Terminating until kube-controller-manager has emptied it
    and every finalizer is done (minutes, on a busy cluster): the syncs meanwhile neither
    delete it again nor report it as pruned."""
    h = harness()
    commit(h.repo, config({"vision": 8, "nlp": 4}))
    assert h.sync().ok
    namespace = ObjectRef("v1", "Namespace", "", "gpu-nlp")
    h.hold(namespace)  # keeps it Terminating until released
    commit(h.repo, config({"vision": 8}))
    first = h.sync()
    assert first.ok, first.result.errors
    assert "Namespace/gpu-nlp" in first.result.pruned
    assert h.look.get(namespace)["metadata"]["deletionTimestamp"]
    h.reset()
    again = h.sync()
    assert again.ok, again.result.errors
    assert not again.result.pruned and not again.result.changed
    assert h.writes == 0, h.written()
    assert "Namespace/gpu-nlp" not in h.listed()


def test_a_namespace_holding_foreign_objects_is_not_pruned(harness):
    h = harness()
    commit(h.repo, config({"vision": 8, "nlp": 4}))
    assert h.sync().ok
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "gpu-nlp"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Ti"}}},
    }
    h.look.create(claim)
    commit(h.repo, config({"vision": 8}))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors  # kept: a warning, not an error
    assert any("Namespace/gpu-nlp: not pruned" in w for w in outcome.result.warnings)
    namespace = h.get("v1", "Namespace", "gpu-nlp")
    assert namespace is not None and not namespace["metadata"].get("deletionTimestamp")
    assert h.get("v1", "PersistentVolumeClaim", "data", "gpu-nlp") is not None
    assert "Job/gpu-nlp/nlp-train" in outcome.result.pruned


def test_a_claim_the_repo_drops_is_left_in_place_with_its_data(harness):
    h = harness()
    files = config({"vision": 8})
    claim = {"name": "data", "mountPath": "/data", "claim": {"size": "1Ti"}}
    files["templates.yaml"][0]["spec"]["volumes"] = [claim]
    commit(h.repo, files)
    assert h.sync().ok
    assert h.get("v1", "PersistentVolumeClaim", "data", "gpu-vision") is not None
    commit(h.repo, config({"vision": 8}))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert outcome.result.orphaned == ["PersistentVolumeClaim/gpu-vision/data"]
    assert h.get("v1", "PersistentVolumeClaim", "data", "gpu-vision") is not None
    assert "PersistentVolumeClaim/gpu-vision/data" not in h.listed()
    h.reset()
    again = h.sync()  # no longer ours: not reported again, never deleted
    assert again.ok and not again.result.orphaned and not again.result.errors
    assert h.writes == 0
    assert h.get("v1", "PersistentVolumeClaim", "data", "gpu-vision") is not None


def test_a_second_repos_reconciler_never_prunes_or_takes_our_objects(harness, tmp_path):
    ours = harness(tmp_path / "ours")
    commit(ours.repo, config({"vision": 8}))
    assert ours.sync().ok
    before = ours.live()
    theirs = harness(tmp_path / "theirs", name="other")
    commit(theirs.repo, config({"speech": 2}, cluster="lab2"))
    outcome = theirs.sync()
    # shared cluster-wide objects (the CRDs) belong to us: reported, not taken
    assert any("owned by reconciler 'gitops-sched'" in e for e in outcome.result.errors)
    assert not outcome.result.pruned
    after = ours.live()
    assert after.keys() == before.keys()
    assert versions(after) == versions(before)
    assert "Namespace/gpu-speech" in theirs.live()
    # and ours sees nothing to do afterwards
    ours.reset()
    assert not ours.sync().result.changed and ours.writes == 0


def test_a_hand_edit_is_repaired_and_reported_as_drift(harness, real_cluster):
    h = harness()
    commit(h.repo, config({"vision": 8}))
    assert h.sync().ok
    # someone opens the namespace to everything, and deletes the members' Role
    kubectl(
        real_cluster,
        "-n",
        "gpu-vision",
        "patch",
        "networkpolicy",
        "gitops-sched-isolation",
        "--type=merge",
        "-p",
        '{"spec":{"ingress":[{}]}}',
    )
    kubectl(real_cluster, "-n", "gpu-vision", "delete", "role", "gitops-sched-member")
    outcome = h.sync()
    assert outcome.ok
    drift = outcome.result.drift
    assert any(
        d.startswith("NetworkPolicy/gpu-vision/gitops-sched-isolation: spec.ingress") for d in drift
    ), drift
    assert "Role/gpu-vision/gitops-sched-member: deleted" in drift
    repaired = h.get(
        "networking.k8s.io/v1", "NetworkPolicy", "gitops-sched-isolation", "gpu-vision"
    )
    assert repaired["spec"].get("ingress") != [{}]
    assert h.get(API, "Cluster", "lab")["status"]["drift"] == drift
    assert any(e["reason"] == "DriftRepaired" for e in events(h))
    h.reset()
    assert h.sync().ok and h.writes == 0


def test_an_invalid_commit_applies_nothing_and_reports_the_errors(harness):
    h = harness()
    good = commit(h.repo, config({"vision": 8}))
    assert h.sync().ok
    before = h.live()
    broken = config({"vision": 8})
    broken["projects.yaml"][0]["spec"]["department"] = "nowhere"
    bad = commit(h.repo, broken)
    h.reset()
    outcome = h.sync()
    assert not outcome.ok and outcome.result is None
    assert any("nowhere" in e for e in outcome.errors)
    assert [w for w in h.written() if "/status" not in w and "/events" not in w] == []
    assert versions(h.live()) == versions(before)
    status = h.get(API, "Cluster", "lab")["status"]
    assert status["syncedCommit"] == good and status["lastAttemptedCommit"] == bad
    assert status["conditions"][0]["reason"] == "InvalidConfig"
    assert any(e["reason"] == "InvalidConfig" for e in events(h))
    h.reset()
    h.sync()  # the same bad commit again: reported once
    assert h.writes == 0


# --- replacing what Kubernetes will not change in place ---------------------------------


def bind_the_jobs_pod(h: Harness) -> dict[str, Any]:
    """A kwok GPU node of the group, and the Job's pod (made by kube-controller-manager)
    bound to it by hand, as our scheduler would: kwok starts it. The running pod."""
    h.look.create(gpu_node("a100-0", "A100-80GB", 8, labels={"pool": "a100"}))
    uid = h.get(*JOB)["metadata"]["uid"]
    [pod] = wait_for("the Job's pod", lambda: job_pods(h, uid))
    name = pod["metadata"]["name"]
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": "gpu-vision"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "a100-0"},
    }
    ref = ObjectRef("v1", "Pod", "gpu-vision", name)
    h.look.post(ref, "binding", binding)
    return wait_for(
        "the pod running",
        lambda: (p := h.look.get(ref)) and p["status"].get("phase") == "Running" and p,
    )


def test_a_changed_image_replaces_the_job_its_pods_stop_and_the_next_sync_writes_nothing(
    harness,
):
    """A Job's pod template is fixed at creation: the API server answers an apply that
    changes the image with 422 "field is immutable". The reconciler deletes the Job (its
    running pod stops first) and creates it again from the repo, in the same sync."""
    h = harness()
    commit(h.repo, config({"vision": 8}))
    assert h.sync().ok
    old_uid = h.get(*JOB)["metadata"]["uid"]
    running = bind_the_jobs_pod(h)
    revision = commit(h.repo, config({"vision": 8}, image="pytorch:2.4"))
    # what the server says of the change made in place
    container = h.get(*JOB)["spec"]["template"]["spec"]["containers"][0]["name"]
    in_place = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "vision-train", "namespace": "gpu-vision"},
        "spec": {"template": {"spec": {"containers": [{"name": container, "image": "x:2"}]}}},
    }
    with pytest.raises(ApiFailure) as refused:
        h.look.apply(in_place, "hand-edit", force=True, dry_run=True)
    assert refused.value.status == 422 and "field is immutable" in refused.value.message
    assert "spec.template: Invalid value" in refused.value.message

    h.reconciler.syncer.poll = 0.05
    h.reset()
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert outcome.result.replaced == ["Job/gpu-vision/vision-train"]
    assert not outcome.result.errors and not outcome.result.drift
    assert "DELETE /apis/batch/v1/namespaces/gpu-vision/jobs/vision-train" in h.sent
    job = h.get(*JOB)
    assert job["metadata"]["uid"] != old_uid
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "pytorch:2.4"
    # the old pod stopped before the new Job was made: the two never ran side by side
    assert h.look.get(ObjectRef.of(running)) is None
    assert job_pods(h, old_uid) == []
    new_pods = wait_for("the new Job's pod", lambda: job_pods(h, job["metadata"]["uid"]))
    assert all(p["spec"]["containers"][0]["image"] == "pytorch:2.4" for p in new_pods)
    status = h.get(API, "Cluster", "lab")["status"]
    assert status["syncedCommit"] == revision and status["replaced"] == 1
    assert status["replacing"] == [] and status["conditions"][0]["reason"] == "Synced"
    assert h.reconciler.metrics.replaced._value.get() == 1
    assert set(h.live()) == h.listed()

    h.reset()
    again = h.sync()
    assert again.ok and not again.result.changed
    assert h.writes == 0


def test_a_replaced_job_waits_for_its_pods_to_stop_then_a_later_sync_creates_it(harness):
    """Deleted in the foreground, the old Job stays until its pods are gone, so the two
    generations never hold GPUs together; a sync that cannot wait longer says so, writes
    nothing more while it waits, and the next one creates the Job. (The pod is held by a
    finalizer, as a kubelet still stopping its containers would hold it.)"""
    h = harness()
    commit(h.repo, config({"vision": 8}))
    assert h.sync().ok
    running = bind_the_jobs_pod(h)
    pod = ObjectRef.of(running)
    h.hold(pod)  # as a kubelet still stopping its containers would hold it
    revision = commit(h.repo, config({"vision": 8}, image="pytorch:2.4"))
    h.reconciler.syncer.replace_timeout = 0.2
    outcome = h.sync()
    assert not outcome.ok and not outcome.result.errors
    assert [w.split(":")[0] for w in outcome.result.waiting] == ["Job/gpu-vision/vision-train"]
    assert h.get(*JOB)["metadata"]["deletionTimestamp"]  # its pod is stopping
    status = h.get(API, "Cluster", "lab")["status"]
    assert status["conditions"][0]["reason"] == "Replacing"
    assert status["syncedCommit"] != revision and status["replacing"]
    assert "Job/gpu-vision/vision-train" in h.listed()  # still listed: it may exist

    h.reset()
    waiting = h.sync()
    assert waiting.result.waiting and h.writes == 0

    # the pod's containers have stopped (kwok marked it Failed; the Job controller took
    # its own finalizer off): let it go, and the garbage collector removes the Job
    wait_for("only our finalizer left", lambda: h.look.get(pod)["metadata"]["finalizers"] == [HOLD])
    h.release(pod)
    wait_for("the old Job gone", lambda: h.get(*JOB) is None)
    done = h.sync()
    assert done.ok, (done.result.errors, done.result.waiting)
    assert done.result.created == ["Job/gpu-vision/vision-train"] and not done.result.drift
    job = h.get(*JOB)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "pytorch:2.4"
    status = h.get(API, "Cluster", "lab")["status"]
    assert status["syncedCommit"] == revision and status["replacing"] == []
    h.reset()
    assert not h.sync().result.changed and h.writes == 0


def test_a_refusal_for_a_field_the_reconciler_does_not_know_is_replaced_too(harness, monkeypatch):
    """A later Kubernetes may fix more fields: the server's 422 leads to a replacement."""
    from gitops_sched.cluster import replace

    monkeypatch.setitem(replace.IMMUTABLE, ("batch", "Job"), ())
    h = harness()
    commit(h.repo, config({"vision": 8}))
    assert h.sync().ok
    commit(h.repo, config({"vision": 8}, image="pytorch:2.4"))
    h.reconciler.syncer.poll = 0.05
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert outcome.result.replaced == ["Job/gpu-vision/vision-train"]
    job = h.get(*JOB)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "pytorch:2.4"


def test_which_changes_need_a_replacement_and_which_refusals_mean_one():
    from gitops_sched.cluster.errors import ApiFailure
    from gitops_sched.cluster.replace import immutable_fields, refused_as_immutable

    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed"},
    }
    changed = ["spec.template.spec.containers.0.image", "spec.parallelism", "metadata.labels"]
    assert immutable_fields(job, changed) == ["spec.template"]
    assert immutable_fields(job, ["spec.parallelism", "spec.completions"]) == []  # elastic
    assert immutable_fields(job, ["spec.activeDeadlineSeconds", "spec.suspend"]) == []
    uneven = {**job, "spec": {**job["spec"], "completions": 8}}
    assert immutable_fields(uneven, ["spec.completions"]) == ["spec.completions"]
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment"}
    assert immutable_fields(deployment, ["spec.template.spec.containers.0.image"]) == []
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim"}
    assert immutable_fields(claim, ["spec.storageClassName"]) == []  # never replaced

    def refusal(message: str, field: str | None) -> ApiFailure:
        causes = [{"reason": "FieldValueInvalid", "message": message, "field": field}]
        body = {"message": f"x is invalid: {field}: {message}", "details": {"causes": causes}}
        return ApiFailure(422, "Invalid", body["message"], body)

    assert refused_as_immutable(
        refusal("Invalid value: 3: field is immutable", "spec.completions")
    ) == ["spec.completions"]
    assert refused_as_immutable(refusal("Invalid value: x: cannot change roleRef", "roleRef")) == [
        "roleRef"
    ]
    assert refused_as_immutable(refusal("Forbidden: may not be changed in an update.", "value"))
    assert refused_as_immutable(refusal("Invalid value: -1: must be >= 0", "spec.x")) == []
    assert refused_as_immutable(ApiFailure(409, "Conflict", "field is immutable")) == []


def test_the_servers_own_refusals_are_read_as_immutable_fields(real_client):
    """What a real kube-apiserver answers a change of a RoleBinding's roleRef and of a
    PriorityClass's value (a Job's pod template: above) is read as those fields being fixed
    at creation."""
    from gitops_sched.cluster.replace import refused_as_immutable

    rbac = "rbac.authorization.k8s.io/v1"
    binding = {
        "apiVersion": rbac,
        "kind": "RoleBinding",
        "metadata": {"name": "members", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "a"},
        "subjects": [{"kind": "Group", "name": "team", "apiGroup": "rbac.authorization.k8s.io"}],
    }
    priority = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "gitops-sched-test"},
        "value": 50,
    }

    def refused(obj: dict[str, Any], change: dict[str, Any]) -> list[str]:
        real_client.apply(obj, "gitops-sched")
        with pytest.raises(ApiFailure) as error:
            real_client.apply({**obj, **change}, "gitops-sched", dry_run=True)
        return refused_as_immutable(error.value)

    try:
        assert refused(binding, {"roleRef": {**binding["roleRef"], "name": "b"}}) == ["roleRef"]
        assert refused(priority, {"value": 51}) == ["value"]
    finally:
        real_client.delete(ObjectRef.of(binding))  # in default, which the wipe keeps


def test_a_dry_run_shows_a_replacement_and_writes_nothing(harness):
    h = harness()
    commit(h.repo, config({"vision": 8}))
    assert h.sync().ok
    before = h.live()
    commit(h.repo, config({"vision": 8}, image="pytorch:2.4"))
    outcome = h.new_reconciler(h.client, dry_run=True).sync_once()
    assert outcome.result.replaced == ["Job/gpu-vision/vision-train"]
    [text] = [d for d in outcome.result.diff if "jobs" in d.lower() or "Job/" in d]
    assert text.startswith("# Job/gpu-vision/vision-train: replaced, spec.template cannot")
    assert "-        image: pytorch:2.3\n+        image: pytorch:2.4\n" in text
    assert "terminationMessagePath" not in text  # server defaults are no difference
    assert "cpu" not in text  # nor is the server's spelling of a quantity
    after = h.live()
    assert versions(after, but="-") == versions(before, but="-")  # not even the status
    assert h.get(*JOB)["spec"]["template"]["spec"]["containers"][0]["image"] == "pytorch:2.3"


def test_dry_run_prints_the_diff_and_writes_nothing(harness):
    h = harness()
    commit(h.repo, config({"vision": 8}))
    assert h.sync().ok
    before, told = h.live(), len(events(h))
    commit(h.repo, config({"vision": 6}))
    dry = h.new_reconciler(h.client, dry_run=True)
    outcome = dry.sync_once()
    text = "".join(outcome.result.diff)
    assert "-    gpu: 8" in text and "+    gpu: 6" in text
    # the server ran the applies as dry runs: no object changed, no Event
    assert versions(h.live(), but="-") == versions(before, but="-")
    assert len(events(h)) == told
    assert h.get(API, "Project", "vision")["spec"]["quota"]["gpu"] == 8


# --- the reconciler's own namespace ----------------------------------------------------


def test_the_reconcilers_own_namespace_is_never_pruned(harness):
    """The repo once named it (its system namespace) and then another: it stays, with the
    inventory in it."""
    h = harness()
    commit(h.repo, config({"vision": 8}, system_namespace=SYSTEM))
    assert h.sync().ok
    assert f"Namespace/{SYSTEM}" in h.listed()
    commit(h.repo, config({"vision": 8}))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert f"Namespace/{SYSTEM}" in outcome.result.orphaned
    assert f"Namespace/{SYSTEM}" not in outcome.result.pruned
    namespace = h.get("v1", "Namespace", SYSTEM)
    assert namespace is not None and not namespace["metadata"].get("deletionTimestamp")
    assert h.inventory().entries
    h.reset()
    assert not h.sync().result.changed and h.writes == 0


# --- the command ------------------------------------------------------------------------


def test_the_reconcile_command_syncs_once(harness, real_cluster, tmp_path):
    """From a Git URL: each run clones into a scratch folder it removes when it ends."""
    h = harness()
    commit(h.repo, config({"vision": 8}))
    kubeconfig = account_kubeconfig(real_cluster, *RECONCILER)  # as its Deployment runs it
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    url = ["reconcile", "--repo", h.repo.resolve().as_uri(), "--kubeconfig", str(kubeconfig)]
    done = run_cli(
        *url, "--once", "--namespace", SYSTEM, env={**os.environ, "TMPDIR": str(scratch)}
    )
    assert done.returncode == 0, done.stderr
    assert h.get(API, "Project", "vision") is not None
    assert not list(scratch.glob("gitops-sched-reconcile-*"))  # the clone is gone
    assert set(h.live()) == h.listed()
    commit(h.repo, config({"vision": 6}))
    dry = run_cli(*url, "--dry-run", "--namespace", SYSTEM)
    assert dry.returncode == 0, dry.stderr
    assert "+    gpu: 6" in dry.stdout
    assert h.get(API, "Project", "vision")["spec"]["quota"]["gpu"] == 8


@pytest.mark.as_admin("a bare cluster: no ServiceAccount yet, an admin runs it from outside")
def test_reconcile_once_on_a_bare_cluster_creates_its_namespace_and_writes_the_inventory(
    harness, bare_cluster
):
    """Nothing installed yet (no gitops-sched namespace): the inventory's namespace is
    created, labelled as ours but never pruned, and the sync succeeds."""
    h = harness(installed=False)
    commit(h.repo, config({"vision": 8}))
    assert h.get("v1", "Namespace", SYSTEM) is None
    base = ["reconcile", "--repo", str(h.repo), "--kubeconfig", str(bare_cluster.kubeconfig)]
    dry = run_cli(*base, "--dry-run", "--namespace", SYSTEM)
    assert dry.returncode == 0, dry.stderr
    assert h.get("v1", "Namespace", SYSTEM) is None  # a dry run writes nothing
    done = run_cli(*base, "--once", "--namespace", SYSTEM)
    assert done.returncode == 0, done.stderr
    namespace = h.get("v1", "Namespace", SYSTEM)
    assert namespace["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gitops-sched"
    assert OWNER_LABEL not in namespace["metadata"]["labels"]
    assert h.inventory().entries
    assert set(h.live()) == h.listed()
    h.reset()
    assert not h.sync().result.changed and h.writes == 0


@pytest.mark.as_admin("a bare cluster: no ServiceAccount yet, an admin runs it from outside")
def test_the_reconcile_process_on_a_bare_cluster_takes_the_lease_syncs_and_serves_probes(
    harness, bare_cluster
):
    """The long-running command, leader election on (the default): on a cluster without its
    namespace it creates it, takes the Lease, syncs, answers /healthz, /readyz and /metrics,
    and gives the Lease back when stopped."""
    h = harness(installed=False)
    revision = commit(h.repo, config({"vision": 8}))
    port = free_port()
    process = subprocess.Popen(
        [
            CLI,
            *("reconcile", "--repo", str(h.repo), "--kubeconfig", str(bare_cluster.kubeconfig)),
            *("--namespace", SYSTEM, "--interval", "60s", "--listen", f"127.0.0.1:{port}"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def get(path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as error:
                return error.code, ""
            except OSError:
                assert process.poll() is None, process.communicate()[0]
                return 0, ""

        def synced() -> bool:
            assert process.poll() is None, process.communicate()[0]
            status = (h.get(API, "Cluster", "lab") or {}).get("status") or {}
            return status.get("syncedCommit") == revision

        wait_for("the commit synced", synced, 90)
        assert get("/healthz")[0] == 200
        assert get("/readyz")[0] == 200
        info = f'gitops_sched_reconcile_synced_commit_info{{commit="{revision}"}} 1.0'
        # recorded just after the status is written: the two may be read in between
        wait_for("the synced commit's metric", lambda: info in get("/metrics")[1])
        metrics = get("/metrics")[1]
        assert "gitops_sched_reconcile_leader 1.0" in metrics
        lease = h.get(
            "coordination.k8s.io/v1", "Lease", "gitops-sched-reconciler-gitops-sched", SYSTEM
        )
        holder = lease["spec"]["holderIdentity"]
        assert holder
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=20)[0]
    assert process.returncode == 0, output
    lease = h.get("coordination.k8s.io/v1", "Lease", "gitops-sched-reconciler-gitops-sched", SYSTEM)
    assert lease["spec"].get("holderIdentity", "") == ""  # given back


# --- leader election, probes, kubectl --------------------------------------------------


def test_only_the_leader_writes_and_the_other_takes_over_when_it_stops(harness):
    h = harness()
    commit(h.repo, config({"vision": 8}))
    replicas = []
    for identity in ("a", "b"):
        client = h.new_client()
        elector = LeaderElector(
            h.new_client(),
            SYSTEM,
            "gitops-sched-reconciler",
            identity,
            lease_duration=1.0,
            renew_deadline=0.6,
            retry_period=0.1,
        )
        settings = Settings(repo=str(h.repo), namespace=SYSTEM, interval=0.2, identity=identity)
        replicas.append((Reconciler(settings, client, elector), client, elector))
    replicas[0][2].try_acquire_or_renew()
    for _, _, elector in replicas:
        elector.start()
    try:
        with running(*(reconciler.run for reconciler, _, _ in replicas)) as loops:
            wait_for("the first sync", lambda: h.get(API, "Cluster", "lab") is not None)
            leader = next(i for i, r in enumerate(replicas) if r[2].is_leader())
            follower = replicas[1 - leader]
            wait_for(
                "the leader's status", lambda: (h.get(API, "Cluster", "lab") or {}).get("status")
            )
            assert replicas[leader][1].requests["write"] > 0
            assert follower[1].requests["write"] == 0  # never wrote: not even status or events

            # the leader dies without giving the Lease back; the follower takes over and syncs
            loops[leader].stop.set()
            replicas[leader][2].stop(release=False)
            commit(h.repo, config({"vision": 8, "nlp": 2}))
            wait_for("nlp created", lambda: h.get(API, "Project", "nlp") is not None)
            assert follower[2].is_leader()
            lease = h.get("coordination.k8s.io/v1", "Lease", "gitops-sched-reconciler", SYSTEM)
            assert lease["spec"]["holderIdentity"] == follower[2].identity
            assert lease["spec"]["leaseTransitions"] >= 1
    finally:
        for reconciler, _, elector in replicas:
            elector.stop()
            reconciler.close()


def test_health_readiness_and_metrics_endpoints(harness):
    from gitops_sched.cluster.serving import Health, serve
    from gitops_sched.reconciler.metrics import Metrics

    h = harness()
    revision = commit(h.repo, config({"vision": 8}))
    metrics, health = Metrics(), Health(stale_after=60)
    server = serve(metrics.registry, health, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(base + path) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, ""

    try:
        assert get("/healthz")[0] == 200
        assert get("/readyz")[0] == 503  # nothing fetched yet
        settings = Settings(repo=str(h.repo), namespace=SYSTEM, identity="m")
        reconciler = Reconciler(settings, h.client, metrics=metrics, health=health)
        outcome = reconciler.sync_once()
        reconciler.close()
        assert outcome.ok, outcome.result.errors
        assert get("/readyz")[0] == 200
        text = get("/metrics")[1]
        assert f'gitops_sched_reconcile_synced_commit_info{{commit="{revision}"}} 1.0' in text
        applied = next(
            line
            for line in text.splitlines()
            if line.startswith("gitops_sched_reconcile_objects_applied_total")
        )
        # what the sync applied: all it renders but the CRDs, unchanged in the baseline
        assert float(applied.split()[-1]) == outcome.result.applied > 0
        assert "gitops_sched_reconcile_duration_seconds_count 1.0" in text
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.as_admin("a bare cluster: no ServiceAccount yet, an admin runs it from outside")
def test_the_rendered_folder_applies_with_kubectl_crds_first(bare_cluster, tmp_path):
    """`render -o DIR` on a bare cluster: `kubectl apply -k DIR/crds`, then (the CRDs
    Established) `kubectl apply -k DIR` applies every object; and the reconciler applies the
    same objects in one pass, CRDs first (taking over what kubectl made needs its consent:
    adopt)."""
    from gitops_sched.compiler import render_repo
    from gitops_sched.compiler.output import write_directory
    from gitops_sched.reconciler import Syncer
    from gitops_sched.validate import check_repo

    repo, _ = check_repo(Path(__file__).resolve().parent.parent / "examples/clusters/netapp-dgx")
    out = tmp_path / "out"
    write_directory(render_repo(repo), out)
    objects = [o for o in fast_yaml.load_all(kubectl(bare_cluster, "kustomize", str(out))) if o]
    crds = fast_yaml.load_all(kubectl(bare_cluster, "kustomize", str(out / "crds")))
    assert {o["kind"] for o in crds} == {"CustomResourceDefinition"}

    kubectl(bare_cluster, "apply", "--server-side", "-k", str(out / "crds"))
    kubectl(bare_cluster, "wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")
    applied = kubectl(bare_cluster, "apply", "--server-side", "-k", str(out)).splitlines()
    assert len(applied) == len(objects)
    assert all(line.endswith("serverside-applied") for line in applied), applied

    client = connect(bare_cluster)
    try:
        syncer = Syncer(client, "gitops-sched", SYSTEM, "rendered", adopt=True, poll=0.05)
        result = syncer.sync(objects, "r1")
        assert result.errors == []
        assert len(result.adopted) == len(objects)
    finally:
        client.close()
