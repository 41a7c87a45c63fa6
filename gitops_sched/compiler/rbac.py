"""Least-privilege access: project members use their workloads, department admins read
their department's projects and what runs in the projects' namespaces.

Members may read what their workloads consist of (pods and logs, jobs, deployments, services,
events, Workload objects) and open a shell or port-forward into their pods for interactive
work; they cannot create, change or delete jobs or deployments: that is done in Git.
"""

from __future__ import annotations

from typing import Any

from gitops_sched.compiler.crds import plural
from gitops_sched.compiler.meta import object_meta
from gitops_sched.config.model import Department, Members, Project, Repo
from gitops_sched.contract.labels import DEPARTMENT_LABEL, GROUP, PROJECT_LABEL

RBAC_API = "rbac.authorization.k8s.io"
MEMBER_ROLE = "gitops-sched-member"
NAMESPACE_READER = "gitops-sched-namespace-reader"
READ = ["get", "list", "watch"]

MEMBER_RULES = [
    {"apiGroups": [""], "resources": ["events", "pods", "pods/log", "services"], "verbs": READ},
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": READ},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": READ},
    {"apiGroups": [GROUP], "resources": [plural("Workload")], "verbs": READ},
    # exec and port-forward are `create` on the subresource, also over WebSockets
    {"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": ["create"]},
]


def render_rbac(repo: Repo) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for project in repo.projects:
        objects += member_access(repo.required_cluster.project_namespace(project.name), project)
    by_department: dict[str, list[str]] = {}
    for project in repo.projects:
        by_department.setdefault(project.department, []).append(project.name)
    for department in repo.departments:
        objects += admin_access(department, by_department.get(department.name, []))
    objects += admin_namespace_access(repo)
    return objects


def admin_namespace_access(repo: Repo) -> list[dict[str, Any]]:
    """Department admins read what runs in their projects' namespaces (pods and logs, jobs,
    deployments, services, events, workloads): one reader ClusterRole, bound per namespace."""
    admins = {d.name: d for d in repo.departments if d.admins}
    if not admins:
        return []
    reader = {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "ClusterRole",
        "metadata": object_meta(NAMESPACE_READER),
        "rules": [rule for rule in MEMBER_RULES if rule["verbs"] == READ],
    }
    bindings = []
    for project in repo.projects:
        department = admins.get(project.department)
        if department is None:
            continue
        labels = {PROJECT_LABEL: project.name, DEPARTMENT_LABEL: department.name}
        namespace = repo.required_cluster.project_namespace(project.name)
        bindings.append(
            {
                "apiVersion": f"{RBAC_API}/v1",
                "kind": "RoleBinding",
                "metadata": object_meta("gitops-sched-department-admins", namespace, labels),
                "roleRef": {"apiGroup": RBAC_API, "kind": "ClusterRole", "name": NAMESPACE_READER},
                "subjects": _subjects(Members(users=department.admins)),
            }
        )
    return [reader, *bindings]


def member_access(namespace: str, project: Project) -> list[dict[str, Any]]:
    """The members' Role, and its binding when the project has members."""
    labels = {PROJECT_LABEL: project.name}
    role = {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "Role",
        "metadata": object_meta(MEMBER_ROLE, namespace, labels),
        "rules": MEMBER_RULES,
    }
    subjects = _subjects(project.members)
    if not subjects:
        return [role]
    binding = {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "RoleBinding",
        "metadata": object_meta(f"{MEMBER_ROLE}s", namespace, labels),
        "roleRef": {"apiGroup": RBAC_API, "kind": "Role", "name": MEMBER_ROLE},
        "subjects": subjects,
    }
    return [role, binding]


def admin_access(department: Department, projects: list[str]) -> list[dict[str, Any]]:
    """Read access to the department and its projects for its admins; nothing without admins."""
    if not department.admins:
        return []
    name = f"gitops-sched-department-{department.name}"
    labels = {DEPARTMENT_LABEL: department.name}
    rules = [_read_named(plural("Department"), [department.name])]
    if projects:  # an empty resourceNames would grant every project
        rules.append(_read_named(plural("Project"), sorted(projects)))
    role = {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "ClusterRole",
        "metadata": object_meta(name, labels=labels),
        "rules": rules,
    }
    binding = {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": object_meta(name, labels=labels),
        "roleRef": {"apiGroup": RBAC_API, "kind": "ClusterRole", "name": name},
        "subjects": _subjects(Members(users=department.admins)),
    }
    return [role, binding]


def _read_named(resource: str, names: list[str]) -> dict[str, Any]:
    # list and watch with resourceNames only match requests for one name (fieldSelector)
    return {"apiGroups": [GROUP], "resources": [resource], "resourceNames": names, "verbs": READ}


def _subjects(members: Members) -> list[dict[str, str]]:
    return [
        {"apiGroup": RBAC_API, "kind": kind, "name": name}
        for kind, names in (("User", members.users), ("Group", members.groups))
        for name in names
    ]
