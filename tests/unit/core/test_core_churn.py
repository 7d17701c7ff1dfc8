"""Needless preemption: a preemptor whose fit was taken in the same cycle waits instead, and
the waiting neither starves it nor keeps lent quota from its owner."""

from __future__ import annotations

import copy

import pytest
from core_helpers import admitted, gpu_queue, job, quota, reason_of, scheduler
from core_worlds import FAST, Run, World, any_world, contended_world, drive, nothing
from hypothesis import given

from queuectl.core import (
    GPU,
    BorrowWithinCohort,
    ClusterQueue,
    Cohort,
    CycleResult,
    FlavorFungibility,
    FlavorQuotas,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
    Scheduler,
)
from queuectl.core.admission_pass import MAX_WAITS

WITHIN = PreemptionPolicy(within_cluster_queue="LowerPriority")
WAITS = "it fitted when this cycle began"


def lost_fit(patience: float | None = None) -> Scheduler:
    """`owner` (4 GPUs) runs owner/0..3; `big` (2 GPUs, may borrow, preempts its own lower
    priority) runs big/low on its own 2 and has big/high (2 GPUs, priority 10) pending: the
    cohort is full, so big/high could only borrow what owner frees."""
    s = scheduler(
        gpu_queue("owner", quota("h100", 4)),
        gpu_queue("big", quota("h100", 2), preemption=WITHIN),
        *(job(f"owner/{i}", "owner", 1, created=i) for i in range(4)),
        job("big/low", "big", 2, created=0),
        patience=patience,
    )
    assert admitted(s.run_cycle(1.0)) == ["big/low", "owner/0", "owner/1", "owner/2", "owner/3"]
    s.upsert_workload(job("big/high", "big", 2, priority=10, created=5))
    return s


def owner_job(cycle: int, i: int) -> str:
    """owner's i-th job (of two) that arrived before cycle `cycle`; the first four ran first."""
    return f"owner/{2 * cycle + i}" if cycle < 2 else f"owner/new-{cycle - 2}-{i}"


def owner_turnover(s: Scheduler, cycle: int, new: int = 2) -> None:
    """owner's two oldest jobs finish; `new` new ones arrive (they take the freed quota in the
    first pass, within owner's own quota, before big/high may borrow it)."""
    for i in range(2):
        s.delete_workload(owner_job(cycle, i))
    for i in range(new):
        s.upsert_workload(job(owner_job(cycle + 2, i), "owner", 1, created=10 * cycle + i))


def test_a_preemptor_whose_fit_was_taken_this_cycle_waits_and_gets_in_without_preempting() -> None:
    s = lost_fit()
    owner_turnover(s, 0)  # 2 GPUs free when the cycle begins; owner's new work takes them
    r = s.run_cycle(2.0)
    assert admitted(r) == ["owner/new-0-0", "owner/new-0-1"] and r.preemptions == ()
    info = s.pending_info("big/high")
    assert info is not None and info.reason == "WaitingForQuota" and WAITS in info.message
    assert r.next_wakeup == 2.0  # the next cycle decides for it, even without an event
    s.delete_workload("owner/2")
    s.delete_workload("owner/3")
    r = s.run_cycle(3.0)
    assert admitted(r) == ["big/high"] and r.preemptions == ()  # big/low keeps running


def test_explain_says_that_a_waiting_preemptor_waits_and_what_it_preempts_if_it_must() -> None:
    s = lost_fit()
    owner_turnover(s, 0)
    s.run_cycle(2.0)
    status = s.pending_info("big/high")
    e = s.explain("big/high", 2.0)
    assert e.pending is not None and status is not None
    assert e.pending.reason == status.reason == "WaitingForQuota"
    assert WAITS in e.pending.message and "fits by preempting" not in e.pending.message
    assert "if it still does not fit then, it preempts 1 workload(s): big/low" in e.pending.message
    assert e.would_evict == ("big/low",) and e.preemption_possible


def test_the_waiting_preemptors_queue_admits_nothing_else_meanwhile() -> None:
    s = lost_fit()
    s.upsert_workload(job("big/small", "big", 1, priority=5, created=6))
    owner_turnover(s, 0, new=1)  # one GPU of the two stays free
    r = s.run_cycle(2.0)
    # big/small would fit in the free GPU, and become big/high's victim next cycle.
    assert admitted(r) == ["owner/new-0-0"] and r.preemptions == ()
    assert reason_of(s, "big/small") == "Pending"  # not evaluated: its queue waits for its head
    e = s.explain("big/small", 2.0)
    assert e.pending is not None and e.admission is not None
    assert "big/high ahead of it in ClusterQueue big waits for quota" in e.pending.message


