"""The keys the workers serve: each by one worker at a time, its actions first, again when it
changed meanwhile, later when its work met API trouble, and at a time when a timer says so.

A key names what to look at (`wl:ns/name`, `job:Kind/ns/name`, ...); what serving a key means
is the manager's (`Controller._serve`). This is only the bookkeeping around it, apart so the
manager is the wiring and the loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections.abc import Awaitable, Callable

from queuectl import metrics
from queuectl.controller.inflight import Action
from queuectl.controller.watch import kube as k
from queuectl.controller.workqueue import WorkQueue

log = logging.getLogger(__name__)

RETRY_S = 1.0
"""How long a key whose work failed waits before it is served again; doubled for each further
failure in a row, up to MAX_RETRY_S (a refusal that repeats must not cost a request a second)."""
MAX_RETRY_S = 60.0


class WorkKeys:
    def __init__(self, clock: Callable[[], float], on_timer: Callable[[], None]) -> None:
        self.clock = clock
        self.on_timer = on_timer
        """Called when a timer puts a key back (it may be a time the core waits for, too)."""
        self.queue = WorkQueue()
        self.active: set[str] = set()
        self.again: dict[str, bool] = {}  # key -> urgent, for keys enqueued while served
        self.failures: dict[str, int] = {}  # key -> failures in a row, for the retry back-off
        self.actions: dict[str, list[Action]] = {}
        self.timers: list[tuple[float, str]] = []
        self.timer_wake = asyncio.Event()

    def enqueue(self, key: str, action: Action | None = None, *, urgent: bool = True) -> None:
        """Queue `key` (once). `urgent=False` is for pending-reason refreshes only: they wait
        until no admission, preemption, eviction or Job event is queued."""
        if action is not None:
            self.actions.setdefault(key, []).append(action)
            urgent = True
        if key in self.active:
            self.again[key] = self.again.get(key, False) or urgent
        else:
            self.queue.put(key, urgent=urgent)

    def at(self, when: float, key: str) -> None:
        heapq.heappush(self.timers, (when, key))
        self.timer_wake.set()

    def take_actions(self, key: str) -> list[Action]:
        return self.actions.pop(key, [])

    async def serve_next(
        self, serve: Callable[[str], Awaitable[None]], ready: Callable[[], Awaitable[None]]
    ) -> None:
        """One worker's turn: the next key, once `ready` (leading), served by `serve`."""
        key = await self.queue.get()
        await ready()
        self.active.add(key)
        try:
            await serve(key)
            self.failures.pop(key, None)
        except Exception as err:
            self.failed(key, err)
        finally:
            self.active.discard(key)
            again = self.again.pop(key, None)
            if again is not None:
                self.enqueue(key, urgent=again)

    def failed(self, key: str, err: Exception) -> None:
        """API trouble (a dropped connection, a timeout, a 5xx, a refusal) serves the key
        again after RETRY_S, whatever its kind, backing off while it keeps failing; a bug is
        logged with its traceback and waits for the key's next event. Nothing a worker meets
        ends the worker."""
        if not k.api_trouble(err):
            log.exception("reconciling %s failed", key)
            return
        failures = self.failures[key] = self.failures.get(key, 0) + 1
        delay = min(RETRY_S * 2 ** (failures - 1), MAX_RETRY_S)
        metrics.CONTROLLER_API_ERRORS.labels(key.partition(":")[0]).inc()
        log.warning("%s: %s: %s; again in %.0f s", key, type(err).__name__, err, delay)
        self.at(self.clock() + delay, key)

    async def timer_loop(self) -> None:
        while True:
            now = self.clock()
            while self.timers and self.timers[0][0] <= now:
                _, key = heapq.heappop(self.timers)
                self.enqueue(key)
                self.on_timer()
            delay = self.timers[0][0] - now if self.timers else 3600.0
            self.timer_wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.timer_wake.wait(), max(0.01, delay))
