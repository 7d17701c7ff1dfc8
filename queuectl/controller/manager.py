"""The controller: watches -> cache -> core -> writes, with one work queue per object key.

Everything but the cycle runs on one asyncio loop. Watch events update the cache and the core
at once (`Feed`; queued while a cycle runs, `CoreThread`); a debounced loop runs the core's
cycle on its own thread at most every `debounce_s` while there is news; the cycle's decisions
and every object that changed become keys on a work queue, served by a bounded pool of workers
that never works on one key twice at the same time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from queuectl import convert, metrics
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.enforcement.enforce_loop import EnforceOptions, Enforcer
from queuectl.controller.etas import REFRESH_S, EtaCache
from queuectl.controller.feed.corethread import CoreThread
from queuectl.controller.feed.feed import Feed
from queuectl.controller.gcpolicy import GcOptions, GcPolicy
from queuectl.controller.inflight import Action, InFlight
from queuectl.controller.leader import LeaderElector
from queuectl.controller.nodes.drain import Drainer, DrainOptions
from queuectl.controller.nodes.gpuuse import GpuUseTracker
from queuectl.controller.observe import Observer
from queuectl.controller.queues.queue_status import QueueStatusWriter
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kinds import RECHECK_S, KindWatches
from queuectl.controller.watch.kube import Kube, Obj
from queuectl.controller.watch.watcher import run_all
from queuectl.controller.watch.workload_pods import WorkloadPods
from queuectl.controller.workkeys import WorkKeys
from queuectl.controller.workloads.decisions import Decisions
from queuectl.controller.workloads.events import EventRecorder
from queuectl.controller.workloads.pods_ready import PodsReadyOptions
from queuectl.controller.workloads.reconcile import Reconciler
from queuectl.core import DEFAULT_PATIENCE_SECONDS, Eta, Scheduler
from queuectl.jobs import podgroup as pg
from queuectl.jobs.registry import KINDS, Registry, placing_owner, queued_whole

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    debounce_s: float = 0.05
    workers: int = 32
    decisions_in_flight: int = 64
    """A cycle starts only once at most this many earlier decisions are unwritten
    (`controller/inflight.py`): above `workers`, so they never idle."""
    in_flight_wait_s: float = 30.0
    gc: GcOptions = field(default_factory=GcOptions)
    status_interval_s: float = 1.0
    kind_recheck_s: float = RECHECK_S
    """How often a job kind whose CRD is not installed is looked for again (kinds.py)."""
    drain: DrainOptions = field(default_factory=DrainOptions)
    enforce: EnforceOptions = field(default_factory=EnforceOptions)
    """The enforcement loop: running pods beyond their admission stop it (enforce_loop.py)."""
    preemption_patience_s: float = DEFAULT_PATIENCE_SECONDS
    """How long a would-be preemptor may wait for completions instead (`core.patience`)."""
    fair_preemption: tuple[str, ...] = ()
    """Fair-sharing preemption's rules, in order; empty: off (`core/fair_preempt.py`)."""
    pods_ready: PodsReadyOptions = field(default_factory=PodsReadyOptions)
    """Startup and recovery timeouts of admitted Workloads' pods (`workloads/pods_ready.py`)."""
    eta_refresh_s: float = REFRESH_S
    """How old the estimated starts the visibility API shows may be (`etas.py`)."""


