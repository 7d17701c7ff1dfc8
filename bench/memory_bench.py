"""Peak memory of the controller at the large-scale benchmark's size, without a cluster.

The real `Controller` object graph (cache, feed, core, observer; never started, no API calls)
is fed what the cluster run feeds it: the scenario's ClusterQueues, LocalQueues and cohorts,
then its 50,000 Workloads as watch lines (memory_server.py) at `--create-per-s`, in the
runner's order. Every `--cycle-s` of virtual time the core runs a cycle; its admissions,
preemptions (preempted, evicted, requeued) and pending reasons (at most `--pending-per-s`) are
written back as the controller's status patches, and the oldest admitted work finishes at
`--finish-per-s` with the runner's Finished patch. After the last creation it goes on until
every Workload finished, so both peaks are seen: the core's (most work pending) and the
cache's (every Workload held, finished ones with their full status).

Reported: VmHWM/VmRSS of this process, deep sizes of the cache's Workloads and of the core
(`--sizes`), and with `--trace` tracemalloc's top allocation sites (RSS is then inflated by
tracemalloc itself: compare RSS only between untraced runs). `digest` hashes every cycle's
admissions and preemptions: a memory change must leave it equal. The last line is JSON.
"""

from __future__ import annotations

import argparse
import collections
import gc
import hashlib
import json
import os
import sys
import time
import tracemalloc
from dataclasses import dataclass
from typing import Any, cast

from bench.cluster import objects, procstat, scenario
from bench.cluster.objects import Layout
from bench.memory_server import ApiServer
from bench.memory_sizes import deep_size, top_sites
from queuectl import convert
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import status
from queuectl.controller.manager import Controller
from queuectl.controller.watch import kube as k
from queuectl.core.results import CycleResult

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class Options:
    scenario: str = "large-scale"
    create_per_s: float = 140.0
    finish_per_s: float = 45.0
    pending_per_s: float = 20.0
    cycle_s: float = 2.0
    limit: int | None = None
    trace: bool = False
    sizes: bool = False
    top: int = 25


def creation_order(lay: Layout) -> list[tuple[int, int, scenario.Stream, int]]:
    """Every Workload of the scenario, in the order the runner's streams create them."""
    s = lay.scenario
    items = [
        (seq * st.interval_s, c, q, st, seq)
        for st in s.streams
        for (c, q) in lay.queues()
        for seq in range(st.count)
    ]
    items.sort(key=lambda i: (i[0], i[1], i[2], i[3].cls))
    return [(c, q, st, seq) for _, c, q, st, seq in items]


