"""Issue 15: the simulator and the controller share the core, so they admit in the same order.

One short trace runs twice: (1) through `queuectl.sim.simulate` on a virtual clock, and (2) on
the real control plane: the same manifests applied, the standard kwok GPU fleet, each Job created
at its submit time, its pods succeeding `runtime` seconds after they start (the kwok Stage's
testenv.queuectl.io/succeed-after). Then every admission,
re-admissions after a preemption included, is compared: within a cohort (or a ClusterQueue on
its own) two admissions the simulator makes at different instants happen in that order on the
cluster; admissions of one simulated instant (one cycle) may land in any order among
themselves. Independent cohorts are not ordered against each other: between them only latency
differs, not a decision. docs/design/simulate.md ("Replay against the controller") says why.

`crowded()` keeps events of one group at least 3 ticks (6 s) apart: the controller's latency
from a pod's end to the next admission is about a second a link, and chains here are at most
three links long (measured up to 3.7 s behind the simulator). Closer events could be reordered by
latency alone, and a different order must only ever mean a different decision.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from e2e.harness import (
    WL,
    ControllerProcess,
    apply,
    cluster_queue,
    condition,
    flavor,
    gpu_job,
    is_true,
    local_queue,
    priority_class,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.sim import Job, SimConfig, load_config, parse_nodes, simulate
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.invariants import request_json
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet

GRACE = 6
"""Seconds of notice the `low` class gives a victim."""
FLEET = "8x8:h100"
"""The standard fleet's H100 nodes, as the simulator reads them (the A100s serve no queue here)."""

TICK = 2.0
"""Seconds per time unit of the rows below (both the simulator and the cluster run in seconds)."""

# name, submit, LocalQueue, pods, GPUs per pod, runtime (submit and runtime in TICKs), class
ROWS: tuple[tuple[str, float, str, int, int, float, str], ...] = (
    # cohort: a and b, 8 GPUs each, borrowing from each other, no preemption
    ("a-01", 0, "lq-a", 1, 8, 16, ""),
    ("a-02", 3, "lq-a", 1, 8, 30, "low"),  # borrows b's idle 8: the cohort is full
    ("b-01", 6, "lq-b", 1, 4, 14, ""),
    ("b-02", 9, "lq-b", 2, 2, 24, "high"),  # a gang; jumps ahead of b-01
    ("a-03", 12, "lq-a", 1, 4, 10, ""),
    ("b-03", 20, "lq-b", 1, 8, 10, ""),
    ("a-04", 23, "lq-a", 1, 2, 13, "high"),
    ("b-04", 26, "lq-b", 1, 4, 6, "low"),
    ("a-05", 53, "lq-a", 2, 4, 12, ""),
    ("b-05", 56, "lq-b", 1, 2, 6, ""),
    ("a-06", 59, "lq-a", 1, 8, 6, "low"),
    # c: 8 GPUs on its own, preemption by priority with a notice
    ("c-01", 0, "lq-c", 1, 8, 16, "low"),
    ("c-03", 3, "lq-c", 1, 4, 6, ""),  # too low to preempt; waits
    ("c-02", 6, "lq-c", 1, 4, 10, "high"),  # preempts c-01: noticed at 12 s, suspended at 18 s
    ("c-04", 26, "lq-c", 1, 2, 6, ""),
    # d: 8 GPUs on its own, BestEffortFIFO: small jobs pass a blocked big one
    ("d-01", 0, "lq-d", 1, 4, 22, ""),
    ("d-02", 3, "lq-d", 1, 8, 8, ""),  # needs all 8: waits for d-01
    ("d-03", 6, "lq-d", 1, 2, 6, ""),
    ("d-04", 9, "lq-d", 1, 2, 9, ""),
    ("d-05", 15, "lq-d", 1, 4, 8, ""),
    ("d-06", 31, "lq-d", 1, 2, 4, ""),
)


def manifests(ns: str) -> list[dict[str, Any]]:
    """What a user applies; names carry the namespace so tests stay apart."""
    cohort = f"co-{ns}"
    return [
        flavor("h100", H100),
        priority_class(f"low-{ns}", 100, grace=GRACE),
        priority_class(f"high-{ns}", 1000),
        cluster_queue(f"a-{ns}", ns, {"h100": 8}, cohortName=cohort),
        cluster_queue(f"b-{ns}", ns, {"h100": 8}, cohortName=cohort),
        cluster_queue(
            f"c-{ns}", ns, {"h100": 8}, preemption={"withinClusterQueue": "LowerPriority"}
        ),
        cluster_queue(f"d-{ns}", ns, {"h100": 8}),
        *(local_queue(f"lq-{q}", ns, f"{q}-{ns}") for q in "abcd"),
    ]


