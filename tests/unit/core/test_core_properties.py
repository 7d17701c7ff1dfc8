"""Properties over random cohort trees and workload streams (built in `core_worlds`)."""

from __future__ import annotations

import copy

import pytest
from core_worlds import (
    FAST,
    Run,
    World,
    any_world,
    contended_world,
    drive,
    nothing,
    violations,
)
from hypothesis import given

from queuectl.core import GPU, CycleResult, Scheduler


@FAST
@given(any_world())
def test_usage_never_exceeds_any_limit_and_gangs_are_whole(world: World) -> None:
    def check(s: Scheduler, run: Run, r: CycleResult, now: float) -> None:
        assert violations(world, run.running) == []

    drive(world, check)


@FAST
@given(any_world())
def test_identical_inputs_give_identical_decisions(world: World) -> None:
    assert drive(world, nothing).trace == drive(world, nothing).trace


@FAST
@given(any_world())
def test_reclaim_only_takes_borrowed_quota(world: World) -> None:
    nominal = {
        (q.name, fq.name): fq.resources[0].nominal
        for q in world.queues
        for g in q.resource_groups
        for fq in g.flavors
    }

    def check(s: Scheduler, run: Run, r: CycleResult, now: float) -> None:
        for p in r.preemptions:
            if p.reason == "InClusterQueue":
                continue
            adm = run.running[p.victim]
            used: dict[str, int] = {}
            for other in run.running.values():
                if other.cluster_queue == adm.cluster_queue:
                    for psa in other.podsets:
                        used[psa.flavors[GPU]] = used.get(psa.flavors[GPU], 0) + psa.usage[GPU]
            flavors = {psa.flavors[GPU] for psa in adm.podsets}
            assert any(used[f] > nominal[(adm.cluster_queue, f)] for f in flavors), p

    drive(world, check)


@FAST
@given(any_world())
def test_every_preemption_leaves_the_preemptor_fitting(world: World) -> None:
    def check(s: Scheduler, run: Run, r: CycleResult, now: float) -> None:
        for preemptor in sorted({p.preemptor for p in r.preemptions}):
            trial = copy.deepcopy(s)
            for v, by in run.victims.items():
                if by == preemptor:
                    trial.requeue_workload(v)
            assert preemptor in {a.key for a in trial.run_cycle(now).admitted}

    drive(world, check)


@pytest.mark.parametrize("first", range(0, 200, 50))
def test_preemption_heavy_streams_keep_every_property(first: int) -> None:
    for seed in range(first, first + 50):
        world = contended_world(seed)
        fits = test_every_preemption_leaves_the_preemptor_fitting.hypothesis.inner_test  # type: ignore[attr-defined]
        fits(world)
        test_reclaim_only_takes_borrowed_quota.hypothesis.inner_test(world)  # type: ignore[attr-defined]
        test_usage_never_exceeds_any_limit_and_gangs_are_whole.hypothesis.inner_test(world)  # type: ignore[attr-defined]
        assert drive(world, nothing).trace == drive(world, nothing).trace


# --- parking is invisible ---------------------------------------------------------------------
def _actions(run: Run) -> list[tuple[object, ...]]:
    return [(r.admitted, r.preemptions) for r in run.trace]


def _look_at_everything(s: Scheduler, run: Run, r: CycleResult, now: float) -> None:
    s.state.wake.all_dirty = True  # the next cycle wakes every parked bucket for a full evaluation


def parking_changes_nothing(world: World) -> None:
    """A parked bucket is one whose full evaluation would still say no: skipping it must admit
    and preempt exactly what evaluating everything, every cycle, does (messages may differ)."""
    assert _actions(drive(world, nothing)) == _actions(drive(world, _look_at_everything))


@FAST
@given(any_world())
def test_parked_work_is_admitted_exactly_when_a_full_evaluation_would_admit_it(
    world: World,
) -> None:
    parking_changes_nothing(world)


@pytest.mark.parametrize("first", range(0, 400, 100))
def test_parking_changes_no_decision_in_preemption_heavy_streams(first: int) -> None:
    for seed in range(first, first + 100):
        parking_changes_nothing(contended_world(seed))


@pytest.mark.parametrize(
    "seed",
    [
        1740,  # a waiter for completions evaluated before quota was freed later in the same cycle
        3233,  # a waiter's victim's queue stopped borrowing when another preemptor's victim left
        8307,  # a waiter's own queue admitted more after it waited: it would borrow now
        8823,  # protected work came of age: a waiter's victim search answers otherwise
        11532,  # a waiter's own queue admitted up to its borrowing limit: no victim set helps
        1425,  # a cohort's borrowing already being taken back by one preemptor, counted again
        198,  # a waiter's victim in another branch: that branch stopped borrowing
    ],
)
def test_parking_changes_no_decision_in_streams_that_once_broke_it(seed: int) -> None:
    parking_changes_nothing(contended_world(seed))
