"""Reclaim follows the tree, over random cohort trees of two and three levels.

A random tree with random quotas and limits is filled with random work; then one preemptor
arrives. Whatever the core stops for it must come from a branch that borrows where it meets the
preemptor's branch, and what it stops must be enough: once the victims are gone the preemptor
is admitted and no limit anywhere is broken. Quotas are recomputed here from the specs alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from core_worlds import World, violations
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as hs

from queuectl.core import (
    GPU,
    Admission,
    BorrowWithinCohort,
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

FLAVOR = "h100"


@dataclass
class Tree:
    cohorts: list[Cohort]
    queues: list[ClusterQueue]
    work: list[tuple[int, int, int]]
    """(queue index, GPUs, priority) admitted in the first cycle where it fits."""
    preemptor: tuple[int, int, int]


def _rq(draw: hs.DrawFn, root: bool) -> ResourceQuota:
    nominal = draw(hs.sampled_from([0, 4, 8, 8, 2]))
    if root:
        return ResourceQuota(GPU, nominal)
    borrowing = draw(hs.sampled_from([None, None, None, None, 0, 4]))
    lending = draw(hs.sampled_from([None, None, None, None, nominal // 2, 0]))
    return ResourceQuota(GPU, nominal, borrowing, lending)


def _groups(rq: ResourceQuota) -> tuple[ResourceGroup, ...]:
    return (ResourceGroup((GPU,), (FlavorQuotas(FLAVOR, (rq,)),)),)


@hs.composite
def trees(draw: hs.DrawFn) -> Tree:
    """R -> 2-3 cohorts -> (optionally 1-2 sub-cohorts each) -> 1-2 queues per leaf cohort."""
    cohorts = [Cohort("R", None, _groups(_rq(draw, root=True)) if draw(hs.booleans()) else ())]
    leaves: list[str] = []
    for i in range(draw(hs.integers(2, 3))):
        name = f"c{i}"
        quota = _groups(_rq(draw, root=False)) if draw(hs.booleans()) else ()
        cohorts.append(Cohort(name, "R", quota))
        subs = draw(hs.integers(0, 2))
        for j in range(subs):
            sub = f"c{i}{j}"
            squota = _groups(_rq(draw, root=False)) if draw(hs.booleans()) else ()
            cohorts.append(Cohort(sub, name, squota))
            leaves.append(sub)
        if not subs:
            leaves.append(name)
    queues: list[ClusterQueue] = []
    for leaf in leaves:
        for k in range(draw(hs.integers(1, 2))):
            policy = PreemptionPolicy(
                draw(hs.sampled_from(["LowerPriority", "Never"])),
                draw(hs.sampled_from(["Any", "Any", "LowerPriority", "Never"])),
                BorrowWithinCohort(
                    draw(hs.sampled_from(["LowerPriority", "Never"])),
                    draw(hs.none() | hs.integers(0, 2)),
                ),
            )
            queues.append(
                ClusterQueue(
                    f"{leaf}-q{k}", leaf, _groups(_rq(draw, root=False)), preemption=policy
                )
            )
    # Some queues stay idle (their quota is lent out), the rest share the work; the preemptor
    # comes to an idle queue as often as not, to take its quota back.
    n = len(queues)
    busy = draw(hs.lists(hs.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    idle = [i for i in range(n) if i not in busy] or busy
    one = hs.tuples(hs.sampled_from(busy), hs.integers(2, 4), hs.integers(0, 2))
    work = draw(hs.lists(one, min_size=8, max_size=30))
    home = draw(hs.sampled_from(idle) | hs.integers(0, n - 1))
    own = queues[home].resource_groups[0].flavors[0].resources[0].nominal
    gpus = draw(hs.integers(1, max(1, own)) | hs.integers(1, 8))  # within its quota, or not
    preemptor = (home, gpus, draw(hs.integers(0, 3)))
    return Tree(cohorts, queues, work, preemptor)


# --- an independent reference: quotas and usages from the specs and the running set ----------
class Model:
    def __init__(self, tree: Tree) -> None:
        self.parent: dict[str, str | None] = {c.name: c.parent for c in tree.cohorts}
        self.quota: dict[str, ResourceQuota | None] = {}
        self.children: dict[str, list[str]] = {}
        specs: list[Cohort | ClusterQueue] = [*tree.cohorts, *tree.queues]
        for spec in specs:
            rgs = spec.resource_groups
            self.quota[spec.name] = rgs[0].flavors[0].resources[0] if rgs else None
        for q in tree.queues:
            self.parent[q.name] = q.cohort
        for name, p in self.parent.items():
            if p is not None:
                self.children.setdefault(p, []).append(name)
        self.is_queue = {q.name for q in tree.queues}

    def subtree(self, n: str) -> int:
        r = self.quota[n]
        own = r.nominal if r else 0
        return own + sum(self.subtree(k) - self.keep(k) for k in self.children.get(n, []))

    def keep(self, n: str) -> int:
        r = self.quota[n]
        if r is None or r.lending_limit is None or self.parent[n] is None:
            return 0
        return max(0, self.subtree(n) - r.lending_limit)

    def usage(self, n: str, used: dict[str, int]) -> int:
        if n in self.is_queue:
            return used.get(n, 0)
        return sum(max(0, self.usage(k, used) - self.keep(k)) for k in self.children.get(n, []))

    def path(self, n: str) -> list[str]:
        """`n` and its ancestors, leaf first."""
        out: list[str] = []
        cur: str | None = n
        while cur is not None:
            out.append(cur)
            cur = self.parent[cur]
        return out


def _gpus(adm: Admission) -> int:
    return sum(psa.usage[GPU] for psa in adm.podsets)


def _world(tree: Tree) -> World:
    return World(tree.cohorts, tree.queues, [])


def _story() -> Tree:
    """R -> A (a1: 8, a2: 0), B (b1: 8, b2: 0): a2 runs 8 on a1's quota, b1 runs 4 and b2
    borrows b1's other 4; b1 asks for them back."""
    reclaim = PreemptionPolicy(reclaim_within_cohort="Any")
    quota = {"a1": 8, "a2": 0, "b1": 8, "b2": 0}
    return Tree(
        [Cohort("R"), Cohort("A", "R"), Cohort("B", "R")],
        [
            ClusterQueue(q, q[0].upper(), _groups(ResourceQuota(GPU, n)), preemption=reclaim)
            for q, n in quota.items()
        ],
        [(1, 4, 0), (1, 4, 0), (2, 4, 0), (3, 4, 0)],
        (2, 4, 0),
    )