class Controller:
    def __init__(
        self,
        kube: Kube,
        *,
        options: Options = Options(),
        leader: LeaderElector | None = None,
        kinds: Registry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kube = kube
        self.options = options
        self.leader = leader
        self.clock = clock
        self.kinds = KINDS if kinds is None else kinds
        self.cache = Cache.for_kinds(kube, self.kinds.values())
        self.kind_watches = KindWatches(
            kube, self.cache, self.kinds.values(), options.kind_recheck_s
        )
        self.sched = Scheduler(
            preemption_patience=options.preemption_patience_s,
            fair_preemption=options.fair_preemption,
            block_admission=options.pods_ready.block_admission,
        )
        """Read it only through `self.core` (`await core.idle()`): a cycle may be running."""
        self.core = CoreThread(self.sched)
        self.inflight = InFlight()
        # Decisions waiting for a worker: the API server takes writes slower than we make them.
        self.events = EventRecorder(kube, busy=lambda: self.inflight.count > options.workers)
        self._wake = asyncio.Event()
        self.keys = WorkKeys(clock, self._wake.set)
        self.gc = GcPolicy(time.monotonic, options.gc)
        self.feed = Feed(self.cache, self.core, self._wake.set, self._on_workload, self._on_job)
        ready_pods = WorkloadPods(self.cache, lambda key: self.enqueue(f"wl:{key}", urgent=False))
        self.reconciler = Reconciler(
            kube,
            self.cache,
            self.feed,
            self.core,
            self.kinds,
            self.events,
            self.at,
            clock,
            pods_ready=options.pods_ready,
            ready_pods=ready_pods,
        )
        self.decisions = Decisions(self.reconciler.writes, self.reconciler.jobs, self.core, self.at)
        self.queue_status = QueueStatusWriter(kube, self.cache, self.core, self.feed, clock)
        self.observer = Observer(
            self.sched, self.cache, leading=self.leading, clock=clock, busy=lambda: self.core.busy
        )
        self.drainer = Drainer(
            kube,
            self.cache,
            self.reconciler.writes,
            self.events,
            lambda key, action: self.enqueue(f"wl:{key}", action),
            options.drain,
            clock,
        )
        self.gpu_use = GpuUseTracker(
            self.cache,
            self.reconciler.writes,
            self.events,
            lambda key, action: self.enqueue(f"wl:{key}", action),
            clock,
        )
        self.enforcer = Enforcer(
            kube,
            self.cache,
            self.reconciler.writes,
            self.events,
            lambda key, action: self.enqueue(f"wl:{key}", action),
            options.enforce,
            self.leading,
            pods=ready_pods,
        )
        self.cache.store(k.ADMISSION_CHECKS).listeners.append(  # built-ins set Active
            lambda kind, obj, old: (
                None if kind == "DELETED" else self.enqueue(f"ac:{obj['metadata']['name']}")
            )
        )
        self.cache.queued_pods.listeners.append(lambda _, pod, __: self._on_queued_pod(pod))
        self.eta_cache = EtaCache(
            self.core, self.cache.store(k.WORKLOADS).values, clock, options.eta_refresh_s
        )
        self.cycles = 0
        self.admitted_total = 0
        self.started = asyncio.Event()

    # --- readiness ------------------------------------------------------------------------
    def synced(self) -> bool:
        return self.cache.synced()

    def leading(self) -> bool:
        return self.leader is None or self.leader.leading.is_set()

    async def estimates(self) -> Mapping[str, Eta]:
        """Every pending workload's estimated start, at most `eta_refresh_s` old."""
        return await self.eta_cache.get()

    async def _wait_leading(self) -> None:
        if self.leader is not None:
            await self.leader.leading.wait()

    # --- keys -----------------------------------------------------------------------------
    def enqueue(self, key: str, action: Action | None = None, *, urgent: bool = True) -> None:
        self.keys.enqueue(key, action, urgent=urgent)

    def at(self, when: float, wl_key: str) -> None:
        """Reconcile the Workload `wl_key` again at `when`."""
        self.keys.at(when, f"wl:{wl_key}")

    def _on_workload(self, key: str) -> None:
        self.enqueue(f"wl:{key}")

    def _on_job(self, event: str, obj: Obj) -> None:
        kind = obj.get("kind") or "Job"
        meta = obj["metadata"]
        adapter = self.kinds.get(kind)
        if adapter is None:
            return
        if not queued_whole(adapter, obj, self.kinds):
            if event != "DELETED" and (placer := placing_owner(obj, self.kinds)) is not None:
                self.enqueue(f"job:{placer[0]}/{meta.get('namespace', '')}/{placer[1]}")
            return
        if event == "DELETED":
            name = adapter.workload_name(obj)
            ns = meta.get("namespace", "")
            self.feed.forget(f"{ns}/{name}")
            self.enqueue(f"gone:{ns}/{name}")
            self._wake.set()
            return
        self.enqueue(f"job:{kind}/{meta.get('namespace', '')}/{meta['name']}")

    def _on_queued_pod(self, pod: Obj) -> None:
        """A queued bare pod came, changed or went: look at its group (podgroup_steps.py)."""
        if pg.is_queued_pod(pod, self.kinds):
            group = pg.group_of(pod)
            self.enqueue(f"group:{group.namespace}/{int(group.single)}/{group.name}")

    async def _serve(self, key: str) -> None:
        actions = self.keys.take_actions(key)
        try:
            for action in actions:
                await action()
        finally:
            self.inflight.drop(actions)  # those after one that raised never run
        kind, _, rest = key.partition(":")
        if kind == "wl":
            await self.reconciler.reconcile(rest)
        elif kind == "job":
            job_kind, ns, name = rest.split("/", 2)
            wl_key = await self.reconciler.reconcile_job(job_kind, ns, name)
            if wl_key is not None:  # a Workload is only ever reconciled under its own key
                self.enqueue(f"wl:{wl_key}")
        elif kind == "group":
            ns, single, name = rest.split("/", 2)
            wl_key = await self.reconciler.reconcile_group(pg.GroupKey(ns, name, single == "1"))
            if wl_key is not None:
                self.enqueue(f"wl:{wl_key}")
        elif kind == "gone":
            ns, name = rest.split("/", 1)
            await self.reconciler.job_deleted(ns, name)
        elif kind == "ac":  # an AdmissionCheck: its Active condition, if a built-in owns it
            await self.reconciler.builtin_checks.sync_check(rest)

    async def _worker(self) -> None:
        while True:
            await self.keys.serve_next(self._serve, self._wait_leading)

    # --- the scheduling cycle --------------------------------------------------------------
    async def _cycle_loop(self) -> None:
        next_wakeup: float | None = None
        while True:
            timeout = None if next_wakeup is None else max(0.0, next_wakeup - self.clock())
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            await self._wait_leading()
            await asyncio.sleep(self.options.debounce_s)  # gather a burst into one cycle
            await self.inflight.wait_below(
                self.options.decisions_in_flight, self.options.in_flight_wait_s, self.clock
            )
            self._wake.clear()
            next_wakeup = await self.run_cycle()

    async def run_cycle(self) -> float | None:
        """One cycle on the core thread; the loop goes on meanwhile. Events that arrive during
        the cycle are applied after it and wake the next one."""
        await self.queue_status.restore_banks()  # once, before the first cycle
        started = time.perf_counter()
        now = self.clock()
        async with self.core.cycle(now) as result:
            metrics.CONTROLLER_CYCLE_SECONDS.observe(time.perf_counter() - started)
            metrics.CONTROLLER_ADMISSIONS_PER_CYCLE.observe(len(result.admitted))
            self.cycles += 1
            for adm in result.admitted:
                self._decided(adm.key, self._admit_action(adm.key, adm.admission))
            for p in result.preemptions:
                self._decided(p.victim, functools.partial(self._preempt, p))
            for e in result.evictions:
                self._decided(e.key, functools.partial(self._evict, e))
            for info in result.pending:
                self.enqueue(f"wl:{info.key}", urgent=False)
            self.observer.settle_deferred()  # before the queued deletes release their charges
        for key in self.core.take_unanswered():
            self.enqueue(f"wl:{key}", urgent=False)
        self.observer.after_cycle(now)
        self.gc.tick()
        return result.next_wakeup

    def _decided(self, wl_key: str, action: Action) -> None:
        self.enqueue(f"wl:{wl_key}", self.inflight.track(action))

    def _admit_action(self, key: str, admission: Any) -> Action:
        async def act() -> None:
            if await self.decisions.admit(key, admission):
                self.admitted_total += 1
                metrics.CONTROLLER_ADMITTED.labels(admission.cluster_queue).inc()
                ns, _, name = key.partition("/")
                wl = self.cache.get(k.WORKLOADS, name, ns)
                created = convert.parse_time(
                    (wl or {}).get("metadata", {}).get("creationTimestamp")
                )
                if created is not None:
                    metrics.CONTROLLER_ADMISSION_WAIT.labels(admission.cluster_queue).observe(
                        max(0.0, self.clock() - created)
                    )

        return act

    async def _preempt(self, p: Any) -> None:
        await self.decisions.preempt(p)  # counted by the observer, once written

    async def _evict(self, e: Any) -> None:
        await self.decisions.apply_eviction(e)  # counted by the observer, once written

    # --- queue status ----------------------------------------------------------------------
    async def _status_loop(self) -> None:
        """Queue status and metrics, at most every `status_interval_s`, and never taking more
        than a fifth of the loop's time: with tens of thousands of Workloads a round costs
        tens of milliseconds, so the interval stretches instead of starving the writes."""
        rounds = 0
        cost = 0.0
        while True:
            await asyncio.sleep(max(self.options.status_interval_s, 4 * cost))
            await self._wait_leading()
            await self.core.idle()
            started = time.perf_counter()
            rounds += 1
            if rounds % 5 == 0:
                self.sweep_pending()
            try:
                await self.queue_status.write_all()
            except Exception as err:
                if not k.api_trouble(err):
                    raise
                log.warning("queue status: %s: %s", type(err).__name__, err)
            cost = time.perf_counter() - started

    def sweep_pending(self) -> None:
        """A safety net: requeue every pending Workload whose condition disagrees with the
        core (a reason lost to a conflicting write is otherwise never reported again). Call it
        when the core is idle (a busy core answers no reasons)."""
        for wl in self.cache.store(k.WORKLOADS).values():
            view = WorkloadView(wl)
            if view.holds_quota or view.is_true(names.COND_FINISHED):
                continue
            key = view.key
            if self.reconciler.pending.stale(key, wl):
                self.enqueue(f"wl:{key}", urgent=False)

    # --- run -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Until cancelled. Raises LeadershipLost if this replica loses its Lease."""
        await self.kind_watches.discover()
        tasks = [
            asyncio.create_task(run_all(list(self.cache.watchers)), name="watches"),
            asyncio.create_task(self.kind_watches.run(), name="job-kinds"),
        ]
        if self.leader is not None:
            tasks.append(asyncio.create_task(self._lead(), name="leader"))
        try:
            await self.cache.wait_synced()
            log.info("caches synced: %s", {n: len(s.objects) for n, s in self.cache.stores.items()})
            tasks += [asyncio.create_task(self._worker()) for _ in range(self.options.workers)]
            tasks += [
                asyncio.create_task(self._cycle_loop(), name="cycle"),
                asyncio.create_task(self.keys.timer_loop(), name="timers"),
                asyncio.create_task(self._status_loop(), name="queue-status"),
                asyncio.create_task(self.drainer.run(self._wait_leading), name="drain"),
                asyncio.create_task(self.enforcer.run(self._wait_leading), name="enforce"),
                asyncio.create_task(self.gpu_use.run(self._wait_leading), name="gpu-use"),
                asyncio.create_task(self.observer.run(self._wait_leading), name="observe"),
            ]
            for wl in self.cache.store(k.WORKLOADS).values():
                self.enqueue(f"wl:{WorkloadView(wl).key}")
            for res in self.cache.job_kinds:
                for job in self.cache.store(res).values():
                    self._on_job("ADDED", job)
            for pod in self.cache.queued_pods.values():
                self._on_queued_pod(pod)
            # The synced caches and the core are long-lived: keep full collections, which
            # stop every thread, from scanning them (gcpolicy.py).
            self.gc.start()
            self._wake.set()
            self.started.set()
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                t.result()
        finally:
            log.info(
                "API calls: %s; reconcile: %s",
                dict(sorted(self.kube.calls.items())),
                self.reconciler.stats,
            )
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            self.core.close()
            if self.leader is not None:
                await self.leader.release()

    async def _lead(self) -> None:
        assert self.leader is not None
        try:
            leading = asyncio.create_task(self.leader.leading.wait())
            leading.add_done_callback(lambda _: metrics.CONTROLLER_LEADER.set(1))
            await self.leader.run()
        finally:
            metrics.CONTROLLER_LEADER.set(0)
