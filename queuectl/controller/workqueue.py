"""The controller's work queue: each key at most once, in one of two lanes.

Under load the core reports thousands of pending Workloads per cycle, each wanting its reason
written; admissions, preemptions, evictions and Job events must not wait behind them (in the
benchmark they did: a pending-reason patch queue of ~26,000 delayed admissions by seconds).
So keys come in two lanes, and workers always drain the urgent lane first. A key queued in
the background lane that becomes urgent is promoted, never served twice.
"""

from __future__ import annotations

import asyncio
from collections import deque


class WorkQueue:
    def __init__(self) -> None:
        self._urgent: deque[str] = deque()
        self._background: deque[str] = deque()
        self._lane: dict[str, bool] = {}  # queued key -> urgent?
        self._ready = asyncio.Event()

    def __contains__(self, key: str) -> bool:
        return key in self._lane

    def __len__(self) -> int:
        return len(self._lane)

    def depth(self, urgent: bool) -> int:
        return sum(1 for u in self._lane.values() if u is urgent)

    def put(self, key: str, *, urgent: bool = True) -> None:
        queued = self._lane.get(key)
        if queued is None:
            self._lane[key] = urgent
            (self._urgent if urgent else self._background).append(key)
        elif urgent and not queued:  # promote; the background entry is skipped when reached
            self._lane[key] = True
            self._urgent.append(key)
        self._ready.set()

    def pop_nowait(self) -> str | None:
        while self._urgent:
            key = self._urgent.popleft()
            if self._lane.get(key) is True:
                del self._lane[key]
                return key
        while self._background:
            key = self._background.popleft()
            if self._lane.get(key) is False:
                del self._lane[key]
                return key
        return None

    async def get(self) -> str:
        while True:
            key = self.pop_nowait()
            if key is not None:
                return key
            self._ready.clear()
            await self._ready.wait()
