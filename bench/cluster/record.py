"""What the runner observed, and the figures computed from it. Pure: no I/O, no clock.

Times are the runner's own `time.monotonic()` readings, except for the reference scheduler's
time to admission, which (as Kueue defines it) comes from the API objects: the Admitted
condition's lastTransitionTime minus the creationTimestamp (epoch seconds, whole seconds both).
Usage is integrated exactly, as a piecewise-constant function that steps at every observed
admission and release, so the percentage does not depend on a sampling rate; the timeline
samples exist only for the plot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench.cluster.stats import spread


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (whole or fractional seconds) -> epoch seconds; None when absent."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@dataclass
class Item:
    """One Workload as the runner saw it."""

    cls: str
    units: int
    size: str = ""
    """Its size class (small, medium, large) when classes split by placement share one."""
    created: float | None = None
    first_admitted: float | None = None
    finished: float | None = None
    running_since: float | None = None
    admissions: int = 0
    evictions: int = 0
    api_created: float | None = None
    """metadata.creationTimestamp (epoch seconds)."""
    api_admitted: float | None = None
    """lastTransitionTime of the Admitted condition the last time it was seen True: after an
    eviction and readmission, the last admission's."""


@dataclass
class Recorder:
    nominal_total: int
    items: dict[str, Item] = field(default_factory=dict)
    used: int = 0
    peak_used: int = 0
    pending: int = 0
    first_created: float | None = None
    last_finished: float | None = None
    evicted_unit_s: float = 0.0
    """Admitted work thrown away: over every eviction, units x (eviction seen - admission seen)."""
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

    def add(self, name: str, cls: str, units: int, size: str = "") -> None:
        self.items[name] = Item(cls, units, size or cls)

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
            if not finished:
                self.evicted_unit_s += it.units * (now - it.running_since)
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

    def api_admission(self, name: str, created_at: float | None, admitted_at: float | None) -> None:
        """The API's own times for a Workload seen running (the latest admission wins)."""
        it = self.items[name]
        if created_at is not None:
            it.api_created = created_at
        if admitted_at is not None:
            it.api_admitted = admitted_at

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

    def tta(self, *, by_class: bool = False) -> dict[str, dict[str, float]]:
        """Per size class, or per class (stats.spread): create request sent -> first seen
        Admitted."""
        groups: dict[str, list[float]] = {}
        for it in self.items.values():
            if it.created is not None and it.first_admitted is not None:
                key = it.cls if by_class else it.size
                groups.setdefault(key, []).append(it.first_admitted - it.created)
        return {key: spread(values) for key, values in sorted(groups.items())}

    def tta_reference(self, *, by_class: bool = False) -> dict[str, dict[str, float]]:
        """Per size class, or per class (stats.spread), as the reference scheduler defines time
        to admission: the last Admitted lastTransitionTime - creationTimestamp."""
        groups: dict[str, list[float]] = {}
        for it in self.items.values():
            if it.api_created is not None and it.api_admitted is not None:
                key = it.cls if by_class else it.size
                groups.setdefault(key, []).append(it.api_admitted - it.api_created)
        return {key: spread(values) for key, values in sorted(groups.items())}

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
