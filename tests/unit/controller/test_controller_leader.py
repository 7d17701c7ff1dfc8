"""Leader election under clock skew and dropped connections, on a virtual clock.

Two electors share one in-memory Lease (resourceVersion preconditions as the API server keeps
them). Their wall clocks disagree by up to an hour; their monotonic clocks run at one rate from
different origins, as on two machines. Observed-time expiry means no skew can make two leaders,
and a dropped connection is a failed attempt, never the end of the loop.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.api.resource import Resource
from queuectl.controller.leader import LeaderElector, LeadershipLost, LeaseTiming
from queuectl.controller.watch.kube import KubeError, Obj

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
TICK = 1.0  # seconds of virtual time per round; electors step every retry period (2 s)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0


@dataclass
class FakeLeases:
    """One Lease; a fault plan per caller drops its calls before or after they are applied."""

    clock: Clock
    lease: dict[str, Any] | None = None
    rv: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    faults: dict[str, str] = field(default_factory=dict)
    """identity -> "before" (the call never reaches the server) | "after" (answer lost)"""

    def view(self, identity: str) -> Any:
        return _View(self, identity)

    def _fault(self, identity: str, when: str) -> None:
        if self.faults.get(identity) == when:
            raise aiohttp.ServerDisconnectedError()

    def _store(self, body: Obj) -> Obj:
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(next(self.rv))
        return copy.deepcopy(self.lease)


@dataclass
class _View:
    server: FakeLeases
    identity: str

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        self.server._fault(self.identity, "before")
        if self.server.lease is None:
            raise KubeError(404, "NotFound", name)
        out = copy.deepcopy(self.server.lease)
        self.server._fault(self.identity, "after")
        return out

    async def create(self, res: Resource, body: Obj, namespace: str | None = None) -> Obj:
        self.server._fault(self.identity, "before")
        if self.server.lease is not None:
            raise KubeError(409, "AlreadyExists", "lease")
        out = self.server._store(body)
        self.server._fault(self.identity, "after")
        return out

    async def request(self, method: str, path: str, *, body: Obj, **_: Any) -> Obj:
        assert method == "PUT"
        self.server._fault(self.identity, "before")
        assert self.server.lease is not None
        if body["metadata"]["resourceVersion"] != self.server.lease["metadata"]["resourceVersion"]:
            raise KubeError(409, "Conflict", "the object has been modified")
        out = self.server._store(body)
        self.server._fault(self.identity, "after")
        return out


def elector(server: FakeLeases, identity: str, skew_s: float, origin: float) -> LeaderElector:
    clock = server.clock
    return LeaderElector(
        server.view(identity),
        identity=identity,
        timing=LeaseTiming(),
        wall=lambda: EPOCH + timedelta(seconds=clock.t + skew_s),
        monotonic=lambda: origin + clock.t,
    )


@dataclass
class Replica:
    """An elector stepping every retry period from its own phase; dead once it lost the lease."""

    elector: LeaderElector
    phase: float
    alive: bool = True

    async def tick(self, now: float) -> None:
        if not self.alive or (now - self.phase) % 2.0 != 0.0:
            return
        try:
            await self.elector.step()
        except LeadershipLost:
            self.alive = False

    @property
    def leading(self) -> bool:
        return self.alive and self.elector.leading.is_set()


async def leads_at(server: FakeLeases, r: Replica, steps: range) -> float | None:
    """Step `r` alone, one tick a step, until it leads; when it did (None: never)."""
    for step in steps:
        server.clock.t = step * TICK
        await r.tick(server.clock.t)
        if r.leading:
            return server.clock.t
    return None


SKEWS = [(3600.0, -3600.0), (-3600.0, 3600.0), (0.0, 0.0), (-3600.0, 0.0)]


def two_replicas(skew_a: float, skew_b: float) -> tuple[FakeLeases, Replica, Replica]:
    """Replicas a (stepping at even seconds) and b (odd) on clocks skewed from the server's."""
    server = FakeLeases(Clock())
    a = Replica(elector(server, "a", skew_a, origin=5_000.0), phase=0.0)
    b = Replica(elector(server, "b", skew_b, origin=77.0), phase=1.0)
    return server, a, b


@pytest.mark.parametrize(("skew_a", "skew_b"), SKEWS)
async def test_a_renewing_leader_keeps_the_lease_whatever_the_clocks_say(
    skew_a: float, skew_b: float
) -> None:
    server, a, b = two_replicas(skew_a, skew_b)
    await a.tick(0.0)
    assert a.leading
    for step in range(1, 120):
        server.clock.t = step * TICK
        await a.tick(server.clock.t)
        await b.tick(server.clock.t)
        assert a.leading and not b.leading, f"at {server.clock.t}s"