def trace(ns: str) -> tuple[Job, ...]:
    """The rows as the simulator's jobs, in submit order (as `parse_trace` gives them)."""
    jobs = (
        Job(
            name=name,
            submit=submit * TICK,
            namespace=ns,
            queue=lq,
            pods=pods,
            gpus=gpus,
            runtime=runtime * TICK,
            priority_class=f"{pc}-{ns}" if pc else "",
        )
        for name, submit, lq, pods, gpus, runtime, pc in ROWS
    )
    return tuple(sorted(jobs, key=lambda j: (j.submit, j.key)))


MARGIN = 3 * TICK
"""Least gap between two instants at which something happens in one cohort of the trace."""

Admission = tuple[str, int]
"""(job, n): the job's n-th admission, counted from 0."""


@dataclass
class Run:
    admitted: dict[Admission, float] = field(default_factory=dict)
    preempted: dict[str, list[str]] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)


def simulated(config: SimConfig, jobs: tuple[Job, ...]) -> tuple[Run, dict[str, str]]:
    """The simulator's run, and each job's ClusterQueue."""
    result = simulate(config, parse_nodes(FLEET, config), jobs)
    run, queues = Run(), {}
    for key, rec in result.recorder.jobs.items():
        job = key.split("/", 1)[1]
        queues[job] = rec.cluster_queue
        run.admitted.update({(job, n): t for n, t in enumerate(rec.admissions)})
        if rec.preemptions:
            run.preempted[job] = list(rec.preemptions)
        if rec.finished is not None:
            run.finished.add(job)
    return run, queues


def crowded(jobs: tuple[Job, ...], sim: Run, group: dict[str, str]) -> list[str]:
    """Where the trace leaves the controller's latency room to reorder what the simulator
    decides: within one group, two instants with events closer than MARGIN, or two jobs
    submitted or finishing at the same instant (the controller sees those one at a time)."""
    submits = {j.name: j.submit for j in jobs}
    ends = {job: max(t for (j, _), t in sim.admitted.items() if j == job) for job in submits}
    durations = {j.name: j.runtime for j in jobs}
    problems = []
    for g in sorted(set(group.values())):
        mine = [j for j in submits if group[j] == g]
        instants = sorted(
            {submits[j] for j in mine}
            | {t for (j, _), t in sim.admitted.items() if group[j] == g}
            | {ends[j] + durations[j] for j in mine}
        )
        problems += [f"{g}: {a:g} and {b:g}" for a, b in pairwise(instants) if b - a < MARGIN]
        for what, when in (
            ("submitted", submits),
            ("finish", {j: ends[j] + durations[j] for j in mine}),
        ):
            at: dict[float, list[str]] = {}
            for j in mine:
                at.setdefault(when[j], []).append(j)
            problems += [
                f"{g}: {', '.join(js)} {what} at {t:g}" for t, js in at.items() if len(js) > 1
            ]
    return problems


class Observer(threading.Thread):
    """Polls the namespace's Workloads and notes when each job is admitted (again), noticed
    for preemption, and finished; times are seconds since `t0` (monotonic)."""

    def __init__(self, cluster: Cluster, ns: str, t0: float, jobs: set[str]) -> None:
        super().__init__(name="replay-observer", daemon=True)
        self.cluster, self.ns, self.t0, self.jobs = cluster, ns, t0, jobs
        self.seen = Run()
        self.errors: list[str] = []
        self._holding: set[str] = set()
        self._notices: set[tuple[str, str]] = set()
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)

    def run(self) -> None:
        path = f"/apis/{names.API_VERSION}/namespaces/{self.ns}/{WL.split('.')[0]}"
        with self.cluster.api_client() as api:
            while not self._halt.is_set():
                try:
                    listed = request_json(api, "GET", path)
                except Exception as exc:  # a slow answer is retried; the test reads `errors`
                    self.errors.append(repr(exc))
                    continue
                self._note(listed["items"], time.monotonic() - self.t0)
                self._halt.wait(0.1)

    def _note(self, workloads: list[dict[str, Any]], now: float) -> None:
        for wl in workloads:
            owners = wl["metadata"].get("ownerReferences") or []
            job = next((o["name"] for o in owners if o.get("kind") == "Job"), None)
            if job not in self.jobs:
                continue
            if is_true(wl, names.COND_FINISHED):
                self.seen.finished.add(job)
            holding = is_true(wl, names.COND_ADMITTED) and not is_true(wl, names.COND_FINISHED)
            if holding and job not in self._holding:
                n = sum(1 for j, _ in self.seen.admitted if j == job)
                self.seen.admitted[(job, n)] = now
            (self._holding.add if holding else self._holding.discard)(job)
            notice = condition(wl, names.COND_PREEMPTED) or {}
            stamp = (job, str(notice.get("lastTransitionTime")))
            if notice.get("status") == "True" and stamp not in self._notices:
                self._notices.add(stamp)
                self.seen.preempted.setdefault(job, []).append(str(notice.get("reason")))


