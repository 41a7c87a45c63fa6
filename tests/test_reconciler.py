"""The reconciler against the API emulator: the real client over HTTP, a real Git repo."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gitops_sched.cli import main
from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.cluster.leader import LeaderElector
from gitops_sched.reconciler import OWNER_LABEL, Reconciler, Settings
from gitops_sched.reconciler.inventory import Inventory
from tests.kube_emulator import Fault, KubeEmulator
from tests.kube_emulator.fixtures import connect

API = "gitops-sched.io/v1alpha1"
SYSTEM = "gitops-sched"  # the reconciler's own namespace


def doc(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def config(
    projects: dict[str, int],
    cluster: str = "lab",
    image: str = "pytorch:2.3",
    system_namespace: str = "gitops-sched-system",
) -> dict[str, list[dict[str, Any]]]:
    """A small config repo: one node group, one department, `projects` (name -> GPU quota),
    a template (of `image`) with quantities the server normalises, and a train workload per
    project."""
    files = {
        "cluster.yaml": [
            doc(
                "Cluster",
                cluster,
                {
                    "kubernetesVersion": "1.32",
                    "systemNamespace": system_namespace,
                    "namespacePrefix": "gpu-",
                    "schedulerName": "gitops-sched",
                },
            )
        ],
        "node-groups.yaml": [
            doc(
                "NodeGroup",
                "a100",
                {
                    "role": "gpu-worker",
                    "nodeSelector": {"matchLabels": {"pool": "a100"}},
                    "nodeLabel": {"key": "gitops-sched.io/node-group", "value": "a100"},
                    "nodeCount": 2,
                    "gpusPerNode": 8,
                    "gpu": {"model": "A100-80GB", "memory": "80Gi"},
                    "cpuPerNode": "128",
                    "memoryPerNode": "1000Gi",
                },
            )
        ],
        "departments.yaml": [doc("Department", "research", {"quota": {"gpu": 16}})],
        "templates.yaml": [
            doc(
                "Template",
                "train",
                {
                    "image": image,
                    "command": ["python", "train.py"],
                    # canonical on the server as 12 and 1Gi: must never look like drift
                    "resources": {"cpu": "12000m", "memory": "1024Mi"},
                },
            )
        ],
    }
    files["projects.yaml"] = [
        doc("Project", name, {"department": "research", "quota": {"gpu": gpu}})
        for name, gpu in projects.items()
    ]
    files["workloads.yaml"] = [
        doc(
            "Workload",
            f"{name}-train",
            {"project": name, "type": "train", "template": "train", "gpu": 1},
        )
        for name in projects
    ]
    return files


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def commit(repo: Path, files: dict[str, Any]) -> str:
    """Replace the repo's YAML files with `files` (raw text or documents) and commit."""
    repo.mkdir(exist_ok=True)
    if not (repo / ".git").exists():
        git(repo, "init", "-q", "-b", "main")
    for old in repo.glob("*.yaml"):
        old.unlink()
    for name, content in files.items():
        text = content if isinstance(content, str) else yaml.safe_dump_all(content, sort_keys=False)
        (repo / name).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "change", "--allow-empty")
    return git(repo, "rev-parse", "HEAD")


class Harness:
    def __init__(self, kube: KubeEmulator, repo: Path, name: str = "gitops-sched"):
        self.kube, self.repo, self.name = kube, repo, name
        self.client = connect(kube)
        self.reconciler = self.new_reconciler(self.client)

    def new_reconciler(self, client: ClusterClient, **kw: Any) -> Reconciler:
        settings = Settings(
            repo=str(self.repo), name=self.name, namespace=SYSTEM, identity="test", **kw
        )
        return Reconciler(
            settings, client, **({"elector": kw["elector"]} if "elector" in kw else {})
        )

    def sync(self):
        return self.reconciler.sync_once()

    def live(self, kind_filter: str | None = None) -> dict[str, dict[str, Any]]:
        """Every stored object carrying our owner label, by "Kind/ns/name"."""
        out = {}
        for rtype in {t.key: t for t in self.kube.api.types.values()}.values():
            for obj in self.kube.api.objects(rtype.api_version, rtype.kind):
                if obj["metadata"].get("labels", {}).get(OWNER_LABEL) == self.name:
                    out[str(ObjectRef.of(obj))] = obj
        return out

    def inventory(self) -> Inventory:
        cm = self.kube.api.find("v1", "ConfigMap", f"gitops-sched-inventory-{self.name}", SYSTEM)
        return Inventory.parse(cm["data"])


