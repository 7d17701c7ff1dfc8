"""Preemption patience: a high-priority job that arrives while finished work keeps returning
quota to its cohort waits for that quota (holding it as it frees) instead of evicting anyone;
in a quiet cohort, or once its patience is spent, it preempts as before."""

from __future__ import annotations

import pytest
from core_helpers import admitted, gpu_queue, job, quota, scheduler
from core_worlds import FAST, World, any_world, contended_world, drive, nothing
from hypothesis import given

from queuectl.core import (
    GPU,
    CycleResult,
    Flavor,
    Node,
    PreemptionPolicy,
    Scheduler,
    Topology,
    waits_for_completions,
)
from queuectl.core.patience import DEFAULT_PATIENCE_SECONDS, MAX_ALLOWANCE_SECONDS

WITHIN = PreemptionPolicy(within_cluster_queue="LowerPriority")
RECLAIM = PreemptionPolicy(reclaim_within_cohort="Any")
RECLAIM_LOWER = PreemptionPolicy(reclaim_within_cohort="LowerPriority")
WAITS = "it waits for that instead of preempting"


def busy_cohort(
    patience: float = DEFAULT_PATIENCE_SECONDS,
    borrowing: int | None = None,
    infer_lends: int | None = None,
) -> Scheduler:
    """`train` (4 GPUs, may borrow `borrowing` more, preempts its own lower priority) runs
    train/low-0..3; `infer` (4 GPUs, lends `infer_lends` of them) runs infer/0..3: the cohort
    is full. At t=2 all of infer's jobs finish and its next four take their GPUs back, so 4
    GPUs came back to the cohort just now. Then train/urgent (4 GPUs, priority 10) arrives."""
    s = Scheduler(preemption_patience=patience)
    s.upsert_flavor(Flavor("h100"))
    s.upsert_cluster_queue(gpu_queue("train", quota("h100", 4, borrowing), preemption=WITHIN))
    s.upsert_cluster_queue(gpu_queue("infer", quota("h100", 4, lending=infer_lends)))
    for i in range(4):
        s.upsert_workload(job(f"train/low-{i}", "train", 1, created=i))
        s.upsert_workload(job(f"infer/{i}", "infer", 1, created=i))
    assert len(s.run_cycle(1.0).admitted) == 8
    for i in range(4):
        s.delete_workload(f"infer/{i}")
        s.upsert_workload(job(f"infer/{i + 4}", "infer", 1, created=10 + i))
    assert admitted(s.run_cycle(2.0)) == [f"infer/{i}" for i in range(4, 8)]
    s.upsert_workload(job("train/urgent", "train", 4, priority=10, created=20))
    return s


def urgent_took_all_of_trains_low_work(r: CycleResult) -> bool:
    return [(p.victim, p.preemptor) for p in r.preemptions] == [
        (f"train/low-{i}", "train/urgent") for i in range(4)
    ]


def test_a_waiter_is_told_apart_from_other_quota_waits_without_matching_prose() -> None:
    """`queuectl describe` asks the core whether what the controller wrote is a waiter's."""
    s = busy_cohort()
    s.run_cycle(3.0)
    info = s.pending_info("train/urgent")
    assert info is not None and waits_for_completions(info.reason, info.message)
    quiet = busy_cohort(patience=0)  # no patience: it preempts; the reason says nothing of it
    quiet.upsert_workload(job("train/more", "train", 8, priority=10, created=30))
    quiet.run_cycle(3.0)
    other = quiet.pending_info("train/more")
    assert other is not None and other.reason == "WaitingForQuota"
    assert not waits_for_completions(other.reason, other.message)
    assert not waits_for_completions("Pending", info.message)


def test_a_preemptor_waits_for_quota_that_finished_work_is_returning_and_evicts_nobody() -> None:
    s = busy_cohort()
    r = s.run_cycle(3.0)
    assert r.preemptions == () and admitted(r) == []
    info = s.pending_info("train/urgent")
    assert info is not None and info.reason == "WaitingForQuota" and WAITS in info.message
    assert "after 5s of waiting, it preempts" in info.message
    assert r.next_wakeup == 3.0 + DEFAULT_PATIENCE_SECONDS
    # train's own low-priority jobs finish one by one; each GPU is held for train/urgent.
    for i in range(3):
        s.delete_workload(f"train/low-{i}")
        r = s.run_cycle(4.0 + i)
        assert r.preemptions == () and admitted(r) == []
    s.delete_workload("train/low-3")
    r = s.run_cycle(7.0)
    assert admitted(r) == ["train/urgent"] and r.preemptions == ()


