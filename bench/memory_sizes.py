"""Where a process's Python memory is: deep object sizes and tracemalloc's top sites."""

from __future__ import annotations

import sys
import tracemalloc
from typing import Any


def deep_size(root: Any, seen: set[int]) -> int:
    """Bytes of `root` and everything it reaches that is not in `seen` (ids; updated), not
    following classes, modules or functions (shared by every instance)."""
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type | type(sys) | type(deep_size)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        elif isinstance(obj, str | bytes | int | float | bool) or obj is None:
            continue
        else:
            slots = [s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())]
            stack.extend(getattr(obj, s) for s in slots if hasattr(obj, s))
            if hasattr(obj, "__dict__"):
                stack.append(obj.__dict__)
    return total


def top_sites(snapshot: tracemalloc.Snapshot, n: int) -> list[str]:
    """The `n` allocation sites (file:line) holding the most memory, and the total."""
    stats = snapshot.statistics("lineno")
    total = sum(s.size for s in stats)
    lines = [f"total {total / 2**20:.1f} MB in {sum(s.count for s in stats):,} blocks"]
    for s in stats[:n]:
        frame = s.traceback[0]
        lines.append(
            f"{s.size / 2**20:7.1f} MB {s.count:9,} blocks  {frame.filename}:{frame.lineno}"
        )
    return lines