SYSTEM_NAMESPACE = b'{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"gitops-sched"}}'


def create_system_namespace(kube: KubeEmulator) -> None:
    assert kube.api.handle("POST", "/api/v1/namespaces", {}, {}, SYSTEM_NAMESPACE).code == 201


@pytest.fixture
def kube():
    with KubeEmulator(crd_establish_delay=0.05) as emulator:
        create_system_namespace(emulator)
        yield emulator


def writes(kube: KubeEmulator) -> list[str]:
    return [f"{r.method} {r.path}" for r in kube.api.requests if r.category == "write"]


def test_first_sync_creates_everything_in_order_and_the_second_writes_nothing(kube, tmp_path):
    repo = tmp_path / "repo"
    revision = commit(repo, config({"vision": 8, "nlp": 4}))
    h = Harness(kube, repo)
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert outcome.result.objects == len(outcome.result.created) > 20
    applied = [w for w in writes(kube) if w.startswith("PATCH") and "inventory" not in w]
    kinds = [w.split("/")[-2] for w in applied if "/status" not in w]
    first_custom = min(i for i, k in enumerate(kinds) if k in ("projects", "clusters", "workloads"))
    last_crd = max(i for i, k in enumerate(kinds) if k == "customresourcedefinitions")
    namespaced = [i for i, w in enumerate(applied) if re.search("/namespaces/gpu-[^/]+/", w)]
    namespaces = [i for i, k in enumerate(kinds) if k == "namespaces"]
    assert last_crd < first_custom
    assert max(namespaces) < min(namespaced)
    assert set(h.live()) == {f"{r}" for r in h.inventory().entries}

    kube.api.reset_counts()
    again = h.sync()
    assert again.ok and not again.result.changed
    counts = kube.api.counts()
    assert counts["write"] == 0
    assert counts["read"] <= 20  # the inventory, and one list per kind

    # the server stored canonical quantities; that is no difference
    job = kube.api.find("batch/v1", "Job", "vision-train", "gpu-vision")
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["cpu"] == "12" and limits["memory"] == "1Gi"
    status = kube.api.find(API, "Cluster", "lab")["status"]
    assert status["syncedCommit"] == revision and status["errors"] == []


def test_a_quota_change_patches_only_what_changed_and_a_removed_project_is_pruned(kube, tmp_path):
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8, "nlp": 4}))
    h = Harness(kube, repo)
    assert h.sync().ok
    kube.api.handle(
        "POST",
        "/api/v1/namespaces/gpu-vision/configmaps",
        {},
        {},
        b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"notes",'
        b'"labels":{"app.kubernetes.io/managed-by":"gitops-sched"}},"data":{}}',
    )
    commit(repo, config({"vision": 6, "nlp": 4}))
    kube.api.reset_counts()
    outcome = h.sync()
    assert outcome.ok
    assert sorted(outcome.result.updated) == [
        "ConfigMap/gitops-sched-system/gitops-sched-policy",
        "Project/vision",
    ]
    assert not outcome.result.created and not outcome.result.pruned and not outcome.result.drift

    commit(repo, config({"vision": 6}))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    pruned = set(outcome.result.pruned)
    assert {"Project/nlp", "Namespace/gpu-nlp", "Workload/gpu-nlp/nlp-train"} <= pruned
    assert "Job/gpu-nlp/nlp-train" in pruned
    assert not [k for k in h.live() if "nlp" in k]
    # carries our generic managed-by label, but not this reconciler's owner label: untouched
    assert kube.api.find("v1", "ConfigMap", "notes", "gpu-vision") is not None
    assert set(h.live()) == {str(r) for r in h.inventory().entries}


JOB = ("batch/v1", "Job", "vision-train", "gpu-vision")


