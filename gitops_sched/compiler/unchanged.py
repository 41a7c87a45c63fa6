"""The workloads a change leaves alone, so that a plan renders neither side's objects of them.

A workload's objects are a function of what `render_workload` is given only: the cluster,
the workload (its document included), its project, its node groups and its merged pod
fields. Where both sides give exactly the same, both render the same objects, which the
object diff would find equal: most workloads of most changes, left out of both renders.

"Exactly the same" is stricter than `==`: the same types all the way down (`1` is not
`1.0` or `True`, `Decimal("8")` not `Decimal("8.0")`: either may be written into a
string), dicts in the same order, documents the same objects (a document compares by
identity; plan's two sides share the documents of the files a change leaves alone).
"""

from __future__ import annotations

import marshal
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from functools import cache
from operator import attrgetter
from typing import Any

from gitops_sched.compiler.workloads import render_inputs
from gitops_sched.config.document import Document
from gitops_sched.config.model import Repo

_EXACT = (str, int, bool, type(None))  # types whose `==` already tells any two apart


def unchanged_workloads(base: Repo, head: Repo) -> frozenset[tuple[str, str]]:
    """(project, name) of the workloads both sides render from exactly the same inputs."""
    before = {(i[1].project, i[1].name): i for i in render_inputs(base)}
    compared: dict[tuple[int, int], bool] = {}  # both repos keep every compared object alive
    return frozenset(
        key
        for inputs in render_inputs(head)
        if (old := before.get(key := (inputs[1].project, inputs[1].name))) is not None
        and same(old, inputs, compared)
    )


def same(a: Any, b: Any, compared: dict[tuple[int, int], bool]) -> bool:
    """Equal, and of the same types in the same order all the way down (see the module).

    `compared`: dataclass pairs already compared, by id (the caller keeps them alive)."""
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
        return len(a) == len(b) and _all_same(a, b, compared)
    if kind is Document:  # by identity: not the same object, so perhaps not the same text
        return False
    if values := _field_values(kind):  # type: ignore[arg-type]  # typeshed: types hash
        key = (id(a), id(b))
        if (found := compared.get(key)) is None:
            found = compared[key] = _all_same(values(a), values(b), compared)
        return found
    if kind in _EXACT:
        return a == b
    return a == b and repr(a) == repr(b)  # floats (-0.0), Decimals (8 and 8.0), the rest


def _all_same(a: tuple | list, b: tuple | list, compared: dict[tuple[int, int], bool]) -> bool:
    """Item by item (of equal lengths); most items of both sides are the same objects."""
    return all(x is y or same(x, y, compared) for x, y in zip(a, b))


@cache
def _field_values(kind: type) -> Callable[[Any], tuple] | None:
    """A dataclass's field values as a tuple (None for any other type)."""
    if not is_dataclass(kind):
        return None
    names = [f.name for f in fields(kind)]
    if len(names) > 1:
        return attrgetter(*names)
    return lambda obj: tuple(getattr(obj, name) for name in names)  # attrgetter: no tuple
