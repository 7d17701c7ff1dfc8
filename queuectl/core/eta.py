"""When will a pending workload start? The core replayed forward on a virtual clock.

A copy of the scheduler is given what it holds now and run forward: every admitted workload
ends at its maximum execution time when it has one, else after the typical runtime of its kind
(`runtimes.RuntimeHistory`, given what it has run already); at each end the same `run_cycle`
the controller and the simulator call decides who goes next, in the pending order and through
the quota tree as they are. What the replay admits gets its own expected end, and so on. The
first admission of a pending workload is its estimated start.

It assumes what it cannot know: no new work arrives (none of higher priority jumps the line),
nothing fails, runtimes are typical, preempted work keeps its progress, admission checks pass
at once. Bounded in cost: it stops at `EtaLimits.horizon_seconds` of virtual time or after
`EtaLimits.max_cycles` cycles, or as soon as every workload asked about has started; what has
not started by then is unknown, with the reason.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from queuectl.core.reasons import EVICTED_MAX_EXEC_TIME
from queuectl.core.runtimes import RuntimeHistory
from queuectl.core.scheduler import Scheduler
from queuectl.core.types import Workload

ASSUMES = (
    "assuming running jobs end at their time limits or typical runtimes, "
    "no new higher-priority work, no failures"
)
"""What every estimate takes for granted: say it wherever one is shown."""


@dataclass(frozen=True, slots=True)
class EtaLimits:
    horizon_seconds: float = 7 * 86400.0
    """Virtual time replayed at most: a start further away is unknown."""
    max_cycles: int = 2000
    """Scheduling cycles replayed at most (each at one instant where something ends)."""
    resolution_seconds: float = 60.0
    """Expected ends are rounded to the nearest multiple of this: ends that close together are
    one instant, one cycle (a guess of typical runtimes is not finer than a minute anyway;
    to the nearest, not up, so that a chain of jobs does not drift late)."""


@dataclass(frozen=True, slots=True)
class Eta:
    key: str
    start: float | None
    """Estimated start (the core's clock); None when unknown, `why` says why."""
    why: str = ""


NO_HISTORY = "no runtime history: running work has no time limit and nothing like it has finished"
NEVER_FITS = "does not fit even when everything running has ended"
INACTIVE = "inactive: it does not start until it is activated"


def _clone(src: Scheduler) -> tuple[Scheduler, list[str]]:
    """A fresh scheduler fed what `src` holds (specs, nodes, admitted, then pending work),
    and the keys that hold quota, in admission order."""
    state = src.state
    out = Scheduler(preemption_patience=src.book.patience)
    out.state.fair_strategies = state.fair_strategies
    out.now = src.now
    for flavor in state.flavors.values():
        out.upsert_flavor(flavor)
    for topology in state.topologies.values():
        out.upsert_topology(topology)
    for cohort in state.cohorts.values():
        out.upsert_cohort(cohort)
    for cq in state.queues.values():
        out.upsert_cluster_queue(cq)
    for check in state.checks.values():
        out.upsert_admission_check(check)
    for node in state.nodes.values():
        out.upsert_node(node)
    for name in state.bank.banks:
        balance = src.gpu_time_bank(name, src.now)
        if balance is not None:
            out.restore_gpu_time_bank(name, balance)
    running = sorted(state.charges, key=lambda k: (state.charges[k].admitted_at, k))
    for key in running:
        charge = state.charges[key]
        w = state.workloads.get(key)
        if w is not None:
            out.upsert_workload(
                replace(w, admission=charge.admission, admitted_at=charge.admitted_at)
            )
    for key, w in state.workloads.items():
        if key not in state.charges:
            out.upsert_workload(w)
    return out, running


class _Replay:
    def __init__(
        self, src: Scheduler, now: float, runtimes: RuntimeHistory | None, limits: EtaLimits
    ) -> None:
        self.sched, running = _clone(src)
        self.now, self.runtimes, self.limits = now, runtimes or RuntimeHistory(), limits
        self.heap: list[tuple[float, int, int, str, int]] = []
        """(time, kind: 0 end / 1 suspend / 2 wake, seq, key, token)"""
        self.seq = 0
        self.token: dict[str, int] = {}
        self.ends: dict[str, float] = {}
        """Expected end of what holds quota in the replay (absent: unknown, never ends)."""
        self.left: dict[str, float] = {}
        """Work left to a workload preempted in the replay."""
        self.starts: dict[str, float] = {}
        for key in running:
            w = self.sched.workload(key)
            hold = self.sched.held_quota(key)
            if w is not None and hold is not None:
                self._admitted(w, hold.admitted_at, now)

    def _push(self, at: float, kind: int, key: str = "", token: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (at, kind, self.seq, key, token))

    def _admitted(self, w: Workload, since: float, now: float) -> None:
        """Work holds quota from `since`: when does it end, as far as we can tell?"""
        token = self.token[w.key] = self.token.get(w.key, 0) + 1
        if w.key in self.left:
            end: float | None = now + self.left.pop(w.key)
        elif w.max_execution_seconds is not None:
            end = since + w.max_execution_seconds
        else:
            left = self.runtimes.remaining(w.cluster_queue, w.priority, now - since)
            end = None if left is None else now + left
        if end is None:
            self.ends.pop(w.key, None)
            return
        step = self.limits.resolution_seconds
        if step > 0:
            end = math.floor(end / step + 0.5) * step
        self.ends[w.key] = end = max(now, end)
        self._push(end, 0, w.key, token)

    def _gone(self, key: str) -> None:
        self.token[key] = self.token.get(key, 0) + 1
        self.ends.pop(key, None)
        self.sched.delete_workload(key)

    def run(self, wanted: set[str]) -> float:
        """Replay until every `wanted` key has started or a bound is hit; the time reached."""
        t, cycles, last = self.now, 0, self.now + self.limits.horizon_seconds
        while True:
            result = self.sched.run_cycle(t)
            cycles += 1
            for a in result.admitted:
                self.starts.setdefault(a.key, t)
                w = self.sched.workload(a.key)
                if w is not None:
                    self._admitted(w, t, t)
            for p in result.preemptions:
                self._push(max(t, p.deadline), 1, p.victim, self.token.get(p.victim, 0))
            for e in result.evictions:
                if e.reason == EVICTED_MAX_EXEC_TIME:
                    self._gone(e.key)
                else:
                    self._suspend(e.key, t)
            if result.next_wakeup is not None:
                self._push(max(t, result.next_wakeup), 2)
            if wanted <= self.starts.keys() or not self.heap or cycles >= self.limits.max_cycles:
                return t
            if self.heap[0][0] > last:
                return last
            t = self.heap[0][0]
            while self.heap and self.heap[0][0] == t:
                _, kind, _, key, token = heapq.heappop(self.heap)
                if kind == 2 or token != self.token.get(key):
                    continue
                if kind == 0:
                    self._gone(key)
                else:
                    self._suspend(key, t)

    def _suspend(self, key: str, t: float) -> None:
        """Preempted or evicted in the replay: back in line with the work it had left."""
        if not self.sched.is_admitted(key):
            return
        end = self.ends.pop(key, None)
        if end is not None:
            self.left[key] = max(0.0, end - t)
        self.token[key] = self.token.get(key, 0) + 1
        self.sched.requeue_workload(key)


def estimate_starts(
    sched: Scheduler,
    now: float,
    runtimes: RuntimeHistory | None = None,
    keys: Iterable[str] | None = None,
    limits: EtaLimits = EtaLimits(),
) -> dict[str, Eta]:
    """The estimated start of each pending workload of `keys` (default: every one the core
    holds and has not admitted). `sched` is not changed; the answer is deterministic."""
    return prepare_estimate(sched, now, runtimes, keys, limits)()


def prepare_estimate(
    sched: Scheduler,
    now: float,
    runtimes: RuntimeHistory | None = None,
    keys: Iterable[str] | None = None,
    limits: EtaLimits = EtaLimits(),
) -> Callable[[], dict[str, Eta]]:
    """`estimate_starts` in two halves: the copy of `sched` is made now, the replay when the
    returned function is called. The replay reads nothing of `sched`, so a caller that must
    not hold the live scheduler for long (the controller) may run it on another thread while
    `sched` goes on changing."""
    pending = {k for k in sched.workloads() if not sched.is_admitted(k)}
    wanted = pending if keys is None else pending.intersection(keys)
    if not wanted:
        return dict
    inactive = {k for k in wanted if not sched.workloads()[k].active}
    replay = _Replay(sched, now, runtimes, limits)
    return lambda: _estimates(replay, wanted, inactive, now, limits)


def _estimates(
    replay: _Replay, wanted: set[str], inactive: set[str], now: float, limits: EtaLimits
) -> dict[str, Eta]:
    reached = replay.run(wanted)
    out: dict[str, Eta] = {}
    unknown_runners = any(
        replay.sched.is_admitted(k) and k not in replay.ends for k in replay.sched.workloads()
    )
    for key in sorted(wanted):
        start = replay.starts.get(key)
        if start is not None:
            out[key] = Eta(key, max(now, start))
        elif key in inactive:
            out[key] = Eta(key, None, INACTIVE)
        elif reached >= now + limits.horizon_seconds:
            hours = limits.horizon_seconds / 3600
            out[key] = Eta(key, None, f"not within the estimate's horizon of {hours:g} h")
        elif replay.heap:
            out[key] = Eta(
                key, None, f"beyond what the estimate replays ({limits.max_cycles} cycles)"
            )
        else:
            out[key] = Eta(key, None, NO_HISTORY if unknown_runners else NEVER_FITS)
    return out
