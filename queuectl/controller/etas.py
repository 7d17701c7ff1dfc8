"""Estimated starts for the visibility API and the web view, computed on demand and kept.

One bounded replay of the core (`core.eta`) answers every pending workload at once, so it is
made at most once per `refresh_s` however many people ask, and never per request: the first
caller after the estimates went stale starts a refresh and is answered with the stale ones, as
is everyone until it ends (only the very first caller, with nothing to show, waits for it).
The copy of the scheduler is made on the loop while no cycle runs (`CoreThread.idle`), and the
replay runs on a worker thread, so cycles, watches and writes go on while it computes.

Typical runtimes are learned from the finished Workloads the cache still holds, as the CLI
does (`finished_run`): the controller keeps no history of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.feed.corethread import CoreThread
from queuectl.core import Eta, EtaLimits, RuntimeHistory, prepare_estimate

log = logging.getLogger(__name__)

REFRESH_S = 10.0
"""Estimates older than this are computed again when next asked for."""


def finished_run(wl: Mapping[str, Any]) -> tuple[float, float] | None:
    """(when it finished, seconds it held an admission in all) of a finished workload that ran;
    None for one that never ran or has no times on record: what ETAs learn runtimes from."""
    view = WorkloadView(wl)
    done = view.condition(names.COND_FINISHED) or {}
    end = convert.parse_time(done.get("lastTransitionTime"))
    if done.get("status") != "True" or end is None:
        return None
    total = float(view.status.get("accumulatedPastExecutionTimeSeconds") or 0)
    cond = view.condition(names.COND_ADMITTED) or view.condition(names.COND_QUOTA_RESERVED) or {}
    since = convert.parse_time(cond.get("lastTransitionTime"))
    if view.status.get("admission") and cond.get("status") == "True" and since is not None:
        total += max(0.0, end - since)
    return (end, total) if total > 0 else None


def _priority(wl: Mapping[str, Any]) -> int:
    value = WorkloadView(wl).spec.get("priority")
    return value if isinstance(value, int) else 0


def runtime_history(workloads: Iterable[Mapping[str, Any]]) -> RuntimeHistory:
    """How long work of each ClusterQueue and priority runs, from these Workloads' finished
    runs, oldest first (the bounded history keeps the latest)."""
    runs = []
    for wl in workloads:
        ran = finished_run(wl)
        view = WorkloadView(wl)
        cq = str((view.status.get("admission") or {}).get("clusterQueue") or "")
        if ran is not None and cq:
            runs.append((ran[0], view.key, cq, _priority(wl), ran[1]))
    history = RuntimeHistory()
    for _, _, cq, priority, seconds in sorted(runs):
        history.add(cq, priority, seconds)
    return history


class EtaCache:
    """The latest estimates of every pending workload, recomputed when stale and asked for."""

    def __init__(
        self,
        core: CoreThread,
        workloads: Callable[[], Iterable[Mapping[str, Any]]],
        clock: Callable[[], float],
        refresh_s: float = REFRESH_S,
        limits: EtaLimits | None = None,
    ) -> None:
        self.core = core
        self.workloads = workloads
        """The cached Workloads, finished ones included (the runtime samples)."""
        self.clock = clock
        self.refresh_s = refresh_s
        self.limits = limits or EtaLimits()
        self.computed_at: float | None = None
        self.refreshes = 0
        self._etas: Mapping[str, Eta] = {}
        self._running: asyncio.Task[None] | None = None

    @property
    def refreshing(self) -> asyncio.Task[None] | None:
        """The refresh under way, if any."""
        running = self._running
        return running if running is not None and not running.done() else None

    async def get(self) -> Mapping[str, Eta]:
        """Workload key -> estimate. Stale ones (older than `refresh_s`) are answered at once
        while a refresh runs behind them; only the very first caller waits for a replay. A
        workload that came after the last refresh is absent until the next one."""
        fresh = self.computed_at is not None and self.clock() - self.computed_at < self.refresh_s
        if not fresh and self.refreshing is None:
            self._running = asyncio.create_task(self._refresh(), name="eta-refresh")
        if self.computed_at is None and self._running is not None:
            # Shielded: one caller giving up must not cancel the refresh the others wait for.
            await asyncio.shield(self._running)
        return self._etas

    async def _refresh(self) -> None:
        now = self.clock()
        try:
            history = runtime_history(list(self.workloads()))
            sched = await self.core.idle()
            now = self.clock()
            replay = prepare_estimate(sched, now, history, limits=self.limits)  # before any await
            self._etas = await asyncio.get_running_loop().run_in_executor(None, replay)
        except Exception:  # an estimate is advice: never fail the answer it decorates
            log.exception("estimating start times failed; the lists show none")
            self._etas = {}
        self.computed_at = now
        self.refreshes += 1
