"""Names a package exports without importing their modules until first used.

A package's `__init__` that imported its modules made importing any one module of it (a
constants file, `engine.types`) load all of them: the node agent paid for the engine and
the compiler, `plan` for the Kubernetes client. `exports` gives such a package a module
`__getattr__` (PEP 562) that imports the module holding a name when the name is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `package` for `modules`: exported name -> its submodule's name."""

    def attribute(name: str) -> Any:
        if name not in modules:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{modules[name]}"), name)

    return attribute