def test_a_changed_pod_template_replaces_the_job_and_the_next_sync_writes_nothing(kube, tmp_path):
    """A Job's pod template is fixed at creation (a real server answers 422 "field is
    immutable"): the reconciler deletes the Job and creates it again in the same sync."""
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8}))
    h = Harness(kube, repo)
    assert h.sync().ok
    old_uid = kube.api.find(*JOB)["metadata"]["uid"]
    revision = commit(repo, config({"vision": 8}, image="pytorch:2.4"))
    kube.api.reset_counts()
    outcome = h.sync()
    assert outcome.ok, (outcome.result.errors, outcome.result.waiting)
    assert outcome.result.replaced == ["Job/gpu-vision/vision-train"]
    assert not outcome.result.errors and not outcome.result.drift
    job = kube.api.find(*JOB)
    assert job["metadata"]["uid"] != old_uid
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "pytorch:2.4"
    assert "DELETE /apis/batch/v1/namespaces/gpu-vision/jobs/vision-train" in writes(kube)
    status = kube.api.find(API, "Cluster", "lab")["status"]
    assert status["syncedCommit"] == revision and status["replaced"] == 1
    assert status["replacing"] == [] and status["conditions"][0]["reason"] == "Synced"
    assert h.reconciler.metrics.replaced._value.get() == 1
    assert set(h.live()) == {str(r) for r in h.inventory().entries}

    kube.api.reset_counts()
    again = h.sync()
    assert again.ok and not again.result.changed
    assert kube.api.counts()["write"] == 0


def test_a_replaced_job_waits_for_its_pods_to_stop_then_a_later_sync_creates_it(tmp_path):
    """Deleted in the foreground, the old Job stays until its pods have stopped, so the two
    generations never hold GPUs together; a sync that cannot wait longer says so, writes
    nothing more while it waits, and the next one creates the Job."""
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8}))
    with KubeEmulator(pod_termination="graceful") as kube:
        create_system_namespace(kube)
        h = Harness(kube, repo)
        h.reconciler.syncer.replace_timeout = 0.2
        assert h.sync().ok
        owner = kube.api.find(*JOB)
        reference = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "vision-train",
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "vision-train-0-abcde", "ownerReferences": [reference]},
            "spec": {"containers": [{"name": "main", "image": "pytorch:2.3"}]},
        }
        kube.api.call("POST", "/api/v1/namespaces/gpu-vision/pods", pod)
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "vision-train-0-abcde"},
            "target": {"kind": "Node", "name": "gpu-1"},
        }
        kube.api.call(
            "POST", "/api/v1/namespaces/gpu-vision/pods/vision-train-0-abcde/binding", binding
        )
        revision = commit(repo, config({"vision": 8}, image="pytorch:2.4"))
        outcome = h.sync()
        assert not outcome.ok and not outcome.result.errors
        assert [w.split(":")[0] for w in outcome.result.waiting] == ["Job/gpu-vision/vision-train"]
        assert kube.api.find(*JOB)["metadata"]["deletionTimestamp"]  # its pod is stopping
        status = kube.api.find(API, "Cluster", "lab")["status"]
        assert status["conditions"][0]["reason"] == "Replacing"
        assert status["syncedCommit"] != revision and status["replacing"]
        assert h.inventory().entries  # the Job is still listed: it may exist

        kube.api.reset_counts()
        waiting = h.sync()
        assert waiting.result.waiting and kube.api.counts()["write"] == 0

        assert kube.api.finish_terminating() == ["gpu-vision/vision-train-0-abcde"]
        assert kube.api.find(*JOB) is None  # gone with its last pod
        done = h.sync()
        assert done.ok, (done.result.errors, done.result.waiting)
        assert done.result.created == ["Job/gpu-vision/vision-train"] and not done.result.drift
        job = kube.api.find(*JOB)
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "pytorch:2.4"
        status = kube.api.find(API, "Cluster", "lab")["status"]
        assert status["syncedCommit"] == revision and status["replacing"] == []
        kube.api.reset_counts()
        assert not h.sync().result.changed and kube.api.counts()["write"] == 0


def test_a_refusal_for_a_field_the_reconciler_does_not_know_is_replaced_too(
    kube, tmp_path, monkeypatch
):
    """A later Kubernetes may fix more fields: the server's 422 leads to a replacement."""
    from gitops_sched.reconciler import replace

    monkeypatch.setitem(replace.IMMUTABLE, ("batch", "Job"), ())
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8}))
    h = Harness(kube, repo)
    assert h.sync().ok
    commit(repo, config({"vision": 8}, image="pytorch:2.4"))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert outcome.result.replaced == ["Job/gpu-vision/vision-train"]
    job = kube.api.find(*JOB)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "pytorch:2.4"


def test_which_changes_need_a_replacement_and_which_refusals_mean_one():
    from gitops_sched.cluster.errors import ApiFailure
    from gitops_sched.reconciler.replace import immutable_fields, refused_as_immutable

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


