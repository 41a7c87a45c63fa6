"""What a render of one side of a change leaves for the other side and for the diff.

A workload's objects are a pure function of what `render_workload` is given: the cluster,
the workload (its document included), its project, its node groups and its merged pod
fields. Where the other side gave exactly the same, its objects are taken as they are
instead of rendered again: a change leaves most workloads alone, and the plan's object
diff then finds those objects equal at once (they are the same objects). The YAML
documents a render writes into a string (the policy ConfigMap's) are kept as the data
they were written from, so that the diff compares them without parsing them back.

"Exactly the same" is stricter than `==`: the same types all the way down (`1` is not
`1.0` or `True`, `Decimal("8")` not `Decimal("8.0")`: either may be written into a
string), dicts in the same order, documents the same objects (a document compares by
identity; plan's two sides share the documents of the files a change leaves alone).
"""

from __future__ import annotations

import marshal
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cache
from typing import Any

from gitops_sched.config.loader import Document
from gitops_sched.config.model import Cluster, NodeGroup, Project, Workload

# what render_workload is given: cluster, workload, project, node groups, merged pod fields
RenderInputs = tuple[Cluster, Workload, Project, tuple[NodeGroup, ...], dict[str, Any]]
_EXACT = (str, int, bool, type(None))  # types whose `==` already tells any two apart


@dataclass
class Renders:
    """Each workload's objects by name, with the inputs they were rendered from; each YAML
    document written, by its text (`yamltext.dump_object` gives it back as it was)."""

    by_name: dict[str, tuple[RenderInputs, list[dict[str, Any]]]] = field(default_factory=dict)
    written: dict[str, Any] = field(default_factory=dict)

    def lookup(self, inputs: RenderInputs, compared: dict[tuple[int, int], bool]):
        """The objects rendered before from the same inputs, or None.

        `compared`: dataclass pairs already compared (by id; the caller keeps both alive)."""
        found = self.by_name.get(inputs[1].name)
        if found is not None and same(found[0], inputs, compared):
            return found[1]
        return None


def same(a: Any, b: Any, compared: dict[tuple[int, int], bool]) -> bool:
    """Equal, and of the same types in the same order all the way down (see the module)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict or kind is list:  # plain data (pod fields) compare fastest as bytes
        try:  # marshal's version 2 has no back-references: no dependence on sharing
            return marshal.dumps(a, 2) == marshal.dumps(b, 2)
        except ValueError:  # not plain data: walked below
            pass
    if kind is dict:
        return len(a) == len(b) and all(
            same(ka, kb, compared) and same(va, vb, compared)
            for (ka, va), (kb, vb) in zip(a.items(), b.items())
        )
    if kind is list or kind is tuple:
        return len(a) == len(b) and all(same(x, y, compared) for x, y in zip(a, b))
    if kind is Document:  # by identity: not the same object, so perhaps not the same text
        return False
    if names := _fields(kind):
        key = (id(a), id(b))
        if (found := compared.get(key)) is None:
            found = compared[key] = all(
                same(getattr(a, name), getattr(b, name), compared) for name in names
            )
        return found
    if kind in _EXACT:
        return a == b
    return a == b and repr(a) == repr(b)  # floats (-0.0), Decimals (8 and 8.0), the rest


@cache
def _fields(kind: type) -> tuple[str, ...]:
    """A dataclass's field names (none for any other type)."""
    return tuple(f.name for f in fields(kind)) if is_dataclass(kind) else ()
