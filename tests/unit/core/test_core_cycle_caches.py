"""Scenarios for the answers one cycle reuses: each proves a cached "no" is dropped in time."""

from __future__ import annotations

from core_helpers import admitted, gpu_queue, job, quota, scheduler

from queuectl.core import BorrowWithinCohort, PreemptionPolicy

RECLAIM = PreemptionPolicy(reclaim_within_cohort="Any")
BORROW_OVER_LOWER = PreemptionPolicy(
    reclaim_within_cohort="Any", borrow_within_cohort=BorrowWithinCohort("LowerPriority")
)


def test_a_queue_that_starts_borrowing_mid_cycle_becomes_a_victim_source_again() -> None:
    """A victim search finds nothing to take in the tree (the only borrower's work is already a
    victim); later in the same cycle another queue starts borrowing, so its older work may now be
    taken: a later search of that cycle must see it, not the remembered empty answer."""
    s = scheduler(
        gpu_queue("a", quota("h100", 4), preemption=RECLAIM),
        gpu_queue("b", quota("h100", 4), preemption=RECLAIM),
        gpu_queue("c", quota("h100", 0), preemption=BORROW_OVER_LOWER),
        gpu_queue("x", quota("h100", 4)),
        gpu_queue("y", quota("h100", 4)),
        gpu_queue("z", quota("h100", 3)),
        job("x/old", "x", 12),
        job("y/old", "y", 4),
        job("z/old", "z", 3),
    )
    assert admitted(s.run_cycle(0.0)) == ["x/old", "y/old", "z/old"]  # all 19 GPUs in use
    s.upsert_workload(job("a/p0", "a", 4, priority=100, created=1))
    r = s.run_cycle(1.0)
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("x/old", "a/p0")]
    # x/old drains (still counted); z/old finishes: 3 GPUs free.
    s.delete_workload("z/old")
    s.upsert_workload(job("b/p1", "b", 4, priority=50, created=2))  # short 1; nothing to take
    s.upsert_workload(job("c/first", "c", 1, priority=70, created=2))  # borrows 1
    s.upsert_workload(job("y/new", "y", 2, priority=60, created=2))  # y starts borrowing
    s.upsert_workload(job("c/p2", "c", 2, pods=2, priority=50, created=2))  # takes y/old
    r = s.run_cycle(2.0)
    assert admitted(r) == ["c/first", "y/new"]
    assert [(p.victim, p.preemptor, p.reason) for p in r.preemptions] == [
        ("y/old", "c/p2", "InCohortReclaimWhileBorrowing")
    ]
