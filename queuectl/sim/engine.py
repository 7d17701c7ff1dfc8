"""The simulation loop: the real `Scheduler` on a virtual clock.

Events (submissions, completions, the end of a victim's grace period, node failures and repairs,
the core's own `next_wakeup`) sit on one heap; every event of the same instant is applied, then
one cycle runs at that instant, as the controller runs a cycle after a burst of watch events.
What the cycle answers is applied as the controller's contract says (docs/design/core.md):
an admission starts the job's remaining work; a preemption lets the victim run until its
deadline, then its pods are gone (`requeue_workload`) and the work since its last checkpoint is
lost; an eviction for maximum execution time stops the job for good.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from queuectl.core import (
    DEFAULT_PATIENCE_SECONDS,
    GPU,
    Admission,
    Node,
    Scheduler,
    Workload,
)
from queuectl.sim.config import SimConfig
from queuectl.sim.eta_check import EtaProbe
from queuectl.sim.fleet import SimFleet
from queuectl.sim.stats import JobRecord, Recorder
from queuectl.sim.trace import Job
from queuectl.sim.workloads import build_workload

Observer = Callable[[float, Mapping[str, Mapping[str, int]]], None]

MAX_EXEC_REASON = "MaximumExecutionTimeExceeded"
MAX_CYCLES_AT_ONE_INSTANT = 1000
"""The core may ask for a cycle at the same instant (a head that waits instead of preempting)
for a bounded number of cycles; far beyond that bound the simulation stops with an error."""

# Event kinds, in the order they apply within one instant.
_FINISH, _SUSPEND, _REPAIR, _FAIL, _SUBMIT, _WAKE = range(6)


@dataclass(frozen=True, slots=True)
class SimOptions:
    node_failures: float = 0.0
    """Failures per node per day (Poisson); a failed node evicts what runs on it."""
    repair_seconds: float = 4 * 3600.0
    seed: int = 0
    """Seeds the node failures (the trace has its own seed)."""
    buckets: int = 200
    """Time buckets of the series the report plots."""
    preemption_patience: float = DEFAULT_PATIENCE_SECONDS
    """As the controller's `--preemption-patience-seconds` (`core.patience`)."""
    fair_preemption: tuple[str, ...] = ()
    """Fair-sharing preemption's rules in order (`core.fair_preempt`); empty: off."""
    eta_every: int = 0
    """Judge the ETA at every this-many-th submission (`eta_check`); 0: off."""


@dataclass(slots=True)
class _Run:
    job: Job
    cq: str
    workload: Workload
    remaining: float = 0.0
    token: int = 0
    start: float | None = None
    """Set while admitted (running or draining)."""
    draining: bool = False
    done: bool = False

    def __post_init__(self) -> None:
        self.remaining = self.job.runtime

    flavors: dict[str, int] = field(default_factory=dict)
    """flavor -> GPUs held while admitted."""
    placed: list[tuple[str, int]] = field(default_factory=list)
    """(node, GPUs) while admitted."""


@dataclass(slots=True)
class SimResult:
    summary: dict[str, object]
    recorder: Recorder


