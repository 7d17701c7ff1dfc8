"""How long work runs, learned from finished workloads: the runtime half of an ETA.

A bounded sample of admitted durations per (ClusterQueue, priority), the priority standing for
the priority class (the value is what the core sees of it). A question about a kind with too
few samples falls back to the queue's samples of every priority, then to the whole fleet's; no
sample at all is an honest "unknown". Work that has already run `elapsed` seconds is judged
by the samples that ran longer (their median, less what it has run; `STATISTIC`): with heavy-tailed
runtimes a job that has run an hour is unlikely to finish in the median job's ten minutes. A
job that has outrun every sample is given as long again as it has run (half of the work that
outlives a heavy tail's sample does about that).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

SAMPLES_PER_KIND = 256
"""Latest finished durations kept per (queue, priority), per queue and for the fleet."""
MIN_SAMPLES = 3
"""Fewer samples than this for a kind: ask the coarser kind instead."""

STATISTIC = "median"
"""Of the samples that ran longer than the work has so far: "median" or "mean". The median
gave the smaller errors on a generated week (docs/design/bench.md, "ETA"): the mean of a
heavy tail is dragged up by the few jobs that run days."""

Kind = tuple[str, int] | str | None
"""(queue, priority) | queue | None (the fleet)."""


class RuntimeHistory:
    """Finished workloads' admitted durations, bounded; pure and deterministic."""

    def __init__(self, per_kind: int = SAMPLES_PER_KIND, statistic: str = STATISTIC) -> None:
        if statistic not in ("mean", "median"):
            raise ValueError(f"statistic {statistic!r}: give mean or median")
        self.per_kind, self.statistic = per_kind, statistic
        self._recent: dict[Kind, deque[float]] = {}
        self._sorted: dict[Kind, list[float]] = {}

    def add(self, cluster_queue: str, priority: int, seconds: float) -> None:
        """A workload of the queue and priority finished after `seconds` admitted."""
        if not seconds >= 0.0:  # NaN and negatives are no evidence
            return
        for kind in ((cluster_queue, priority), cluster_queue, None):
            recent = self._recent.get(kind)
            if recent is None:
                recent = self._recent[kind] = deque(maxlen=self.per_kind)
            recent.append(seconds)
            self._sorted.pop(kind, None)

    def __len__(self) -> int:
        return len(self._recent.get(None, ()))

    def _samples(self, cluster_queue: str, priority: int) -> list[float]:
        for kind in ((cluster_queue, priority), cluster_queue, None):
            if len(self._recent.get(kind, ())) >= MIN_SAMPLES or kind is None:
                got = self._sorted.get(kind)
                if got is None:
                    got = self._sorted[kind] = sorted(self._recent.get(kind, ()))
                return got
        return []  # pragma: no cover - the fleet's kind always answers

    def remaining(self, cluster_queue: str, priority: int, elapsed: float = 0.0) -> float | None:
        """Expected seconds left for work that has run `elapsed`; None with no history."""
        samples = self._samples(cluster_queue, priority)
        if not samples:
            return None
        elapsed = max(0.0, elapsed)
        longer = samples[bisect_right(samples, elapsed) :]
        if not longer:
            return max(elapsed, 1.0)
        if self.statistic == "median":
            return longer[(len(longer) - 1) // 2] - elapsed
        return sum(longer) / len(longer) - elapsed
