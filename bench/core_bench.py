"""Benchmark of the scheduling core alone: admission throughput and full-cycle latency.

Scales (issue 3): small = 30 ClusterQueues in 5 cohorts with 15,000 pending workloads; large =
1,000 ClusterQueues in 10 cohorts with 50,000 pending. Every queue has a CPU/memory group and a
GPU group with two flavors (h100, then a100) and may borrow inside its cohort; workloads come in a
handful of realistic shapes and four priorities.

Shapes: `gpu` (the default) is the above. `fleet` is the cluster bench's shape
(bench/scenarios/large-scale.yaml): one flavor of one resource, nominal 20 and borrowingLimit 100
per queue, reclaimWithinCohort Any and withinClusterQueue LowerPriority, three classes (1 unit at
priority 50, 5 at 100, 20 at 200, in the scenario's 35:11:4 mix). Work arrives as a stream, not a
backlog: each cycle brings `--load` x the nominal quota's worth of work (the scenario offers about
1.4x), and a workload finishes a fixed number of cycles after its admission (2, 4, 8: the
scenario's runtimes 150, 350, 700 ms), so a backlog of mixed priorities builds up as in the
cluster bench and the priorities contend. `tas` is the same stream with the cluster bench's topology
scenario (bench/scenarios/tas.yaml; `bench/tas_core.py`): its 640 nodes and nine classes (runs
of 2, 5 and 10 cycles); every evaluation places a gang on the nodes.

The run: one cycle admits what fits into the empty cluster (`first_cycle_ms`); then each steady
cycle follows a batch of completions spread over every cohort (so every cohort tree has freed
quota and every queue is looked at again, a full cycle) and as many new arrivals, keeping the
backlog at its size. `admissions_per_s` = workloads admitted / time spent inside `run_cycle`.
`preemptions` counts them by reason; `evictions_per_admission` = preemptions / admissions (a
victim is requeued at once and counts again when readmitted). The last line printed is one JSON
object.

`--gc-freeze` runs CPython's collector as the controller does (`controller/gcpolicy.py`):
`gc.freeze()` once the backlog is loaded and again after a cycle when 5 s passed since the last
freeze. Without it (the default), every full collection scans the whole 50,000-workload
backlog (~0.1 s at large scale) inside whichever cycle it falls in.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import io
import json
import pstats
import random
import statistics
import sys
import time
from dataclasses import dataclass

from bench import tas_core
from queuectl.core import (
    GPU,
    ClusterQueue,
    Cohort,
    Flavor,
    FlavorQuotas,
    PodSet,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
    Scheduler,
    Workload,
)


@dataclass(frozen=True)
class Scale:
    queues: int
    cohorts: int
    pending: int


SCALES = {
    "small": Scale(queues=30, cohorts=5, pending=15_000),
    "large": Scale(queues=1_000, cohorts=10, pending=50_000),
}
GIB = 1024**3
# (pods, GPUs per pod, millicores per pod, memory per pod): inference, fine-tune, training gangs
SHAPES = [
    (1, 1, 4_000, 32 * GIB),
    (1, 2, 8_000, 64 * GIB),
    (1, 4, 16_000, 128 * GIB),
    (2, 8, 32_000, 512 * GIB),
    (4, 8, 32_000, 512 * GIB),
]
SHAPE_WEIGHTS = [40, 25, 20, 10, 5]
# fleet: (units, priority, cycles it runs) of the cluster bench's small, medium and large class
FLEET_CLASSES = [(1, 50, 2), (5, 100, 4), (20, 200, 8)]
FLEET_WEIGHTS = [35, 11, 4]


def build_fleet(scale: Scale) -> tuple[Scheduler, list[str]]:
    s = Scheduler()
    s.upsert_flavor(Flavor("default"))
    for c in range(scale.cohorts):
        s.upsert_cohort(Cohort(f"dept-{c}"))
    names = []
    for i in range(scale.queues):
        name = f"team-{i:04}"
        names.append(name)
        group = ResourceGroup(
            ("cpu",),
            (FlavorQuotas("default", (ResourceQuota("cpu", 20, borrowing_limit=100),)),),
        )
        s.upsert_cluster_queue(
            ClusterQueue(
                name,
                f"dept-{i % scale.cohorts}",
                (group,),
                preemption=PreemptionPolicy(
                    reclaim_within_cohort="Any", within_cluster_queue="LowerPriority"
                ),
            )
        )
    return s, names


def fleet_workload(seq: int, queues: list[str], rnd: random.Random, now: float) -> Workload:
    units, priority, _ = rnd.choices(FLEET_CLASSES, FLEET_WEIGHTS)[0]
    return Workload(
        key=f"ns-{seq % 97}/job-{seq:07}",
        cluster_queue=rnd.choice(queues),
        podsets=(PodSet("main", 1, {"cpu": units}),),
        priority=priority,
        created=now + seq * 1e-6,
    )


FLEET_RUNTIME = {priority: cycles for _, priority, cycles in FLEET_CLASSES}
FLEET_NOMINAL = 20
# Units x cycles that one arrival brings, on average.
FLEET_WORK = sum(
    u * c * n for (u, _, c), n in zip(FLEET_CLASSES, FLEET_WEIGHTS, strict=True)
) / sum(FLEET_WEIGHTS)


def units(w: Workload) -> int:
    """What a workload holds of the contended resource: GPUs, the fleet's units of cpu, or
    tas's millicores."""
    return sum(ps.count * ps.requests.get(GPU, ps.requests.get("cpu", 0)) for ps in w.podsets)


