"""Scenarios for the answers one cycle reuses: each proves a cached "no" is dropped in time."""

from __future__ import annotations

from core_helpers import admitted, borrower_meets_lender, gpu_queue, job, quota, scheduler

from queuectl.core import (
    GPU,
    BorrowWithinCohort,
    FlavorFungibility,
    PodSet,
    PreemptionPolicy,
    Scheduler,
    Workload,
)
from queuectl.core.quota import QNode, add_usage, available, compute_subtree, share

RECLAIM = PreemptionPolicy(reclaim_within_cohort="Any")
BORROW_OVER_LOWER = PreemptionPolicy(
    reclaim_within_cohort="Any", borrow_within_cohort=BorrowWithinCohort("LowerPriority")
)
WITHIN = PreemptionPolicy(within_cluster_queue="LowerPriority")
BORROW_ONLY = PreemptionPolicy(borrow_within_cohort=BorrowWithinCohort("LowerPriority"))
"""May preempt lower-priority borrowed work while it borrows, never while within its quota."""


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
    b.nominal[fr], b.lending_limit[fr] = 4, 2  # b keeps 2 for itself, lends 2
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


# --- parked work wakes for every change that could admit it ---------------------------------
def test_a_small_release_that_ends_borrowing_lets_the_owner_reclaim_at_once() -> None:
    """a runs 3 + 1 GPUs of its 8; b borrows a's other 4. a/next (5) would borrow, which a may
    not do over anyone, so it parks waiting for 5 freed GPUs. a/small finishes: 1 GPU freed,
    far from 5, but a/next now fits a's own quota and may reclaim b's borrowed GPUs."""
    s = scheduler(
        gpu_queue("a", quota("h100", 8), preemption=RECLAIM),
        gpu_queue("b", quota("h100", 0)),
        job("a/run", "a", 3),
        job("a/small", "a", 1),
        job("b/big", "b", 4),
    )
    assert admitted(s.run_cycle(0.0)) == ["a/run", "a/small", "b/big"]
    s.upsert_workload(job("a/next", "a", 5, created=1))
    r = s.run_cycle(1.0)
    assert admitted(r) == [] and r.preemptions == ()
    s.delete_workload("a/small")
    r = s.run_cycle(2.0)
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("b/big", "a/next")]


def test_work_admitted_in_a_cycle_is_a_victim_in_the_next_without_another_event() -> None:
    """mid/1 preempts lo/old; once lo/old is gone, the next cycle admits mid/1 first thing. top/2,
    looked at later in that cycle, finds nothing to preempt (work admitted in this very cycle is
    never stopped). It must look again one cycle later, with no other event, and take mid/1."""
    s = scheduler(
        gpu_queue("q", quota("h100", 4), preemption=PreemptionPolicy("LowerPriority")),
        job("lo/old", "q", 4),
    )
    assert admitted(s.run_cycle(0.0)) == ["lo/old"]
    s.upsert_workload(job("mid/1", "q", 4, priority=5, created=1))
    r = s.run_cycle(1.0)
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("lo/old", "mid/1")]
    s.delete_workload("lo/old")
    s.upsert_workload(job("top/2", "q", 4, priority=10, created=2))
    r = s.run_cycle(2.0)
    assert admitted(r) == ["mid/1"] and r.preemptions == ()
    r = s.run_cycle(3.0)
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("mid/1", "top/2")]


def test_a_flavor_taken_by_its_owner_sends_a_gang_where_it_may_reclaim() -> None:
    """q's gang: its main pod set borrows own's idle a100s, so the driver, short of h100 (b has
    borrowed all of q's), may not reclaim (a borrower may not preempt here): the gang parks.
    Then own takes its a100s back by admitting work: the main pod set now goes to h100 as well,
    the gang no longer borrows, and it reclaims b's borrowed h100s, in that same cycle (own's
    admission comes in the first pass, the gang's second look in the borrowing pass)."""
    s = scheduler(
        gpu_queue(
            "q",
            quota("h100", 4),
            quota("a100", 0),
            preemption=RECLAIM,
            fungibility=FlavorFungibility("Borrow", "TryNextFlavor"),
        ),
        gpu_queue("own", quota("a100", 2)),
        gpu_queue("b", quota("h100", 0)),
        job("b/run", "b", 4),
        flavors=("h100", "a100"),
    )
    assert admitted(s.run_cycle(0.0)) == ["b/run"]
    gang = Workload(
        "q/gang",
        "q",
        (PodSet("main", 1, {GPU: 2}), PodSet("driver", 1, {GPU: 1})),
        created=1,
    )
    s.upsert_workload(gang)
    r = s.run_cycle(1.0)
    assert r.admitted == () and r.preemptions == ()
    s.upsert_workload(job("own/a", "own", 2, created=2))
    r = s.run_cycle(2.0)
    assert admitted(r) == ["own/a"]
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("b/run", "q/gang")]