def test_a_dry_run_shows_a_replacement_and_writes_nothing(kube, tmp_path):
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8}))
    h = Harness(kube, repo)
    assert h.sync().ok
    commit(repo, config({"vision": 8}, image="pytorch:2.4"))
    kube.api.reset_counts()
    outcome = h.new_reconciler(h.client, dry_run=True).sync_once()
    assert [r for r in kube.api.requests if r.category == "write" and "dryRun" not in r.query] == []
    assert outcome.result.replaced == ["Job/gpu-vision/vision-train"]
    [text] = [d for d in outcome.result.diff if "jobs" in d.lower() or "Job/" in d]
    assert text.startswith("# Job/gpu-vision/vision-train: replaced, spec.template cannot")
    assert "-        image: pytorch:2.3\n+        image: pytorch:2.4\n" in text
    assert "terminationMessagePath" not in text  # server defaults are no difference
    assert "cpu" not in text  # nor is the server's spelling of a quantity


def test_a_namespace_holding_foreign_objects_is_not_pruned(kube, tmp_path):
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8, "nlp": 4}))
    h = Harness(kube, repo)
    assert h.sync().ok
    kube.api.handle(
        "POST",
        "/api/v1/namespaces/gpu-nlp/persistentvolumeclaims",
        {},
        {},
        b'{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data"},'
        b'"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Ti"}}}}',
    )
    commit(repo, config({"vision": 8}))
    outcome = h.sync()
    assert any("Namespace/gpu-nlp: not pruned" in e for e in outcome.result.errors)
    assert kube.api.find("v1", "Namespace", "gpu-nlp") is not None
    assert kube.api.find("v1", "PersistentVolumeClaim", "data", "gpu-nlp") is not None
    assert "Job/gpu-nlp/nlp-train" in outcome.result.pruned


def test_a_claim_the_repo_drops_is_left_in_place_with_its_data(kube, tmp_path):
    repo = tmp_path / "repo"
    files = config({"vision": 8})
    claim = {"name": "data", "mountPath": "/data", "claim": {"size": "1Ti"}}
    files["templates.yaml"][0]["spec"]["volumes"] = [claim]
    commit(repo, files)
    h = Harness(kube, repo)
    assert h.sync().ok
    assert kube.api.find("v1", "PersistentVolumeClaim", "data", "gpu-vision") is not None
    commit(repo, config({"vision": 8}))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert outcome.result.orphaned == ["PersistentVolumeClaim/gpu-vision/data"]
    assert kube.api.find("v1", "PersistentVolumeClaim", "data", "gpu-vision") is not None
    assert "PersistentVolumeClaim/gpu-vision/data" not in {str(r) for r in h.inventory().entries}
    again = h.sync()  # no longer ours: not reported again, never deleted
    assert again.ok and not again.result.orphaned and not again.result.errors


def test_a_second_repos_reconciler_never_prunes_or_takes_our_objects(kube, tmp_path):
    ours = Harness(kube, tmp_path / "ours")
    commit(ours.repo, config({"vision": 8}))
    assert ours.sync().ok
    before = ours.live()
    theirs = Harness(kube, tmp_path / "theirs", name="other")
    commit(theirs.repo, config({"speech": 2}, cluster="lab2"))
    outcome = theirs.sync()
    # shared cluster-wide objects (the CRDs) belong to us: reported, not taken
    assert any("owned by reconciler 'gitops-sched'" in e for e in outcome.result.errors)
    assert not outcome.result.pruned
    after = ours.live()
    assert after.keys() == before.keys()
    assert all(
        after[k]["metadata"]["resourceVersion"] == before[k]["metadata"]["resourceVersion"]
        for k in before
        if not k.startswith("Cluster/")
    )
    assert "Namespace/gpu-speech" in theirs.live()
    # and ours sees nothing to do afterwards
    kube.api.reset_counts()
    assert not ours.sync().result.changed


