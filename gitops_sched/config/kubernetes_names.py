"""Kubernetes' own syntax for label keys and values, in one place.

The API server refuses an object whose labels, node selector or node affinity break these
rules (apimachinery's `IsQualifiedName` and `IsValidLabelValue`), so every check of a label
the repo writes (a node group's selector, its topology label, a document's own labels) asks
here, and `validate` refuses what `kubectl apply` would.
"""

from __future__ import annotations

import re

MAX_LABEL_NAME = 63  # a label value, and a key's name part
MAX_SUBDOMAIN = 253  # a key's prefix: a DNS-1123 subdomain
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

# what a label value, or a key's name part, may be
LABEL_NAME_RULE = (
    f"at most {MAX_LABEL_NAME} characters: alphanumerics, '-', '_' and '.', beginning and "
    "ending with an alphanumeric"
)


def valid_label_value(value: str) -> bool:
    """Whether `value` is a label value: empty, or as LABEL_NAME_RULE says."""
    return value == "" or _valid_name(value)


def label_key_problem(key: str) -> str | None:
    """Why `key` is no label key: a name, optionally after a DNS subdomain and '/'
    (`nvidia.com/gpu.product`)."""
    prefix, slash, name = key.rpartition("/")
    if slash and not _SUBDOMAIN.fullmatch(prefix):
        return (
            f"its prefix '{prefix}' is not a DNS subdomain (lower-case alphanumerics, '-' and "
            "'.', beginning and ending with an alphanumeric)"
        )
    if len(prefix) > MAX_SUBDOMAIN:
        return f"its prefix is {len(prefix)} characters, more than {MAX_SUBDOMAIN}"
    if not _valid_name(name):
        return f"after the prefix: {LABEL_NAME_RULE}" if slash else LABEL_NAME_RULE
    return None


def _valid_name(name: str) -> bool:
    return len(name) <= MAX_LABEL_NAME and _LABEL_NAME.fullmatch(name) is not None