def build(scale: Scale, rnd: random.Random) -> tuple[Scheduler, list[str]]:
    s = Scheduler()
    for name in ("default", "h100", "a100"):
        s.upsert_flavor(Flavor(name))
    for c in range(scale.cohorts):
        s.upsert_cohort(Cohort(f"dept-{c}", "org"))
    s.upsert_cohort(Cohort("org"))
    names = []
    for i in range(scale.queues):
        name = f"team-{i:04}"
        names.append(name)
        cpu = ResourceGroup(
            ("cpu", "memory"),
            (
                FlavorQuotas(
                    "default", (ResourceQuota("cpu", 256_000), ResourceQuota("memory", 4096 * GIB))
                ),
            ),
        )
        gpu = ResourceGroup(
            (GPU,),
            (
                FlavorQuotas("h100", (ResourceQuota(GPU, 8, borrowing_limit=16),)),
                FlavorQuotas("a100", (ResourceQuota(GPU, 8, borrowing_limit=16),)),
            ),
        )
        s.upsert_cluster_queue(
            ClusterQueue(
                name,
                f"dept-{i % scale.cohorts}",
                (cpu, gpu),
                preemption=PreemptionPolicy(
                    reclaim_within_cohort="Any", within_cluster_queue="LowerPriority"
                ),
            )
        )
    return s, names


def workload(seq: int, queues: list[str], rnd: random.Random, now: float) -> Workload:
    pods, gpus, cpu, mem = rnd.choices(SHAPES, SHAPE_WEIGHTS)[0]
    return Workload(
        key=f"ns-{seq % 97}/job-{seq:07}",
        cluster_queue=rnd.choice(queues),
        podsets=(PodSet("main", pods, {GPU: gpus, "cpu": cpu, "memory": mem}),),
        priority=rnd.choice((0, 0, 100, 1000)),
        created=now + seq * 1e-6,
    )


