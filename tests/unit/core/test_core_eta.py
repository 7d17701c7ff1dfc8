"""Estimated starts: the core replayed forward on a virtual clock (`queuectl.core.eta`).

The world of most scenarios: cohort `org` with queues `a` and `b`, 4 H100 each.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from core_helpers import gpu_queue, job, quota, scheduler
from core_worlds import FAST, Run, any_world, drive
from hypothesis import given

from queuectl.core import CycleResult, Scheduler, Workload
from queuectl.core.eta import (
    INACTIVE,
    NEVER_FITS,
    NO_HISTORY,
    EtaLimits,
    estimate_starts,
    prepare_estimate,
)
from queuectl.core.fleet import pending_order
from queuectl.core.runtimes import RuntimeHistory

HOUR = 3600.0


def limited(w: Workload, seconds: float) -> Workload:
    return replace(w, max_execution_seconds=seconds)


def running(s: Scheduler, *ws: Workload, at: float = 0.0) -> None:
    """Queue the workloads and let one cycle at `at` admit them all."""
    for w in ws:
        s.upsert_workload(w)
    result = s.run_cycle(at)
    assert sorted(a.key for a in result.admitted) == sorted(w.key for w in ws)


def history(cq: str, *seconds: float, priority: int = 0) -> RuntimeHistory:
    h = RuntimeHistory()
    for x in seconds:
        h.add(cq, priority, x)
    return h


def test_a_job_behind_one_running_job_with_a_time_limit_starts_when_it_ends() -> None:
    s = scheduler(gpu_queue("a", quota("h100", 4), cohort=None))
    running(s, limited(job("a/run", "a", 4), HOUR))
    s.upsert_workload(job("a/next", "a", 4, created=10))
    eta = estimate_starts(s, now=600.0)
    assert eta["a/next"].start == HOUR
    assert s.is_admitted("a/run") and not s.is_admitted("a/next")  # the live core is untouched


@pytest.mark.parametrize(
    ("borrowing", "start", "why"),
    [
        (None, HOUR, ""),  # a borrows b's idle 4 GPUs as soon as its own job ends
        (0, None, NEVER_FITS),  # a may not borrow: 8 GPUs never fit in its 4
    ],
)
def test_a_job_that_must_borrow_starts_when_its_queue_frees_if_the_cohort_lends(
    borrowing: int | None, start: float | None, why: str
) -> None:
    s = scheduler(gpu_queue("a", quota("h100", 4, borrowing)), gpu_queue("b", quota("h100", 4)))
    running(s, limited(job("a/run", "a", 4), HOUR))
    s.upsert_workload(job("a/big", "a", 8, created=10))
    eta = estimate_starts(s, now=60.0)["a/big"]
    assert (eta.start, eta.why) == (start, why)


def test_a_borrower_holding_the_lenders_quota_delays_the_lender_until_it_ends() -> None:
    """a runs its own 4 (ends in 1 h) and 4 borrowed from b (ends in 2 h); b's job of 4 waits
    for its own quota to come back: 2 h, not the 1 h when a's own job ends."""
    s = scheduler(gpu_queue("a", quota("h100", 4)), gpu_queue("b", quota("h100", 4)))
    running(s, limited(job("a/own", "a", 4), HOUR), limited(job("a/lent", "a", 4, created=1), 7200))
    s.upsert_workload(job("b/back", "b", 4, created=10))
    s.upsert_workload(job("a/more", "a", 4, created=20))
    eta = estimate_starts(s, now=60.0)
    # at 1 h a's own 4 come free: b's job is within its nominal and goes first
    assert eta["b/back"].start == HOUR
    assert eta["a/more"].start == 7200.0


def test_unknown_when_nothing_running_ever_ends() -> None:
    s = scheduler(gpu_queue("a", quota("h100", 4), cohort=None))
    running(s, job("a/forever", "a", 4))
    s.upsert_workload(job("a/next", "a", 4, created=10))
    eta = estimate_starts(s, now=60.0)["a/next"]
    assert eta.start is None and eta.why == NO_HISTORY


def test_a_typical_runtime_learned_from_finished_work_stands_in_for_a_missing_limit() -> None:
    s = scheduler(gpu_queue("a", quota("h100", 4), cohort=None))
    running(s, job("a/run", "a", 4))
    s.upsert_workload(job("a/first", "a", 4, created=10))
    s.upsert_workload(job("a/second", "a", 4, created=20))
    # the runner has run 10 min; typical work here runs 30 min: 20 min left
    eta = estimate_starts(s, now=600.0, runtimes=history("a", 1200, 1800, 2400))
    assert eta["a/first"].start == 1800.0
    assert eta["a/second"].start == 1800.0 + 1800.0  # then the first runs a typical 30 min


