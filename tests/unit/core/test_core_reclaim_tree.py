"""Reclaim follows the cohort tree: an owner takes back its quota from the branch that borrowed it.

Root R with cohorts A (a1: 8 GPUs, a2: none) and B (b1: 8, b2: none). Inside each cohort one
queue borrows its neighbour's idle GPUs; the whole tree is full. When b1 comes back for its
quota, the GPUs it lent went to b2, inside B: b2's work is what gives them back. a2 borrows only
from a1, inside A; A as a whole runs within its own 8, so nothing of A's is B's to take.
"""

from __future__ import annotations

from core_helpers import admitted, gpu_cohort, gpu_queue, job, quota, scheduler, usage

from queuectl.core import BorrowWithinCohort, PreemptionPolicy, Scheduler

RECLAIM = PreemptionPolicy(reclaim_within_cohort="Any")


def two_departments(*, r_quota: int = 0) -> list[object]:
    """R -> A (a1: 8, a2: 0), R -> B (b1: 8, b2: 0); every queue reclaims Any."""
    return [
        gpu_cohort("R", None, *((quota("h100", r_quota),) if r_quota else ())),
        gpu_cohort("A", "R"),
        gpu_cohort("B", "R"),
        gpu_queue("a1", quota("h100", 8), cohort="A", preemption=RECLAIM),
        gpu_queue("a2", quota("h100", 0), cohort="A", preemption=RECLAIM),
        gpu_queue("b1", quota("h100", 8), cohort="B", preemption=RECLAIM),
        gpu_queue("b2", quota("h100", 0), cohort="B", preemption=RECLAIM),
    ]


def full_tree() -> Scheduler:
    """a2 runs 8 on a1's idle quota; b1 runs 4 of its own and b2 borrows b1's other 4."""
    s = scheduler(
        *two_departments(),
        job("a2/big", "a2", 8),
        job("b1/own", "b1", 4),
        job("b2/lent", "b2", 4),
    )
    assert admitted(s.run_cycle(1.0)) == ["a2/big", "b1/own", "b2/lent"]
    return s


def test_the_owner_takes_back_what_its_own_cohort_borrowed_not_what_the_other_cohort_runs() -> None:
    s = full_tree()
    # b1 asks for the 4 it lent: b2 borrowed them, so b2's job stops, not a2's.
    s.upsert_workload(job("b1/back", "b1", 4, created=2))
    r = s.run_cycle(2.0)
    assert [(p.victim, p.preemptor, p.reason) for p in r.preemptions] == [
        ("b2/lent", "b1/back", "InCohortReclamation")
    ]
    s.requeue_workload("b2/lent")
    assert admitted(s.run_cycle(3.0)) == ["b1/back"]
    # Nobody borrows across the cohorts: A and B each run exactly their own 8.
    assert (usage(s, "a1") + usage(s, "a2"), usage(s, "b1") + usage(s, "b2")) == (8, 8)


def test_a_borrowing_owner_takes_nothing_from_a_cohort_within_its_own_quota() -> None:
    s = scheduler(*two_departments(), job("a2/big", "a2", 8), job("b1/own", "b1", 8))
    assert admitted(s.run_cycle(1.0)) == ["a2/big", "b1/own"]
    # b1 at its nominal 8 asks for more: it would borrow, and A runs on A's own quota.
    borrow = PreemptionPolicy(
        reclaim_within_cohort="Any", borrow_within_cohort=BorrowWithinCohort("LowerPriority")
    )
    s.upsert_cluster_queue(gpu_queue("b1", quota("h100", 8), cohort="B", preemption=borrow))
    s.upsert_workload(job("b1/more", "b1", 4, priority=10, created=2))
    assert s.run_cycle(2.0).preemptions == ()


def test_a_cohort_that_borrows_from_the_other_is_reclaimed_from() -> None:
    # B is idle: a2 runs 16, a1's 8 and B's 8. b1 comes back for 8: A borrows B's quota at R,
    # so a2's work is reclaimed there.
    s = scheduler(*two_departments(), *(job(f"a2/{i}", "a2", 4, created=i) for i in range(4)))
    assert len(admitted(s.run_cycle(1.0))) == 4
    s.upsert_workload(job("b1/back", "b1", 8, created=10))
    r = s.run_cycle(2.0)
    assert sorted(p.victim for p in r.preemptions) == ["a2/2", "a2/3"]  # the newest two


def test_the_nearest_borrower_goes_first() -> None:
    # R owns 8 itself: A borrows 4 of them (a2 runs 12), B borrows 4 (b2 runs 4, b1 runs 8).
    # b1 is within its quota and short: b2, a sibling in B, is taken before a2, a cousin.
    s = scheduler(
        *two_departments(r_quota=8),
        *(job(f"a2/{i}", "a2", 4, created=i) for i in range(3)),
        job("b1/own", "b1", 4),
        job("b2/lent", "b2", 4),
        job("b2/more", "b2", 4, created=1),
    )
    assert len(admitted(s.run_cycle(1.0))) == 6
    s.upsert_workload(job("b1/back", "b1", 4, created=10))
    r = s.run_cycle(2.0)
    assert [p.victim for p in r.preemptions] == ["b2/more"]


def test_two_owners_coming_back_together_take_the_borrowed_quota_back_once() -> None:
    # A borrows 4 of B's quota (a2 runs three 4-GPU jobs); b1 and b2 each come back for 2.
    # Stopping a2's newest job gives back all 4: the second owner waits for it, it does not
    # stop a second job of A's, which would leave A below its own 8.
    s = scheduler(
        gpu_cohort("R"),
        gpu_cohort("A", "R"),
        gpu_cohort("B", "R"),
        gpu_queue("a1", quota("h100", 8), cohort="A", preemption=RECLAIM),
        gpu_queue("a2", quota("h100", 0), cohort="A", preemption=RECLAIM),
        gpu_queue("b1", quota("h100", 4), cohort="B", preemption=RECLAIM),
        gpu_queue("b2", quota("h100", 4), cohort="B", preemption=RECLAIM),
        *(job(f"a2/{i}", "a2", 4, created=i) for i in range(3)),
        job("b1/own", "b1", 2, created=3),
        job("b2/own", "b2", 2, created=4),
    )
    assert len(admitted(s.run_cycle(1.0))) == 5
    s.upsert_workload(job("b1/back", "b1", 2, created=10))
    s.upsert_workload(job("b2/back", "b2", 2, created=11))
    r = s.run_cycle(2.0)
    assert [p.victim for p in r.preemptions] == ["a2/2"]
    s.requeue_workload("a2/2")
    assert admitted(s.run_cycle(3.0)) == ["b1/back", "b2/back"]
    assert (usage(s, "a2"), usage(s, "b1") + usage(s, "b2")) == (8, 8)