def run(
    scale_name: str,
    cycles: int,
    churn: float,
    seed: int,
    digest: bool = False,
    shape: str = "gpu",
    load: float = 1.4,
    gc_freeze: bool = False,
) -> dict[str, object]:
    scale = SCALES[scale_name]
    rnd = random.Random(seed)
    t0 = time.perf_counter()
    fleet = shape in ("fleet", "tas")  # a stream of arrivals that finish after fixed cycles
    if shape == "tas":
        s, queues = tas_core.build_tas(scale.queues, scale.cohorts)
        make, runtime = tas_core.tas_workload, tas_core.RUNTIME
        arrivals = round(load * tas_core.NOMINAL * scale.queues / tas_core.WORK)
    else:
        s, queues = build_fleet(scale) if fleet else build(scale, rnd)
        make = fleet_workload if fleet else workload
        runtime = FLEET_RUNTIME
        arrivals = round(load * FLEET_NOMINAL * scale.queues / FLEET_WORK)
    priority: dict[str, int] = {}
    size: dict[str, int] = {}
    ends: dict[str, float] = {}  # fleet, tas: when each running workload finishes
    seq = 0
    initial = arrivals if fleet else scale.pending
    for _ in range(initial):
        seq += 1
        w = make(seq, queues, rnd, 0.0)
        priority[w.key] = w.priority
        size[w.key] = units(w)
        s.upsert_workload(w)
    setup_s = time.perf_counter() - t0
    frozen_at = time.perf_counter()
    if gc_freeze:
        gc.freeze()  # the controller freezes once its caches have synced

    running: list[str] = []
    decisions = hashlib.sha256()
    actions = hashlib.sha256()
    cycle_s: list[float] = []
    cycle_cpu_s: list[float] = []
    admitted_per_cycle: list[int] = []
    evaluated = 0
    by_reason: dict[str, int] = {}
    by_priorities: dict[str, int] = {}
    started: dict[str, float] = {}
    lost = 0.0
    event_s = 0.0
    now = 1.0
    for c in range(cycles + 1):
        if c:
            t = time.perf_counter()
            if fleet:
                done = [i for i, key in enumerate(running) if ends[key] <= now]
            else:
                done = rnd.sample(range(len(running)), k=max(1, int(len(running) * churn)))
            for i in sorted(done, reverse=True):
                s.delete_workload(running[i])
                ends.pop(running[i], None)
                running[i] = running[-1]
                running.pop()
            for _ in range(arrivals if fleet else len(done)):
                seq += 1
                w = make(seq, queues, rnd, now)
                priority[w.key] = w.priority
                size[w.key] = units(w)
                s.upsert_workload(w)
            event_s += time.perf_counter() - t
        t, cpu = time.perf_counter(), time.process_time()
        result = s.run_cycle(now)
        cycle_s.append(time.perf_counter() - t)
        cycle_cpu_s.append(time.process_time() - cpu)
        running.extend(a.key for a in result.admitted)
        for a in result.admitted:
            started[a.key] = now
        if fleet:
            for a in result.admitted:
                ends[a.key] = now + runtime[priority[a.key]]
        if digest:
            acted = (c, result.admitted, result.preemptions)
            actions.update(repr(acted).encode())
            decisions.update(repr((*acted, result.pending)).encode())
        # Victims stop at once here: the controller would requeue them after their grace.
        for p in result.preemptions:
            by_reason[p.reason] = by_reason.get(p.reason, 0) + 1
            lost += size[p.victim] * (now - started[p.victim])
            pair = f"{priority[p.preemptor]}>{priority[p.victim]}"
            by_priorities[pair] = by_priorities.get(pair, 0) + 1
            s.requeue_workload(p.victim)
            running.remove(p.victim)
            ends.pop(p.victim, None)
        admitted_per_cycle.append(len(result.admitted))
        evaluated += result.evaluated
        if gc_freeze and time.perf_counter() - frozen_at >= 5.0:
            gc.freeze()  # and again after a cycle when 5 s passed (GcOptions.freeze_every_s)
            frozen_at = time.perf_counter()
        now += 1.0

    if gc_freeze:
        gc.unfreeze()  # hand what was frozen back (a caller may run again in this process)
    steady = cycle_s[1:] or cycle_s
    steady_admitted = sum(admitted_per_cycle[1:])
    ms = sorted(x * 1000 for x in steady)
    admitted = sum(admitted_per_cycle)
    preempted = sum(by_reason.values())
    figures: dict[str, object] = {
        "scale": scale_name,
        "shape": shape,
        "cluster_queues": scale.queues,
        "cohorts": scale.cohorts,
        "pending_start": initial,
        "setup_s": round(setup_s, 3),
        "first_cycle_ms": round(cycle_s[0] * 1000, 2),
        "first_cycle_admitted": admitted_per_cycle[0],
        "cycles": len(cycle_s),
        "admitted": admitted,
        "preempted": preempted,
        "preemptions": dict(sorted(by_reason.items())),
        "preemptions_by_priority": dict(sorted(by_priorities.items())),
        "evictions_per_admission": round(preempted / max(1, admitted), 4),
        # units (fleet) or GPUs (gpu) x cycles of admitted runtime that preemption threw away
        "evicted_unit_cycles": round(lost),
        "running_end": len(running),
        "evaluated": evaluated,
        "admissions_per_s": round(sum(admitted_per_cycle) / sum(cycle_s), 1),
        "evaluations_per_s": round(evaluated / sum(cycle_s), 1),
        "steady_admissions_per_s": round(steady_admitted / sum(steady), 1),
        "cycle_ms_p50": round(statistics.median(ms), 2),
        "cycle_ms_p95": round(ms[min(len(ms) - 1, int(len(ms) * 0.95))], 2),
        "cycle_ms_p99": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2),
        "cycle_ms_max": round(ms[-1], 2),
        # CPU time is steadier than wall time when the cores are shared with other work.
        "admissions_per_cpu_s": round(sum(admitted_per_cycle) / sum(cycle_cpu_s), 1),
        "cycle_cpu_ms_p50": round(statistics.median(cycle_cpu_s[1:] or cycle_cpu_s) * 1000, 2),
        "events_us_per_event": round(event_s / max(1, seq - initial) / 2 * 1e6, 1),
        "gc_freeze": gc_freeze,
    }
    if digest:
        figures["digest"] = decisions.hexdigest()[:16]
        # Admissions and preemptions only: equal when a change alters just pending messages.
        figures["actions_digest"] = actions.hexdigest()[:16]
    return figures


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench core", description=__doc__.splitlines()[0])
    ap.add_argument("--scale", choices=sorted(SCALES), default="small")
    ap.add_argument("--cycles", type=int, default=40, help="steady cycles after the first")
    ap.add_argument(
        "--churn",
        type=float,
        default=0.02,
        help="fraction of running workloads that finish before each steady cycle",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--shape",
        choices=("gpu", "fleet", "tas"),
        default="gpu",
        help="gpu: GPU shapes with two flavors; fleet: the cluster bench's queues and classes; "
        "tas: fleet's stream on the tas scenario's 640 nodes with topology (bench/tas_core.py)",
    )
    ap.add_argument("--profile", action="store_true", help="cProfile; top functions to stderr")
    ap.add_argument(
        "--digest",
        action="store_true",
        help="hash every cycle's admissions, preemptions and pending reasons (compare decisions)",
    )
    ap.add_argument(
        "--load",
        type=float,
        default=1.4,
        help="fleet: work arriving each cycle, as a multiple of the nominal quota",
    )
    ap.add_argument(
        "--gc-freeze",
        action="store_true",
        help="freeze CPython's collector after loading and every 5 s, as the controller does",
    )
    args = ap.parse_args(argv)
    call = (
        args.scale, args.cycles, args.churn, args.seed, args.digest, args.shape, args.load,
        args.gc_freeze,
    )  # fmt: skip
    if args.profile:
        prof = cProfile.Profile()
        figures = prof.runcall(run, *call)
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue(), file=sys.stderr)
    else:
        figures = run(*call)
    print(json.dumps(figures))
    return 0
