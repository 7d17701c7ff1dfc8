"""A parked borrower's reason keeps its figures while its own queue's releases cannot change
its answer, and is refreshed by a full evaluation at least every `REFRESH_SECONDS`.

Team a (4 GPUs, reclaims Any) runs a/0 and a/1 (1 GPU each); team b (4 GPUs) has borrowed a's
other 2; the cohort is full. a/big (4 GPUs) would borrow, and a borrower of a may take nothing
(borrowWithinCohort Never): it waits. Only once a's own work is down to nothing does a/big fit
within a's quota, where it reclaims what b borrowed."""

from __future__ import annotations

from core_helpers import gpu_queue, job, quota, scheduler

from queuectl.core import PreemptionPolicy, Scheduler
from queuectl.core.parking import REFRESH_SECONDS

RECLAIM = PreemptionPolicy(reclaim_within_cohort="Any")


def full_cohort() -> Scheduler:
    s = scheduler(
        gpu_queue("a", quota("h100", 4), preemption=RECLAIM),
        gpu_queue("b", quota("h100", 4)),
        patience=0,
    )
    for i in range(6):
        s.upsert_workload(job(f"b/{i}", "b", 1, created=i))
    s.run_cycle(1.0)
    for i in range(2):
        s.upsert_workload(job(f"a/{i}", "a", 1, created=10 + i))
    assert len(s.run_cycle(2.0).admitted) == 2
    s.upsert_workload(job("a/big", "a", 4, created=20))
    r = s.run_cycle(3.0)
    assert r.admitted == () and r.preemptions == () and r.evaluated == 1
    return s


def message(s: Scheduler) -> str:
    info = s.pending_info("a/big")
    assert info is not None and info.reason == "WaitingForQuota"
    return info.message


def test_a_release_that_leaves_it_borrowing_keeps_its_figures_without_an_evaluation() -> None:
    s = full_cohort()
    before = message(s)
    assert "0 available" in before
    s.delete_workload("a/0")  # a now uses 1: with a/big it would still borrow
    r = s.run_cycle(4.0)
    assert r.evaluated == 0 and r.admitted == () and r.preemptions == ()
    assert message(s) == before  # the parked figures, not "1 available"


def test_the_release_that_ends_its_borrowing_lets_it_reclaim_at_once() -> None:
    s = full_cohort()
    s.delete_workload("a/0")
    s.run_cycle(4.0)
    s.delete_workload("a/1")  # a uses nothing: a/big fits within a's quota and reclaims
    r = s.run_cycle(5.0)
    assert sorted(p.victim for p in r.preemptions) == ["b/4", "b/5"]
    assert {p.preemptor for p in r.preemptions} == {"a/big"}


def test_parked_figures_are_refreshed_by_a_release_once_they_are_old() -> None:
    s = full_cohort()
    s.delete_workload("a/0")
    r = s.run_cycle(3.0 + REFRESH_SECONDS)
    assert r.evaluated == 1 and r.preemptions == ()
    assert "1 available" in message(s)
