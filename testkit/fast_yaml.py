"""PyYAML's libyaml classes, where the installed wheel has them, for the YAML the tests
parse and write themselves (kubectl's output, test repos, kubeconfigs): the pure-Python
classes cost about ten times as much CPU, and none of this goes through the product's own
loader, whose parser choice the tests check separately (`each_yaml_parser`)."""

from __future__ import annotations

from typing import Any

import yaml

LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
DUMPER: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str) -> Any:
    return yaml.load(text, Loader=LOADER)


def load_all(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=LOADER))


def dump(data: Any, **options: Any) -> str:
    return str(yaml.dump(data, Dumper=DUMPER, **options))


def dump_all(documents: list[Any], **options: Any) -> str:
    return str(yaml.dump_all(documents, Dumper=DUMPER, **options))
