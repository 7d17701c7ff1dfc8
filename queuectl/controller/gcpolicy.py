"""When the controller lets CPython's cyclic garbage collector look at what.

CPython's collector stops every thread while it runs, so a full (generation 2) collection over
the controller's cache and core stalls webhook answers and Lease renewal for as long as it
takes: ~0.5 s of CPU for 30,000 Workloads, and in a replay of 60,000 Workload dicts arriving
after start (tests/bench: the large-scale shape) 9 full collections of up to 2 s each. Almost
everything the controller keeps is long-lived plain data (watch dicts, core records) that only
reference counting ever frees, so the collector's scans of it are wasted.

So: `gc.freeze()` once the caches sync, and again whenever `freeze_every_s` passed since the
last time, which moves what survived so far out of the collector's view (a constant-time list
splice); young collections still run as usual for short-lived cycles. What a freeze hides from
the collector is only freed by reference counting, so cyclic garbage that was frozen would
stay; every `sweep_every_s` (30 min) the frozen objects are handed back and collected once
(`gc.unfreeze()`, `gc.collect()`): one long pause per sweep instead of one per few thousand
new objects. In the replay: the 9 full collections (9.9 s in all) went to none.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class GcOptions:
    freeze_every_s: float = 5.0
    sweep_every_s: float = 1800.0


class GcPolicy:
    def __init__(self, clock: Callable[[], float], options: GcOptions = GcOptions()) -> None:
        self.options = options
        self._clock = clock
        self._frozen_at: float | None = None
        self._swept_at = clock()
        self.freezes = 0
        self.sweeps = 0

    def start(self) -> None:
        """The caches just synced: everything alive now is long-lived."""
        self._freeze(self._clock())

    def tick(self) -> None:
        """After a cycle: freeze what survived since the last freeze, or sweep when due."""
        now = self._clock()
        if self._frozen_at is None:
            return  # not started: nothing is known to be long-lived yet
        if now - self._swept_at >= self.options.sweep_every_s:
            gc.unfreeze()
            gc.collect()  # the one deliberate full collection: reclaims frozen cycles
            self._swept_at = now
            self.sweeps += 1
            self._freeze(now)
            return
        if now - self._frozen_at >= self.options.freeze_every_s:
            self._freeze(now)

    def _freeze(self, now: float) -> None:
        gc.freeze()
        self._frozen_at = now
        self.freezes += 1