@pytest.mark.parametrize(("skew_a", "skew_b"), SKEWS)
async def test_a_silent_leader_is_replaced_after_the_lease_duration_on_the_candidates_clock(
    skew_a: float, skew_b: float
) -> None:
    server, a, b = two_replicas(skew_a, skew_b)
    await a.tick(0.0)
    server.clock.t = 1.0
    await b.tick(1.0)  # b sees a's record at t=1 and never again a change: a crashed
    took_over = await leads_at(server, b, range(2, 60))
    assert took_over is not None and 16.0 <= took_over <= 18.0


@pytest.mark.parametrize(
    ("restarted_as", "takes_over_by"),
    [
        ("a", 2.0),  # the kubelet restarted the container: same pod, same name, its own Lease
        ("a2", 18.0),  # a new pod: it waits out the 15 s lease like any candidate
    ],
)
async def test_a_crashed_leader_restarted_in_its_pod_takes_its_lease_back_at_once(
    restarted_as: str, takes_over_by: float
) -> None:
    server = FakeLeases(Clock())
    a = Replica(elector(server, "a", 0.0, origin=0.0), phase=0.0)
    await a.tick(0.0)
    a.alive = False  # SIGKILL just after a renewal: the Lease still names a for 15 s
    back = Replica(elector(server, restarted_as, 0.0, origin=900.0), phase=0.0)
    took_over = await leads_at(server, back, range(1, 30))
    assert took_over is not None and took_over <= takes_over_by
    assert (took_over < 15.0) == (restarted_as == "a")


async def test_a_candidate_tries_again_the_moment_the_record_it_watches_expires() -> None:
    server, a, b = two_replicas(0.0, 0.0)
    await a.tick(0.0)
    server.clock.t = 1.0
    await b.tick(1.0)  # b first sees a's record at t=1: it may take the Lease from t=16
    assert b.elector.pause_s() == 2.0
    server.clock.t = 14.5
    assert b.elector.pause_s() == pytest.approx(1.55)  # not 2 s: 16.05, not 16.5
    assert a.elector.pause_s() == 2.0  # a leader renews on the retry period


@pytest.mark.parametrize("fault", ["before", "after"])
async def test_dropped_connections_within_the_renew_deadline_keep_the_leader(fault: str) -> None:
    server = FakeLeases(Clock())
    a = Replica(elector(server, "a", 0.0, origin=0.0), phase=0.0)
    await a.tick(0.0)
    server.faults["a"] = fault
    for t in (2.0, 4.0, 6.0, 8.0, 10.0):  # 10 s of ServerDisconnectedError
        server.clock.t = t
        await a.tick(t)
        assert a.leading
    server.faults.pop("a")
    server.clock.t = 12.0
    await a.tick(12.0)
    assert a.leading


async def test_a_lease_not_renewed_within_the_renew_deadline_ends_leadership() -> None:
    server = FakeLeases(Clock())
    a = Replica(elector(server, "a", 0.0, origin=0.0), phase=0.0)
    await a.tick(0.0)
    server.faults["a"] = "before"
    for t in (2.0, 4.0, 6.0, 8.0, 10.0, 12.0):
        server.clock.t = t
        await a.tick(t)
    assert not a.alive and not a.elector.leading.is_set()


FAULT = st.sampled_from([None, None, None, "before", "after"])


@settings(max_examples=150, deadline=None)
@given(
    skews=st.tuples(st.floats(-3600, 3600), st.floats(-3600, 3600)),
    origins=st.tuples(st.floats(0, 1e6), st.floats(0, 1e6)),
    phase_b=st.sampled_from([0.0, 1.0]),
    plan=st.lists(st.tuples(FAULT, FAULT), min_size=10, max_size=120),
    same_pod=st.booleans(),
)
async def test_two_electors_with_skewed_clocks_and_flaky_connections_never_both_lead(
    skews: tuple[float, float],
    origins: tuple[float, float],
    phase_b: float,
    plan: list[tuple[str | None, str | None]],
    same_pod: bool,
) -> None:
    server = FakeLeases(Clock())
    replicas = {
        "a": Replica(elector(server, "a", skews[0], origins[0]), phase=0.0),
        "b": Replica(elector(server, "b", skews[1], origins[1]), phase=phase_b),
    }
    spawned = itertools.count()
    for step, faults in enumerate(plan):
        server.clock.t = step * TICK
        for i, fault in enumerate(faults):
            name = "ab"[i]
            replica = replicas[name]
            if not replica.alive:  # the process exited; restarted in its pod or as a new pod
                fresh = name if same_pod else f"{name}{next(spawned)}"
                replica = Replica(elector(server, fresh, skews[i], origins[i]), server.clock.t)
                replicas[name] = replica
            server.faults[replica.elector.identity] = fault or ""
            await replica.tick(server.clock.t)
            assert not all(r.leading for r in replicas.values()), f"two leaders at {step}s"