class _Engine:
    def __init__(
        self,
        config: SimConfig,
        nodes: tuple[Node, ...],
        jobs: tuple[Job, ...],
        options: SimOptions,
        progress: Callable[[float], None] | None,
        observe: Observer | None = None,
    ) -> None:
        self.config, self.options, self.progress = config, options, progress
        self.observe = observe
        self.sched = Scheduler(
            preemption_patience=options.preemption_patience,
            fair_preemption=options.fair_preemption,
        )
        for f in config.flavors:
            self.sched.upsert_flavor(f)
        for t in config.topologies:
            self.sched.upsert_topology(t)
        for c in config.cohorts:
            self.sched.upsert_cohort(c)
        for q in config.cluster_queues:
            self.sched.upsert_cluster_queue(q)
        for n in nodes:
            self.sched.upsert_node(n)
        self.fleet = SimFleet(nodes, config.flavors)
        self.runs = {j.key: _Run(j, *build_workload(config, j)) for j in jobs}
        last_submit = max((j.submit for j in jobs), default=0.0)
        width = max(60.0, last_submit / max(1, options.buckets))
        nominal = {
            q.name: {
                fq.name: sum(r.nominal for r in fq.resources if r.name == GPU)
                for g in q.resource_groups
                for fq in g.flavors
            }
            for q in config.cluster_queues
        }
        self.rec = Recorder(width, nominal)
        for j in jobs:
            self.rec.jobs[j.key] = JobRecord(
                team=j.namespace,
                cluster_queue=self.runs[j.key].cq,
                priority_class=j.priority_class or "(none)",
                gpus=j.pods * j.gpus,
                submit=j.submit,
            )
        self.rec.capacity = self.fleet.capacity
        self.pending: set[str] = set()
        self.pending_sizes: Counter[int] = Counter()
        self.heap: list[tuple[float, int, int, str, int]] = []
        self.seq = 0
        self.live = 0
        """Events on the heap other than node failures: none left, nothing can
        change any more (every running job has its completion on the heap)."""
        self.wakeups: set[float] = set()
        for j in jobs:
            self._push(j.submit, _SUBMIT, j.key)
        self.total = len(jobs)
        self.finished = 0
        self.rng = random.Random(options.seed)
        self.eta = EtaProbe(options.eta_every) if options.eta_every > 0 else None
        if options.node_failures > 0 and nodes:
            self._next_failure(0.0)

    # --- the event heap -------------------------------------------------------------------
    def _push(self, at: float, kind: int, key: str = "", token: int = 0) -> None:
        self.seq += 1
        if kind != _FAIL:
            self.live += 1
        heapq.heappush(self.heap, (at, kind, self.seq, key, token))

    def _next_failure(self, now: float) -> None:
        per_second = self.options.node_failures * len(self.fleet.nodes) / 86400.0
        self._push(now + self.rng.expovariate(per_second), _FAIL)

    # --- the loop -------------------------------------------------------------------------
    def run(self) -> SimResult:
        at_instant, last_t = 0, None
        while self.heap:
            if self.live == 0:
                break
            t = self.heap[0][0]
            self.rec.advance(t, self._depth, self._fragmentation)
            while self.heap and self.heap[0][0] == t:
                _, kind, _, key, token = heapq.heappop(self.heap)
                self.rec.events += 1
                if kind != _FAIL:
                    self.live -= 1
                self._apply(kind, key, token, t)
            at_instant = at_instant + 1 if t == last_t else 0
            if at_instant > MAX_CYCLES_AT_ONE_INSTANT:
                raise RuntimeError(f"the core asked for cycles at t={t} without end")
            last_t = t
            if self.eta is not None:
                self.eta.before_cycle(self.sched, t)
            self._cycle(t)
            if self.observe is not None:
                self.observe(t, self.rec.usage)
            if self.progress is not None and self.rec.cycles % 512 == 0:
                self.progress(self.finished / self.total if self.total else 1.0)
        if self.progress is not None:
            self.progress(1.0)
        never = {}
        for key, run in self.runs.items():
            if run.start is None and not run.done and self.rec.jobs[key].admitted is None:
                info = self.sched.pending_info(key)
                never[key] = f"{info.reason}: {info.message}" if info else "never admitted"
        summary = self.rec.summary(never)
        if self.eta is not None:
            summary["eta_error"] = self.eta.summary(self.rec.jobs)
        return SimResult(summary, self.rec)

    def _apply(self, kind: int, key: str, token: int, t: float) -> None:
        if kind == _SUBMIT:
            run = self.runs[key]
            self.sched.upsert_workload(run.workload)
            self._queued(key, +1)
            if self.eta is not None:
                self.eta.submitted(key)
        elif kind == _FINISH:
            run = self.runs[key]
            if run.token == token and run.start is not None and not run.done:
                self._release(run)
                run.done = True
                self.sched.delete_workload(key)
                self.rec.jobs[key].finished = t
                self.finished += 1
                if self.eta is not None:
                    self.eta.finished(run.cq, run.workload.priority, run.job.runtime)
        elif kind == _SUSPEND:
            run = self.runs[key]
            if run.token == token and run.start is not None and not run.done:
                self.rec.lost_work(key, self._stop(run, t, front=False))
        elif kind == _FAIL:
            self._fail_node(t)
        elif kind == _REPAIR:
            self.rec.capacity += self.fleet.repair(key)
            self.sched.upsert_node(self.fleet.nodes[key])
        elif kind == _WAKE:
            self.wakeups.discard(t)

    def _cycle(self, t: float) -> None:
        result = self.sched.run_cycle(t)
        self.rec.cycles += 1
        for a in result.admitted:
            self._start(self.runs[a.key], a.admission, t)
        for p in result.preemptions:
            run = self.runs[p.victim]
            if run.start is None or run.draining or run.done:
                continue
            run.draining = True
            self.rec.preempted(p.victim, p.reason, sum(run.flavors.values()))
            self._push(max(t, p.deadline), _SUSPEND, p.victim, run.token)
        for e in result.evictions:
            run = self.runs[e.key]
            if run.start is None or run.done:
                continue
            if e.reason == MAX_EXEC_REASON:
                self._release(run)
                run.done = True
                self.sched.delete_workload(e.key)
                self.rec.jobs[e.key].finished = t
                self.rec.jobs[e.key].stopped = True
            else:
                self._stop(run, t, front=False)
            self._wake(t)  # its quota is free now: the next cycle, at this same instant
        if result.next_wakeup is not None:
            self._wake(max(t, result.next_wakeup))

    def _wake(self, at: float) -> None:
        if at not in self.wakeups:
            self.wakeups.add(at)
            self._push(at, _WAKE)

    # --- a job's life ---------------------------------------------------------------------
    def _queued(self, key: str, sign: int) -> None:
        job = self.runs[key].job
        if sign > 0:
            self.pending.add(key)
        else:
            self.pending.discard(key)
        if job.gpus:
            self.pending_sizes[job.gpus] += sign
            if self.pending_sizes[job.gpus] <= 0:
                del self.pending_sizes[job.gpus]

    def _start(self, run: _Run, admission: Admission, t: float) -> None:
        key = run.job.key
        self._queued(key, -1)
        run.start, run.draining = t, False
        run.token += 1
        rec = self.rec.jobs[key]
        if rec.admitted is None:
            rec.admitted = t
        rec.admissions.append(t)
        flavors: dict[str, int] = {}
        for ps in admission.podsets:
            gpus = ps.usage.get(GPU, 0)
            if not gpus or not ps.count:
                continue
            flavor = ps.flavors.get(GPU, "")
            flavors[flavor] = flavors.get(flavor, 0) + gpus
            per_pod = gpus // ps.count if ps.count else 0
            if ps.topology is not None:
                for d in ps.topology.domains:
                    for node in d.nodes:
                        self.fleet.take(run.placed, node, per_pod * d.count)
            else:
                self.rec.unplaced_pods += self.fleet.place(run.placed, flavor, per_pod, ps.count)
        run.flavors = flavors
        self.rec.hold(run.cq, run.job.namespace, flavors, +1)
        self._push(t + run.remaining, _FINISH, key, run.token)

    def _release(self, run: _Run) -> None:
        self.fleet.release(run.placed)
        self.rec.hold(run.cq, run.job.namespace, run.flavors, -1)
        run.flavors = {}
        run.start = None

    def _stop(self, run: _Run, t: float, *, front: bool) -> float:
        """Its pods are gone before it finished: keep the work up to its last checkpoint, lose
        the rest, and queue it again. Returns the GPU-seconds lost."""
        assert run.start is not None
        done = t - run.start
        ckpt = run.job.checkpoint
        saved = (done // ckpt) * ckpt if ckpt > 0 else 0.0
        gpus = sum(run.flavors.values())
        run.remaining = max(0.0, run.remaining - saved)
        self._release(run)
        run.draining = False
        run.token += 1
        key = run.job.key
        self.sched.requeue_workload(key, front=front)
        w = run.workload
        if w.max_execution_seconds is not None:
            run.workload = replace(
                w, max_execution_seconds=max(0.0, w.max_execution_seconds - done)
            )
            current = self.sched.workload(key)
            if current is not None:
                self.sched.upsert_workload(
                    replace(current, max_execution_seconds=run.workload.max_execution_seconds)
                )
        self._queued(key, +1)
        return (done - saved) * gpus

    def _fail_node(self, t: float) -> None:
        self._next_failure(t)
        up = self.fleet.up()
        if not up:
            return
        name = self.rng.choice(up)
        self.rec.node_failures += 1
        self.rec.capacity -= self.fleet.fail(name)
        self.sched.upsert_node(replace(self.fleet.nodes[name], unschedulable=True))
        self._push(t + self.options.repair_seconds, _REPAIR, name)
        hit = sorted(
            key
            for key, run in self.runs.items()
            if run.start is not None and any(node == name for node, _ in run.placed)
        )
        for key in hit:
            lost = self._stop(self.runs[key], t, front=True)
            self.rec.failure_evictions += 1
            self.rec.failure_lost += lost

    # --- samples for the series -----------------------------------------------------------
    def _depth(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for key in self.pending:
            out[self.rec.jobs[key].priority_class] += 1
        return dict(sorted(out.items()))

    def _fragmentation(self) -> float:
        return self.fleet.fragmentation(self.pending_sizes)


def simulate(
    config: SimConfig,
    nodes: tuple[Node, ...],
    jobs: tuple[Job, ...],
    options: SimOptions = SimOptions(),
    progress: Callable[[float], None] | None = None,
    observe: Observer | None = None,
) -> SimResult:
    """Replay `jobs` on `nodes` under `config` through the real core; deterministic.
    `progress` hears the fraction of jobs done; `observe` (for tests) hears, after every
    cycle, the time and GPUs held per ClusterQueue and flavor."""
    return _Engine(config, nodes, jobs, options, progress, observe).run()