def _cycle(s: Scheduler, now: float, fresh: bool) -> tuple[list[str], list[tuple[str, str]]]:
    """One cycle; `fresh`: every parked bucket is evaluated in full first (no parking)."""
    if fresh:
        s.state.wake.all_dirty = True
    r = s.run_cycle(now)
    return admitted(r), [(p.victim, p.preemptor) for p in r.preemptions]


def _lent_out(fresh: bool) -> Scheduler:
    """a (4 GPUs, reclaimWithinCohort Never, borrowWithinCohort LowerPriority), b and c (4
    each): b runs five 2-GPU jobs of priority 0, borrowing c's 4 GPUs and 2 of a's. a/next (4
    GPUs, priority 5) is within a's quota, but only 2 GPUs are free and a may not reclaim:
    it parks with no candidate at all, waiting for 2 GPUs to be freed."""
    s = scheduler(
        gpu_queue("a", quota("h100", 4), preemption=BORROW_ONLY),
        gpu_queue("b", quota("h100", 4)),
        gpu_queue("c", quota("h100", 4)),
        *(job(f"b/{i}", "b", 2, created=i) for i in range(5)),
    )
    assert _cycle(s, 1.0, fresh) == ([f"b/{i}" for i in range(5)], [])
    s.upsert_workload(job("a/next", "a", 4, priority=5, created=10))
    assert _cycle(s, 2.0, fresh) == ([], [])
    return s


def test_a_queue_whose_own_urgent_job_pushed_its_next_job_into_borrowing_preempts_at_once() -> None:
    """a/urgent (2 GPUs, priority 10) takes a's 2 free GPUs in the first pass. a/next would
    now borrow, and as a borrower it may preempt b's lower-priority borrowed work: it does so
    in the borrowing pass of the same cycle, as a fresh evaluation of every workload does
    (nothing was freed, so nothing else wakes it)."""
    for fresh in (False, True):
        s = _lent_out(fresh)
        s.upsert_workload(job("a/urgent", "a", 2, priority=10, created=20))
        victims = [("b/3", "a/next"), ("b/4", "a/next")]
        assert _cycle(s, 3.0, fresh) == (["a/urgent"], victims), fresh


def test_a_lower_priority_job_that_takes_its_queues_last_gpus_lets_the_next_preempt() -> None:
    """a/low (2 GPUs, priority 1) takes a's 2 free GPUs after a/next's turn (which still saw
    them free); in the next cycle, with no other event, a/next would borrow and preempts b's
    borrowed work, as a fresh evaluation does."""
    for fresh in (False, True):
        s = _lent_out(fresh)
        s.upsert_workload(job("a/low", "a", 2, priority=1, created=20))
        assert _cycle(s, 3.0, fresh) == (["a/low"], []), fresh
        assert _cycle(s, 4.0, fresh) == ([], [("b/3", "a/next"), ("b/4", "a/next")]), fresh


def _lost_fit_with_a_small_bucket(fresh: bool) -> Scheduler:
    """owner (4 GPUs) runs owner/0..3; big (3 GPUs, preempts its own lower priority) runs
    big/low (2) and big/tiny (1), both priority 0; big/b0 (1 GPU, priority 0) has no one to
    preempt and parks. Then owner's two oldest finish and its next two take their GPUs in the
    first pass, so big/high (2 GPUs, priority 10), whose fit they took, waits for the next cycle
    instead of preempting: big stops there, and big/b0's bucket, owed a re-check, is left
    unparked with it still owed."""
    s = scheduler(
        gpu_queue("owner", quota("h100", 4)),
        gpu_queue("big", quota("h100", 3), preemption=WITHIN),
        *(job(f"owner/{i}", "owner", 1, created=i) for i in range(4)),
        job("big/low", "big", 2, created=0),
        job("big/tiny", "big", 1, created=0.5),
        job("big/b0", "big", 1, created=0.7),
        patience=0.0,
    )
    assert _cycle(s, 1.0, fresh)[0] == ["big/low", "big/tiny"] + [f"owner/{i}" for i in range(4)]
    s.upsert_workload(job("big/high", "big", 2, priority=10, created=5))
    for i in range(2):
        s.delete_workload(f"owner/{i}")
        s.upsert_workload(job(f"owner/new-{i}", "owner", 1, created=10 + i))
    assert _cycle(s, 2.0, fresh) == (["owner/new-0", "owner/new-1"], [])
    return s


def test_a_new_best_member_of_a_bucket_still_owed_a_re_check_is_evaluated_in_full() -> None:
    """big/mid (1 GPU, priority 5) joins big/b0's bucket: it may preempt big/tiny, which big/b0
    could not. In the next cycle big/high preempts big/low, and big/mid preempts big/tiny, as
    a fresh evaluation does; the bucket's cheap re-check, written for big/b0, would keep it
    parked ("still short", nobody to preempt)."""
    for fresh in (False, True):
        s = _lost_fit_with_a_small_bucket(fresh)
        s.upsert_workload(job("big/mid", "big", 1, priority=5, created=12))
        victims = [("big/low", "big/high"), ("big/tiny", "big/mid")]
        assert _cycle(s, 3.0, fresh) == ([], victims), fresh
