"""The controller's fleet metrics and Workload transition counters (cli.md, "Fleet figures").

Two inputs, both read-only:
- after a scheduling cycle (and on a timer, for quiet spells) the core's state gives GPU
  allocation per flavor, fragmentation and GPU-seconds (and their cost at each flavor's price
  in force when they are charged). The fleet computations walk every
  charge, node and pending workload, so they run at most once per `interval_s` however often
  the cycle runs (every 50 ms under load).
- the Workload cache's events give the Finished, Evicted and Preempted transitions, counted
  once each whoever wrote them (a cycle decision, a grace period running out, a stopped queue).

Only the leader counts: followers see the same events, and Prometheus sums replicas.

The core is read only while no cycle runs on the core thread (`busy`): a refresh due during a
cycle waits for the refresh after it, and a departing workload's last seconds are charged when
the cycle returns, before its release (queued meanwhile) reaches the core.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from queuectl import metrics
from queuectl.api import names
from queuectl.api.flavor import FlavorCost
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Obj
from queuectl.core import Scheduler, cost, fleet
from queuectl.core.types import GPU

log = logging.getLogger(__name__)

EVICTIONS_COUNTED_ELSEWHERE = frozenset({names.REASON_EVICTED_NODE_FAILURES})
"""The drainer counts its own NodeFailures evictions right after writing them."""


def _turned_true(obj: Obj, old: Obj | None, cond_type: str) -> str | None:
    """The condition's reason if this event set it True (it was not True before)."""
    if (
        old is None
        or WorkloadView(old).is_true(cond_type)
        or not WorkloadView(obj).is_true(cond_type)
    ):
        return None
    return str((WorkloadView(obj).condition(cond_type) or {}).get("reason") or "")


