"""Least privilege, proven on the real control plane: each in-cluster part runs as its own
ServiceAccount (a kubeconfig from a TokenRequest, never `system:masters`) with the RBAC its
manifests ship, through one scenario that takes every code path making a distinct call; the
API server's audit log says which calls it made (verb, resource and subresource, namespace,
name), and those must be exactly what the shipped roles grant:

- every call allowed (the audit log shows no 403, and a grant covers each call);
- no grant the code never uses, and no ClusterRole grant the code uses only in a namespace
  of its own (a Role there would do).

The scenarios run once per module (each on the session's control plane, wiped after it); the
README's table per part is checked against the same grants.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.agent.fake import FakeBackend, FakeGpuSpec
from gitops_sched.agent.inventory import node_inventory
from gitops_sched.agent.node import AgentPolicy
from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.cluster.leader import LeaderElector
from gitops_sched.compiler import render_repo
from gitops_sched.contract.inventory import encode_inventory
from gitops_sched.contract.labels import WORKLOAD_LABEL
from gitops_sched.contract.pods import GPU_MEMORY_LIMIT, IDLE_SINCE, NODE_GPUS
from gitops_sched.hardware.mig import MigInstance
from gitops_sched.reconciler.sync import OWNER_LABEL, Syncer
from gitops_sched.scheduler.loop import Scheduler, Settings
from gitops_sched.scheduler.main import LEASE_NAME
from gitops_sched.validate import check_repo
from testkit.control_plane import accounts as accounts_module
from testkit.control_plane import audit
from testkit.control_plane.accounts import (
    AGENT,
    RECONCILER,
    RESERVATION,
    SCHEDULER,
    account_client,
    account_kubeconfig,
    install_agent,
    make_namespace,
)
from testkit.control_plane.audit import Audit, Call
from testkit.control_plane.client import connect
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.faultproxy import FaultProxy
from testkit.control_plane.fixtures import bare, wipe
from testkit.control_plane.install import apply_kustomization, kustomization
from testkit.control_plane.nodes import group_nodes
from testkit.control_plane.permissions import Grant, grants, missing, table, unused
from testkit.control_plane.waiting import wait
from testkit.loops import running
from testkit.reconciler_harness import API, commit, config, doc
from tests import test_agent_cluster as agent_test
from tests import test_mig_e2e as mig_test
from tests import test_scheduler_e2e as scheduler_test
from tests import test_scheduler_faults as faults_test
from tests.conftest import examples
from tests.readme_blocks import check

CLI = str(Path(sys.executable).with_name("gitops-sched"))


@dataclass(frozen=True)
class Part:
    title: str
    folder: str  # its kustomization
    account: tuple[str, str]  # namespace, ServiceAccount

    def grants(self) -> set[Grant]:
        return grants(kustomization(self.folder), *self.account)


PARTS = {
    "reconciler": Part("The reconciler", "reconciler", RECONCILER),
    "scheduler": Part("The scheduler", "scheduler", SCHEDULER),
    "reservation": Part("GPU reservation pods", "scheduler", RESERVATION),
    "agent": Part("The node agent", "scheduler/agent", AGENT),
}


def recorded(
    plane: ControlPlane, names: list[str], scenario: Callable[[], None]
) -> dict[str, Audit]:
    """The calls of these parts while `scenario` runs; the cluster wiped after it."""
    since = audit.size(plane.audit_log)
    try:
        scenario()
    finally:
        wipe(plane)
    log = plane.audit_log
    return {n: audit.read(log, audit.service_account(*PARTS[n].account), since) for n in names}


# --- the reconciler: the real process, `gitops-sched reconcile` ------------------------------


def reconciler_files(projects: dict[str, int], image: str = "pytorch:2.3", claim: bool = False):
    """The harness's small repo with members in each project, an admin in the department, an
    inference workload (a Deployment and a Service) per project and, with `claim`, a volume
    claim in the training template."""
    files = config(projects, image=image)
    for project in files["projects.yaml"]:
        project["spec"]["members"] = {"users": [f"{project['metadata']['name']}@example.com"]}
    files["departments.yaml"][0]["spec"]["admins"] = ["head@example.com"]
    serve = {"image": "triton:24.05", "ports": [{"name": "http", "containerPort": 8000}]}
    files["templates.yaml"].append(doc("Template", "serve", serve))
    files["workloads.yaml"] += [
        doc(
            "Workload", f"{name}-serve", {"project": name, "type": "inference", "template": "serve"}
        )
        for name in projects
    ]
    if claim:
        volume = {"name": "data", "mountPath": "/data", "claim": {"size": "1Ti"}}
        files["templates.yaml"][0]["spec"]["volumes"] = [volume]
    return files


def leftovers(rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An object of every kind the reconciler renders, as an earlier commit (or version) of
    it would have left one: carrying its owner label, no longer rendered. Claims are never
    pruned, so none."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for obj in rendered:
        kind = (obj["apiVersion"], obj["kind"])
        if kind in out or obj["kind"] == "PersistentVolumeClaim":
            continue
        meta = obj["metadata"]
        labels = {**meta.get("labels", {}), OWNER_LABEL: "gitops-sched"}
        copy = {**obj, "metadata": {**meta, "name": f"left-{meta['name']}", "labels": labels}}
        if obj["kind"] == "CustomResourceDefinition":
            names = {"kind": "Leftover", "plural": "leftovers", "singular": "leftover"}
            spec = copy["spec"] = {**obj["spec"], "names": {**names, "listKind": "LeftoverList"}}
            copy["metadata"]["name"] = f"leftovers.{spec['group']}"
        out[kind] = copy
    return list(out.values())


def reconciler_scenario(plane: ControlPlane, repo: Path) -> None:
    """Create everything (projects' RBAC among it), prune what an earlier commit left of every
    kind, replace Jobs whose image changed, prune a project and drop a claim, report an
    invalid commit; with its Lease, Events and the Cluster's status, as the Deployment runs
    it."""
    apply_kustomization(plane, "reconciler")
    kubeconfig = account_kubeconfig(plane, *RECONCILER)
    admin = connect(plane)
    cluster = ObjectRef(API, "Cluster", "", "lab")

    def status() -> dict[str, Any]:
        return (admin.get(cluster) or {}).get("status") or {}

    def gone(obj: dict[str, Any]) -> bool:
        live = admin.get(ObjectRef.of(obj))
        return live is None or bool(live["metadata"].get("deletionTimestamp"))

    revision = commit(repo, reconciler_files({"vision": 8, "nlp": 4}, claim=True))
    args = [CLI, "reconcile", f"--repo={repo}", f"--kubeconfig={kubeconfig}", "--interval=1s"]
    log = (plane.root / "logs" / "reconciler.log").open("ab")
    process = subprocess.Popen([*args, "--listen="], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait("the first sync", lambda: status().get("syncedCommit") == revision, 90)
        loaded, _ = check_repo(repo)
        assert loaded is not None
        left = leftovers(render_repo(loaded))
        for obj in left:
            admin.create(obj)
        wait("the leftovers pruned", lambda: all(gone(o) for o in left), 60)
        # a changed image: the Jobs are deleted and created again
        revision = commit(repo, reconciler_files({"vision": 8, "nlp": 4}, "pytorch:2.4", True))
        wait("the Jobs replaced", lambda: status().get("syncedCommit") == revision, 90)
        # a project removed: its objects and namespace pruned; the claim stays (orphaned)
        revision = commit(repo, reconciler_files({"vision": 8}, "pytorch:2.4"))
        wait("nlp pruned", lambda: status().get("syncedCommit") == revision, 90)
        assert gone({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-nlp"}})
        # an invalid commit: nothing applied, the errors reported
        files = reconciler_files({"vision": 8}, "pytorch:2.4")
        files["projects.yaml"].append(doc("Project", "stray", {"department": "nowhere"}))
        revision = commit(repo, files)
        wait(
            "the invalid commit reported",
            lambda: status().get("lastAttemptedCommit") == revision and status().get("errors"),
            60,
        )
    finally:
        process.terminate()  # gives the Lease up (and exits 1: its last commit was invalid)
        process.wait(30)
        log.close()
        admin.close()


# --- the scheduler: binds, reservations, evictions, stopped Jobs, MIG requests -----------


def scheduler_scenario(plane: ControlPlane, tmp_path: Path) -> None:
    """The example repo's workloads placed (fractions on GPUs held by reservation pods,
    whose `reserve` runs as their own ServiceAccount), a higher claim that evicts and leaves
    pods waiting (told why), an idle notebook's Job suspended, the claim's and the
    fractions' Jobs deleted (their reservation pods go), a pod bound by the running loop;
    as the Lease's holder. Then, on the MIG example, a MIG layout requested on a node; and,
    its pod watch silent, the pods its writes are assumed on read back."""
    repo, _ = check_repo(scheduler_test.EXAMPLE)
    assert repo is not None
    cluster = scheduler_test.Cluster(plane, repo)
    elector = LeaderElector(
        account_client(plane, *SCHEDULER), SCHEDULER[0], LEASE_NAME, "scenario", retry_period=1
    )
    scheduler = cluster.new_scheduler(elector)
    try:
        cluster.install()
        elector.start()  # renews the Lease while the scenario runs
        wait("the Lease", elector.is_leader)
        for workload in cluster.rendered:
            if workload["kind"] in scheduler_test.WORKLOAD_KINDS:
                cluster.client.create(workload)  # at once: no order to keep here
        cluster.wait("the workloads' pods", cluster.controllers_done)
        cluster.settle(scheduler)
        claim = doc("Workload", "d-train", {"project": "team-d", "type": "train", "gpu": 4})
        job = next(o for o in scheduler_test.render_claim(claim, tmp_path) if o["kind"] == "Job")
        cluster.submit(job)
        cluster.settle(scheduler)
        assert cluster.evicted_workloads()
        (notebook,) = [p for p in cluster.pods() if _workload(p) == "notebook-2"]
        meta = notebook["metadata"]
        idle = {IDLE_SINCE: scheduler_test.stamp(cluster.clock() - 7200)}
        cluster.client.patch(ObjectRef.of(notebook), {"metadata": {"annotations": idle}})
        cluster.settle(scheduler)
        suspended = cluster.client.get(
            ObjectRef("batch/v1", "Job", meta["namespace"], "notebook-2")
        )
        assert suspended is not None and suspended["spec"]["suspend"] is True
        for job in cluster.client.list("batch/v1", "Job") or ():
            cluster.client.delete(ObjectRef.of(job))
        cluster.wait("the pods gone", lambda: not cluster.pods())
        cluster.settle(scheduler)
        # the loop as the Deployment runs it: informers watching pods, nodes and the policy
        pod = scheduler_test.hand_made_pod(repo.project_namespace("team-d"), gpus=1)
        cluster.client.create(pod)
        with running(scheduler.run):
            cluster.wait("the pod bound", lambda: _bound(cluster.client.get(ObjectRef.of(pod))))
    finally:
        elector.stop(release=True)
        for client in (elector.client, scheduler.client):
            client.close()
        cluster.close()
    wipe(plane)
    mig_request(plane)
    wipe(plane)
    assumed_read_back(plane)


def mig_request(plane: ControlPlane) -> None:
    """The MIG example's policy, a node of its MIG group with its GPUs published (as the
    agent publishes them), a pod asking for a MIG profile: the scheduler asks the node for a
    layout."""
    repo, _ = check_repo(mig_test.EXAMPLE)
    assert repo is not None
    apply_kustomization(plane, "reconciler")
    apply_kustomization(plane, "scheduler")
    rest = [o for o in render_repo(repo) if o["kind"] not in ("Job", "Deployment")]
    reconciler = account_client(plane, *RECONCILER)
    admin = connect(plane)
    scheduler = Scheduler(account_client(plane, *SCHEDULER), Settings(namespace=SCHEDULER[0]))
    try:
        assert not Syncer(reconciler, "gitops-sched", RECONCILER[0], "test").sync(rest, "r1").errors
        (group,) = [g for g in repo.node_groups if g.name == mig_test.GROUP]
        (node,) = group_nodes(group)
        name = node["metadata"]["name"]
        gpus = FakeBackend([FakeGpuSpec("A100-80GB", mig=True)] * 8, node=name).gpus()
        node["metadata"]["annotations"] = {NODE_GPUS: encode_inventory(node_inventory(gpus))}
        admin.create(node)
        # Ready, and untainted by the node lifecycle controller: the scheduler places on it
        wait("the node settled", lambda: agent_test.settled(admin.get(ObjectRef.of(node)) or {}))
        namespace = repo.project_namespace("sandbox")
        account = ObjectRef("v1", "ServiceAccount", namespace, "default")
        wait(f"{namespace}'s default ServiceAccount", lambda: admin.get(account))
        admin.create(mig_test.mig_pod(namespace))
        report = scheduler.sync_once()
        assert report is not None and report.outcome.mig_requests == 1, report
    finally:
        for client in (reconciler, admin, scheduler.client):
            client.close()


def assumed_read_back(plane: ControlPlane) -> None:
    """A pod watch gone silent (and a Binding answered 429): the scheduler reads back the
    pods its writes are assumed on (`tests/test_scheduler_faults.py`)."""
    admin = connect(plane)
    proxy = FaultProxy(plane.server, plane.root / "ca.crt", seed=19).start()
    try:
        assert faults_test.silent_watch_and_throttled_binding(plane, admin, proxy)
    finally:
        proxy.stop()
        admin.close()


def _bound(pod: dict[str, Any] | None) -> bool:
    return bool((pod or {}).get("spec", {}).get("nodeName"))


def _workload(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get(WORKLOAD_LABEL, ""))


# --- the node agent: fake GPUs, as `gitops-sched agent --fake` has them --------------------


def agent_scenario(plane: ControlPlane) -> None:
    """Inventory published, a MIG request carried out (the device plugin's pod deleted), a
    fraction pod over its share warned about and evicted, an idle notebook marked."""
    admin = connect(plane)
    for namespace in (agent_test.PLUGIN_NAMESPACE, agent_test.TEAM):
        make_namespace(admin, namespace)
    admin.close()
    install_agent(plane)
    cluster = agent_test.Cluster(plane)
    try:
        policy = AgentPolicy(fraction_policy="evict", grace=0, idle_window=60)
        node = agent_test.Node(cluster, policy=policy)
        node.agent.tick()
        node.request({agent_test.MIG_GPU: [MigInstance("1g.10gb", 0)]})
        node.agent.tick()
        assert node.plugin_pods() == [agent_test.OTHER]
        share = {GPU_MEMORY_LIMIT: "1024"}
        greedy = agent_test.fraction_pod(node, "greedy", agent_test.PLAIN_GPU, share)
        node.run_pod(greedy, 100, agent_test.PLAIN_GPU, 2 * agent_test.GIB)
        notebook = agent_test.interactive_pod("notebook")
        node.run_pod(notebook, 200, agent_test.PLAIN_GPU, agent_test.GIB)
        node.agent.tick()
        node.clock.now += 60
        node.agent.tick()
        wait("greedy evicted", lambda: node.evicted() == ["greedy"])
        assert agent_test.idle_annotation(node, "notebook")
    finally:
        cluster.clean()


# --- the audits, one scenario per module ------------------------------------------------------


@pytest.fixture(scope="module")
def reconciler_audit(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Audit]:
    repo = tmp_path_factory.mktemp("repo") / "repo"
    # on a bare cluster: creating the CRDs is among the calls its role must grant
    return recorded(
        control_plane, ["reconciler"], lambda: reconciler_scenario(bare(control_plane), repo)
    )


@pytest.fixture(scope="module")
def scheduler_audit(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Audit]:
    folder = tmp_path_factory.mktemp("claim")
    return recorded(
        control_plane,
        ["scheduler", "reservation"],
        lambda: scheduler_scenario(control_plane, folder),
    )


@pytest.fixture(scope="module")
def agent_audit(control_plane: ControlPlane) -> dict[str, Audit]:
    return recorded(control_plane, ["agent"], lambda: agent_scenario(control_plane))


SCENARIOS = {
    "reconciler": "reconciler_audit",
    "scheduler": "scheduler_audit",
    "reservation": "scheduler_audit",
    "agent": "agent_audit",
}


@pytest.mark.parametrize("name", PARTS)
@pytest.mark.usefixtures("control_plane")  # what each scenario fixture runs on
def test_the_shipped_roles_grant_exactly_the_calls_the_part_makes(name, request):
    part, seen = PARTS[name], request.getfixturevalue(SCENARIOS[name])[name]
    granted = part.grants()
    assert seen.calls, f"{part.title} made no call: its scenario did not run as its account"
    refused = sorted(seen.forbidden)
    assert not refused, "refused by the API server:\n" + "\n".join(map(str, refused))
    lacking = missing(seen.calls, granted)
    assert not lacking, "called, no shipped role allows it:\n" + "\n".join(map(str, lacking))
    extra = unused(granted, seen.calls)
    assert not extra, "granted, the code never needs it:\n" + "\n".join(extra)


# --- no part on the admin's token, the comparison itself, and the README ----------------------


def admin_token_client(token: str, key: str = "authorization") -> ClusterClient:
    """A client holding `token` as a kubeconfig (`BearerToken`) or the plane's configuration
    (`authorization`) holds it; it sends nothing until asked."""
    configuration = kubernetes.client.Configuration()
    configuration.host = "https://127.0.0.1:1"
    configuration.api_key = {key: f"Bearer {token}"}
    return ClusterClient(configuration)


@pytest.mark.parametrize("key", ["authorization", "BearerToken"])
def test_a_part_built_on_the_admins_token_fails_the_test_unless_marked(monkeypatch, key):
    monkeypatch.setattr(accounts_module, "ADMIN_TOKENS", {"the-admins"})
    admin, account = admin_token_client("the-admins", key), admin_token_client("an-account", key)
    try:
        with pytest.raises(AssertionError, match="Syncer built on the admin's token"):
            Syncer(admin, "gitops-sched", "gitops-sched", "test")
        with pytest.raises(AssertionError, match="Scheduler built on the admin's token"):
            Scheduler(admin, Settings(namespace="gitops-sched-system"))
        Syncer(account, "gitops-sched", "gitops-sched", "test")
        Scheduler(account, Settings(namespace="gitops-sched-system"))
    finally:
        admin.close()
        account.close()


@pytest.mark.as_admin("checks the mark itself")
def test_the_as_admin_mark_lets_a_test_run_a_part_on_the_admins_token(monkeypatch):
    monkeypatch.setattr(accounts_module, "ADMIN_TOKENS", {"the-admins"})
    admin = admin_token_client("the-admins")
    try:
        Syncer(admin, "gitops-sched", "gitops-sched", "test")
    finally:
        admin.close()


def test_a_grant_never_called_and_a_call_never_granted_are_both_found():
    calls = {
        Call("list", "", "pods"),
        Call("create", "", "pods/eviction", "team", "p"),
        Call("create", "", "pods", "gitops-sched-system"),
        Call("get", "coordination.k8s.io", "leases", "gitops-sched-system", "lease"),
    }
    granted = {
        Grant("list", "", "pods"),
        Grant("create", "", "pods/eviction"),
        Grant("create", "", "pods", "gitops-sched-system"),
        Grant("get", "coordination.k8s.io", "leases", "gitops-sched-system", "lease"),
    }
    assert missing(calls, granted) == [] and unused(granted, calls) == []
    extra = granted | {Grant("update", "", "pods"), Grant("get", "", "pods", "elsewhere")}
    assert unused(extra, calls) == [
        "get core/pods in elsewhere: never used",
        "update core/pods: never used",
    ]
    assert missing(calls | {Call("delete", "", "pods", "team", "p")}, granted) == [
        Call("delete", "", "pods", "team", "p")
    ]
    # a ClusterRole grant used only in a namespace with Roles of the part is too broad
    broad = granted - {Grant("create", "", "pods", "gitops-sched-system")}
    broad |= {Grant("create", "", "pods")}
    assert unused(broad, calls) == [
        "create core/pods: used only in namespace gitops-sched-system (a Role there)"
    ]
    # a wildcard covers every resource, and is used as soon as one call needs it
    assert missing(calls, {Grant("*", "*", "*")}) == []
    assert unused({Grant("list", "*", "*")}, calls) == []
    # a name the Role is limited to, and a call for another name
    other = Call("get", "coordination.k8s.io", "leases", "gitops-sched-system", "other")
    assert missing(calls | {other}, granted) == [other]


OWN = ("gitops-sched-system",)  # the namespace the generated parts keep Roles in
calls_drawn = st.builds(
    Call,
    verb=st.sampled_from(["get", "list", "watch", "create", "patch", "delete"]),
    group=st.sampled_from(["", "apps", "gitops-sched.io"]),
    resource=st.sampled_from(["pods", "pods/eviction", "jobs", "projects/status"]),
    namespace=st.sampled_from(["", "team", *OWN]),
    name=st.sampled_from(["", "a"]),
)


def least(calls: set[Call]) -> set[Grant]:
    """The smallest roles for these calls: a Role grant for what is called only in an own
    namespace, a ClusterRole grant for the rest."""
    elsewhere = {(c.verb, c.group, c.resource) for c in calls if c.namespace not in OWN}
    return {
        Grant(
            c.verb,
            c.group,
            c.resource,
            c.namespace if (c.verb, c.group, c.resource) not in elsewhere else "",
        )
        for c in calls
    }


@settings(max_examples=examples(200))
@given(st.sets(calls_drawn, min_size=1, max_size=12))
def test_the_least_roles_for_any_calls_pass_and_any_grant_more_or_less_fails(calls):
    granted = least(calls)
    assert missing(calls, granted) == [] and unused(granted, calls) == []
    for grant in granted:  # each one is needed
        assert missing(calls, granted - {grant})
    extra = Grant("deletecollection", "", "pods")  # a verb none of the calls uses
    assert unused(granted | {extra}, calls) == ["deletecollection core/pods: never used"]


def readme_tables() -> str:
    return "".join(f"**{part.title}**\n\n{table(part.grants())}\n" for part in PARTS.values())


def test_the_readme_shows_each_parts_permissions():
    """The README's tables are the shipped roles (which the test above proves are exactly
    what each part calls); `UPDATE_README=1` writes them."""
    check("permissions", readme_tables())