def test_quota_freed_while_it_waits_is_held_for_it_not_taken_by_other_queues() -> None:
    s = busy_cohort()
    s.run_cycle(3.0)
    s.delete_workload("train/low-0")
    s.upsert_workload(job("infer/late", "infer", 1, created=30))  # could borrow the freed GPU
    r = s.run_cycle(4.0)
    assert admitted(r) == [] and r.preemptions == ()
    r = s.run_cycle(5.0)  # infer/late still waits: the GPU was train/urgent's first
    assert admitted(r) == [] and r.preemptions == ()


def test_a_waiting_preemptor_preempts_when_its_patience_is_spent() -> None:
    """infer's work keeps finishing and restarting, but infer lends nothing: the quota that
    comes back never reaches train/urgent, which preempts once its 5 seconds are up."""
    s = busy_cohort(infer_lends=0)
    for t in range(3, 8):
        r = s.run_cycle(float(t))
        assert r.preemptions == (), t
        s.delete_workload(f"infer/{t + 1}")
        s.upsert_workload(job(f"infer/{t + 5}", "infer", 1, created=10 + t))
    r = s.run_cycle(8.0)
    assert urgent_took_all_of_trains_low_work(r)


def test_a_queue_that_may_not_borrow_does_not_wait_for_other_queues_completions() -> None:
    """train's borrowingLimit is 0: what infer's finished work returns is infer's own quota
    and can never reach it, so it preempts at once instead of waiting its 5 seconds."""
    s = busy_cohort(borrowing=0)
    r = s.run_cycle(3.0)
    assert urgent_took_all_of_trains_low_work(r)


def test_a_queue_that_may_not_borrow_waits_for_its_own_completions() -> None:
    s = busy_cohort(borrowing=0)
    for i in range(4):  # train's own work turns over too: 4 GPUs came back to it at t=2.5
        s.delete_workload(f"train/low-{i}")
        s.upsert_workload(job(f"train/low-{i + 4}", "train", 1, created=15 + i))
    s.delete_workload("train/urgent")  # it arrives after the turnover
    assert len(s.run_cycle(2.5).admitted) == 4
    s.upsert_workload(job("train/urgent", "train", 4, priority=10, created=20))
    r = s.run_cycle(3.0)
    assert r.preemptions == () and admitted(r) == []
    info = s.pending_info("train/urgent")
    assert info is not None and WAITS in info.message