def test_an_inactive_workload_is_unknown_and_says_so() -> None:
    s = scheduler(gpu_queue("a", quota("h100", 4), cohort=None))
    s.upsert_workload(replace(job("a/off", "a", 4), active=False))
    assert estimate_starts(s, now=0.0)["a/off"].why == INACTIVE


def test_the_horizon_bounds_the_replay() -> None:
    s = scheduler(gpu_queue("a", quota("h100", 4), cohort=None))
    running(s, limited(job("a/long", "a", 4), 10 * 86400))
    s.upsert_workload(job("a/next", "a", 4, created=10))
    eta = estimate_starts(s, now=0.0, limits=EtaLimits(horizon_seconds=86400))["a/next"]
    assert eta.start is None and "horizon of 24 h" in eta.why


def test_the_cycle_budget_bounds_the_replay() -> None:
    s = scheduler(gpu_queue("a", quota("h100", 4), cohort=None))
    running(s, limited(job("a/run", "a", 4), HOUR))
    s.upsert_workload(job("a/next", "a", 4, created=10))
    eta = estimate_starts(s, now=0.0, limits=EtaLimits(max_cycles=1))["a/next"]
    assert eta.start is None and "beyond what the estimate replays (1 cycles)" in eta.why


def test_only_the_keys_asked_about_are_answered() -> None:
    s = scheduler(gpu_queue("a", quota("h100", 4), cohort=None))
    running(s, limited(job("a/run", "a", 4), HOUR))
    s.upsert_workload(job("a/x", "a", 4, created=1))
    s.upsert_workload(job("a/y", "a", 4, created=2))
    assert set(estimate_starts(s, 0.0, keys=["a/x", "a/run", "gone"])) == {"a/x"}


def test_runtime_history_is_bounded_and_falls_back_to_coarser_kinds() -> None:
    h = RuntimeHistory(per_kind=3)
    for x in (100.0, 200.0, 300.0, 400.0):
        h.add("a", 5, x)
    assert h.remaining("a", 5) == 300.0  # 100 fell out: median of 200, 300, 400
    assert h.remaining("a", 5, elapsed=350.0) == 50.0  # of those that ran longer
    assert h.remaining("a", 5, elapsed=1000.0) == 1000.0  # outran them all: as long again
    assert h.remaining("a", 9) == 300.0  # no samples of priority 9: the queue's
    assert h.remaining("b", 0) == 300.0  # an unknown queue: the fleet's
    assert RuntimeHistory().remaining("a", 0) is None


def test_the_mean_may_stand_for_the_median() -> None:
    h = RuntimeHistory(statistic="mean")
    for x in (100.0, 200.0, 900.0):
        h.add("a", 0, x)
    assert h.remaining("a", 0) == 400.0
    assert h.remaining("a", 0, elapsed=150.0) == 400.0  # (200 + 900) / 2 - 150
    with pytest.raises(ValueError, match="give mean or median"):
        RuntimeHistory(statistic="p90")


@FAST
@given(any_world())
def test_an_estimate_is_never_before_now_deterministic_and_leaves_the_core_alone(world) -> None:  # type: ignore[no-untyped-def]
    seen: list[tuple[Scheduler, float]] = []

    def keep(s: Scheduler, run: Run, r: CycleResult, now: float) -> None:
        seen[:] = [(s, now)]

    drive(world, keep)
    if not seen:
        return
    s, now = seen[0]
    runtimes = history("", 30.0)
    for key, w in sorted(s.workloads().items()):
        if s.is_admitted(key) and int(key[-1]) % 2:
            s.upsert_workload(limited(w, 90.0))
    before = {q: pending_order(s, q) for q in s.cluster_queues()}
    held = {k for k in s.workloads() if s.is_admitted(k)}
    first = estimate_starts(s, now + 5, runtimes)
    assert first == estimate_starts(s, now + 5, runtimes)
    for eta in first.values():
        assert eta.start is None or eta.start >= now + 5
        assert (eta.start is None) == bool(eta.why)
    assert {q: pending_order(s, q) for q in s.cluster_queues()} == before
    assert {k for k in s.workloads() if s.is_admitted(k)} == held


def test_a_prepared_estimate_replays_the_core_as_it_was_when_prepared() -> None:
    """The controller copies the core between cycles and replays the copy on another thread:
    a job that arrives (or ends) after the copy changes nothing in that answer."""
    s = scheduler(gpu_queue("a", quota("h100", 4), cohort=None))
    running(s, limited(job("a/run", "a", 4), HOUR))
    s.upsert_workload(job("a/next", "a", 4, created=10))
    replay = prepare_estimate(s, now=600.0)
    s.upsert_workload(job("a/jumps", "a", 4, priority=100, created=20))
    s.delete_workload("a/run")
    s.run_cycle(700.0)
    eta = replay()
    assert set(eta) == {"a/next"} and eta["a/next"].start == HOUR
    assert prepare_estimate(s, now=800.0, keys=["a/unknown"])() == {}
