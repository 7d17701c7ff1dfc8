"""What a simulation measures: waits, completion times, allocation over time, fragmentation,
preemptions and the work they lost, fairness against entitlement, borrowing and reclaim.

The engine tells the `Recorder` what happens; levels that hold between two event times (GPUs
allocated, a queue's usage beyond its nominal quota) are integrated over virtual time, so the
figures do not depend on how often events happen. Everything is rounded when summarised, so a
run's JSON is byte-for-byte the same for the same inputs.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

RECLAIM_REASONS = frozenset(
    {
        "InCohortReclamation",
        "InCohortReclaimWhileBorrowing",
        "InCohortReclaimWithCredit",
        "InCohortFairSharing",
    }
)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted `values` (0 when empty)."""
    if not values:
        return 0.0
    rank = max(1, math.ceil(q / 100 * len(values)))
    return values[min(rank, len(values)) - 1]


def spread(values: Iterable[float]) -> dict[str, float]:
    data = sorted(values)
    mean = sum(data) / len(data) if data else 0.0
    return {
        "count": len(data),
        "mean": round(mean, 1),
        "p50": round(percentile(data, 50), 1),
        "p95": round(percentile(data, 95), 1),
        "p99": round(percentile(data, 99), 1),
    }


def jain(xs: Iterable[float]) -> float:
    """Jain's fairness index: 1 when every x is equal, 1/n when one takes everything."""
    data = list(xs)
    sq = sum(x * x for x in data)
    return (sum(data) ** 2) / (len(data) * sq) if data and sq > 0 else 1.0


@dataclass(slots=True)
class Series:
    """Per time bucket: integrals and point samples for the plots."""

    width: float
    alloc: list[float] = field(default_factory=list)
    capacity: list[float] = field(default_factory=list)
    depth: list[dict[str, int]] = field(default_factory=list)
    """Pending jobs per priority class, sampled at the end of each bucket."""
    fragmentation: list[float] = field(default_factory=list)

    def grow(self, index: int) -> None:
        while len(self.alloc) <= index:
            self.alloc.append(0.0)
            self.capacity.append(0.0)

    def alloc_pct(self) -> list[float]:
        return [
            100 * a / c if c > 0 else 0.0 for a, c in zip(self.alloc, self.capacity, strict=True)
        ]


@dataclass(slots=True)
class JobRecord:
    team: str
    cluster_queue: str
    priority_class: str
    gpus: int
    submit: float
    admitted: float | None = None
    finished: float | None = None
    stopped: bool = False
    """Stopped by its maximum execution time."""
    admissions: list[float] = field(default_factory=list)
    """Every admission, re-admissions after a preemption included (`admitted` is the first):
    the sequence the replay test compares with the controller's."""
    preemptions: list[str] = field(default_factory=list)
    """The reason of each preemption notice it got, in order."""


