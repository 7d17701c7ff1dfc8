"""Scenarios for the answers one cycle reuses: each proves a cached "no" is dropped in time."""

from __future__ import annotations

from core_helpers import admitted, borrower_meets_lender, gpu_queue, job, quota, scheduler

from queuectl.core import BorrowWithinCohort, PreemptionPolicy
from queuectl.core.quota import QNode, add_usage, available, compute_subtree, share

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


def test_remembered_availability_follows_usage_anywhere_on_the_path() -> None:
    """`available` and `share` remember answers per node: a change of a sibling's usage (seen only
    through the shared parent) must change the answer, and a change that stays inside a
    sibling's guaranteed part (the parent's usage does not move) must not."""
    fr = ("h100", "nvidia.com/gpu")
    root = QNode("org", is_queue=False)
    a, b = QNode("a", is_queue=True), QNode("b", is_queue=True)
    root.nominal[fr] = 4
    a.nominal[fr] = 4
    b.nominal[fr], b.llimit[fr] = 4, 2  # b keeps 2 for itself, lends 2
    for q in (a, b):
        q.parent = root
        root.children.append(q)
    compute_subtree(root)
    assert (available(a, fr), available(b, fr)) == (10, 12)
    add_usage(b, fr, 2)  # inside b's guaranteed part: the parent's usage does not move
    assert root.usage == {} and available(a, fr) == 10
    assert available(b, fr) == 10
    assert share(b) == 0.0
    add_usage(b, fr, 9)  # 9 beyond guaranteed: a sees the pool shrink
    assert available(a, fr) == 1 and available(b, fr) == 1
    assert share(b) == 7 / 10
    add_usage(a, fr, 1)  # a takes the last one: nothing left for b, right at the boundary
    assert available(a, fr) == 0 and available(b, fr) == 0
    assert share(a) == 0.0
    add_usage(b, fr, -11)
    assert available(a, fr) == 9 and available(b, fr) == 11 and share(b) == 0.0


def test_a_borrower_remembered_by_one_search_loses_its_victim_before_the_next() -> None:
    """Victim searches of one cycle share each queue's preemptible work: once a search takes
    x/2, the next preemptor of the same cycle, short of the same thing, must take x/1 (x/2 is
    already going), not be handed the remembered list with x/2 still in it."""
    s = scheduler(
        gpu_queue("a", quota("h100", 4), preemption=RECLAIM),
        gpu_queue("b", quota("h100", 4), preemption=RECLAIM),
        gpu_queue("x", quota("h100", 0)),
        job("x/1", "x", 4, created=0),
        job("x/2", "x", 4, created=1),
    )
    assert admitted(s.run_cycle(0.0)) == ["x/1", "x/2"]  # x borrows all 8
    s.upsert_workload(job("a/p", "a", 4, created=2))
    s.upsert_workload(job("b/p", "b", 4, created=3))
    r = s.run_cycle(1.0)
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("x/2", "a/p"), ("x/1", "b/p")]
    # Next cycle (memo gone): nothing left to take, nothing taken twice.
    s.upsert_workload(job("a/q", "a", 4, created=4))
    assert s.run_cycle(2.0).preemptions == ()


def test_victim_candidates_are_a_priority_prefix_with_exact_bounds_and_ties_interleave() -> None:
    """Searches take a prefix of each queue's ranked work (priority below a bound) and merge
    queues of equal share by rank, without building every candidate: the bounds must be exact
    (equal priority is not lower; the borrow threshold is inclusive) and the order unchanged."""

    borrower = borrower_meets_lender

    assert [p.victim for p in borrower(5, 5).run_cycle(2.0).preemptions] == ["y/0"]
    assert borrower(4, 5).run_cycle(2.0).preemptions == ()
    assert borrower(None, 10).run_cycle(2.0).preemptions == ()
    assert [p.victim for p in borrower(None, 9).run_cycle(2.0).preemptions] == ["y/0"]

    lower = PreemptionPolicy(reclaim_within_cohort="LowerPriority")
    s = scheduler(
        gpu_queue("owner", quota("h100", 8), preemption=lower),
        gpu_queue("y1", quota("h100", 0)),
        gpu_queue("y2", quota("h100", 0)),
        job("y1/0", "y1", 2),
        job("y2/0", "y2", 2, created=1),
    )
    assert admitted(s.run_cycle(1.0)) == ["y1/0", "y2/0"]
    s.upsert_workload(job("y1/1", "y1", 2, priority=1, created=2))
    s.upsert_workload(job("y2/1", "y2", 2, created=3))
    assert admitted(s.run_cycle(2.0)) == ["y1/1", "y2/1"]  # equal shares: 4 of 8 each
    s.upsert_workload(job("owner/0", "owner", 2, created=4))
    assert s.run_cycle(3.0).preemptions == ()  # nobody is below priority 0
    s.upsert_workload(job("owner/1", "owner", 2, priority=1, created=5))
    # Priority 0 only (y1/1 is not lower), newest admitted first across both queues.
    assert [p.victim for p in s.run_cycle(4.0).preemptions] == ["y2/1"]
