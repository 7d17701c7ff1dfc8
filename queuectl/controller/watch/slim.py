"""What the watcher does to each object before the cache keeps it: less of it, shared.

The cache holds every watched object for the process's life (50,000 Workloads in the
large-scale benchmark), each parsed from its own JSON line, so each carries its own copy of
every key ("metadata", "lastTransitionTime", ...) and of every repeated value ("True", a
reason, a queue name, a timestamp of the same second): about half the bytes of a parsed
Workload. Interning makes each distinct string one object, shared by every object that holds
it; an interned string is freed like any other once nothing refers to it.
"""

from __future__ import annotations

import sys
from typing import Any, Final

from queuectl.controller.watch.kube import Obj

MAX_SHARED_LEN: Final = 128
"""Longer values (free-text messages with figures) are rarely repeated: left alone."""
UNIQUE_KEYS: Final = frozenset({"uid", "resourceVersion"})
"""Values never shared between objects (or versions): interning them would only cost."""
MAX_DEPTH: Final = 64
"""Deeper parts are kept as parsed (no real object nests this far; none can recurse us)."""


def slim(obj: Obj) -> Obj:
    """The object without managedFields (large, never read), its strings shared."""
    obj.get("metadata", {}).pop("managedFields", None)
    shared: Obj = _share(obj, 0)
    return shared


def _share(node: Any, depth: int) -> Any:
    if isinstance(node, str):
        return sys.intern(node) if len(node) <= MAX_SHARED_LEN else node
    if depth >= MAX_DEPTH:
        return node
    if isinstance(node, dict):
        return {
            sys.intern(key): value if key in UNIQUE_KEYS else _share(value, depth + 1)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_share(value, depth + 1) for value in node]
    return node
