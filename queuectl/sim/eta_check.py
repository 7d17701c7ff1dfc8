"""Judging the ETA: what the estimator would have shown at submission, against the real start.

At every `every`-th submission, after the job is queued and before the cycle of that instant,
`queuectl.core.estimate_starts` is asked about the new job with only what a live cluster would
know then: the core's state and the runtimes of the jobs finished so far (never the trace's
future). The job's first admission in the simulation is its actual start. A replay per sampled
submission is what costs, so one in `every` is sampled, not all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuectl.core import EtaLimits, RuntimeHistory, Scheduler, estimate_starts
from queuectl.sim.stats import JobRecord, percentile


class EtaProbe:
    def __init__(self, every: int, limits: EtaLimits | None = None) -> None:
        self.every, self.limits = every, limits or EtaLimits()
        self.history = RuntimeHistory()
        self.submitted_count = 0
        self.due: list[str] = []
        self.shown: dict[str, float | None] = {}
        """Sampled job -> the start the estimator gave at its submission (None: unknown)."""
        self.replays = 0

    def submitted(self, key: str) -> None:
        if self.submitted_count % self.every == 0:
            self.due.append(key)
        self.submitted_count += 1

    def finished(self, cluster_queue: str, priority: int, seconds: float) -> None:
        self.history.add(cluster_queue, priority, seconds)

    def before_cycle(self, sched: Scheduler, now: float) -> None:
        """Estimate the jobs sampled at this instant (one replay for them all)."""
        if not self.due:
            return
        etas = estimate_starts(sched, now, self.history, self.due, self.limits)
        self.replays += 1
        for key in self.due:
            eta = etas.get(key)
            self.shown[key] = eta.start if eta is not None else None
        self.due.clear()

    def summary(self, jobs: Mapping[str, JobRecord]) -> dict[str, Any]:
        """Per priority class and overall: the absolute error's p50 and p90 in seconds (jobs
        estimated and started), the signed median (positive: the ETA was late), the actual
        wait's median for scale, and how many were unknown or never started; `waited`: the
        same error over the jobs that waited more than `WAITED_SECONDS`."""
        groups: dict[str, list[tuple[float | None, JobRecord]]] = {}
        for key, shown in self.shown.items():
            rec = jobs[key]
            for name in (rec.priority_class, "overall"):
                groups.setdefault(name, []).append((shown, rec))
        out: dict[str, Any] = {
            "sampled_every": self.every,
            "samples": len(self.shown),
            "replays": self.replays,
        }
        classes: dict[str, Any] = {}
        for name, items in sorted(groups.items()):
            both = [
                (s, r.admitted, r) for s, r in items if s is not None and r.admitted is not None
            ]
            errors = sorted(abs(s - a) for s, a, _ in both)
            signed = sorted(s - a for s, a, _ in both)
            waits = sorted(a - r.submit for _, a, r in both)
            figures = {
                "count": len(items),
                "estimated": len(both),
                "unknown": sum(1 for s, _ in items if s is None),
                "never_started": sum(1 for s, r in items if s is not None and r.admitted is None),
                "abs_error_p50": round(percentile(errors, 50), 1),
                "abs_error_p90": round(percentile(errors, 90), 1),
                "error_p50": round(percentile(signed, 50), 1),
                "actual_wait_p50": round(percentile(waits, 50), 1),
                "waited": _waited(both),
            }
            if name == "overall":
                out["overall"] = figures
            else:
                classes[name] = figures
        out["classes"] = classes
        return out


WAITED_SECONDS = 60.0
"""A job that started within this of its submission did not wait: the estimate of "now" for
it is trivially right, so the figures are also given for the jobs that waited longer."""


def _waited(both: list[tuple[float, float, JobRecord]]) -> dict[str, Any]:
    errors = sorted(abs(s - a) for s, a, r in both if a - r.submit > WAITED_SECONDS)
    return {
        "count": len(errors),
        "abs_error_p50": round(percentile(errors, 50), 1),
        "abs_error_p90": round(percentile(errors, 90), 1),
    }