def test_a_queue_that_may_not_borrow_waits_for_its_loans_coming_home() -> None:
    """train (4 GPUs, borrowingLimit 0) lent 2 idle GPUs to infer, and runs 2 jobs of its own.
    infer's two borrowing jobs finish (their next two borrow again): those GPUs were train's
    quota coming home, so train/urgent (2 GPUs) waits for that flow instead of preempting."""
    s = Scheduler(preemption_patience=DEFAULT_PATIENCE_SECONDS)
    s.upsert_flavor(Flavor("h100"))
    policy = PreemptionPolicy(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any")
    s.upsert_cluster_queue(gpu_queue("train", quota("h100", 4, 0), preemption=policy))
    s.upsert_cluster_queue(gpu_queue("infer", quota("h100", 4)))
    for i in range(6):
        s.upsert_workload(job(f"infer/{i}", "infer", 1, created=i))
    assert len(s.run_cycle(1.0).admitted) == 6
    for i in range(2):
        s.upsert_workload(job(f"train/low-{i}", "train", 1, created=10 + i))
    assert len(s.run_cycle(1.5).admitted) == 2
    for i in (4, 5):
        s.delete_workload(f"infer/{i}")
        s.upsert_workload(job(f"infer/{i + 2}", "infer", 1, created=20 + i))
    assert len(s.run_cycle(2.0).admitted) == 2
    s.upsert_workload(job("train/urgent", "train", 2, priority=10, created=30))
    r = s.run_cycle(2.5)
    assert r.preemptions == () and admitted(r) == []
    info = s.pending_info("train/urgent")
    assert info is not None and WAITS in info.message


def test_it_preempts_at_once_when_the_recent_flow_no_longer_covers_what_it_lacks() -> None:
    s = busy_cohort()
    s.run_cycle(3.0)
    # By t=7.5 what infer returned at t=2 is older than the patience window.
    r = s.run_cycle(7.5)
    assert len(r.preemptions) == 4


def test_in_a_quiet_cohort_a_preemptor_preempts_at_once() -> None:
    s = busy_cohort()
    r = s.run_cycle(30.0)  # the GPUs returned at t=2 are long out of the window
    assert len(r.preemptions) == 4


def test_patience_zero_turns_it_off() -> None:
    s = busy_cohort(patience=0.0)
    r = s.run_cycle(3.0)
    assert len(r.preemptions) == 4


def test_explain_says_it_waits_and_whom_it_would_preempt() -> None:
    s = busy_cohort()
    s.run_cycle(3.0)
    e = s.explain("train/urgent", 3.5)
    assert e.pending is not None and WAITS in e.pending.message
    assert e.would_evict == tuple(f"train/low-{i}" for i in range(4)) and e.preemption_possible


def test_describe_between_cycles_never_names_a_victim_that_just_finished() -> None:
    s = busy_cohort()
    s.run_cycle(3.0)
    s.delete_workload("train/low-0")  # the next cycle has not run yet
    assert s.explain("train/urgent", 3.5).would_evict == (
        "train/low-1",
        "train/low-2",
        "train/low-3",
    )


def test_a_reclaiming_owner_waits_for_the_borrowers_completions_too() -> None:
    """`owner` lent its 4 GPUs to `borrower`; borrower's work keeps finishing and restarting.
    owner's job reclaims only if the returning quota does not reach it within its patience."""
    s = Scheduler()
    s.upsert_flavor(Flavor("h100"))
    s.upsert_cluster_queue(gpu_queue("owner", quota("h100", 4), preemption=RECLAIM))
    s.upsert_cluster_queue(gpu_queue("borrower", quota("h100", 0)))
    for i in range(4):
        s.upsert_workload(job(f"b/{i}", "borrower", 1, created=i))
    s.run_cycle(1.0)
    for i in range(2):
        s.delete_workload(f"b/{i}")
    s.run_cycle(2.0)  # nothing pending: the GPUs stay free
    for i in range(4, 6):
        s.upsert_workload(job(f"b/{i}", "borrower", 1, created=i))
    assert admitted(s.run_cycle(2.5)) == ["b/4", "b/5"]
    s.upsert_workload(job("owner/job", "owner", 2, created=6))
    r = s.run_cycle(3.0)
    assert r.preemptions == ()
    s.delete_workload("b/2")
    s.delete_workload("b/3")
    r = s.run_cycle(4.0)
    assert admitted(r) == ["owner/job"] and r.preemptions == ()


def test_a_waiter_whose_victims_queue_stops_borrowing_lets_go_of_what_it_holds_at_once() -> None:
    """`train` (7 GPUs) may reclaim from `infer` (1 GPU), which borrows 3 more. train/p takes
    back infer/big; then one of train's GPUs frees and train/urgent (2 GPUs) arrives: short by
    one, which that completion covers, it waits instead of reclaiming infer/small and holds the
    free GPU. Then infer/big stops: its GPUs are held for train/p, nothing is freed in the
    cohort, but infer no longer borrows, so infer/small is no victim any more and train/urgent
    cannot preempt at all. It lets go of the GPU it held in that very cycle, and infer's next
    job takes it (not a cycle later, once train/p's admission frees something)."""
    s = scheduler(
        gpu_queue("train", quota("h100", 7), preemption=RECLAIM_LOWER),
        gpu_queue("infer", quota("h100", 1)),
    )
    for i in range(4):
        s.upsert_workload(job(f"train/{i}", "train", 1, created=i))
    s.upsert_workload(job("infer/big", "infer", 3, created=10))
    s.upsert_workload(job("infer/small", "infer", 1, created=11))
    assert len(s.run_cycle(1.0).admitted) == 6  # the cohort's 8 GPUs are all taken
    s.upsert_workload(job("train/p", "train", 3, priority=5, created=20))
    r = s.run_cycle(2.0)
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("infer/big", "train/p")]
    s.delete_workload("train/0")
    s.upsert_workload(job("train/urgent", "train", 2, priority=10, created=30))
    r = s.run_cycle(3.0)
    assert admitted(r) == [] and r.preemptions == ()
    info = s.pending_info("train/urgent")
    assert info is not None and WAITS in info.message and info.victims == ("infer/small",)
    s.requeue_workload("infer/big")  # it stopped: its 3 GPUs are held for train/p
    s.upsert_workload(job("infer/next", "infer", 1, created=40))
    r = s.run_cycle(4.0)
    assert admitted(r) == ["infer/next", "train/p"] and r.preemptions == ()
    info = s.pending_info("train/urgent")
    assert info is not None and WAITS not in info.message and info.victims == ()