def test_a_hand_edit_is_repaired_and_reported_as_drift(kube, tmp_path):
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8}))
    h = Harness(kube, repo)
    assert h.sync().ok
    policy = kube.api.find(
        "networking.k8s.io/v1", "NetworkPolicy", "gitops-sched-isolation", "gpu-vision"
    )
    policy["spec"]["ingress"] = [{}]  # someone opened the namespace to everything
    response = kube.api.handle(
        "PUT",
        "/apis/networking.k8s.io/v1/namespaces/gpu-vision/networkpolicies/gitops-sched-isolation",
        {"fieldManager": "kubectl-edit"},
        {},
        json.dumps(policy).encode(),
    )
    assert response.code == 200
    assert h.client.delete(
        ObjectRef("rbac.authorization.k8s.io/v1", "Role", "gpu-vision", "gitops-sched-member")
    )
    outcome = h.sync()
    assert outcome.ok
    drift = outcome.result.drift
    assert any(
        d.startswith("NetworkPolicy/gpu-vision/gitops-sched-isolation: spec.ingress") for d in drift
    )
    assert "Role/gpu-vision/gitops-sched-member: deleted" in drift
    repaired = kube.api.find(
        "networking.k8s.io/v1", "NetworkPolicy", "gitops-sched-isolation", "gpu-vision"
    )
    assert repaired["spec"]["ingress"] != [{}]
    assert kube.api.find(API, "Cluster", "lab")["status"]["drift"] == drift
    events = kube.api.objects("v1", "Event")
    assert any(e["reason"] == "DriftRepaired" for e in events)
    kube.api.reset_counts()
    assert h.sync().ok and kube.api.counts()["write"] == 0


def test_an_invalid_commit_applies_nothing_and_reports_the_errors(kube, tmp_path):
    repo = tmp_path / "repo"
    good = commit(repo, config({"vision": 8}))
    h = Harness(kube, repo)
    assert h.sync().ok
    before = h.live()
    broken = config({"vision": 8})
    broken["projects.yaml"][0]["spec"]["department"] = "nowhere"
    bad = commit(repo, broken)
    kube.api.reset_counts()
    outcome = h.sync()
    assert not outcome.ok and outcome.result is None
    assert any("nowhere" in e for e in outcome.errors)
    assert [w for w in writes(kube) if "/status" not in w and "/events" not in w] == []
    after = h.live()
    assert {
        k: v["metadata"]["resourceVersion"] for k, v in after.items() if k != "Cluster/lab"
    } == {k: v["metadata"]["resourceVersion"] for k, v in before.items() if k != "Cluster/lab"}
    status = kube.api.find(API, "Cluster", "lab")["status"]
    assert status["syncedCommit"] == good and status["lastAttemptedCommit"] == bad
    assert status["conditions"][0]["reason"] == "InvalidConfig"
    assert any(e["reason"] == "InvalidConfig" for e in kube.api.objects("v1", "Event"))
    kube.api.reset_counts()
    h.sync()  # the same bad commit again: reported once
    assert kube.api.counts()["write"] == 0


def test_injected_conflicts_throttling_errors_and_timeouts_do_not_stop_a_sync(kube, tmp_path):
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8, "nlp": 4}))
    h = Harness(kube, repo)
    h.client.timeout = 0.5
    kube.api.add_fault(Fault(409, method="PATCH", times=2))
    kube.api.add_fault(Fault(429, method="GET", path="/configmaps", retry_after=0))
    kube.api.add_fault(Fault(500, method="PATCH", path="/jobs/"))
    kube.api.add_fault(Fault(503, method="PATCH", path="/namespaces/gpu-nlp$"))
    kube.api.add_fault(Fault("timeout", method="PATCH", path="/roles/", after=True, delay=1.0))
    kube.api.add_fault(Fault("timeout", method="GET", path="/projects", delay=1.0))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert all(f.times == 0 for f in kube.api.faults)
    assert set(h.live()) == {str(r) for r in h.inventory().entries}
    kube.api.reset_counts()
    assert not h.sync().result.changed and kube.api.counts()["write"] == 0


class Killed(BaseException):
    """The process died (not an Exception: nothing in the reconciler may catch it)."""


