"""What finished work returned to one cohort tree, over time: the flow `patience` looks at.

Kept as running totals at each cycle that saw a release, so that "how much came back since
time T" is a binary search and one subtraction per (flavor, resource), however long the window
(a waiter may look back as far as its victims' grace period: minutes in a GPU fleet)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping

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


FlowKey = tuple[str, str]
"""("tree", root), ("loans", root) or ("queue", ClusterQueue): see `Flows`."""


class Flows:
    """The flows `patience` weighs, each a `FreedLog`: everything finished work returned to a
    cohort tree; of that, what its queues had borrowed (loans returned to the cohort); and for
    a fenced queue (one that may not borrow some resource), what its own work returned. A
    fenced queue short of quota gets it back only from its own work and from loans of its
    quota coming home, never from what another queue's own quota frees, so the tree's whole
    flow would make it wait for quota that cannot reach it."""

    __slots__ = ("logs", "pending")

    def __init__(self) -> None:
        self.pending: dict[FlowKey, Freed] = {}
        """What was returned since the last cycle, per flow."""
        self.logs: dict[FlowKey, FreedLog] = {}

    def note(self, key: FlowKey, freed: Mapping[FlavorResource, int]) -> None:
        into = self.pending.setdefault(key, {})
        for fr, n in freed.items():
            if n > 0:
                into[fr] = into.get(fr, 0) + n

    def record(self, now: float, horizon: float) -> None:
        """Move what was noted since the last cycle into the logs (at `now`), and drop the
        entries older than `horizon`."""
        for key, freed in self.pending.items():
            log = self.logs.get(key)
            if log is None:
                log = self.logs[key] = FreedLog()
            log.add(now, freed)
        self.pending = {}
        for key in [k for k, log in self.logs.items() if log.prune(horizon)]:
            del self.logs[key]

    def since(self, key: FlowKey, t: float) -> Freed:
        log = self.logs.get(key)
        return log.since(t) if log is not None else {}
