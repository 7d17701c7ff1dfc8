"""Weighted dominant-resource shares for fair-sharing preemption, read as they will be once
the preemptor is admitted and what is on its way out is gone (core/fair_preempt.py decides
with them)."""

from __future__ import annotations

from queuectl.core.quota import QNode, share_on
from queuectl.core.reach import own_usage, set_aside
from queuectl.core.state import State
from queuectl.core.types import FlavorResource


class Shares:
    """Weighted dominant-resource shares as they will be once the preemptor and the preemptors
    nominated before it are admitted and what is on its way out is gone: every queue's usage
    without quota held for preemptors and work being stopped (`reach.set_aside`), with what
    each preemptor needs added to its queue (`State.claims`). Without the claims, a second
    preemptor of the same queue would count its queue's share before the first one's
    admission, and take more than its share (the victims would then take it back). The
    victims a search tries are taken off the tree itself (`State.apply`)."""

    __slots__ = ("aside", "below", "frs")

    def __init__(
        self, state: State, key: str, node: QNode, need: dict[FlavorResource, int]
    ) -> None:
        held, _ = set_aside(state)
        aside = {q: dict(v) for q, v in held.items()}
        claims = [(q, n) for k, (q, n) in sorted(state.claims.items()) if k != key]
        frs = set(need)
        for queue, claim in [*claims, (node.name, need)]:
            mine = aside.setdefault(queue, {})
            for fr, n in claim.items():
                mine[fr] = mine.get(fr, 0) - n  # less set aside: more used
                frs.add(fr)
        self.aside = aside
        self.below: dict[QNode, list[QNode]] = {}
        for name in sorted(self.aside):
            child = state.tree.queues.get(name)
            while child is not None and child.parent is not None:
                kids = self.below.setdefault(child.parent, [])
                if child in kids:
                    break
                kids.append(child)
                child = child.parent
        self.frs = frozenset(frs)

    def usage(self, n: QNode, fr: FlavorResource) -> int:
        return own_usage(n, fr, self.aside, self.below)

    def of(self, n: QNode) -> float:
        """`quota.share` of `n` on these usages."""
        parent = n.parent
        if parent is None:
            return 0.0
        return share_on(n, parent, ((fr, self.usage(n, fr)) for fr in self.frs.union(n.usage)))

    def path(self, n: QNode) -> tuple[float, ...]:
        """Minus the shares from the top cohort's child down to `n`: ascending order visits
        the highest share at each level first (a tournament down the tree)."""
        out: list[float] = []
        cur = n
        while cur.parent is not None:
            out.append(-self.of(cur))
            cur = cur.parent
        out.reverse()
        return tuple(out)
