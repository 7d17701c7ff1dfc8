"""Full collections stop every thread: the controller keeps its long-lived data out of them."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from queuectl.controller.gcpolicy import GcOptions, GcPolicy


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_what_arrives_after_start_is_frozen_again_every_few_seconds() -> None:
    clock = Clock()
    policy = GcPolicy(clock, GcOptions(freeze_every_s=5.0, sweep_every_s=1800.0))
    policy.tick()
    assert policy.freezes == 0, "before the caches sync nothing is known to be long-lived"
    policy.start()
    frozen = gc.get_freeze_count()
    arrived = [[f"workload-{i}"] for i in range(2000)]  # survives: a cache's new entries
    gc.collect(1)  # they reach the oldest generation, as long-lived objects do
    clock.t += 1.0
    policy.tick()
    assert policy.freezes == 1, "not again within freeze_every_s"
    clock.t += 5.0
    policy.tick()
    assert policy.freezes == 2
    assert gc.get_freeze_count() >= frozen + len(arrived)


def test_a_sweep_reclaims_cycles_that_were_frozen() -> None:
    clock = Clock()
    policy = GcPolicy(clock, GcOptions(freeze_every_s=5.0, sweep_every_s=60.0))

    class Node:
        peer: object = None

    a, b = Node(), Node()
    a.peer, b.peer = b, a  # a cycle only the collector can free
    policy.start()
    del a, b
    before = gc.get_freeze_count()
    clock.t += 61.0
    policy.tick()
    assert policy.sweeps == 1
    assert gc.get_freeze_count() < before, "the garbage cycle was collected, not refrozen"
