"""Python's cyclic garbage collector paused while large acyclic structures are built.

The collector runs every few hundred container allocations and now and then walks every
live object. Loading a repo of thousands of documents, or rendering tens of thousands of
Kubernetes objects, or running a scheduling cycle over tens of thousands of jobs,
allocates millions of dicts, lists and dataclasses that form few reference cycles: those
walks find next to nothing to free and took a sixth to a half of the time. Reference
counting frees memory as usual meanwhile; a cycle made meanwhile waits for the collector's
next run, which also walks, once, the objects that outlive the block.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Collector off for the block (a no-op when it is off already); usable as a decorator."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
