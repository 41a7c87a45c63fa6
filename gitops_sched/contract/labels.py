"""The API group of our documents and the labels every rendered object carries.

All objects carry `MANAGED_BY`, which is how the reconciler finds what it owns; a workload's
pods carry the project, workload and type labels, which is how the scheduler and the node
agent know whose they are.
"""

API_VERSION = "gitops-sched.io/v1alpha1"
GROUP = API_VERSION.split("/")[0]
MANAGED_BY = {"app.kubernetes.io/managed-by": "gitops-sched"}
PROJECT_LABEL = f"{GROUP}/project"
DEPARTMENT_LABEL = f"{GROUP}/department"
WORKLOAD_LABEL = f"{GROUP}/workload"
TYPE_LABEL = f"{GROUP}/type"
