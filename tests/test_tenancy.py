"""Tenancy as rendered, asked of the real authorizer: `examples/clusters/oci-a100` is applied
by the reconciler's ServiceAccount, then the API server's RBAC answers, through
SubjectAccessReviews (what `kubectl auth can-i --as` asks), what a project member and a
department admin may do. The README's "Who may do what" is this table.

The rendered NetworkPolicies are validated by the same API server (applied, and dry-run
applied for every example): nothing here enforces them, since no CNI runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitops_sched.cluster import ClusterClient, ObjectRef
from gitops_sched.cluster.diff import compared, differences
from gitops_sched.compiler import render_repo
from gitops_sched.config.model import Repo
from gitops_sched.reconciler.sync import Syncer
from gitops_sched.validate import check_repo
from testkit.control_plane.accounts import RECONCILER, account_client
from testkit.control_plane.client import connect
from testkit.control_plane.cluster import ControlPlane
from testkit.control_plane.fixtures import wipe
from testkit.control_plane.install import apply_kustomization
from tests.readme_blocks import check

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "clusters"
WORKLOAD_KINDS = ("Job", "Deployment")
GROUP = "gitops-sched.io"
MEMBER = "ana@example.com"  # of project assistant, department product
ADMIN = "tom.becker@example.com"  # of department product: projects assistant, search-ranking
OWN, SIBLING, OTHER = "gpu-assistant", "gpu-search-ranking", "gpu-vision"  # vision: research
SYSTEM = "gitops-sched-system"


@dataclass(frozen=True)
class Action:
    """What someone may try: a verb on a resource (with its subresource), in a namespace
    ("" cluster-wide), on a name ("" any); and who may, as the README says it."""

    text: str
    verb: str
    resource: str
    namespace: str = ""
    name: str = ""
    group: str = ""
    member: bool = False
    admin: bool = False


ACTIONS = [
    Action("read pods in their project", "get", "pods", OWN, member=True, admin=True),
    Action("read logs in their project", "get", "pods/log", OWN, member=True, admin=True),
    Action(
        "list jobs in their project", "list", "jobs", OWN, group="batch", member=True, admin=True
    ),
    Action("exec into a pod of their project", "create", "pods/exec", OWN, member=True),
    Action(
        "port-forward to a pod of their project", "create", "pods/portforward", OWN, member=True
    ),
    Action("create a job in their project", "create", "jobs", OWN, group="batch"),
    Action("change a job in their project", "patch", "jobs", OWN, group="batch"),
    Action("delete a job in their project", "delete", "jobs", OWN, group="batch"),
    Action("change a deployment in their project", "patch", "deployments", OWN, group="apps"),
    Action("delete a pod in their project", "delete", "pods", OWN),
    Action("read secrets in their project", "get", "secrets", OWN),
    Action("read pods of a sibling project (same department)", "get", "pods", SIBLING, admin=True),
    Action("list pods of a sibling project (same department)", "list", "pods", SIBLING, admin=True),
    Action("read pods of another department's project", "get", "pods", OTHER),
    Action("list pods of another department's project", "list", "pods", OTHER),
    Action("list pods in every namespace", "list", "pods"),
    Action("list namespaces", "list", "namespaces"),
    Action(
        "read their department's Project objects",
        "get",
        "projects",
        "",
        "search-ranking",
        GROUP,
        admin=True,
    ),
    Action("read another department's Project objects", "get", "projects", "", "vision", GROUP),
    Action("list every Project", "list", "projects", group=GROUP),
    Action("change their Project object", "patch", "projects", "", "assistant", GROUP),
    Action("read their Department object", "get", "departments", "", "product", GROUP, admin=True),
    Action("read another Department object", "get", "departments", "", "research", GROUP),
    Action("read pods in the system namespace", "get", "pods", SYSTEM),
    Action("create a pod in the system namespace", "create", "pods", SYSTEM),
    Action("read the policy ConfigMap", "get", "configmaps", SYSTEM, "gitops-sched-policy"),
    Action("change the policy ConfigMap", "patch", "configmaps", SYSTEM, "gitops-sched-policy"),
]


def allowed(client: ClusterClient, user: str, action: Action) -> bool:
    """The API server's RBAC answer for `user` (a SubjectAccessReview)."""
    resource, _, subresource = action.resource.partition("/")
    attributes = {
        "verb": action.verb,
        "group": action.group,
        "resource": resource,
        "subresource": subresource,
        "namespace": action.namespace,
        "name": action.name,
    }
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": {
            "user": user,
            "groups": ["system:authenticated"],
            "resourceAttributes": attributes,
        },
    }
    return bool(client.create(review)["status"].get("allowed"))


