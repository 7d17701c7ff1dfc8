"""Two-phase admission in the core: a reservation holds quota like an admission, the checks'
verdict rules, and queues that wait for their checks (docs/design/admission-checks.md)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from core_helpers import admitted, gpu_queue, job, quota, reason_of, scheduler, usage
from core_worlds import FAST, World, violations, worlds
from hypothesis import given
from hypothesis import strategies as hs

from queuectl.core import (
    Admission,
    AdmissionCheck,
    CheckState,
    CycleResult,
    Flavor,
    PreemptionPolicy,
    Scheduler,
    backoff_seconds,
)
from queuectl.core.checks import verdict

GATED = replace(gpu_queue("team", quota("h100", 8), cohort=None), admission_checks=("capacity",))
READY_CHECK = AdmissionCheck("capacity", active=True)


# --- the verdict ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ({}, "waiting"),
        ({"a": "Ready"}, "waiting"),  # b has no state yet: Pending
        ({"a": "Ready", "b": "Pending"}, "waiting"),
        ({"a": "Ready", "b": "Ready"}, "admitted"),
        ({"a": "Retry", "b": "Ready"}, "retry"),
        ({"a": "Retry", "b": "Pending"}, "retry"),
        ({"a": "Retry", "b": "Rejected"}, "rejected"),  # never let in: no point retrying
        ({"a": "Ready", "b": "Rejected"}, "rejected"),
        ({"a": "Ready", "b": "Ready", "stale": "Rejected"}, "admitted"),  # not required
    ],
)
def test_the_checks_verdict(states: dict[str, CheckState], expected: str) -> None:
    assert verdict(("a", "b"), states) == expected


def test_a_queue_without_checks_admits_at_once() -> None:
    assert verdict((), {}) == "admitted"


STATES: list[CheckState] = ["Pending", "Ready", "Retry", "Rejected"]


@given(hs.lists(hs.sampled_from("abcd"), unique=True), hs.dictionaries(
    hs.sampled_from("abcde"), hs.sampled_from(STATES)
))  # fmt: skip
def test_admitted_only_when_every_required_check_is_ready(
    required: list[str], states: dict[str, CheckState]
) -> None:
    all_ready = all(states.get(n) == "Ready" for n in required)
    assert (verdict(required, states) == "admitted") == all_ready


# --- queues that wait for their checks ------------------------------------------------------
def gated(*objects: object, check: AdmissionCheck | None = READY_CHECK) -> Scheduler:
    s = scheduler(GATED, *objects)
    if check is not None:
        s.upsert_admission_check(check)
    return s


@pytest.mark.parametrize(
    ("check", "reason", "says"),
    [
        (None, "AdmissionCheckNotFound", "admission check(s) capacity not found"),
        (
            AdmissionCheck("capacity", active=False, message="no provisioner configured"),
            "AdmissionCheckInactive",
            "capacity: no provisioner configured",
        ),
    ],
)
def test_a_queue_whose_check_is_missing_or_inactive_admits_nothing(
    check: AdmissionCheck | None, reason: str, says: str
) -> None:
    s = gated(job("team/a", "team", 2), check=check)
    assert admitted(s.run_cycle(1.0)) == []
    assert reason_of(s, "team/a") == "ClusterQueueInactive"
    info = s.pending_info("team/a")
    assert info is not None and says in info.message
    status = s.cluster_queue_status("team")
    assert status is not None and not status.active
    assert status.reason == reason and status.problem is not None and says in status.problem


def test_the_queue_admits_once_its_check_becomes_active() -> None:
    s = gated(job("team/a", "team", 2), check=AdmissionCheck("capacity"))
    assert admitted(s.run_cycle(1.0)) == []
    s.upsert_admission_check(READY_CHECK)
    assert admitted(s.run_cycle(2.0)) == ["team/a"]
    status = s.cluster_queue_status("team")
    assert status is not None and status.active and status.reason is None


def test_a_check_no_queue_names_changes_nothing() -> None:
    s = scheduler(gpu_queue("free", quota("h100", 4), cohort=None), job("free/a", "free", 2))
    s.upsert_admission_check(AdmissionCheck("unused"))
    s.delete_admission_check("unused")
    assert admitted(s.run_cycle(1.0)) == ["free/a"]


def test_deleting_the_check_stops_the_queue_again() -> None:
    s = gated(job("team/a", "team", 2))
    assert admitted(s.run_cycle(1.0)) == ["team/a"]
    s.delete_admission_check("capacity")
    s.upsert_workload(job("team/b", "team", 2, created=1))
    assert admitted(s.run_cycle(2.0)) == []
    assert reason_of(s, "team/b") == "ClusterQueueInactive"
    assert s.is_admitted("team/a")  # a reservation already made keeps its quota


# --- a reservation counts like an admission -------------------------------------------------
def test_a_reservation_holds_quota_while_its_checks_decide() -> None:
    s = gated(job("team/a", "team", 6), job("team/b", "team", 4, created=1))
    assert admitted(s.run_cycle(1.0)) == ["team/a"]  # reserved; its checks are Pending
    assert usage(s, "team") == 6
    assert reason_of(s, "team/b") == "WaitingForQuota"


def test_retry_releases_the_reservation_and_backs_off() -> None:
    s = gated(job("team/a", "team", 6), job("team/b", "team", 4, created=1))
    s.run_cycle(1.0)
    s.requeue_workload("team/a", not_before=1.0 + backoff_seconds(1, base=10.0))  # Retry
    assert not s.is_admitted("team/a") and usage(s, "team") == 0
    assert admitted(s.run_cycle(2.0)) == ["team/b"]  # the freed quota serves the next one
    assert admitted(s.run_cycle(5.0)) == []  # still backing off
    s.delete_workload("team/b")
    assert admitted(s.run_cycle(11.0)) == ["team/a"]  # reserved again after its back-off


def test_a_reserved_workload_can_be_preempted_like_an_admitted_one() -> None:
    policy = PreemptionPolicy(within_cluster_queue="LowerPriority")
    queue = replace(GATED, preemption=policy)
    s = scheduler(queue, job("team/low", "team", 8))
    s.upsert_admission_check(READY_CHECK)
    s.run_cycle(1.0)
    s.upsert_workload(job("team/high", "team", 8, priority=10, created=1))
    r = s.run_cycle(2.0)
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("team/low", "team/high")]


# --- properties: random worlds whose queues are gated, checks played at random --------------
@hs.composite
def gated_worlds(draw: hs.DrawFn) -> tuple[World, int]:
    world = draw(worlds())
    gates = draw(hs.lists(hs.booleans(), min_size=len(world.queues), max_size=len(world.queues)))
    world.queues = [
        replace(q, admission_checks=("gate",)) if g else q
        for q, g in zip(world.queues, gates, strict=True)
    ]
    return world, draw(hs.integers(0, 2**16))


def play(world: World, seed: int) -> list[tuple[object, ...]]:
    """Drive the core like the controller with check controllers that answer at random.

    Returns the trace of what happened; asserts the invariants on the way: never over quota
    counting reservations, a Retry gives the quota back, and no workload is admitted (its Job
    started) unless every check of its queue said Ready.
    """
    rng = random.Random(seed)
    s = Scheduler()
    for f in ("h100", "a100"):
        s.upsert_flavor(Flavor(f))
    for c in world.cohorts:
        s.upsert_cohort(c)
    for q in world.queues:
        s.upsert_cluster_queue(q)
    s.upsert_admission_check(AdmissionCheck("gate", active=True))
    gates = {q.name: q.admission_checks for q in world.queues}
    holding: dict[str, Admission] = {}  # reserved or admitted: what counts against quota
    states: dict[str, dict[str, CheckState]] = {}  # reserved, waiting for checks
    started: set[str] = set()
    retries: dict[str, int] = {}
    trace: list[tuple[object, ...]] = []
    now, seq = 0.0, 0
    for op in world.ops:
        if op[0] == "add":
            _, qi, gpus, pods, prio, _, _ = op
            seq += 1
            cq = world.queues[int(qi)].name  # type: ignore[call-overload]
            size, count, rank = int(gpus), int(pods), int(prio)  # type: ignore[call-overload]
            s.upsert_workload(job(f"w/{seq:03}", cq, size, pods=count, priority=rank, created=now))
        elif op[0] == "cycle":
            now += 1.0
            r: CycleResult = s.run_cycle(now)
            for a in r.admitted:
                assert a.key not in holding
                holding[a.key] = a.admission
                states[a.key] = {n: "Pending" for n in gates[a.admission.cluster_queue]}
            for p in r.preemptions:  # victims stop at once
                s.requeue_workload(p.victim)
                holding.pop(p.victim)
                states.pop(p.victim, None)
                started.discard(p.victim)
            assert violations(world, holding) == []
            trace.append((now, r.admitted, r.preemptions))
            for key in sorted(states):  # the check controllers answer, then the controller acts
                states[key] = {n: rng.choice(STATES) for n in states[key]}
                v = verdict(gates[holding[key].cluster_queue], states[key])
                trace.append((key, v))
                if v == "admitted":
                    started.add(key)
                    del states[key]
                elif v in ("retry", "rejected"):
                    cq = holding.pop(key).cluster_queue
                    del states[key]
                    before = s.cluster_queue_status(cq)
                    retries[key] = retries.get(key, 0) + 1
                    s.requeue_workload(key, not_before=now + backoff_seconds(retries[key]))
                    after = s.cluster_queue_status(cq)
                    assert not s.is_admitted(key) and s.held_quota(key) is None
                    assert before is not None and after is not None
                    assert sum(after.usage.values()) < sum(before.usage.values())
                    if v == "rejected":
                        w = s.workload(key)
                        assert w is not None
                        s.upsert_workload(replace(w, active=False))
            for key in started:  # started work still holds its quota, and waits for nothing
                assert key in holding and key not in states and s.is_admitted(key)
        elif op[0] == "finish" and started:
            key = sorted(started)[int(op[1]) % len(started)]  # type: ignore[call-overload]
            s.delete_workload(key)
            started.discard(key)
            del holding[key]
    return trace


@FAST
@given(gated_worlds())
def test_gated_worlds_never_overcommit_and_admit_only_when_ready(case: tuple[World, int]) -> None:
    play(*case)


@FAST
@given(gated_worlds())
def test_gated_worlds_are_deterministic(case: tuple[World, int]) -> None:
    assert repr(play(*case)) == repr(play(*case))
