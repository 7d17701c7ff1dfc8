"""What finished work returned to one cohort tree, over time: the flow `patience` looks at.

Kept as running totals at each cycle that saw a release, so that "how much came back since
time T" is a binary search and one subtraction per (flavor, resource), however long the window
(a waiter may look back as far as its victims' grace period: minutes in a GPU fleet)."""

from __future__ import annotations

from bisect import bisect_left

from queuectl.core.types import FlavorResource

Freed = dict[FlavorResource, int]


class FreedLog:
    __slots__ = ("_head", "_times", "_totals")

    def __init__(self) -> None:
        self._times: list[float] = []
        self._totals: list[Freed] = [{}]
        """_totals[i]: everything returned before entry i (so _totals[0] is what was pruned)."""
        self._head = 0

    def add(self, now: float, freed: Freed) -> None:
        total = dict(self._totals[-1])
        for fr, n in freed.items():
            total[fr] = total.get(fr, 0) + n
        self._times.append(now)
        self._totals.append(total)

    def prune(self, horizon: float) -> bool:
        """Forget entries older than `horizon`; True when none is left."""
        times = self._times
        head = bisect_left(times, horizon, self._head)
        if head == len(times):
            return True
        if head > 64 and head * 2 > len(times):
            del times[:head]
            del self._totals[:head]
            head = 0
        self._head = head
        return False

    def since(self, t: float) -> Freed:
        """What was returned at or after time `t` (within what is kept)."""
        times = self._times
        i = bisect_left(times, t, self._head)
        last, before = self._totals[-1], self._totals[i]
        return {fr: n - before.get(fr, 0) for fr, n in last.items() if n > before.get(fr, 0)}
