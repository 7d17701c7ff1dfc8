"""The next cycle waits while earlier decisions are unwritten (controller/inflight.py).

Scenario behind it: the core decides admissions faster than the API server takes them; each
queued admission holds quota that nothing uses yet, so the next cycle would see full cohorts
and preempt work that has not started. The cycle waits instead, until the writes drained.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from queuectl.controller.inflight import InFlight
from queuectl.controller.manager import Controller
from tests.unit.controller.controller_fakes import FakeKube


def _clock() -> float:
    return time.monotonic()


async def test_a_cycle_waits_until_earlier_decisions_are_written() -> None:
    inflight = InFlight()
    gates = [asyncio.Event() for _ in range(3)]

    def write(gate: asyncio.Event) -> Callable[[], Awaitable[None]]:
        async def act() -> None:
            await gate.wait()

        return act

    actions = [inflight.track(write(g)) for g in gates]
    running = asyncio.gather(*(a() for a in actions))
    assert inflight.count == 3

    waiter = asyncio.create_task(inflight.wait_below(1, 30.0, _clock))
    await asyncio.sleep(0.01)
    gates[0].set()
    await asyncio.sleep(0.01)
    assert not waiter.done(), "two admissions are still unwritten: the cycle must not start"
    gates[1].set()
    assert await asyncio.wait_for(waiter, 1.0) is True
    assert inflight.count == 1
    gates[2].set()
    await running
    assert inflight.count == 0


async def test_a_failed_write_no_longer_counts() -> None:
    inflight = InFlight()

    async def refused() -> None:
        raise RuntimeError("the API server said no")

    action = inflight.track(refused)
    with pytest.raises(RuntimeError):
        await action()
    assert inflight.count == 0
    assert await inflight.wait_below(0, 0.1, _clock) is True


async def test_a_count_that_never_falls_delays_the_cycle_only_up_to_the_timeout() -> None:
    inflight = InFlight()

    async def never() -> None:  # pragma: no cover - never run
        await asyncio.Event().wait()

    inflight.track(never)
    assert await inflight.wait_below(0, 0.05, _clock) is False
    assert inflight.waited_s >= 0.05


async def test_actions_queued_behind_one_that_raised_are_dropped_from_the_count() -> None:
    """A key's actions run in order; when one raises the rest never run, so the controller
    must not keep counting them (a leak would hold every later cycle back)."""
    c = Controller(FakeKube())  # type: ignore[arg-type]

    async def refused() -> None:
        raise RuntimeError("refused")

    async def fine() -> None:
        pass

    c._decided("team-a/w1", refused)
    c._decided("team-a/w1", fine)
    assert c.inflight.count == 2
    with pytest.raises(RuntimeError):
        await c._serve("wl:team-a/w1")
    assert c.inflight.count == 0