def test_a_kill_between_any_two_requests_then_a_restart_converges(tmp_path):
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8, "nlp": 4}))
    with KubeEmulator(validate_builtins=False) as kube:
        create_system_namespace(kube)
        h = Harness(kube, repo)
        assert h.sync().ok
        start = kube.api.snapshot()
        # the change: a project added, one removed, one changed, and the Jobs' image (the
        # Jobs that stay are replaced)
        commit(repo, config({"vision": 6, "speech": 2}, image="pytorch:2.4"))
        counter = [0]
        h.client.before_request.append(lambda *_: counter.__setitem__(0, counter[0] + 1))
        h.reconciler = h.new_reconciler(h.client)
        changed = h.sync()
        assert changed.ok and changed.result.replaced == ["Job/gpu-vision/vision-train"]
        expected = set(h.live())
        requests = counter[0]
        assert requests > 20
        for kill_at in range(requests):
            kube.api.restore(start)
            client = connect(kube)
            seen = [0]

            def hook(method: str, path: str, seen=seen, kill_at=kill_at) -> None:
                if seen[0] == kill_at:
                    raise Killed
                seen[0] += 1

            client.before_request.append(hook)
            with pytest.raises(Killed):
                h.new_reconciler(client).sync_once()
            # whatever was created is listed: nothing can be orphaned
            inventory = {str(r) for r in h.inventory().entries}
            assert set(h.live()) <= inventory, kill_at
            restarted = connect(kube)
            outcome = h.new_reconciler(restarted).sync_once()
            assert outcome.ok, (kill_at, outcome.result.errors)
            assert set(h.live()) == expected, kill_at
            assert {str(r) for r in h.inventory().entries} == expected, kill_at
            client.close()
            restarted.close()


def test_only_the_leader_writes_and_the_other_takes_over_when_it_stops(kube, tmp_path):
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8}))
    replicas = []
    for identity in ("a", "b"):
        client = connect(kube)
        elector = LeaderElector(
            connect(kube),
            SYSTEM,
            "gitops-sched-reconciler",
            identity,
            lease_duration=1.0,
            renew_deadline=0.6,
            retry_period=0.1,
        )
        settings = Settings(repo=str(repo), namespace=SYSTEM, interval=0.2, identity=identity)
        replicas.append((Reconciler(settings, client, elector), client, elector, threading.Event()))
    first = replicas[0]
    first[2].try_acquire_or_renew()
    threads = []
    for reconciler, _, elector, stop in replicas:
        elector.start()
        threads.append(threading.Thread(target=reconciler.run, args=(stop,), daemon=True))
        threads[-1].start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and kube.api.find(API, "Cluster", "lab") is None:
        time.sleep(0.05)
    time.sleep(0.5)
    leader = next(r for r in replicas if r[2].is_leader())
    follower = next(r for r in replicas if r is not leader)
    assert leader[1].requests["write"] > 0
    assert follower[1].requests["write"] == 0  # never wrote: not even its status or events

    # the leader dies without giving the Lease back; the follower takes over and syncs
    leader[3].set()
    leader[2].stop(release=False)
    commit(repo, config({"vision": 8, "nlp": 2}))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and kube.api.find(API, "Project", "nlp") is None:
        time.sleep(0.05)
    assert follower[2].is_leader()
    assert kube.api.find(API, "Project", "nlp") is not None
    lease = kube.api.find("coordination.k8s.io/v1", "Lease", "gitops-sched-reconciler", SYSTEM)
    assert lease["spec"]["holderIdentity"] == follower[2].identity
    assert lease["spec"]["leaseTransitions"] >= 1
    follower[3].set()
    follower[2].stop()
    for thread in threads:
        thread.join(timeout=5)


def test_dry_run_prints_the_diff_and_writes_nothing(kube, tmp_path):
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8}))
    h = Harness(kube, repo)
    assert h.sync().ok
    commit(repo, config({"vision": 6}))
    dry = h.new_reconciler(h.client, dry_run=True)
    kube.api.reset_counts()
    outcome = dry.sync_once()
    assert [r for r in kube.api.requests if r.category == "write" and "dryRun" not in r.query] == []
    text = "".join(outcome.result.diff)
    assert "-    gpu: 8" in text and "+    gpu: 6" in text
    assert kube.api.find(API, "Project", "vision")["spec"]["quota"]["gpu"] == 8