def out_of_order(
    sim: dict[Admission, float], real: dict[Admission, float], group: dict[str, str]
) -> list[str]:
    """Pairs of one group that the cluster admitted in the other order than the simulator
    (admissions of one simulated instant are not ordered among themselves)."""
    bad = []
    events = sorted(real, key=real.__getitem__)
    for i, first in enumerate(events):
        for later in events[i + 1 :]:
            seen_apart = real[first] < real[later]  # one poll apart or more: not one write burst
            if group[first[0]] == group[later[0]] and sim[first] > sim[later] and seen_apart:
                bad.append(
                    f"{later} (sim {sim[later]:g}) before {first} (sim {sim[first]:g}) in the "
                    f"simulator; the cluster admitted {first} at {real[first]:.1f} s, "
                    f"{later} at {real[later]:.1f} s"
                )
    return bad


def closest(
    sim: dict[Admission, float], real: dict[Admission, float], group: dict[str, str]
) -> float:
    """The least real time between two admissions of one group that the simulator orders (how
    near the cluster came to reordering them; negative when it did)."""
    gaps = [
        real[b] - real[a]
        for a in real
        for b in real
        if group[a[0]] == group[b[0]] and a in sim and b in sim and sim[a] < sim[b]
    ]
    return min(gaps, default=float("inf"))


def test_the_controller_admits_a_trace_in_the_order_the_simulator_does(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    ns = namespace
    docs = manifests(ns)
    config = load_config((f"manifest {i}", d) for i, d in enumerate(docs))
    jobs = trace(ns)
    sim, queue_of = simulated(config, jobs)
    # the trace exercises what it claims: borrowing, a gang, one preemption with a re-admission
    assert sim.preempted == {"c-01": [names.REASON_PREEMPTED_WITHIN_CQ]}
    assert ("c-01", 1) in sim.admitted
    assert sim.finished == {j.name for j in jobs}
    cohort = {q.name: q.cohort or q.name for q in config.cluster_queues}
    group = {job: cohort[cq] for job, cq in queue_of.items()}
    assert crowded(jobs, sim, group) == []

    apply(control_plane, *docs)
    # warm up (webhooks, informers, the first cycle): under load the first admission took 2.3 s,
    # a delay every chain of the trace inherited
    apply(control_plane, gpu_job("warm-up", ns, "lq-a", gpus=1, runs_for="0s"))
    wait_for(
        "the warm-up job done",
        lambda: is_true(workload_of(control_plane, ns, "warm-up"), names.COND_FINISHED),
    )
    path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    t0 = time.monotonic()
    observer = Observer(control_plane, ns, t0, {j.name for j in jobs})
    observer.start()
    late: dict[str, float] = {}
    try:
        with control_plane.api_client() as api:
            for job in jobs:  # sorted by submit time
                time.sleep(max(0.0, t0 + job.submit - time.monotonic()))
                body = gpu_job(
                    job.name,
                    ns,
                    job.queue,
                    pods=job.pods,
                    gpus=job.gpus,
                    priority=job.priority_class or None,
                    runs_for=f"{job.runtime:g}s",
                )
                request_json(api, "POST", path, body)
                late[job.name] = time.monotonic() - t0 - job.submit
        span = max(t for t in sim.admitted.values()) + max(j.runtime for j in jobs)
        wait_for(
            "every job of the trace finished",
            lambda: observer.seen.finished >= sim.finished,
            timeout=2 * span + 60,
            interval=1.0,
        )
    finally:
        observer.stop()
    real = observer.seen

    drift = {a: real.admitted[a] - sim.admitted[a] for a in real.admitted if a in sim.admitted}
    print(
        f"\nreplay: {len(real.admitted)} admissions; cluster minus simulator: "
        f"min {min(drift.values()):.2f} s, max {max(drift.values()):.2f} s; "
        f"Job creation at most {max(late.values()):.2f} s late; "
        f"observer errors {len(observer.errors)}; "
        f"closest call {closest(sim.admitted, real.admitted, group):.2f} s"
    )
    for a in sorted(sim.admitted, key=lambda a: (group[a[0]], sim.admitted[a], a)):
        print(
            f"  {group[a[0]][:2]} {a[0]}#{a[1]}: sim {sim.admitted[a]:5.1f}  "
            f"real {real.admitted.get(a, float('nan')):5.1f}"
        )
    assert set(real.admitted) == set(sim.admitted), (
        f"admitted only by the simulator: {sorted(set(sim.admitted) - set(real.admitted))}; "
        f"only by the controller: {sorted(set(real.admitted) - set(sim.admitted))}"
    )
    assert real.preempted == sim.preempted
    assert out_of_order(sim.admitted, real.admitted, group) == []