def example(name: str) -> Repo:
    repo, diagnostics = check_repo(EXAMPLES / name)
    assert repo is not None, diagnostics
    return repo


@pytest.fixture(scope="module")
def admin(control_plane: ControlPlane) -> Iterator[ClusterClient]:
    """oci-a100 applied by the reconciler's ServiceAccount (workloads aside); an admin client."""
    apply_kustomization(control_plane, "reconciler")
    objects = [o for o in render_repo(example("oci-a100")) if o["kind"] not in WORKLOAD_KINDS]
    reconciler = account_client(control_plane, *RECONCILER)
    admin = connect(control_plane)
    try:
        result = Syncer(reconciler, "gitops-sched", RECONCILER[0], "test").sync(objects, "r1")
        assert not result.errors, result.errors
        yield admin
    finally:
        reconciler.close()
        admin.close()
        wipe(control_plane)


def answers(client: ClusterClient) -> list[tuple[bool, bool]]:
    return [(allowed(client, MEMBER, a), allowed(client, ADMIN, a)) for a in ACTIONS]


def test_members_and_department_admins_may_do_exactly_what_the_readme_says(admin):
    got = answers(admin)
    wanted = [(a.member, a.admin) for a in ACTIONS]
    wrong = [
        f"{a.text}: member {m}, admin {d}"
        for a, (m, d), expected in zip(ACTIONS, got, wanted)
        if (m, d) != expected
    ]
    assert not wrong, "\n".join(wrong)


def test_a_member_through_a_group_has_the_projects_access(admin):
    """Project vision names the group vision-team: any user of it is a member."""
    read = Action("", "get", "pods/log", OTHER)
    assert not allowed(admin, "nobody@example.com", read)
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": {
            "user": "someone@example.com",
            "groups": ["vision-team", "system:authenticated"],
            "resourceAttributes": {
                "verb": "get",
                "resource": "pods",
                "subresource": "log",
                "namespace": OTHER,
            },
        },
    }
    assert admin.create(review)["status"]["allowed"] is True


def who_may_do_what() -> str:
    lines = ["| may they... | project member | department admin |", "|---|---|---|"]
    for a in ACTIONS:
        member, admin = ("yes" if may else "no" for may in (a.member, a.admin))
        lines.append(f"| {a.text} | {member} | {admin} |")
    return "\n".join(lines) + "\n"


def test_the_readme_says_who_may_do_what():
    """`UPDATE_README=1` writes the table (the test above checks it against the server)."""
    check("who may do what", who_may_do_what())


# --- NetworkPolicies -------------------------------------------------------------------------


def test_the_applied_network_policies_are_the_rendered_ones(admin):
    policies = [o for o in render_repo(example("oci-a100")) if o["kind"] == "NetworkPolicy"]
    assert policies
    for policy in policies:
        live = admin.get(ObjectRef.of(policy))
        assert live is not None and differences(compared(policy), compared(live)) == []


def test_the_other_examples_network_policies_pass_the_api_servers_validation(admin):
    """A server-side dry run, in namespaces made for it: the server validates and defaults
    each policy and stores nothing; what it would store is what was admin."""
    objects = render_repo(example("netapp-dgx"))
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert policies
    for policy in policies:
        name = policy["metadata"]["namespace"]
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        if admin.get(ObjectRef.of(namespace)) is None:
            admin.create(namespace)
        answer = admin.apply(policy, "test", dry_run=True)
        assert differences(compared(policy), compared(answer)) == []
    assert all(admin.get(ObjectRef.of(p)) is None for p in policies)