class Observer:
    """Sets the fleet gauges and counters of `queuectl.metrics` from the core and the cache."""

    def __init__(
        self,
        sched: Scheduler,
        cache: Cache,
        *,
        leading: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
        interval_s: float = 1.0,
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self.sched = sched
        self.busy = busy
        self.cache = cache
        self.leading = leading
        self.clock = clock
        self.interval_s = interval_s
        self.meter = fleet.GpuSecondsMeter()
        self.refreshed_at: float | None = None
        self._flavors: set[str] = set()
        self._prices: dict[str, tuple[dict[str, object], cost.Price | None]] = {}
        """flavor -> (its spec.cost as last parsed, the price it gave)"""
        self._unsettled: list[tuple[str, float]] = []
        """(workload key, when it left) heard while a cycle ran."""
        # First in line: a finished Workload's charge is still in the core when we see the
        # event (the feed, listening after us, releases it), so its last seconds are charged.
        cache.store(k.WORKLOADS).listeners.insert(0, self.on_workload)

    # --- after each cycle --------------------------------------------------------------------
    def after_cycle(self, now: float) -> None:
        """Refresh unless the last refresh is younger than `interval_s` (or a cycle runs: the
        controller calls this again when it returns)."""
        if self.busy():
            return
        if self.refreshed_at is None or now - self.refreshed_at >= self.interval_s:
            self.refresh(now)

    async def run(self, wait_leading: Callable[[], Awaitable[None]]) -> None:
        """Refresh at least every `interval_s` while leading, cycles or not: a quiet cluster
        still burns GPU-seconds."""
        while True:
            await asyncio.sleep(self.interval_s)
            await wait_leading()
            try:
                self.after_cycle(self.clock())
            except Exception:  # a metrics bug must not stop the controller
                log.exception("fleet metrics refresh failed")

    def refresh(self, now: float) -> None:
        self.refreshed_at = now
        self._charge(self.meter.advance(self.sched, now))
        self._allocation()
        free = fleet.free_gpus(self.sched)
        requests = fleet.pending_gpu_requests(self.sched)
        metrics.CONTROLLER_FRAGMENTATION.set(fleet.fragmentation_ratio(free, requests))

    def _charge(self, used: Mapping[fleet.GpuSecondsKey, float]) -> None:
        for (namespace, cq, flavor), seconds in used.items():
            self._add(namespace, cq, flavor, seconds)

    def _add(self, namespace: str, cq: str, flavor: str, seconds: float) -> None:
        """GPU-seconds, and their cost where the flavor has a price now."""
        if seconds <= 0:
            return
        metrics.CONTROLLER_GPU_SECONDS.labels(namespace, cq, flavor).inc(seconds)
        price = self._price(flavor)
        if price is not None:
            metrics.CONTROLLER_GPU_COST.labels(namespace, cq, flavor, price.currency).inc(
                cost.cost_of(seconds, price)
            )

    def _price(self, flavor: str) -> cost.Price | None:
        """The flavor's price now, parsed once per change of its spec.cost (this runs for every
        namespace, queue and flavor on every refresh)."""
        raw = ObjectView(self.cache.get(k.RESOURCE_FLAVORS, flavor) or {}).spec.get("cost")
        if not raw:
            return None
        known = self._prices.get(flavor)
        if known is not None and known[0] == raw:
            return known[1]
        try:
            said = FlavorCost.model_validate(raw)
            price: cost.Price | None = cost.Price(said.price, said.currency)
        except ValueError:  # the API server refuses it; an older object is charged nothing
            price = None
        self._prices[flavor] = (dict(raw), price)
        return price

    def _allocation(self) -> None:
        seen = set()
        for f in fleet.gpu_allocation(self.sched):
            seen.add(f.flavor)
            metrics.CONTROLLER_FLAVOR_GPUS.labels(f.flavor, "capacity").set(f.capacity)
            metrics.CONTROLLER_FLAVOR_GPUS.labels(f.flavor, "allocated").set(f.allocated)
            metrics.CONTROLLER_GPU_ALLOCATION.labels(f.flavor).set(f.ratio)
        for gone in self._flavors - seen:  # a deleted flavor leaves no frozen series
            metrics.CONTROLLER_FLAVOR_GPUS.remove(gone, "capacity")
            metrics.CONTROLLER_FLAVOR_GPUS.remove(gone, "allocated")
            metrics.CONTROLLER_GPU_ALLOCATION.remove(gone)
        self._flavors = seen

    # --- Workload events ---------------------------------------------------------------------
    def on_workload(self, kind: str, obj: Obj, old: Obj | None) -> None:
        """A cache listener. The initial list (no `old`) counts nothing: those transitions
        happened before this process started."""
        if not self.leading():
            return
        key = WorkloadView(obj).key
        if kind == "DELETED" or WorkloadView(obj).is_true(names.COND_FINISHED):
            self._settle(key)  # the feed is about to release its quota
        if kind == "DELETED":
            return
        if (reason := _turned_true(obj, old, names.COND_FINISHED)) is not None:
            metrics.CONTROLLER_FINISHED.labels(self._cluster_queue(obj), reason).inc()
        reason = _turned_true(obj, old, names.COND_EVICTED)
        if reason is not None and reason not in EVICTIONS_COUNTED_ELSEWHERE:
            metrics.CONTROLLER_EVICTED.labels(reason).inc()
        if (reason := _turned_true(obj, old, names.COND_PREEMPTED)) is not None:
            metrics.CONTROLLER_PREEMPTED.labels(reason).inc()

    def _settle(self, key: str) -> None:
        """Charge a departing workload's GPU-seconds up to now (the meter's next reading will
        not find it)."""
        if self.busy():
            self._unsettled.append((key, self.clock()))
        else:
            self._settle_at(key, self.clock())

    def settle_deferred(self) -> None:
        """Charge the workloads that left during a cycle, up to when they left. Call it when
        the cycle has returned and before the core applies what was queued meanwhile. A key
        heard twice (Finished, then DELETED) is charged up to the first: its release is queued
        right behind that event."""
        unsettled, self._unsettled = self._unsettled, []
        settled: set[str] = set()
        for key, when in unsettled:
            if key not in settled:
                settled.add(key)
                self._settle_at(key, when)

    def _settle_at(self, key: str, now: float) -> None:
        last = self.meter.last
        charge = self.sched.held_quota(key)
        if last is None or charge is None:
            return
        start = max(last, charge.admitted_at)
        if now <= start:
            return
        namespace = key.split("/", 1)[0]
        for (flavor, res), amount in charge.usage.items():
            if res == GPU and amount > 0:
                self._add(namespace, charge.cluster_queue, flavor, amount * (now - start))

    def _cluster_queue(self, wl: Obj) -> str:
        view = WorkloadView(wl)
        admission = view.admission or {}
        if admission.get("clusterQueue"):
            return str(admission["clusterQueue"])
        return self.cache.local_queue(view.namespace, view.queue_name) or ""
