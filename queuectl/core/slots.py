"""Nodes as placement sees them (how many pods of one shape each still holds), and packing pods
over them: the primitives that `topology` and `slices` share.

Packing is best fit at every level: the smallest domain that holds the rest of the pods, else the
largest one filled, so that large domains stay whole for large gangs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from queuectl.core.types import Node


@dataclass(slots=True)
class Slot:
    """A node and how many pods of the shape being placed it still holds."""

    node: Node
    cap: int


def label(node: Node, key: str) -> str:
    return node.labels.get(key, "")


def neg(key: str) -> tuple[int, ...]:
    """Order strings descending inside a max(): ties go to the smallest name."""
    return tuple(-ord(c) for c in key)


def group(slots: Sequence[Slot], levels: Sequence[str], depth: int) -> dict[str, list[Slot]]:
    """`slots` by their label at `levels[depth]` (by node name past the last level)."""
    groups: dict[str, list[Slot]] = {}
    if depth >= len(levels):
        for s in slots:
            groups[s.node.name] = [s]
        return groups
    for s in slots:
        groups.setdefault(label(s.node, levels[depth]), []).append(s)
    return groups


def distribute(
    slots: list[Slot], count: int, levels: Sequence[str], depth: int
) -> list[tuple[Slot, int]]:
    """Spread `count` pods over `slots` (total cap >= count), best fit at each finer level."""
    groups = group(slots, levels, depth)
    caps = {k: sum(s.cap for s in g) for k, g in groups.items()}
    out: list[tuple[Slot, int]] = []
    remaining = count
    left = sorted(groups)
    while remaining > 0 and left:
        fitting = [k for k in left if caps[k] >= remaining]
        if fitting:
            pick = min(fitting, key=lambda k: (caps[k], k))
            take = remaining
        else:
            pick = max(left, key=lambda k: (caps[k], neg(k)))
            take = caps[pick]
        left.remove(pick)
        if depth >= len(levels):
            out.append((groups[pick][0], take))
        else:
            out.extend(distribute(groups[pick], take, levels, depth + 1))
        remaining -= take
    return out
