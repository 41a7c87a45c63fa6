"""The reconciler's comparison of a rendered object with what a real API server returns:
what the server normalises is no change (so a no-op sync writes nothing), what differs is."""

from __future__ import annotations

from typing import Any

from gitops_sched.cluster.diff import value_changes, why_apply


def applied(obj: dict[str, Any], fields: dict[str, Any], **served: Any) -> dict[str, Any]:
    """`obj` as the API server returns it after our apply: `fields` our FieldsV1, `served`
    the top-level fields as the server stores them."""
    entry = {"manager": "gitops-sched", "operation": "Apply", "fieldsV1": fields}
    return {**obj, **served, "metadata": {**obj["metadata"], "managedFields": [entry]}}


ROLE_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "RoleBinding",
    "metadata": {"name": "members", "namespace": "p"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "member"},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ann"}],
}
# roleRef is an atomic struct: the server's FieldsV1 lists it as one field
ROLE_BINDING_FIELDS = {"f:roleRef": {}, "f:subjects": {}}


def test_an_atomic_struct_the_server_tracks_as_one_field_is_no_change():
    live = applied(ROLE_BINDING, ROLE_BINDING_FIELDS)
    assert value_changes(ROLE_BINDING, live) == []
    assert why_apply(ROLE_BINDING, live) == []


def test_a_changed_value_inside_an_atomic_struct_is_a_change():
    live = applied(ROLE_BINDING, ROLE_BINDING_FIELDS)
    want = {**ROLE_BINDING, "roleRef": {**ROLE_BINDING["roleRef"], "name": "admin"}}
    assert value_changes(want, live) == ["roleRef.name"]


def test_a_field_we_no_longer_render_is_removed_and_one_another_manager_took_is_named():
    live = applied(ROLE_BINDING, {**ROLE_BINDING_FIELDS, "f:metadata": {"f:labels": {"f:x": {}}}})
    assert value_changes(ROLE_BINDING, live) == ["metadata.labels.x"]
    live = applied(ROLE_BINDING, {"f:roleRef": {}})
    assert why_apply(ROLE_BINDING, live) == ["subjects (owned by another manager)"]


PRIORITY_CLASS = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "train"},
    "value": 100,
    "globalDefault": False,
}


def test_an_empty_value_the_server_leaves_out_is_no_change():
    served = {k: v for k, v in PRIORITY_CLASS.items() if k != "globalDefault"}  # omitempty
    live = applied(served, {"f:value": {}, "f:globalDefault": {}})
    assert value_changes(PRIORITY_CLASS, live) == []
    want = {**PRIORITY_CLASS, "globalDefault": True}
    assert value_changes(want, live) == ["globalDefault"]