def test_the_reconcile_command_syncs_once(kube, tmp_path):
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8}))
    kubeconfig = kube.kubeconfig(tmp_path / "kubeconfig")
    args = [
        "reconcile",
        "--repo",
        str(repo),
        "--once",
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        SYSTEM,
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert kube.api.find(API, "Project", "vision") is not None
    dry = CliRunner().invoke(
        main,
        [
            "reconcile",
            "--repo",
            str(repo),
            "--dry-run",
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            SYSTEM,
        ],
    )
    assert dry.exit_code == 0, dry.output


def test_reconcile_once_on_a_new_cluster_creates_its_own_namespace(tmp_path):
    """Nothing installed yet: the inventory's namespace is created, never pruned."""
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8}))
    with KubeEmulator(crd_establish_delay=0.05) as kube:
        kubeconfig = str(kube.kubeconfig(tmp_path / "kubeconfig"))
        base = ["reconcile", "--repo", str(repo), "--kubeconfig", kubeconfig]
        dry = CliRunner().invoke(main, [*base, "--dry-run", "--namespace", SYSTEM])
        assert dry.exit_code == 0, dry.output
        assert kube.api.find("v1", "Namespace", SYSTEM) is None  # a dry run writes nothing
        result = CliRunner().invoke(main, [*base, "--once", "--namespace", SYSTEM])
        assert result.exit_code == 0, result.output
        namespace = kube.api.find("v1", "Namespace", SYSTEM)
        assert namespace["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gitops-sched"
        assert OWNER_LABEL not in namespace["metadata"]["labels"]
        h = Harness(kube, repo)
        assert h.inventory().entries
        assert set(h.live()) == {str(r) for r in h.inventory().entries}
        kube.api.reset_counts()
        assert not h.sync().result.changed and kube.api.counts()["write"] == 0


def test_the_reconcilers_own_namespace_is_never_pruned(kube, tmp_path):
    """The repo once named it (its system namespace) and then another: it stays, with the
    inventory in it."""
    repo = tmp_path / "repo"
    commit(repo, config({"vision": 8}, system_namespace=SYSTEM))
    h = Harness(kube, repo)
    assert h.sync().ok
    assert f"Namespace/{SYSTEM}" in {str(r) for r in h.inventory().entries}
    commit(repo, config({"vision": 8}))
    outcome = h.sync()
    assert outcome.ok, outcome.result.errors
    assert f"Namespace/{SYSTEM}" in outcome.result.orphaned
    assert f"Namespace/{SYSTEM}" not in outcome.result.pruned
    assert kube.api.find("v1", "Namespace", SYSTEM) is not None
    assert h.inventory().entries
    kube.api.reset_counts()
    assert not h.sync().result.changed and kube.api.counts()["write"] == 0


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_rendered_folder_applies_in_one_pass_crds_first(kube, tmp_path):
    from gitops_sched.compiler import render_repo
    from gitops_sched.compiler.output import write_directory
    from gitops_sched.config.validate import check_repo
    from gitops_sched.reconciler import Syncer

    repo, _ = check_repo(Path(__file__).resolve().parent.parent / "examples/clusters/netapp-dgx")
    write_directory(render_repo(repo), tmp_path / "out")
    built = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path / "out")], capture_output=True, text=True, check=True
    ).stdout
    objects = list(yaml.safe_load_all(built))
    crds = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path / "out" / "crds")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert {o["kind"] for o in yaml.safe_load_all(crds)} == {"CustomResourceDefinition"}
    client = connect(kube)
    result = Syncer(client, "gitops-sched", SYSTEM, "rendered").sync(objects, "r1")
    assert result.errors == []
    assert len(result.created) == len(objects)
    client.close()


def test_health_readiness_and_metrics_endpoints(kube, tmp_path):
    import urllib.error
    import urllib.request

    from gitops_sched.cluster.serving import Health, serve
    from gitops_sched.reconciler.metrics import Metrics

    repo = tmp_path / "repo"
    revision = commit(repo, config({"vision": 8}))
    metrics, health = Metrics(), Health(stale_after=60)
    server = serve(metrics.registry, health, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(base + path) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, ""

    assert get("/healthz")[0] == 200
    assert get("/readyz")[0] == 503  # nothing fetched yet
    settings = Settings(repo=str(repo), namespace=SYSTEM, identity="m")
    outcome = Reconciler(settings, connect(kube), metrics=metrics, health=health).sync_once()
    assert outcome.ok
    assert get("/readyz")[0] == 200
    text = get("/metrics")[1]
    assert f'gitops_sched_reconcile_synced_commit_info{{commit="{revision}"}} 1.0' in text
    applied = next(
        line
        for line in text.splitlines()
        if line.startswith("gitops_sched_reconcile_objects_applied_total")
    )
    assert float(applied.split()[-1]) == outcome.result.objects
    assert "gitops_sched_reconcile_duration_seconds_count 1.0" in text
    server.shutdown()
