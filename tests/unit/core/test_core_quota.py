"""Quota scenarios a reader can check by hand: borrowing, reclaim, nested cohorts, limits, FIFO."""

from __future__ import annotations

import pytest
from core_helpers import admitted, gpu_cohort, gpu_queue, job, quota, reason_of, scheduler, usage

from queuectl.core import CycleResult, PreemptionPolicy, Scheduler

RECLAIM = PreemptionPolicy(reclaim_within_cohort="Any")


def test_two_teams_one_borrows_then_the_owner_returns_and_reclaims() -> None:
    s = scheduler(
        gpu_queue("team-a", quota("h100", 8), preemption=RECLAIM),
        gpu_queue("team-b", quota("h100", 8), preemption=RECLAIM),
        *(job(f"b/{i}", "team-b", 4, created=i) for i in range(4)),
    )
    # team-a is idle, so team-b runs 16 GPUs: 8 of its own and 8 borrowed.
    assert admitted(s.run_cycle(1.0)) == ["b/0", "b/1", "b/2", "b/3"]
    assert usage(s, "team-b") == 16

    # team-a comes back for its 8 GPUs: exactly two of team-b's borrowed jobs are reclaimed.
    s.upsert_workload(job("a/0", "team-a", 8, created=10))
    r = s.run_cycle(2.0)
    assert r.admitted == ()
    assert sorted(p.victim for p in r.preemptions) == ["b/2", "b/3"]  # the newest
    assert {p.reason for p in r.preemptions} == {"InCohortReclamation"}
    assert reason_of(s, "a/0") == "WaitingForPreemptedWorkloads"

    # The victims stop; team-a is admitted; team-b is back to its nominal 8.
    for p in r.preemptions:
        s.requeue_workload(p.victim)
    r = s.run_cycle(3.0)
    assert admitted(r) == ["a/0"]
    assert (usage(s, "team-a"), usage(s, "team-b")) == (8, 8)
    assert reason_of(s, "b/2") == "WaitingForQuota"
    # And nothing preempts anything ever again: no loop.
    for t in range(4, 8):
        assert s.run_cycle(float(t)).preemptions == ()


def three_levels(dept_x_borrowing: int | None = None) -> list[object]:
    """org -> dept-x (own 4 GPUs) -> team-a (4), team-b (0); org -> dept-y -> team-c (8)."""
    return [
        gpu_cohort("org"),
        gpu_cohort("dept-x", "org", quota("h100", 4, borrowing=dept_x_borrowing)),
        gpu_cohort("dept-y", "org"),
        gpu_queue("team-a", quota("h100", 4), cohort="dept-x"),
        gpu_queue("team-b", quota("h100", 0), cohort="dept-x", preemption=RECLAIM),
        gpu_queue("team-c", quota("h100", 8), cohort="dept-y", preemption=RECLAIM),
    ]


def test_three_levels_of_cohorts_pool_quota_from_the_whole_tree() -> None:
    s = scheduler(*three_levels(), job("b/big", "team-b", 16))
    # team-b owns nothing, yet gets team-a's 4 + dept-x's own 4 + dept-y's 8.
    assert admitted(s.run_cycle(1.0)) == ["b/big"]
    s.upsert_workload(job("b/more", "team-b", 1, created=1))
    s.run_cycle(2.0)
    info = s.pending_info("b/more")
    assert info is not None and info.reason == "WaitingForQuota"
    assert (info.requested, info.available, info.shortfall) == (1, 0, 1)
    assert [(h.cluster_queue, h.usage, h.borrowed) for h in info.holders] == [("team-b", 16, 16)]
    # team-c, two levels away, reclaims its 8: the borrower's only job is the victim.
    s.upsert_workload(job("c/0", "team-c", 8, created=2))
    r = s.run_cycle(3.0)
    assert [(p.victim, p.reason) for p in r.preemptions] == [("b/big", "InCohortReclamation")]


@pytest.mark.parametrize(
    ("borrowing_limit", "gpus", "expected"),
    [
        (None, 16, "admitted"),
        (4, 12, "admitted"),  # dept-x holds 8 and may borrow 4 more from org
        (4, 13, "ExceedsMaxQuota"),
        (0, 9, "ExceedsMaxQuota"),
    ],
)
def test_a_cohort_borrowing_limit_caps_everything_below_it(
    borrowing_limit: int | None, gpus: int, expected: str
) -> None:
    s = scheduler(*three_levels(borrowing_limit), job("b/0", "team-b", gpus))
    r = s.run_cycle(1.0)
    assert (admitted(r) == ["b/0"]) == (expected == "admitted")
    if expected != "admitted":
        assert reason_of(s, "b/0") == expected


@pytest.mark.parametrize(("gpus", "expected"), [(2, "admitted"), (3, "ExceedsMaxQuota")])
def test_a_lending_limit_stops_borrowing(gpus: int, expected: str) -> None:
    s = scheduler(
        gpu_queue("team-a", quota("h100", 8, lending=2)),
        gpu_queue("team-b", quota("h100", 0)),
        job("b/0", "team-b", gpus),
    )
    r = s.run_cycle(1.0)
    assert (admitted(r) == ["b/0"]) == (expected == "admitted")
    if expected != "admitted":
        assert reason_of(s, "b/0") == expected