# --- properties ---------------------------------------------------------------------------
def nobody_waits_past_patience(world: World) -> None:
    """Once told it waits for completions, a workload is admitted, nominated or requeued within
    the patience window: its reason changes (the drive runs one cycle a second)."""
    since: dict[str, float] = {}
    run = drive(world, nothing)
    for i, r in enumerate(run.trace, start=1):
        now = float(i)
        for p in r.pending:
            if WAITS in p.message:
                since.setdefault(p.key, now)
            else:
                since.pop(p.key, None)
        for a in r.admitted:
            since.pop(a.key, None)
        for p in r.preemptions:
            since.pop(p.preemptor, None)
        for key, t in since.items():
            assert now - t <= DEFAULT_PATIENCE_SECONDS, (key, t, now)


@FAST
@given(any_world())
def test_no_preemptor_waits_for_completions_longer_than_its_patience(world: World) -> None:
    nobody_waits_past_patience(world)


@pytest.mark.parametrize("first", range(0, 100, 50))
def test_preemption_heavy_streams_never_wait_past_patience(first: int) -> None:
    for seed in range(first, first + 50):
        nobody_waits_past_patience(contended_world(seed))


def test_a_day_of_grace_lets_it_wait_an_hour_at_most() -> None:
    s = Scheduler()
    s.upsert_flavor(Flavor("h100"))
    s.upsert_cluster_queue(gpu_queue("train", quota("h100", 4), preemption=WITHIN))
    s.upsert_cluster_queue(gpu_queue("infer", quota("h100", 4)))
    for i in range(4):
        s.upsert_workload(job(f"train/low-{i}", "train", 1, created=i, grace=86400.0))
        s.upsert_workload(job(f"infer/{i}", "infer", 1, created=i))
    s.run_cycle(1.0)
    for i in range(4):
        s.delete_workload(f"infer/{i}")
        s.upsert_workload(job(f"infer/{i + 4}", "infer", 1, created=10 + i))
    s.run_cycle(2.0)
    s.upsert_workload(job("train/urgent", "train", 4, priority=10, created=20))
    r = s.run_cycle(3.0)
    assert r.preemptions == () and r.next_wakeup == 3.0 + MAX_ALLOWANCE_SECONDS


def test_victims_with_a_long_grace_period_let_it_wait_that_long_for_completions() -> None:
    """train's low-priority jobs would take 60 s to stop after a notice (their grace period):
    waiting up to 60 s for infer's completions instead costs train/urgent nothing more, and
    nobody is evicted when infer's jobs finish at t=40."""
    s = Scheduler()
    s.upsert_flavor(Flavor("h100"))
    s.upsert_cluster_queue(gpu_queue("train", quota("h100", 4), preemption=WITHIN))
    s.upsert_cluster_queue(gpu_queue("infer", quota("h100", 4)))
    for i in range(4):
        s.upsert_workload(job(f"train/low-{i}", "train", 1, created=i, grace=60.0))
        s.upsert_workload(job(f"infer/{i}", "infer", 1, created=i))
    s.run_cycle(1.0)
    for i in range(4):  # infer's jobs turn over: 4 GPUs came back just now
        s.delete_workload(f"infer/{i}")
        s.upsert_workload(job(f"infer/{i + 4}", "infer", 1, created=10 + i))
    s.run_cycle(2.0)
    s.upsert_workload(job("train/urgent", "train", 4, priority=10, created=20))
    r = s.run_cycle(3.0)
    assert r.preemptions == () and r.next_wakeup == 63.0
    info = s.pending_info("train/urgent")
    assert info is not None and "after 60s of waiting, it preempts" in info.message
    for i in range(4, 8):
        s.delete_workload(f"infer/{i}")
    r = s.run_cycle(40.0)
    assert admitted(r) == ["train/urgent"] and r.preemptions == ()