class Run:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.lay = Layout(scenario.load(opts.scenario), "mem")
        self.ctl = Controller(cast(Any, None))  # never run: no request is ever made
        self.api = ApiServer(self.ctl.cache, self.lay)
        self.now = EPOCH
        self.running: collections.deque[str] = collections.deque()
        self.digest = hashlib.sha256()
        self.counts: collections.Counter[str] = collections.Counter()
        self.pending_budget = 0.0
        self.rss: list[tuple[str, float, float]] = []

    def setup(self) -> None:
        lay, api = self.lay, self.api
        api.create(k.NAMESPACES, objects.namespace(lay), self.now)
        api.create(k.RESOURCE_FLAVORS, objects.flavor(lay), self.now)
        for c in range(lay.scenario.cohorts):
            api.create(k.COHORTS, objects.cohort(lay, c), self.now)
        for c, q in lay.queues():
            api.create(k.CLUSTER_QUEUES, objects.cluster_queue(lay, c, q), self.now)
            api.create(k.LOCAL_QUEUES, objects.local_queue(lay, c, q), self.now)
        self.ctl.gc.start()

    def cycle(self) -> None:
        result = self.ctl.sched.run_cycle(self.now)
        self._record(result)
        for adm in result.admitted:
            wl = self._get(adm.key)
            if wl is not None and not WorkloadView(wl).holds_quota:
                self._write(adm.key, status.admit(wl, adm.admission, self.now))
                self.running.append(adm.key)
                self.counts["admitted"] += 1
        for p in result.preemptions:
            self._evict(p.victim, lambda wl, p=p: status.preempted(wl, p, self.now))
        for e in result.evictions:
            self._evict(e.key, None)
        self.pending_budget += self.opts.pending_per_s * self.opts.cycle_s
        for info in result.pending:
            if self.pending_budget < 1:
                break
            wl = self._get(info.key)
            patch = None if wl is None else status.pending(wl, info.reason, info.message, self.now)
            if patch is not None:
                self._write(info.key, patch)
                self.pending_budget -= 1
                self.counts["pending_writes"] += 1
        self.pending_budget = min(self.pending_budget, 200.0)  # the pacer's burst
        self.ctl.observer.after_cycle(self.now)
        self.ctl.gc.tick()
        while self.ctl.keys.queue.pop_nowait() is not None:  # the workers' keys: served
            pass

    def _record(self, result: CycleResult) -> None:
        for adm in result.admitted:
            flavors = [sorted(ps.flavors.items()) for ps in adm.admission.podsets]
            self.digest.update(f"A{adm.key}|{adm.admission.cluster_queue}|{flavors};".encode())
        for p in result.preemptions:
            self.digest.update(f"P{p.victim}|{p.preemptor}|{p.reason};".encode())
        self.digest.update(b"/")

    def _evict(self, key: str, first: Any) -> None:
        """Preempted (or evicted), then requeued once its pods are gone."""
        wl = self._get(key)
        if wl is None or not WorkloadView(wl).holds_quota:
            return
        if first is not None:
            wl = self._write(key, first(wl)) or wl
        reason = names.REASON_EVICTED_PREEMPTION
        wl = self._write(key, status.evicted(wl, reason, "preempted", self.now)) or wl
        self._write(key, status.requeued(wl, self.now, status.admitted_seconds(wl, self.now)))
        self.ctl.core.requeue_workload(key)  # as the reconciler does once the write landed
        self.counts["evicted"] += 1

    def finish(self, n: int) -> None:
        while n > 0 and self.running:
            key = self.running.popleft()
            wl = self._get(key)
            if (
                wl is None
                or not WorkloadView(wl).holds_quota
                or WorkloadView(wl).is_true(names.COND_FINISHED)
            ):
                continue  # evicted since: it comes back through the queue
            conds = (wl.get("status") or {}).get("conditions") or []
            done = {
                "type": names.COND_FINISHED,
                "status": "True",
                "reason": names.REASON_FINISHED_SUCCEEDED,
                "message": "bench: ran 0.15s",
                "lastTransitionTime": convert.format_time(self.now),
            }
            patch = {"metadata": {"resourceVersion": wl["metadata"]["resourceVersion"]}}
            self._write(key, {**patch, "status": {"conditions": [*conds, done]}})
            self.counts["finished"] += 1
            n -= 1

    def _get(self, key: str) -> dict[str, Any] | None:
        ns, _, name = key.partition("/")
        return self.ctl.cache.get(k.WORKLOADS, name, ns)

    def _write(self, key: str, patch: dict[str, Any]) -> dict[str, Any] | None:
        self.counts["status_writes"] += 1
        return self.api.patch_status(key.partition("/")[2], patch, self.now)

    def sample(self, phase: str) -> None:
        s = procstat.sample(os.getpid())
        self.rss.append((phase, round(s.rss_mb, 1), round(s.peak_rss_mb, 1)))

    def run(self) -> dict[str, Any]:
        opts = self.opts
        t0 = time.perf_counter()
        self.setup()
        order = creation_order(self.lay)[: opts.limit]
        per_cycle = max(1, round(opts.create_per_s * opts.cycle_s))
        finishes = opts.finish_per_s * opts.cycle_s
        owed = 0.0
        for start in range(0, len(order), per_cycle):
            for c, q, st, seq in order[start : start + per_cycle]:
                self.api.create(k.WORKLOADS, objects.workload(self.lay, c, q, st, seq), self.now)
            self.now += opts.cycle_s
            owed += finishes
            self.finish(int(owed))
            owed -= int(owed)
            self.cycle()
        self.sample("created")
        report: dict[str, Any] = {"created_s": round(self.now - EPOCH)}
        if opts.sizes:
            report["at_created"] = self.sizes()
        if opts.trace:
            report["top_at_created"] = top_sites(tracemalloc.take_snapshot(), opts.top)
        while self.counts["finished"] < len(order) and self.now - EPOCH < 20_000:
            self.now += opts.cycle_s
            owed += finishes
            self.finish(int(owed))
            owed -= int(owed)
            self.cycle()
        self.sample("drained")
        if opts.sizes:
            report["at_drained"] = self.sizes()
        if opts.trace:
            report["top_at_drained"] = top_sites(tracemalloc.take_snapshot(), opts.top)
        peak = max(r[2] for r in self.rss)
        report.update(
            workloads=len(order),
            virtual_s=round(self.now - EPOCH),
            wall_s=round(time.perf_counter() - t0, 1),
            counts=dict(self.counts),
            watch_lines=self.api.lines,
            rss_mb={phase: rss for phase, rss, _ in self.rss},
            peak_rss_mb=peak,
            digest=self.digest.hexdigest()[:16],
        )
        return report

    def sizes(self) -> dict[str, float]:
        """Deep sizes in MB; what the cache and core share is counted once, with the cache."""
        gc.collect()
        seen: set[int] = set()
        cache = deep_size(self.ctl.cache.store(k.WORKLOADS).objects, seen)
        core = deep_size(self.ctl.sched, seen)
        return {
            "cache_workloads_mb": round(cache / 2**20, 1),
            "core_mb": round(core / 2**20, 1),
            "core_workloads": len(self.ctl.sched.workloads()),
        }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench memory", description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="large-scale")
    ap.add_argument("--create-per-s", type=float, default=140.0)
    ap.add_argument("--finish-per-s", type=float, default=45.0)
    ap.add_argument("--pending-per-s", type=float, default=20.0)
    ap.add_argument("--cycle-s", type=float, default=2.0, help="virtual seconds between cycles")
    ap.add_argument("--limit", type=int, default=None, help="only the first N Workloads")
    ap.add_argument("--sizes", action="store_true", help="deep sizes of cache and core")
    ap.add_argument("--trace", action="store_true", help="tracemalloc top allocation sites")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    opts = Options(
        scenario=args.scenario,
        create_per_s=args.create_per_s,
        finish_per_s=args.finish_per_s,
        pending_per_s=args.pending_per_s,
        cycle_s=args.cycle_s,
        limit=args.limit,
        trace=args.trace,
        sizes=args.sizes,
        top=args.top,
    )
    if opts.trace:
        tracemalloc.start(1)
    report = Run(opts).run()
    for phase in ("top_at_created", "top_at_drained"):
        for line in report.pop(phase, []):
            print(f"{phase}: {line}", file=sys.stderr)
    print(json.dumps(report))
    return 0
