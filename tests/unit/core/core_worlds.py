"""Random cohort trees and workload streams, and a driver that plays them like the controller.

The quota check here is written from scratch from the specs and from the admissions the test has
seen (not from the core's own counters), so a bookkeeping slip in the core cannot hide itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as hs

from queuectl.core import (
    GPU,
    Admission,
    BorrowWithinCohort,
    ClusterQueue,
    Cohort,
    CycleResult,
    Flavor,
    FlavorFungibility,
    FlavorQuotas,
    GpuTimeBank,
    PodSet,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
    Scheduler,
    Workload,
)

FLAVORS = ("h100", "a100")
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class World:
    cohorts: list[Cohort]
    queues: list[ClusterQueue]
    ops: list[tuple[object, ...]]


def _rq(draw: hs.DrawFn, with_parent: bool) -> ResourceQuota:
    nominal = draw(hs.sampled_from([4, 8, 2, 0, 6]))
    borrowing = draw(hs.sampled_from([None, None, 2, 0, 6])) if with_parent else None
    lending = draw(hs.sampled_from([None, None, nominal // 2, 0])) if with_parent else None
    return ResourceQuota(GPU, nominal, borrowing, lending)


BANK = GpuTimeBank(cap_gpu_hours=0.01, accrual_rate=3600.0, half_life_hours=0.001)
"""An idle GPU earns 1 GPU-hour a second; credit halves every 3.6 s: signs change often."""


@hs.composite
def worlds(draw: hs.DrawFn, contended: bool = False) -> World:
    """Random trees; `contended`: one flat cohort where queues reclaim from each other."""
    cohorts: list[Cohort] = []
    for i in range(1 if contended else draw(hs.integers(0, 3))):
        parent = draw(hs.none() | hs.sampled_from([c.name for c in cohorts])) if cohorts else None
        groups: tuple[ResourceGroup, ...] = ()
        if draw(hs.booleans()):
            fq = FlavorQuotas("h100", (_rq(draw, parent is not None),))
            groups = (ResourceGroup((GPU,), (fq,)),)
        cohorts.append(Cohort(f"co{i}", parent, groups, draw(hs.sampled_from([1.0, 2.0]))))
    queues = []
    for i in range(draw(hs.integers(2, 5))):
        names = [c.name for c in cohorts] or ["co-implicit"]
        cohort = (
            names[0]
            if contended or draw(hs.booleans())
            else draw(hs.sampled_from(names) | hs.none())
        )
        order = draw(hs.permutations(FLAVORS))[: draw(hs.integers(1, 2))]
        fqs = tuple(FlavorQuotas(f, (_rq(draw, cohort is not None),)) for f in order)
        preemption = PreemptionPolicy(
            draw(hs.sampled_from(["LowerPriority", "LowerOrNewerEqualPriority", "Never"])),
            draw(hs.sampled_from(["Any", "LowerPriority"] + ([] if contended else ["Never"]))),
            BorrowWithinCohort(
                draw(hs.sampled_from(["LowerPriority", "Never"])),
                draw(hs.none() | hs.integers(0, 3)),
            ),
        )
        fungibility = FlavorFungibility(
            draw(hs.sampled_from(["Borrow", "TryNextFlavor"])),
            draw(hs.sampled_from(["Preempt", "TryNextFlavor"])),
        )
        queues.append(
            ClusterQueue(
                f"q{i}",
                cohort,
                (ResourceGroup((GPU,), fqs),),
                queueing_strategy=draw(hs.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
                preemption=preemption,
                flavor_fungibility=fungibility,
                fair_weight=draw(hs.sampled_from([1.0, 3.0])),
                # a bank fills within a cycle or two (cycles are 1 s apart): credit decides
                gpu_time_bank=draw(hs.sampled_from([None, None, BANK])),
            )
        )
    add = hs.tuples(
        hs.just("add"),
        hs.integers(0, len(queues) - 1),
        hs.integers(1, 2),
        hs.integers(1, 3),
        hs.sampled_from([0, 3, 1, 2]),
        hs.sampled_from([0.0, 3.0]),
        hs.booleans(),
    )
    op = hs.one_of(
        add,
        add,
        add,
        hs.just(("cycle",)),
        hs.just(("cycle",)),
        hs.tuples(hs.just("finish"), hs.integers(0, 50)),
        hs.just(("drain",)),
    )
    ops = draw(hs.lists(op, min_size=8, max_size=50))
    return World(cohorts, queues, [*ops, ("cycle",), ("drain",), ("cycle",)])


def any_world() -> hs.SearchStrategy[World]:
    return hs.one_of(worlds(), worlds(contended=True))


# --- an independent reference of the quota rules ---------------------------------------------
def violations(world: World, running: dict[str, Admission]) -> list[str]:
    qspec = {q.name: q for q in world.queues}
    cspec = {c.name: c for c in world.cohorts}
    children: dict[str, list[tuple[str, str]]] = {}
    parent_of: dict[tuple[str, str], tuple[str, str] | None] = {}
    for c in world.cohorts:
        parent_of[("c", c.name)] = ("c", c.parent) if c.parent else None
    for q in world.queues:
        parent_of[("q", q.name)] = ("c", q.cohort) if q.cohort else None
        if q.cohort and ("c", q.cohort) not in parent_of:
            parent_of[("c", q.cohort)] = None  # implicit cohort
    for n, p in parent_of.items():
        if p is not None:
            children.setdefault(p[1], []).append(n)
    used: dict[tuple[str, str], int] = {}
    for adm in running.values():
        for psa in adm.podsets:
            fr = (psa.flavors[GPU], adm.cluster_queue)
            used[fr] = used.get(fr, 0) + psa.usage[GPU]

    def rq(n: tuple[str, str], flavor: str) -> ResourceQuota | None:
        groups = (
            qspec[n[1]].resource_groups
            if n[0] == "q"
            else (cspec[n[1]].resource_groups if n[1] in cspec else ())
        )
        for g in groups:
            for fq in g.flavors:
                if fq.name == flavor:
                    return fq.resources[0]
        return None

    problems = []
    for flavor in FLAVORS:

        def subtree(n: tuple[str, str], flavor: str = flavor) -> int:
            r = rq(n, flavor)
            own = r.nominal if r else 0
            kids = children.get(n[1], []) if n[0] == "c" else []
            return own + sum(subtree(k) - keep(k) for k in kids)

        def keep(n: tuple[str, str], flavor: str = flavor) -> int:
            r = rq(n, flavor)
            if r is None or r.lending_limit is None or parent_of[n] is None:
                return 0
            return max(0, subtree(n) - r.lending_limit)

        def usage(n: tuple[str, str], flavor: str = flavor) -> int:
            if n[0] == "q":
                return used.get((flavor, n[1]), 0)
            return sum(max(0, usage(k) - keep(k)) for k in children.get(n[1], []))

        for n, p in parent_of.items():
            u, limit = usage(n), subtree(n)
            r = rq(n, flavor)
            if p is None and u > limit:
                problems.append(f"{n} {flavor}: {u} > {limit}")
            capped = p is not None and r is not None and r.borrowing_limit is not None
            if (
                capped
                and r is not None
                and r.borrowing_limit is not None
                and (u > limit + r.borrowing_limit)
            ):
                problems.append(f"{n} {flavor}: {u} > {limit}+{r.borrowing_limit}")
            if n[0] == "q" and r is None and u > 0:
                problems.append(f"{n} uses flavor {flavor} it does not list")
    return problems


# --- driving the core like the controller would ------------------------------------------------
@dataclass
class Run:
    trace: list[CycleResult] = field(default_factory=list)
    running: dict[str, Admission] = field(default_factory=dict)
    victims: dict[str, str] = field(default_factory=dict)


def drive(world: World, after_cycle: Callable[[Scheduler, Run, CycleResult, float], None]) -> Run:
    s = Scheduler()
    for f in FLAVORS:
        s.upsert_flavor(Flavor(f))
    for c in world.cohorts:
        s.upsert_cohort(c)
    for q in world.queues:
        s.upsert_cluster_queue(q)
    run, now, seq = Run(), 0.0, 0
    specs: dict[str, Workload] = {}
    for op in world.ops:
        if op[0] == "add":
            _, qi, gpus, pods, prio, min_runtime, gang = op
            assert isinstance(qi, int) and isinstance(gpus, int) and isinstance(pods, int)
            podsets = [PodSet("main", pods, {GPU: gpus})]
            if gang:
                podsets.append(PodSet("driver", 1, {GPU: 1}))
            seq += 1
            w = Workload(
                f"w/{seq:03}",
                world.queues[qi].name,
                tuple(podsets),
                priority=int(prio),
                created=now + seq / 1000,  # type: ignore[call-overload]
                minimum_runtime_seconds=float(min_runtime),
            )  # type: ignore[arg-type]
            specs[w.key] = w
            s.upsert_workload(w)
        elif op[0] == "cycle":
            now += 1.0
            r = s.run_cycle(now)
            run.trace.append(r)
            for a in r.admitted:
                assert a.key not in run.running
                run.running[a.key] = a.admission
                assert_whole(specs[a.key], a.admission)
            for p in r.preemptions:
                assert p.victim in run.running and p.victim not in run.victims
                run.victims[p.victim] = p.preemptor
            after_cycle(s, run, r, now)
        elif op[0] == "finish" and run.running:
            key = sorted(run.running)[int(op[1]) % len(run.running)]  # type: ignore[call-overload]
            s.delete_workload(key)
            del run.running[key]
            run.victims.pop(key, None)
        elif op[0] == "drain":
            for v in sorted(run.victims):
                s.requeue_workload(v)
                del run.running[v]
            run.victims.clear()
    return run


def assert_whole(w: Workload, adm: Admission) -> None:
    assert adm.cluster_queue == w.cluster_queue
    assert [(p.name, p.count) for p in adm.podsets] == [(p.name, p.count) for p in w.podsets]
    for psa, ps in zip(adm.podsets, w.podsets, strict=True):
        assert psa.usage == {GPU: ps.requests[GPU] * ps.count}
        assert set(psa.flavors) == {GPU}


def nothing(s: Scheduler, run: Run, r: CycleResult, now: float) -> None:
    pass


# --- a seeded stream heavy on preemption: every property at once ------------------------------
def contended_world(seed: int) -> World:
    """Queues that borrow from and reclaim on each other, with mixed priorities and gangs."""
    rnd = random.Random(seed)
    cohorts = [Cohort("co0")]
    if rnd.random() < 0.5:
        cohorts += [Cohort("co1", "co0"), Cohort("co2", "co0")]
    queues = []
    for i in range(rnd.randint(2, 5)):
        fqs = []
        for f in FLAVORS[: rnd.randint(1, 2)]:
            nominal = rnd.choice([0, 0, 4, 8])
            lending = rnd.choice([None, None, 2])
            fqs.append(
                FlavorQuotas(
                    f,
                    (
                        ResourceQuota(
                            GPU,
                            nominal,
                            rnd.choice([None, None, 4]),
                            None if lending is None else min(lending, nominal),
                        ),
                    ),
                )
            )
        queues.append(
            ClusterQueue(
                f"q{i}",
                rnd.choice([c.name for c in cohorts[-2:]]),
                (ResourceGroup((GPU,), tuple(fqs)),),
                queueing_strategy=rnd.choice(["BestEffortFIFO", "StrictFIFO"]),
                preemption=PreemptionPolicy(
                    rnd.choice(["LowerPriority", "LowerOrNewerEqualPriority", "Never"]),
                    rnd.choice(["Any", "LowerPriority"]),
                    BorrowWithinCohort(
                        rnd.choice(["LowerPriority", "Never"]), rnd.choice([None, 1])
                    ),
                ),
                flavor_fungibility=FlavorFungibility(
                    rnd.choice(["Borrow", "TryNextFlavor"]),
                    rnd.choice(["Preempt", "TryNextFlavor"]),
                ),
                fair_weight=rnd.choice([1.0, 3.0]),
            )
        )
    ops: list[tuple[object, ...]] = []
    for _ in range(rnd.randint(10, 60)):
        r = rnd.random()
        if r < 0.5:
            ops.append(
                (
                    "add",
                    rnd.randrange(len(queues)),
                    rnd.randint(1, 3),
                    rnd.randint(1, 3),
                    rnd.randint(0, 3),
                    rnd.choice([0.0, 0.0, 3.0]),
                    rnd.random() < 0.3,
                )
            )
        elif r < 0.75:
            ops.append(("cycle",))
        elif r < 0.88:
            ops.append(("finish", rnd.randint(0, 50)))
        else:
            ops.append(("drain",))
    return World(cohorts, queues, [*ops, ("cycle",), ("drain",), ("cycle",)])