def test_with_no_flow_long_grace_victims_are_preempted_at_once() -> None:
    s = Scheduler()
    s.upsert_flavor(Flavor("h100"))
    s.upsert_cluster_queue(gpu_queue("train", quota("h100", 4), preemption=WITHIN))
    for i in range(4):
        s.upsert_workload(job(f"train/low-{i}", "train", 1, created=i, grace=60.0))
    s.run_cycle(1.0)
    s.upsert_workload(job("train/urgent", "train", 4, priority=10, created=20))
    assert len(s.run_cycle(2.0).preemptions) == 4


def racked_busy_cohort(free_nodes: int) -> Scheduler:
    """`busy_cohort` on a topology flavor: one rack of 8-GPU nodes, `free_nodes` of them empty
    beyond the 8 GPUs the cohort's work holds; a queue `solo` in a cohort of its own shares
    the rack and runs solo/0 (8 GPUs). train/urgent (4 x 1 GPU, required rack) waits for
    completions in its cohort."""
    s = Scheduler()
    s.upsert_topology(Topology("t", ("rack", "kubernetes.io/hostname")))
    s.upsert_flavor(Flavor("h100", {"gpu": "h100"}, topology_name="t"))
    for i in range(2 + free_nodes):
        name = f"n{i}"
        s.upsert_node(
            Node(name, {"gpu": "h100", "rack": "r0", "kubernetes.io/hostname": name}, {GPU: 8})
        )
    s.upsert_cluster_queue(gpu_queue("train", quota("h100", 4), preemption=WITHIN))
    s.upsert_cluster_queue(gpu_queue("infer", quota("h100", 4)))
    s.upsert_cluster_queue(gpu_queue("solo", quota("h100", 8), cohort="elsewhere"))
    s.upsert_workload(job("solo/0", "solo", 8, created=0))
    for i in range(4):
        s.upsert_workload(job(f"train/low-{i}", "train", 1, created=i))
        s.upsert_workload(job(f"infer/{i}", "infer", 1, created=i))
    assert len(s.run_cycle(1.0).admitted) == 9
    for i in range(4):
        s.delete_workload(f"infer/{i}")
        s.upsert_workload(job(f"infer/{i + 4}", "infer", 1, created=10 + i))
    assert admitted(s.run_cycle(2.0)) == [f"infer/{i}" for i in range(4, 8)]
    s.upsert_workload(
        job("train/urgent", "train", 1, pods=4, priority=10, created=20, required="rack")
    )
    assert s.run_cycle(3.0).preemptions == ()
    info = s.pending_info("train/urgent")
    assert info is not None and waits_for_completions(info.reason, info.message)
    return s


def test_room_freed_elsewhere_does_not_wake_a_waiter_the_nodes_already_hold() -> None:
    """solo/0 finishes in another cohort: its node's room cannot change what train/urgent
    waits for (the rack holds it; it lacks quota), so the next cycle does not evaluate it."""
    s = racked_busy_cohort(free_nodes=1)
    s.delete_workload("solo/0")
    r = s.run_cycle(3.5)
    assert (r.evaluated, r.preemptions, r.admitted) == (0, (), ())


def test_room_freed_wakes_a_waiter_whose_victims_were_chosen_to_free_room_too() -> None:
    """With no free node, the rack holds train/urgent only once its victims' GPUs are free:
    room freed anywhere may change its answer, so solo/0 finishing gets it evaluated."""
    s = racked_busy_cohort(free_nodes=0)
    s.delete_workload("solo/0")
    assert s.run_cycle(3.5).evaluated >= 1