def test_a_preemptor_that_never_had_a_fit_preempts_at_once() -> None:
    s = lost_fit()
    r = s.run_cycle(2.0)  # nothing was freed: no fit when the cycle began
    assert [(p.victim, p.preemptor, p.reason) for p in r.preemptions] == [
        ("big/low", "big/high", "InClusterQueue")
    ]


def test_a_preemptor_whose_fit_is_taken_every_cycle_preempts_after_max_waits() -> None:
    s = lost_fit(patience=0.0)  # this rule alone (patience would keep it waiting: below)
    for c in range(MAX_WAITS):
        owner_turnover(s, c)
        r = s.run_cycle(2.0 + c)
        assert r.preemptions == (), c
    owner_turnover(s, MAX_WAITS)
    r = s.run_cycle(2.0 + MAX_WAITS)
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("big/low", "big/high")]


def test_with_patience_the_same_turnover_lets_it_in_without_preempting() -> None:
    """After MAX_WAITS cycles it would preempt, but owner keeps returning GPUs: it waits for
    them instead (`core.patience`), holding what owner frees before owner's new work may take
    it, and gets in with big/low still running."""
    s = lost_fit()
    for c in range(MAX_WAITS + 2):
        owner_turnover(s, c)
        r = s.run_cycle(2.0 + c)
        assert r.preemptions == (), c
        if admitted(r) == ["big/high"]:
            break
    else:
        raise AssertionError("big/high was never admitted")
    assert s.is_admitted("big/low")


# --- properties ---------------------------------------------------------------------------
def waiting(r: CycleResult) -> set[str]:
    return {p.key for p in r.pending if WAITS in p.message}


def never_waits_too_long(world: World) -> None:
    """No workload is told it waits for a lost fit more than MAX_WAITS cycles in a row."""
    streak: dict[str, int] = {}
    for r in drive(world, nothing).trace:
        told = waiting(r)
        streak = {k: streak.get(k, 0) + 1 for k in told}
        assert all(n <= MAX_WAITS for n in streak.values()), streak
        # Told once, it stays waiting (reports only changes) until decided otherwise.
        decided = {a.key for a in r.admitted} | {p.preemptor for p in r.preemptions}
        for k in list(streak):
            if k in decided:
                del streak[k]


def no_fit_taken_for_preemption(world: World) -> None:
    """A workload that could be admitted as the cycle begins (explain on a copy of the state
    says it fits) is not that cycle's preemptor, unless it already waited MAX_WAITS cycles."""
    waited: dict[str, int] = {}

    def wrap(s: Scheduler, run: Run, r: CycleResult, now: float) -> None:
        nonlocal waited
        waited = {k: waited.get(k, 0) + 1 for k in waiting(r)}
        if getattr(s, "checked", False):
            return
        real = s.run_cycle

        def checked_cycle(now: float) -> CycleResult:
            before = copy.deepcopy(s)
            result = real(now)
            for p in {p.preemptor for p in result.preemptions}:
                if waited.get(p, 0) < MAX_WAITS:
                    assert before.explain(p, now).admission is None, p
            return result

        s.run_cycle = checked_cycle  # type: ignore[method-assign]
        s.checked = True  # type: ignore[attr-defined]

    drive(world, wrap)


def settle(s: Scheduler, run: Run, now: float) -> float:
    """No arrivals any more: drain victims and run cycles (past every minimum runtime) until a
    cycle decides nothing. A preemptor that never gets its turn would keep this from ending."""
    for _ in range(4 * MAX_WAITS + 20):
        for v in sorted(run.victims):
            s.requeue_workload(v)
            del run.running[v]
        run.victims.clear()
        now += 5.0
        r = s.run_cycle(now)
        for a in r.admitted:
            run.running[a.key] = a.admission
        for p in r.preemptions:
            run.victims[p.victim] = p.preemptor
        if not r.admitted and not r.preemptions and not run.victims:
            return now
    raise AssertionError("the cycles never settle")


def settled(world: World) -> tuple[Scheduler, Run, float]:
    box: list[tuple[Scheduler, Run, float]] = []

    def keep(s: Scheduler, run: Run, r: CycleResult, now: float) -> None:
        box[:] = [(s, run, now)]

    run = drive(world, keep)
    s, _, now = box[0]
    return s, run, settle(s, run, now)


