"""Fair shares are taken back: with fair-sharing preemption on, a team under its share takes
borrowed GPUs back from a team above its share, even at equal priority.

The cohort `org` owns 8 GPUs that no team owns; teams a and b own none, so all they run is
borrowed. b came first and took all 8.
"""

from __future__ import annotations

import pytest
from core_helpers import admitted, gpu_cohort, gpu_queue, job, quota, scheduler, usage

from queuectl.core import Cohort, PreemptionPolicy, Scheduler

ANY = PreemptionPolicy(reclaim_within_cohort="Any")
BOTH = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
FINAL = ("LessThanOrEqualToFinalShare",)


def b_took_every_gpu(
    fair: tuple[str, ...], *, gpus: int = 1, grace: float = 0.0, min_runtime: float = 0.0
) -> Scheduler:
    """b runs 8 GPUs of equal-priority work (jobs of `gpus` GPUs), created 0, 1, ...; a is idle."""
    s = scheduler(
        gpu_cohort("org", None, quota("h100", 8)),
        gpu_queue("a", quota("h100", 0), preemption=ANY),
        gpu_queue("b", quota("h100", 0), preemption=ANY),
        *(
            job(f"b/{i}", "b", gpus, created=i, grace=grace, min_runtime=min_runtime)
            for i in range(8 // gpus)
        ),
        fair=fair,
    )
    assert len(admitted(s.run_cycle(1.0))) == 8 // gpus
    return s


def test_team_a_at_share_zero_takes_back_bs_newest_borrowed_job_after_its_grace_period() -> None:
    s = b_took_every_gpu(BOTH, grace=600)
    s.upsert_workload(job("a/0", "a", 1, created=10))
    r = s.run_cycle(10.0)
    assert [(p.victim, p.preemptor, p.reason, p.deadline) for p in r.preemptions] == [
        ("b/7", "a/0", "InCohortFairSharing", 610.0)
    ]
    assert r.admitted == ()  # b/7 keeps running for its grace period
    assert s.run_cycle(300.0).admitted == ()
    s.requeue_workload("b/7")  # its grace period is over: the controller stopped it
    assert admitted(s.run_cycle(610.0)) == ["a/0"]
    assert (usage(s, "a"), usage(s, "b")) == (1, 7)


def test_without_fair_sharing_preemption_team_a_waits_for_b_to_finish() -> None:
    s = b_took_every_gpu(())
    s.upsert_workload(job("a/0", "a", 1, created=10))
    r = s.run_cycle(10.0)
    assert (r.preemptions, r.admitted) == ((), ())
    assert s.pending_info("a/0") is not None


def test_shares_even_out_and_stop_there() -> None:
    # a asks for 8 one by one: it takes b's work back until both run 4, then waits.
    s = b_took_every_gpu(BOTH)
    for i in range(8):
        s.upsert_workload(job(f"a/{i}", "a", 1, created=10 + i))
    t = 10.0
    for _ in range(12):
        r = s.run_cycle(t)
        for p in r.preemptions:
            s.requeue_workload(p.victim)
        t += 1
    assert (usage(s, "a"), usage(s, "b")) == (4, 4)


def test_young_work_keeps_its_minimum_runtime() -> None:
    s = b_took_every_gpu(BOTH, min_runtime=100)
    s.upsert_workload(job("a/0", "a", 1, created=10))
    r = s.run_cycle(10.0)
    assert r.preemptions == ()
    assert r.next_wakeup == 101.0  # when b's work comes of age
    assert [p.victim for p in s.run_cycle(101.0).preemptions] == ["b/7"]


@pytest.mark.parametrize(("rules", "victims"), [(BOTH, ["b/0"]), (FINAL, [])])
def test_less_than_initial_share_takes_a_whole_job_the_strict_rule_refuses(
    rules: tuple[str, ...], victims: list[str]
) -> None:
    # b runs one 8-GPU job; a wants 4. Taking it leaves b at 0, below a's 4: the strict rule
    # refuses; a's 4 is still below b's 8 before, so the second rule takes it.
    s = b_took_every_gpu(rules, gpus=8)
    s.upsert_workload(job("a/0", "a", 4, created=10))
    assert [p.victim for p in s.run_cycle(10.0).preemptions] == victims


def test_lower_priority_policy_keeps_equal_priority_work() -> None:
    s = scheduler(
        gpu_cohort("org", None, quota("h100", 8)),
        gpu_queue("a", quota("h100", 0), preemption=PreemptionPolicy("Never", "LowerPriority")),
        gpu_queue("b", quota("h100", 0)),
        *(job(f"b/{i}", "b", 1, created=i) for i in range(8)),
        fair=BOTH,
    )
    s.run_cycle(1.0)
    s.upsert_workload(job("a/0", "a", 1, created=10))
    assert s.run_cycle(10.0).preemptions == ()


def test_the_victim_coming_back_does_not_take_it_back() -> None:
    s = b_took_every_gpu(BOTH)
    s.upsert_workload(job("a/0", "a", 4, created=10))
    s.upsert_workload(job("a/1", "a", 1, created=11))
    taken: list[str] = []
    t = 10.0
    for _ in range(6):
        r = s.run_cycle(t)
        assert all(p.preemptor.startswith("a/") for p in r.preemptions)
        for p in r.preemptions:
            taken.append(p.victim)
            s.requeue_workload(p.victim)
        t += 1
    assert taken and usage(s, "a") >= 4


@pytest.mark.parametrize(("weight", "victims"), [(1.0, ["x/7"]), (2.0, [])])
def test_a_cohort_weight_counts_where_the_branches_meet(weight: float, victims: list[str]) -> None:
    # org owns 12. Department X (weight `weight`) runs 8, department Y runs 4, all borrowed.
    # Y wants one more: at weight 1 X's share (8/12) stays above Y's (5/12) without one of its
    # jobs; at weight 2 X's share is 4/12 and Y's would pass it.
    s = scheduler(
        gpu_cohort("org", None, quota("h100", 12)),
        Cohort("X", "org", fair_weight=weight),
        gpu_cohort("Y", "org"),
        gpu_queue("x", quota("h100", 0), cohort="X", preemption=ANY),
        gpu_queue("y", quota("h100", 0), cohort="Y", preemption=ANY),
        *(job(f"x/{i}", "x", 1, created=i) for i in range(8)),
        *(job(f"y/{i}", "y", 1, created=i) for i in range(4)),
        fair=BOTH,
    )
    assert len(admitted(s.run_cycle(1.0))) == 12
    s.upsert_workload(job("y/new", "y", 1, created=10))
    assert [p.victim for p in s.run_cycle(10.0).preemptions] == victims
    if not victims:  # the reason says why nothing was taken
        info = s.pending_info("y/new")
        assert info is not None
        assert info.message.endswith(
            "no preemption would make it fit within fair shares: the queues that borrow it are "
            "not above this queue's weighted share where their branches meet"
        ), info.message


@pytest.mark.parametrize(
    "rules",
    [("LessThanInitialShare", "LessThanOrEqualToFinalShare"), ("Fair",), FINAL + FINAL],
)
def test_a_bad_list_of_rules_is_refused_with_what_to_give(rules: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="LessThanOrEqualToFinalShare, LessThanInitialShare"):
        Scheduler(fair_preemption=rules)


def test_a_fair_share_preemptor_is_patient_like_any_other() -> None:
    # One of b's jobs finished a second before a's arrives (b took the GPU back at once): quota
    # is flowing back, so a waits for completions first, and preempts when its patience runs out.
    s = b_took_every_gpu(BOTH)
    s.upsert_workload(job("b/8", "b", 1, created=8))
    s.delete_workload("b/0")  # finished
    assert admitted(s.run_cycle(9.0)) == ["b/8"]
    s.upsert_workload(job("a/0", "a", 1, created=10))
    r = s.run_cycle(10.0)
    assert r.preemptions == ()
    info = s.pending_info("a/0")
    assert info is not None and "instead of preempting" in info.message
    assert [p.victim for p in s.run_cycle(15.0).preemptions] == ["b/8"]


def test_a_weight_zero_team_borrows_only_what_nobody_else_wants() -> None:
    # b has weight 0: while it borrows anything its share outweighs a's, so a, asking for 8 one
    # by one, takes all 8 back (at equal weights both would stop at 4).
    s = scheduler(
        gpu_cohort("org", None, quota("h100", 8)),
        gpu_queue("a", quota("h100", 0), preemption=ANY),
        gpu_queue("b", quota("h100", 0), preemption=ANY, weight=0.0),
        *(job(f"b/{i}", "b", 1, created=i) for i in range(8)),
        fair=BOTH,
    )
    assert len(admitted(s.run_cycle(1.0))) == 8  # nobody else wanted them
    for i in range(8):
        s.upsert_workload(job(f"a/{i}", "a", 1, created=10 + i))
    t = 10.0
    for _ in range(12):
        for p in s.run_cycle(t).preemptions:
            s.requeue_workload(p.victim)
        t += 1
    assert (usage(s, "a"), usage(s, "b")) == (8, 0)