class Recorder:
    """Accumulates what the engine reports; `summary()` turns it into the JSON figures."""

    def __init__(self, width: float, nominal: Mapping[str, Mapping[str, int]]) -> None:
        self.series = Series(width)
        self.nominal = nominal
        """ClusterQueue -> flavor -> nominal GPUs."""
        self.jobs: dict[str, JobRecord] = {}
        self.last = 0.0
        self.bucket = 0
        self.allocated = 0
        self.capacity = 0
        self.usage: dict[str, dict[str, int]] = {cq: {} for cq in nominal}
        self.levels: dict[str, tuple[int, int]] = {cq: (0, 0) for cq in nominal}
        """ClusterQueue -> (GPUs it holds, of them beyond its nominal quota), kept by `hold`
        in `usage`'s order: `advance`, called at every event time, only multiplies."""
        self.gpu_seconds: defaultdict[str, float] = defaultdict(float)
        self.team_gpu_seconds: defaultdict[str, float] = defaultdict(float)
        self.team_usage: Counter[str] = Counter()
        self.borrowed_seconds: defaultdict[str, float] = defaultdict(float)
        self.preemptions: Counter[str] = Counter()
        self.team_preemptions: Counter[str] = Counter()
        self.lost: defaultdict[str, float] = defaultdict(float)
        """GPU-seconds of work lost to preemption, per team (node failures: `failure_lost`)."""
        self.reclaimed_gpus = 0
        self.node_failures = 0
        self.failure_evictions = 0
        self.failure_lost = 0.0
        self.unplaced_pods = 0
        self.cycles = 0
        self.events = 0

    # --- levels ---------------------------------------------------------------------------
    def advance(
        self, now: float, depth: Callable[[], dict[str, int]], frag: Callable[[], float]
    ) -> None:
        """Integrate the current levels up to `now`, sampling at every bucket boundary passed."""
        s = self.series
        t = self.last
        if now <= t:
            return
        span = now - t
        for cq, (total, borrowed) in self.levels.items():
            if total:
                self.gpu_seconds[cq] += total * span
            if borrowed:
                self.borrowed_seconds[cq] += borrowed * span
        for team, used in self.team_usage.items():
            if used:
                self.team_gpu_seconds[team] += used * span
        while t < now:
            b = self.bucket
            boundary = (b + 1) * s.width
            end = min(now, boundary)
            s.grow(b)
            s.alloc[b] += self.allocated * (end - t)
            s.capacity[b] += self.capacity * (end - t)
            if end >= boundary:
                s.depth.append(depth())
                s.fragmentation.append(frag())
                self.bucket += 1
            t = end
        self.last = now

    def hold(self, cq: str, team: str, usage: Mapping[str, int], sign: int) -> None:
        """A job starts (+1) or stops (-1) holding GPUs: flavor -> GPUs."""
        per = self.usage.setdefault(cq, {})
        for flavor, gpus in usage.items():
            per[flavor] = per.get(flavor, 0) + sign * gpus
            self.allocated += sign * gpus
            self.team_usage[team] += sign * gpus
        nominal = self.nominal.get(cq, {})
        self.levels[cq] = (
            sum(per.values()),
            sum(max(0, used - nominal.get(flavor, 0)) for flavor, used in per.items()),
        )

    # --- events ---------------------------------------------------------------------------
    def preempted(self, key: str, reason: str, gpus: int) -> None:
        team = self.jobs[key].team
        self.jobs[key].preemptions.append(reason)
        self.preemptions[reason] += 1
        self.team_preemptions[team] += 1
        if reason in RECLAIM_REASONS:
            self.reclaimed_gpus += gpus

    def lost_work(self, key: str, gpu_seconds: float) -> None:
        self.lost[self.jobs[key].team] += gpu_seconds

    # --- the figures ----------------------------------------------------------------------
    def summary(self, never_admitted: Mapping[str, str]) -> dict[str, Any]:
        jobs = self.jobs.values()
        teams = sorted({j.team for j in jobs})
        waits = {
            t: [j.admitted - j.submit for j in jobs if j.team == t and j.admitted is not None]
            for t in teams
        }
        jcts = {
            t: [
                j.finished - j.submit
                for j in jobs
                if j.team == t and j.finished is not None and not j.stopped
            ]
            for t in teams
        }
        alloc = self.series.alloc_pct()
        frag = self.series.fragmentation
        entitled_total = sum(sum(v.values()) for v in self.nominal.values())
        used_total = sum(self.gpu_seconds.values())
        queues: dict[str, Any] = {}
        ratios = []
        for cq in sorted(self.nominal):
            ent = sum(self.nominal[cq].values()) / entitled_total if entitled_total else 0.0
            share = self.gpu_seconds[cq] / used_total if used_total else 0.0
            ratio = share / ent if ent > 0 else 0.0
            if ent > 0:
                ratios.append(ratio)
            queues[cq] = {
                "gpu_hours": round(self.gpu_seconds[cq] / 3600, 2),
                "share": round(share, 4),
                "entitlement": round(ent, 4),
                "share_over_entitlement": round(ratio, 3),
                "borrowed_gpu_hours": round(self.borrowed_seconds[cq] / 3600, 2),
            }
        finished = sum(1 for j in jobs if j.finished is not None and not j.stopped)
        return {
            "jobs": {
                "total": len(self.jobs),
                "finished": finished,
                "stopped_max_exec": sum(1 for j in jobs if j.stopped),
                "never_admitted": len(never_admitted),
                "unfinished": len(self.jobs) - finished - sum(1 for j in jobs if j.stopped),
            },
            "wait_seconds": {
                "overall": spread(w for ws in waits.values() for w in ws),
                "teams": {t: spread(waits[t]) for t in teams},
            },
            "jct_seconds": {
                "overall": spread(c for cs in jcts.values() for c in cs),
                "teams": {t: spread(jcts[t]) for t in teams},
            },
            "gpu_allocation_pct": {
                "mean": round(
                    100 * sum(self.series.alloc) / sum(self.series.capacity)
                    if sum(self.series.capacity) > 0
                    else 0.0,
                    2,
                ),
                "p50": round(percentile(sorted(alloc), 50), 2),
                "max": round(max(alloc, default=0.0), 2),
            },
            "fragmentation_pct": {
                "mean": round(100 * sum(frag) / len(frag), 2) if frag else 0.0,
                "max": round(100 * max(frag, default=0.0), 2),
            },
            "preemptions": {
                "total": sum(self.preemptions.values()),
                "by_reason": dict(sorted(self.preemptions.items())),
                "teams": {t: self.team_preemptions[t] for t in teams},
                "gpu_hours_lost": round(sum(self.lost.values()) / 3600, 2),
                "gpu_hours_lost_teams": {t: round(self.lost[t] / 3600, 2) for t in teams},
            },
            "node_failures": {
                "failures": self.node_failures,
                "evictions": self.failure_evictions,
                "gpu_hours_lost": round(self.failure_lost / 3600, 2),
            },
            "fairness": {"jain_index": round(jain(ratios), 4), "queues": queues},
            "borrowing": {
                "gpu_hours_borrowed": round(sum(self.borrowed_seconds.values()) / 3600, 2),
                "reclaim_preemptions": sum(self.preemptions[r] for r in RECLAIM_REASONS),
                "reclaimed_gpus": self.reclaimed_gpus,
            },
            "team_gpu_hours": {t: round(self.team_gpu_seconds[t] / 3600, 2) for t in teams},
            "unplaced_pods": self.unplaced_pods,
            "never_admitted": dict(sorted(never_admitted.items())[:20]),
            "sim": {
                "cycles": self.cycles,
                "events": self.events,
                "virtual_hours": round(self.last / 3600, 2),
            },
        }