@example(_story())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_reclaim_takes_only_from_branches_that_borrow_and_takes_enough(tree: Tree) -> None:
    s = Scheduler()
    s.upsert_flavor(Flavor(FLAVOR))
    for c in tree.cohorts:
        s.upsert_cohort(c)
    for q in tree.queues:
        s.upsert_cluster_queue(q)
    for i, (qi, gpus, prio) in enumerate(tree.work):
        s.upsert_workload(
            Workload(
                f"w/{i:02}",
                tree.queues[qi].name,
                (PodSet("main", 1, {GPU: gpus}),),
                priority=prio,
                created=i / 100,
            )
        )
    running = {a.key: a.admission for a in s.run_cycle(1.0).admitted}
    for i in range(len(tree.work)):
        if f"w/{i:02}" not in running:
            s.delete_workload(f"w/{i:02}")  # only the preemptor waits in the next cycle
    qi, gpus, prio = tree.preemptor
    home = tree.queues[qi].name
    s.upsert_workload(
        Workload("p/0", home, (PodSet("main", 1, {GPU: gpus}),), priority=prio, created=1.5)
    )
    r = s.run_cycle(2.0)
    if any(a.key == "p/0" for a in r.admitted):
        running["p/0"] = next(a.admission for a in r.admitted if a.key == "p/0")
        assert violations(_world(tree), running) == []
        return

    model = Model(tree)
    mine = set(model.path(home))
    used: dict[str, int] = {}
    for adm in running.values():
        used[adm.cluster_queue] = used.get(adm.cluster_queue, 0) + _gpus(adm)
    for p in r.preemptions:
        assert p.preemptor == "p/0"
        victim = running[p.victim]
        if p.reason != "InClusterQueue":
            # Up to (not including) the lowest cohort it shares with the preemptor, the
            # victim's queue and every cohort above it borrow.
            for n in model.path(victim.cluster_queue):
                if n in mine:
                    break
                assert model.usage(n, used) > model.subtree(n), (p, n, used)

    if r.preemptions:
        for p in r.preemptions:
            s.requeue_workload(p.victim)
            del running[p.victim]
        after = s.run_cycle(3.0)
        assert [a.key for a in after.admitted] == ["p/0"], r.preemptions
        running["p/0"] = after.admitted[0].admission
    assert violations(_world(tree), running) == []
