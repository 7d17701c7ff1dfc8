"""Which borrowers a preemptor may take from, along the cohort tree.

A queue is a candidate for a preemptor of another queue only through their lowest common
cohort: the branch below it that holds the candidate must use more than its own quota there,
and so must every cohort between the candidate's queue and that branch's top, and the queue
itself. Otherwise the candidate's work runs on quota its own branch owns, and stopping it would
only let the preemptor's branch borrow from a branch that lent it nothing (Kueue's hierarchical
reclaim). Candidates met at a lower common cohort (nearer the preemptor) are taken first.

What a cohort's queues run but will not keep is left out of every cohort usage compared here
(`Aside`, carried up the tree as `add_usage` would carry its removal): quota held for
preemptors (their victims already gone) and work already being stopped (another preemptor's
victims, evictions). A branch whose borrowing another preemptor is already taking back has no
borrowing left for a second one: counting it twice would stop its work below its quota.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from queuectl.core.quota import QNode
from queuectl.core.state import State
from queuectl.core.types import FlavorResource

Aside = Mapping[str, Mapping[FlavorResource, int]]
"""queue -> what its usage counts that it will not keep (held quota, work being stopped)."""
Below = Mapping[QNode, list[QNode]]
"""cohort -> its children on the way down to a queue with something aside."""


def set_aside(state: State) -> tuple[Aside, Below]:
    """What each queue will not keep, and the tree paths from those queues up to their roots."""
    aside: dict[str, dict[FlavorResource, int]] = {q: dict(v) for q, v in state.queue_holds.items()}
    for key in (*state.victim_of, *state.evicting):
        charge = state.charges.get(key)
        if charge is None:
            continue
        mine = aside.setdefault(charge.cq, {})
        for fr, n in charge.usage.items():
            mine[fr] = mine.get(fr, 0) + n
    below: dict[QNode, list[QNode]] = {}
    for name in aside:
        child = state.tree.queues.get(name)
        while child is not None and child.parent is not None:
            kids = below.setdefault(child.parent, [])
            if child in kids:
                break
            kids.append(child)
            child = child.parent
    return aside, below


def own_usage(n: QNode, fr: FlavorResource, aside: Aside, below: Below) -> int:
    """`n`'s usage of `fr` without what its queues will not keep."""
    if n.is_queue:
        mine = aside.get(n.name)
        return n.usage.get(fr, 0) - (mine.get(fr, 0) if mine else 0)
    u = n.usage.get(fr, 0)
    for child in below.get(n, ()):
        was, now = child.usage.get(fr, 0), own_usage(child, fr, aside, below)
        g = child.guaranteed.get(fr, 0)
        u += (max(0, now - g) - max(0, was - g)) if g else now - was
    return u


def over(n: QNode, frs: Iterable[FlavorResource], aside: Aside, below: Below) -> bool:
    """Does `n` use more than its own subtree quota of one of `frs` (`aside` left out)?"""
    return any(own_usage(n, fr, aside, below) > n.subtree.get(fr, 0) for fr in frs)


def meeting(
    other: QNode,
    levels: Mapping[QNode, int],
    frs: Iterable[FlavorResource],
    aside: Aside,
    below: Below,
) -> tuple[int, QNode] | None:
    """Where a borrowing queue `other` meets the preemptor: (level of their lowest common
    cohort, 1 for the preemptor's parent; the child of that cohort that holds `other`), or None
    when a cohort between them is within its own quota of `frs` (its work is its own there).
    `levels`: the preemptor's queue and ancestors -> their level."""
    frs = tuple(frs)
    branch = other
    cur = other.parent
    while cur is not None:
        level = levels.get(cur)
        if level is not None:
            return level, branch
        if not over(cur, frs, aside, below):
            return None
        branch = cur
        cur = cur.parent
    return None


class Reach:
    """One victim search's view of the tree from the preemptor's queue `node`; what is set
    aside is gathered only when a borrower meets it above its own parent (a flat cohort never
    needs it)."""

    __slots__ = ("aside", "below", "levels", "state")

    def __init__(self, state: State, node: QNode) -> None:
        self.state = state
        self.levels = {n: i for i, n in enumerate(node.chain)}
        self.aside: Aside | None = None
        self.below: Below = {}

    def meet(self, other: QNode, frs: Iterable[FlavorResource]) -> tuple[int, QNode] | None:
        """`meeting` for a borrowing queue of the preemptor's tree."""
        level = self.levels.get(other.parent) if other.parent is not None else None
        if level is not None:
            return level, other
        if self.aside is None:
            self.aside, self.below = set_aside(self.state)
        return meeting(other, self.levels, frs, self.aside, self.below)