def test_what_a_queue_keeps_back_stays_its_own() -> None:
    s = scheduler(
        gpu_queue("team-a", quota("h100", 8, lending=2)),
        gpu_queue("team-b", quota("h100", 0)),
        job("b/0", "team-b", 2),
        job("a/0", "team-a", 6, created=1),
    )
    assert admitted(s.run_cycle(1.0)) == ["a/0", "b/0"]
    s.upsert_workload(job("a/1", "team-a", 1, created=2))
    assert admitted(s.run_cycle(2.0)) == []  # team-a lent its 2; it must reclaim them to use them


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [("StrictFIFO", []), ("BestEffortFIFO", ["q/small"])],
)
def test_a_strict_fifo_head_that_does_not_fit_blocks_the_queue(
    strategy: str, expected: list[str]
) -> None:
    s = scheduler(
        gpu_queue("q", quota("h100", 8), cohort=None, strategy=strategy),
        job("q/running", "q", 4),
    )
    s.run_cycle(1.0)
    s.upsert_workload(job("q/head", "q", 8, created=1))
    s.upsert_workload(job("q/small", "q", 2, created=2))
    assert admitted(s.run_cycle(2.0)) == expected
    assert reason_of(s, "q/head") == "WaitingForQuota"
    # When the others finish, the head is admitted.
    s.delete_workload("q/running")
    s.delete_workload("q/small")
    assert admitted(s.run_cycle(3.0)) == ["q/head"]


def blocked_strict_queue() -> tuple[Scheduler, CycleResult]:
    """StrictFIFO `q` (8 GPUs) runs q/running (4); its head q/head (8) does not fit, and
    q/small (2, behind it) would. Returns the scheduler and the cycle at t=2."""
    s = scheduler(
        gpu_queue("q", quota("h100", 8), cohort=None, strategy="StrictFIFO"),
        job("q/running", "q", 4),
    )
    s.run_cycle(1.0)
    s.upsert_workload(job("q/head", "q", 8, created=1))
    s.upsert_workload(job("q/small", "q", 2, created=2))
    return s, s.run_cycle(2.0)


def test_work_behind_a_blocked_strict_fifo_head_is_told_why_it_waits() -> None:
    s, r = blocked_strict_queue()
    told = {p.key: p for p in r.pending}
    assert told["q/small"].reason == "Pending"
    assert "StrictFIFO and a workload ahead of this one does not fit" in told["q/small"].message
    r = s.run_cycle(3.0)  # told once
    assert "q/small" not in {p.key for p in r.pending}


def test_explain_says_a_fitting_workload_waits_behind_its_strict_fifo_head() -> None:
    s, _ = blocked_strict_queue()
    e = s.explain("q/small", 2.0)
    assert e.pending is not None and "fits now, but ClusterQueue q is StrictFIFO" in (
        e.pending.message
    )
    assert "its head q/head does not fit (WaitingForQuota)" in e.pending.message
    head = s.explain("q/head", 2.0)
    assert head.pending is not None and head.pending.reason == "WaitingForQuota"


def test_a_deep_queue_is_admitted_in_one_cycle_and_hopeless_work_is_not_rescanned() -> None:
    s = scheduler(
        gpu_queue("q", quota("h100", 64), cohort=None),
        *(job(f"q/{i:03}", "q", 1, created=i) for i in range(1000)),
    )
    r = s.run_cycle(1.0)
    assert len(r.admitted) == 64
    assert r.evaluated == 65  # the 65th fails and parks the 935 of the same shape with it
    assert s.run_cycle(2.0).evaluated == 0  # nothing changed: nothing is looked at
    s.delete_workload("q/000")
    r = s.run_cycle(3.0)
    assert admitted(r) == ["q/064"] and r.evaluated == 2


def test_priority_then_age_orders_a_queue() -> None:
    s = scheduler(
        gpu_queue("q", quota("h100", 2), cohort=None),
        job("q/old-low", "q", 1, priority=0, created=0),
        job("q/new-high", "q", 1, priority=5, created=9),
        job("q/old-high", "q", 1, priority=5, created=1),
    )
    assert admitted(s.run_cycle(1.0)) == ["q/new-high", "q/old-high"]


def test_requeue_after_node_failure_goes_ahead_of_peers_after_its_backoff() -> None:
    s = scheduler(
        gpu_queue("q", quota("h100", 1), cohort=None),
        job("q/a", "q", 1, created=0),
        job("q/b", "q", 1, created=1),
    )
    assert admitted(s.run_cycle(1.0)) == ["q/a"]
    s.requeue_workload("q/a", not_before=5.0, front=True)
    r = s.run_cycle(2.0)
    assert admitted(r) == ["q/b"] and r.next_wakeup == 5.0  # q/a backs off; q/b takes the GPU
    assert reason_of(s, "q/a") == "Pending"
    s.requeue_workload("q/b", front=False)
    assert admitted(s.run_cycle(5.0)) == ["q/a"]
