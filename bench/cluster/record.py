"""What the runner observed, and the figures computed from it. Pure: no I/O, no clock.

Times are the runner's own `time.monotonic()` readings. Usage is integrated exactly, as a
piecewise-constant function that steps at every observed admission and release, so the
percentage does not depend on a sampling rate; the timeline samples exist only for the plot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Item:
    """One Workload as the runner saw it."""

    cls: str
    units: int
    created: float | None = None
    first_admitted: float | None = None
    finished: float | None = None
    running_since: float | None = None
    admissions: int = 0
    evictions: int = 0


@dataclass
class Recorder:
    nominal_total: int
    items: dict[str, Item] = field(default_factory=dict)
    used: int = 0
    peak_used: int = 0
    pending: int = 0
    first_created: float | None = None
    last_finished: float | None = None
    _area: float = 0.0
    _area_since: float | None = None
    timeline: list[tuple[float, int, int]] = field(default_factory=list)
    """(time, pending, used units) samples for the plot."""

    def _step(self, now: float, delta: int) -> None:
        if self._area_since is not None:
            self._area += self.used * (now - self._area_since)
        self._area_since = now
        self.used += delta
        self.peak_used = max(self.peak_used, self.used)

    def add(self, name: str, cls: str, units: int) -> None:
        self.items[name] = Item(cls, units)

    def created(self, name: str, now: float) -> None:
        self.items[name].created = now
        self.pending += 1
        if self.first_created is None:
            self.first_created = now
            self._area_since = now

    def admitted(self, name: str, now: float) -> None:
        it = self.items[name]
        if it.running_since is not None or it.finished is not None:
            return
        if it.first_admitted is None:
            it.first_admitted = now
        it.admissions += 1
        it.running_since = now
        self.pending -= 1
        self._step(now, it.units)

    def stopped(self, name: str, now: float, *, finished: bool) -> None:
        """Released: finished (for good) or evicted (back to pending)."""
        it = self.items[name]
        if it.finished is not None:
            return
        if it.running_since is not None:
            it.running_since = None
            self._step(now, -it.units)
        elif finished:  # finished without a seen admission: it leaves the pending count
            self.pending -= 1
        else:
            return
        if finished:
            it.finished = now
            self.last_finished = now
        else:
            it.evictions += 1
            self.pending += 1

    def sample(self, now: float) -> None:
        self.timeline.append((now, self.pending, self.used))

    def all_finished(self) -> bool:
        return all(it.finished is not None for it in self.items.values())

    # --- figures ---------------------------------------------------------------------------
    def wall(self) -> float:
        if self.first_created is None or self.last_finished is None:
            return 0.0
        return self.last_finished - self.first_created

    def usage_pct(self) -> float:
        """Integral of used quota over the run / (sum of nominal quota x wall time)."""
        wall = self.wall()
        if wall <= 0:
            return 0.0
        area = self._area
        if self._area_since is not None and self.last_finished is not None:
            area += self.used * max(0.0, self.last_finished - self._area_since)
        return 100.0 * area / (self.nominal_total * wall)

    def tta(self) -> dict[str, dict[str, float]]:
        """Per class: average, p50, p95 and max time from creation to first admission."""
        by_class: dict[str, list[float]] = {}
        for it in self.items.values():
            if it.created is not None and it.first_admitted is not None:
                by_class.setdefault(it.cls, []).append(it.first_admitted - it.created)
        out: dict[str, dict[str, float]] = {}
        for cls, values in sorted(by_class.items()):
            values.sort()
            n = len(values)
            out[cls] = {
                "avg": sum(values) / n,
                "p50": values[n // 2],
                "p95": values[min(n - 1, int(n * 0.95))],
                "max": values[-1],
            }
        return out

    def counts(self) -> dict[str, Any]:
        items = self.items.values()
        return {
            "workloads": len(self.items),
            "created": sum(1 for it in items if it.created is not None),
            "finished": sum(1 for it in items if it.finished is not None),
            "admissions": sum(it.admissions for it in items),
            "evictions": sum(it.evictions for it in items),
            "peak_used_units": self.peak_used,
        }
