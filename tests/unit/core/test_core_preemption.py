"""Preemption and fair sharing scenarios."""

from __future__ import annotations

from core_helpers import (
    admitted,
    borrower_meets_lender,
    gpu_queue,
    job,
    quota,
    reason_of,
    scheduler,
    usage,
)

from queuectl.core import PreemptionPolicy, Scheduler

WITHIN = PreemptionPolicy(within_cluster_queue="LowerPriority")


def running(*jobs: tuple[str, int, float], min_runtime: float = 0.0) -> Scheduler:
    """One 4-GPU queue; each (key, priority, admitted at) job holds one GPU."""
    s = scheduler(gpu_queue("q", quota("h100", 4), cohort=None, preemption=WITHIN))
    for key, prio, at in jobs:
        s.upsert_workload(job(key, "q", 1, priority=prio, created=at, min_runtime=min_runtime))
        assert admitted(s.run_cycle(at)) == [key]
    return s


FOUR = (("q/a", 1, 1.0), ("q/b", 1, 2.0), ("q/c", 2, 3.0), ("q/d", 3, 4.0))


def test_priority_preemption_picks_the_newest_of_the_lowest_priority() -> None:
    s = running(*FOUR)
    s.upsert_workload(job("q/urgent", "q", 1, priority=10, created=5))
    r = s.run_cycle(10.0)
    assert [(p.victim, p.preemptor, p.reason) for p in r.preemptions] == [
        ("q/b", "q/urgent", "InClusterQueue")
    ]


def test_the_fewest_victims_that_make_room() -> None:
    s = running(*FOUR)
    s.upsert_workload(job("q/urgent", "q", 1, pods=2, priority=10, created=5))
    r = s.run_cycle(10.0)
    assert sorted(p.victim for p in r.preemptions) == ["q/a", "q/b"]


def test_a_young_victim_is_protected_until_its_minimum_runtime() -> None:
    s = running(*FOUR, min_runtime=20.0)  # q/a admitted at 1 is protected until 21, q/b until 22
    s.upsert_workload(job("q/urgent", "q", 1, priority=10, created=5))
    r = s.run_cycle(21.5)
    assert [p.victim for p in r.preemptions] == ["q/a"]  # q/b, the usual choice, is too young


def test_when_every_candidate_is_protected_it_waits_and_says_when_to_look_again() -> None:
    s = running(*FOUR, min_runtime=20.0)
    s.upsert_workload(job("q/urgent", "q", 1, priority=10, created=5))
    r = s.run_cycle(10.0)
    assert r.preemptions == () and r.next_wakeup == 21.0
    assert reason_of(s, "q/urgent") == "WaitingForQuota"
    assert [p.victim for p in s.run_cycle(21.0).preemptions] == ["q/a"]


def test_no_preemption_that_would_not_make_the_preemptor_fit() -> None:
    s = running(("q/low", 1, 1.0), ("q/high1", 9, 2.0), ("q/high2", 9, 3.0), ("q/high3", 9, 4.0))
    s.upsert_workload(job("q/big", "q", 2, priority=5, created=5))
    r = s.run_cycle(10.0)
    assert r.preemptions == ()  # evicting q/low alone frees 1 of the 2 GPUs it needs
    explained = s.explain("q/big", 10.0)
    assert not explained.preemption_possible and explained.would_evict == ()


def test_freed_quota_is_held_for_the_preemptor_while_victims_drain() -> None:
    s = scheduler(
        gpu_queue(
            "team-a", quota("h100", 4), preemption=PreemptionPolicy(reclaim_within_cohort="Any")
        ),
        gpu_queue("team-b", quota("h100", 0)),
        gpu_queue("team-c", quota("h100", 0)),
        job("b/0", "team-b", 2, created=0),
        job("b/1", "team-b", 2, created=1),
    )
    assert admitted(s.run_cycle(1.0)) == ["b/0", "b/1"]
    s.upsert_workload(job("a/0", "team-a", 4, created=2, priority=0))
    r = s.run_cycle(2.0)
    assert sorted(p.victim for p in r.preemptions) == ["b/0", "b/1"]
    # One victim is gone; team-c's small job would fit in what it freed, but that is a/0's.
    s.requeue_workload("b/0")
    s.upsert_workload(job("c/0", "team-c", 2, created=3, priority=100))
    assert admitted(s.run_cycle(3.0)) == []
    assert reason_of(s, "a/0") == "WaitingForPreemptedWorkloads"
    s.requeue_workload("b/1")
    assert admitted(s.run_cycle(4.0)) == ["a/0"]
    assert usage(s, "team-a") == 4 and usage(s, "team-c") == 0


def test_borrow_within_cohort_respects_the_priority_threshold() -> None:

    r = borrower_meets_lender(None, 5).run_cycle(2.0)
    assert [(p.victim, p.reason) for p in r.preemptions] == [
        ("y/0", "InCohortReclaimWhileBorrowing")
    ]
    assert (
        borrower_meets_lender(4, 5).run_cycle(2.0).preemptions == ()
    )  # y/0's priority 5 is above the threshold


def test_fair_sharing_between_two_borrowers_with_weights_one_and_three() -> None:
    s = scheduler(
        gpu_queue("lender", quota("h100", 8)),
        gpu_queue("light", quota("h100", 0), weight=1.0),
        gpu_queue("heavy", quota("h100", 0), weight=3.0),
        *(job(f"light/{i}", "light", 1, created=2 * i) for i in range(10)),
        *(job(f"heavy/{i}", "heavy", 1, created=2 * i + 1) for i in range(10)),
    )
    s.run_cycle(1.0)
    assert (usage(s, "light"), usage(s, "heavy")) == (2, 6)


def test_the_largest_borrower_gives_back_first() -> None:
    reclaim = PreemptionPolicy(reclaim_within_cohort="Any")
    s = scheduler(
        gpu_queue("owner", quota("h100", 8), preemption=reclaim),
        gpu_queue("small", quota("h100", 0)),
        gpu_queue("large", quota("h100", 0)),
        job("large/0", "large", 6, created=0),
        job("small/0", "small", 2, created=1),
    )
    assert admitted(s.run_cycle(1.0)) == ["large/0", "small/0"]
    s.upsert_workload(job("owner/0", "owner", 2, created=2))
    r = s.run_cycle(2.0)
    # small/0 is newer and exactly the right size, but "large" borrows the larger share.
    assert [p.victim for p in r.preemptions] == ["large/0"]


def test_the_free_part_of_a_preemptors_need_is_held_too() -> None:
    s = scheduler(
        gpu_queue(
            "team-a", quota("h100", 4), preemption=PreemptionPolicy(reclaim_within_cohort="Any")
        ),
        gpu_queue("team-b", quota("h100", 0)),
        gpu_queue("team-c", quota("h100", 0)),
        job("b/0", "team-b", 2),
    )
    assert admitted(s.run_cycle(1.0)) == ["b/0"]
    s.upsert_workload(job("a/0", "team-a", 4, created=1))
    assert [p.victim for p in s.run_cycle(2.0).preemptions] == ["b/0"]
    # 2 GPUs are free right now, but they are part of what a/0 was promised.
    s.upsert_workload(job("c/0", "team-c", 2, created=2, priority=100))
    assert admitted(s.run_cycle(3.0)) == []
    s.requeue_workload("b/0")
    assert admitted(s.run_cycle(4.0)) == ["a/0"]
