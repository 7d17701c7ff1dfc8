"""Decisions in flight: admissions, preemptions and evictions decided but not yet written.

Why the cycle waits for them: the core counts a workload's quota as used from the
moment it decides to admit it, but the workload only starts when the admission reaches the API
server, and it only gives the quota back once its finish comes back through a watch. When the
core decides faster than the API server takes writes, the decisions queue up in the controller;
every queued admission holds quota that nothing uses, the cohorts look full although the fleet
is nearly idle, and the next arrivals of higher priority preempt work that has not even started
(the large-scale bench: 55 % of admissions evicted at 0.3 % of the quota really in use). Each
eviction costs three more writes, so the queue grows faster: a feedback loop.

So the next cycle starts only once the decisions of earlier cycles are down to `limit`: a
waiting workload then stays pending (holding nothing) instead of admitted-and-queued (holding
quota), and the cycle that admits it sees the completions that happened meanwhile. The limit
is above the number of workers, so they never idle for want of work. One cycle still admits
every fit (a deep queue never waits one cycle per workload); only the cadence follows the API
server's pace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from queuectl import metrics

log = logging.getLogger(__name__)

Action = Callable[[], Awaitable[Any]]


class InFlight:
    """Counts decision writes from enqueue to completion (success or failure alike)."""

    def __init__(self) -> None:
        self._live: set[Action] = set()
        self.waited_s = 0.0
        """Total time cycles waited for the writes to drain (a figure for the bench)."""
        self._released = asyncio.Event()

    def track(self, action: Action) -> Action:
        """`action`, counted from now until it has run (raised or not) or is dropped."""

        async def tracked() -> None:
            try:
                await action()
            finally:
                self.drop((tracked,))

        self._live.add(tracked)
        metrics.CONTROLLER_DECISIONS_IN_FLIGHT.set(len(self._live))
        return tracked

    def drop(self, actions: Iterable[Action]) -> None:
        """No longer count these (run, or never to run: a key whose earlier action raised)."""
        before = len(self._live)
        self._live.difference_update(actions)
        if len(self._live) < before:
            metrics.CONTROLLER_DECISIONS_IN_FLIGHT.set(len(self._live))
            self._released.set()

    @property
    def count(self) -> int:
        return len(self._live)

    async def wait_below(self, limit: int, timeout: float, clock: Callable[[], float]) -> bool:
        """Wait until at most `limit` decisions are in flight, or `timeout` seconds (a safety
        net: writes time out on their own, so a count that never falls is a bug, logged).
        True when the count is at most the limit."""
        start = clock()
        while self.count > limit:
            left = start + timeout - clock()
            if left <= 0:
                log.warning(
                    "%d decisions still in flight after %.0f s; running the cycle anyway",
                    self.count,
                    timeout,
                )
                break
            self._released.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._released.wait(), left)
        waited = clock() - start
        self.waited_s += waited
        metrics.CONTROLLER_CYCLE_WRITE_WAIT.inc(waited)
        return self.count <= limit