def nobody_starves(world: World) -> None:
    """Once nothing arrives, every pending workload is one that a full evaluation would neither
    admit nor let preempt (StrictFIFO queues: their head)."""
    s, run, now = settled(world)
    strict = {q.name for q in world.queues if q.queueing_strategy == "StrictFIFO"}
    heads: dict[str, tuple[tuple[int, float, str], str]] = {}
    pending = [k for k in s.workloads() if k not in run.running]
    for key in pending:
        w = s.workloads()[key]
        rank = (-w.priority, w.created, key)
        if w.cluster_queue not in heads or rank < heads[w.cluster_queue][0]:
            heads[w.cluster_queue] = (rank, key)
    for key in sorted(pending):
        w = s.workloads()[key]
        if w.cluster_queue in strict and heads[w.cluster_queue][1] != key:
            continue
        e = s.explain(key, now)
        assert e.admission is None and not e.preemption_possible, (key, e)


def owners_get_their_quota_back(world: World) -> None:
    """Once nothing arrives, a queue that reclaims from any priority and has pending work that
    fits in its own unused nominal quota (one flavor, BestEffortFIFO) has got it back: computed
    from the specs and the admissions seen, not from the core's counters."""
    s, run, _ = settled(world)
    for q in world.queues:
        flavors = q.resource_groups[0].flavors
        if (
            q.preemption.reclaim_within_cohort != "Any"
            or len(flavors) != 1
            or q.queueing_strategy != "BestEffortFIFO"
        ):
            continue
        nominal = flavors[0].resources[0].nominal
        used = sum(
            psa.usage[GPU]
            for a in run.running.values()
            if a.cluster_queue == q.name
            for psa in a.podsets
        )
        for key, w in s.workloads().items():
            if key in run.running or w.cluster_queue != q.name:
                continue
            need = sum(ps.count * ps.requests[GPU] for ps in w.podsets)
            assert used + need > nominal, (q.name, key, used, need, nominal)


@FAST
@given(any_world())
def test_no_preemptor_waits_more_than_max_waits_cycles_in_a_row(world: World) -> None:
    never_waits_too_long(world)


@FAST
@given(any_world())
def test_a_workload_that_fits_when_the_cycle_begins_is_not_its_preemptor(world: World) -> None:
    no_fit_taken_for_preemption(world)


def _found_2026_11_25() -> World:
    """Five queues of one cohort; q4 tries a100 (2) before h100 (0), the rest hold 4 h100."""
    policy = PreemptionPolicy(
        within_cluster_queue="LowerPriority",
        reclaim_within_cohort="Any",
        borrow_within_cohort=BorrowWithinCohort("LowerPriority"),
    )

    def h100(lending: int | None = None) -> FlavorQuotas:
        return FlavorQuotas("h100", (ResourceQuota(GPU, 4, lending_limit=lending),))

    def queue(name: str, *flavors: FlavorQuotas, preempt: str = "Preempt") -> ClusterQueue:
        return ClusterQueue(
            name,
            "co0",
            (ResourceGroup((GPU,), flavors),),
            preemption=policy,
            flavor_fungibility=FlavorFungibility(when_can_preempt=preempt),  # type: ignore[arg-type]
        )

    return World(
        cohorts=[Cohort("co0")],
        queues=[
            queue("q0", h100()),
            queue("q1", h100()),
            queue("q2", h100()),
            queue("q3", h100(lending=0)),
            queue(
                "q4",
                FlavorQuotas("a100", (ResourceQuota(GPU, 2),)),
                FlavorQuotas("h100", (ResourceQuota(GPU, 0),)),
                preempt="TryNextFlavor",
            ),
        ],
        ops=[
            ("add", 4, 1, 3, 0, 0.0, True),
            ("add", 0, 1, 2, 0, 0.0, True),
            ("add", 0, 1, 1, 0, 0.0, False),
            ("add", 0, 2, 3, 0, 0.0, False),
            ("cycle",),
            ("add", 0, 1, 1, 0, 0.0, False),
            ("add", 4, 1, 2, 3, 0.0, False),
            ("finish", 1),
            ("cycle",),
            ("drain",),
            ("cycle",),
        ],
    )


def test_a_workload_that_fits_is_not_its_preemptor_in_a_world_found_once() -> None:
    no_fit_taken_for_preemption(_found_2026_11_25())


@FAST
@given(any_world())
def test_once_arrivals_stop_nobody_who_could_be_admitted_or_preempt_is_left(world: World) -> None:
    nobody_starves(world)


@FAST
@given(any_world())
def test_once_arrivals_stop_every_owner_has_its_lent_quota_back(world: World) -> None:
    owners_get_their_quota_back(world)


@pytest.mark.parametrize("first", range(0, 200, 50))
def test_preemption_heavy_streams_keep_every_churn_property(first: int) -> None:
    for seed in range(first, first + 50):
        world = contended_world(seed)
        no_fit_taken_for_preemption(world)
        never_waits_too_long(world)
        nobody_starves(world)
        owners_get_their_quota_back(world)
