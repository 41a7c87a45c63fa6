"""The other side of a change, so a problem two objects share lands on the one it introduced.

A duplicate name involves two definitions, and a department over its quota all of its
projects; `validate` alone blames the later one in path order (file path, then position
in the file). `plan` knows more: the base. A definition the base already had in the same
file is established; one the change added (or, for a value, changed) is introduced, and
the problem is reported there, where the pull request's author looks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gitops_sched.config.document import Document, Path_


def path_order(doc: Document) -> tuple:
    """Files by path (folder by folder), then documents in file order."""
    return (tuple(doc.file.split("/")), doc.index)


def _value(data: Any, path: Path_) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


@dataclass(frozen=True)
class Baseline:
    """Each object of the base by (kind, name): the file and data of its first definition.

    The empty baseline (validate's) knows nothing: every definition is established, so
    ordering by `order` is plain path order."""

    objects: dict[tuple[str, str], Document] = field(default_factory=dict)

    @staticmethod
    def of(documents: Iterable[Document]) -> Baseline:
        objects: dict[tuple[str, str], Document] = {}
        for doc in documents:
            objects.setdefault((doc.kind, doc.name), doc)
        return Baseline(objects)

    def _before(self, doc: Document) -> Document | None:
        return self.objects.get((doc.kind, doc.name))

    def introduced(self, doc: Document) -> bool:
        """Whether the change added this definition (the base had none in this file)."""
        if not self.objects:
            return False
        before = self._before(doc)
        return before is None or before.file != doc.file

    def changed(self, doc: Document, path: Path_) -> bool:
        """Whether the change added this definition or changed its value at `path`."""
        if not self.objects:
            return False
        before = self._before(doc)
        return before is None or _value(before.data, path) != _value(doc.data, path)

    def order(self, docs: Iterable[Document], path: Path_ | None = None) -> list[Document]:
        """Established definitions first, then introduced ones (with `path`: those whose
        value there changed), each in path order: who comes last is who gets the blame."""

        def key(doc: Document) -> tuple:
            new = self.introduced(doc) if path is None else self.changed(doc, path)
            return (new, path_order(doc))

        return sorted(docs, key=key)


NO_BASELINE = Baseline()
