"""Pacing of the controller's courtesy writes, so they never crowd out the writes that matter.

The benchmark showed where an unpaced controller spends the API server: a pending Workload's
message ("needs 8 GPUs, 3 free") changes almost every cycle while its reason stays the same,
and one Event per transition was 27 % of all requests. Admissions, preemptions and evictions
are never paced; these two are.
"""

from __future__ import annotations

from typing import Final

from queuectl import metrics

PENDING_REFRESH_S: Final = 30.0
PENDING_QPS: Final = 10.0
PENDING_BURST: Final = 200
EVENT_QPS: Final = 5.0
EVENT_BURST: Final = 200


class PendingRefresh:
    """A pending Workload's message is rewritten at most every `interval_s` while its reason
    stays the same. All pending writes together get `qps` a second (burst `burst`): when
    thousands of Workloads arrive at once, each one's first WaitingForQuota write would
    otherwise take a third of the API server's requests from the admissions. A write refused
    here is not lost: the controller's pending sweep finds the condition stale and tries again.
    """

    def __init__(
        self,
        interval_s: float = PENDING_REFRESH_S,
        qps: float = PENDING_QPS,
        burst: int = PENDING_BURST,
    ) -> None:
        self.interval_s = interval_s
        self._written: dict[str, float] = {}
        self._budget: TokenBucket | None = None
        self._qps, self._burst = qps, burst
        self.deferred = 0
        """Writes refused for lack of budget (the sweep retries them)."""

    def allow(self, key: str, now: float, *, same_reason: bool) -> bool:
        """May this pending write go out now?"""
        if same_reason and not self.due(key, now):
            return False
        if self._budget is None:
            self._budget = TokenBucket(self._qps, self._burst, now)
        if not self._budget.take(now):
            self.deferred += 1
            metrics.CONTROLLER_PENDING_DEFERRED.inc()
            return False
        return True

    def due(self, key: str, now: float) -> bool:
        return now - self._written.get(key, float("-inf")) >= self.interval_s

    def wrote(self, key: str, now: float) -> None:
        self._written[key] = now
        if len(self._written) > 4096 and len(self._written) % 1024 == 0:
            # entries older than the interval mean the same as none: keep memory bounded
            self._written = {k: t for k, t in self._written.items() if now - t < self.interval_s}


class TokenBucket:
    """`rate` tokens a second, at most `burst` saved up; take() spends one if there is one."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._tokens = float(burst)
        self._at = now

    def take(self, now: float) -> bool:
        self._tokens = min(self.burst, self._tokens + max(0.0, now - self._at) * self.rate)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True
