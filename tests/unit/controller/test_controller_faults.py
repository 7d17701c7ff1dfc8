"""Writes that fail in transit, over the in-memory API server of the reconcile tests.

A dropped connection, a timeout or a 5xx leaves a write's outcome unknown: it may have landed
("after": the answer was lost) or not ("before"), or it may land later ("late": still in
flight when the client gave up). Whatever the shape, an admission is kept exactly when it
landed and its quota released exactly when it did not; notices, evictions and requeues are
written once and followed through.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from controller_fakes import FakeKube, World, gpu_node, merge, new_job, queued
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl import convert
from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.api.views import WorkloadView
from queuectl.controller.manager import Controller
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import KubeError
from queuectl.controller.watch.watcher import Store, Watcher
from queuectl.core import types as core
from queuectl.core.results import Eviction, Preemption

Match = Callable[[Resource, str, Any], bool]

ERRORS: list[BaseException] = [
    aiohttp.ServerDisconnectedError(),
    aiohttp.ClientConnectionError("Connection closed"),
    aiohttp.ClientOSError(104, "Connection reset by peer"),
    TimeoutError(),
    KubeError(503, "ServiceUnavailable", "apiserver is shutting down"),
    KubeError(504, "Timeout", "the server may still be processing the request"),
]


@dataclass
class Faults:
    """Wraps FakeKube.patch: the next matching calls fail with `err`, landed or not."""

    kube: FakeKube
    plan: list[tuple[Match, BaseException, str]] = field(default_factory=list)
    late: list[tuple[Resource, str, Any, str | None, str]] = field(default_factory=list)
    landed: list[Any] = field(default_factory=list)
    """every patch body the fake API server applied"""

    def __post_init__(self) -> None:
        self.real = self.kube.patch
        self.kube.patch = self.patch  # type: ignore[method-assign]

    def fail(self, match: Match, err: BaseException, how: str, times: int = 1) -> None:
        self.plan += [(match, err, how)] * times

    async def patch(
        self, res: Resource, name: str, patch: Any, namespace: str | None = None, **kw: Any
    ) -> k.Obj:
        for i, (match, err, how) in enumerate(self.plan):
            if match(res, kw.get("sub", ""), patch):
                del self.plan[i]
                if how == "pass":
                    break
                if how == "after":
                    await self.real(res, name, patch, namespace, **kw)
                    self.landed.append(patch)
                elif how == "late":
                    self.late.append((res, name, patch, namespace, kw.get("sub", "")))
                raise err
        out = await self.real(res, name, patch, namespace, **kw)
        self.landed.append(patch)
        return out

    async def replay_late(self) -> None:
        for res, name, patch, namespace, sub in self.late:
            await self.real(res, name, patch, namespace, sub=sub)
            self.landed.append(patch)


def admission_write(res: Resource, sub: str, patch: Any) -> bool:
    return sub == "status" and "admission" in (patch.get("status") or {})


def workload_write(res: Resource, sub: str, patch: Any) -> bool:
    return res.plural == "workloads"


def condition_write(type_: str) -> Match:
    def match(res: Resource, sub: str, patch: Any) -> bool:
        conds = (patch.get("status") or {}).get("conditions") or []
        return sub == "status" and any(c["type"] == type_ and c["status"] == "True" for c in conds)

    return match


class Sleeps:
    def __init__(self) -> None:
        self.slept: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)


async def queued_world() -> tuple[World, Faults, str, core.Admission]:
    """One 8-GPU Job on one 8-GPU node; the core has just admitted (and charged) it."""
    w = World()
    faults = Faults(w.kube)
    w.add(k.NODES, gpu_node("n0"))
    key = await queued(w, new_job())
    (admitted,) = w.sched.run_cycle(w.now).admitted
    assert usage(w) == 8
    return w, faults, key, admitted.admission


def usage(w: World) -> int:
    qs = w.sched.cluster_queue_status("cq")
    assert qs is not None
    return qs.usage.get(("h100", names.GPU_RESOURCE), 0)


def api_workload(w: World) -> dict[str, Any]:
    (wl,) = [o for (plural, _, _), o in w.kube.objects.items() if plural == "workloads"]
    return wl


EACH_ERROR = pytest.mark.parametrize(
    "err", ERRORS, ids=lambda e: type(e).__name__ + str(getattr(e, "status", ""))
)


def admissions_landed(f: Faults) -> int:
    return sum(1 for p in f.landed if "admission" in (p.get("status") or {}))


@EACH_ERROR
async def test_an_admission_lost_before_the_server_releases_the_quota_and_is_admitted_again(
    err: BaseException,
) -> None:
    w, faults, key, admission = await queued_world()
    faults.fail(admission_write, err, "before")
    assert not await w.decisions(sleep=Sleeps()).admit(key, admission)
    assert not WorkloadView(api_workload(w)).holds_quota
    assert usage(w) == 0 and w.sched.requeued == [key]  # no quota charged for nothing
    assert (w.now + 1.0, key) in w.timers  # wakes the cycle when its back-off ends

    w.now += 2  # past the requeue back-off: the next cycle admits it, once
    (again,) = w.sched.run_cycle(w.now).admitted
    assert await w.decisions().admit(key, again.admission)
    assert WorkloadView(api_workload(w)).holds_quota and usage(w) == 8
    assert admissions_landed(faults) == 1
    assert w.job()["spec"]["suspend"] is False


@EACH_ERROR
async def test_an_admission_whose_answer_was_lost_is_kept_and_never_written_twice(
    err: BaseException,
) -> None:
    w, faults, key, admission = await queued_world()
    faults.fail(admission_write, err, "after")
    assert await w.decisions(sleep=Sleeps()).admit(key, admission)
    assert WorkloadView(api_workload(w)).holds_quota and usage(w) == 8
    assert w.sched.requeued == []
    assert w.job()["spec"]["suspend"] is False  # followed through: the Job started
    w.now += 2
    assert w.sched.run_cycle(w.now).admitted == ()
    assert admissions_landed(faults) == 1


async def test_an_admission_still_in_flight_is_fenced_off_and_can_never_land() -> None:
    w, faults, key, admission = await queued_world()
    faults.fail(admission_write, TimeoutError(), "late")
    assert not await w.decisions(sleep=Sleeps()).admit(key, admission)
    assert usage(w) == 0
    with pytest.raises(KubeError) as late:
        await faults.replay_late()  # the client gave up; the server gets to it now
    assert late.value.conflict
    assert not WorkloadView(api_workload(w)).holds_quota
    cond = WorkloadView(api_workload(w)).condition(names.COND_QUOTA_RESERVED) or {}
    assert "interrupted (TimeoutError" in cond.get("message", "")


async def test_while_the_api_server_is_away_the_quota_stays_reserved_until_it_answers() -> None:
    w, faults, key, admission = await queued_world()
    faults.fail(admission_write, aiohttp.ServerDisconnectedError(), "before")
    faults.fail(lambda *_: True, aiohttp.ClientOSError(111, "Connection refused"), "before", 3)
    sleeps = Sleeps()
    assert not await w.decisions(sleep=sleeps).admit(key, admission)
    assert sleeps.slept == [0.2, 0.4, 0.8]  # backing off, the reservation held meanwhile
    assert usage(w) == 0 and w.sched.requeued == [key]


async def admitted_world() -> tuple[World, Faults, str]:
    w, faults, key, admission = await queued_world()
    assert await w.decisions().admit(key, admission)
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 1, "startTime": "t"}}))
    return w, faults, key


@pytest.mark.parametrize("how", ["before", "after"])
@pytest.mark.parametrize("err", ERRORS[:4], ids=lambda e: type(e).__name__)
async def test_a_preemption_notice_lost_in_transit_is_written_once_and_served(
    err: BaseException, how: str
) -> None:
    w, faults, key = await admitted_world()
    faults.fail(condition_write(names.COND_PREEMPTED), err, how)
    await w.decisions(sleep=Sleeps()).preempt(
        Preemption(key, "ns/other", "InClusterQueue", "priority", w.now + 60)
    )
    assert WorkloadView(api_workload(w)).is_true(names.COND_PREEMPTED)
    notices = [
        p for p in faults.landed if condition_write(names.COND_PREEMPTED)(k.WORKLOADS, "status", p)
    ]
    assert len(notices) == 1
    annotations = w.job()["metadata"].get("annotations") or {}
    assert annotations.get(names.ANNOTATION_PREEMPTION_DEADLINE) == convert.format_time(w.now + 60)


@pytest.mark.parametrize("how", ["before", "after"])
async def test_an_eviction_for_its_time_limit_survives_dropped_connections(how: str) -> None:
    w, faults, key = await admitted_world()
    deactivate: Match = lambda res, sub, patch: sub == "" and "spec" in patch  # noqa: E731
    faults.fail(deactivate, aiohttp.ServerDisconnectedError(), how)
    faults.fail(condition_write(names.COND_EVICTED), aiohttp.ServerDisconnectedError(), how)
    await w.decisions(sleep=Sleeps()).apply_eviction(
        Eviction(key, names.REASON_EVICTED_MAX_EXEC_TIME, "ran past its limit")
    )
    wl = api_workload(w)
    assert wl["spec"]["active"] is False and WorkloadView(wl).is_true(names.COND_EVICTED)
    assert w.job()["spec"]["suspend"] is True  # the drain went on


@pytest.mark.parametrize("how", ["before", "after"])
async def test_a_requeue_lost_in_transit_still_releases_the_quota(how: str) -> None:
    w, faults, key = await admitted_world()
    await w.rec.evict(w.workload(), names.REASON_EVICTED_NODE_FAILURES, "GPU fell off the bus")
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 0, "startTime": None}}))
    assert usage(w) == 8
    faults.fail(condition_write(names.COND_REQUEUED), aiohttp.ServerDisconnectedError(), how)
    await w.rec.reconcile(key)
    wl = api_workload(w)
    assert not WorkloadView(wl).holds_quota and WorkloadView(wl).is_true(names.COND_REQUEUED)
    assert w.sched.requeued == [key] and usage(w) == 0


# --- the loops: one dropped connection ends none of them -----------------------------------
LOOP_ERRORS: list[BaseException] = [
    aiohttp.ServerDisconnectedError(),
    aiohttp.ClientPayloadError("Response payload is not completed"),
    TimeoutError(),
    KubeError(500, "InternalError", "etcdserver: leader changed"),
]


@pytest.mark.parametrize("err", LOOP_ERRORS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("key", ["job:Job/ns/train", "wl:ns/w", "gone:ns/w"])
async def test_a_worker_survives_api_trouble_and_serves_the_key_again(
    err: BaseException, key: str
) -> None:
    now = [1_000.0]
    c = Controller(FakeKube(), clock=lambda: now[0])  # type: ignore[arg-type]
    served: list[str] = []

    async def serve(k_: str) -> None:
        served.append(k_)
        if len(served) == 1:
            raise err

    c._serve = serve  # type: ignore[method-assign]
    tasks = [asyncio.create_task(c._worker()), asyncio.create_task(c.keys.timer_loop())]
    try:
        c.enqueue(key)
        await settle_loop(lambda: bool(c.keys.timers))
        assert served == [key] and not tasks[0].done()
        now[0] += 1.0  # the retry falls due
        c.keys.timer_wake.set()
        await settle_loop(lambda: len(served) == 2)
        assert served == [key, key]
    finally:
        for t in tasks:
            t.cancel()


async def settle_loop(done: Callable[[], bool]) -> None:
    """Let the loop run until `done` (a hang guard of many iterations, not a clock)."""
    for _ in range(2000):
        if done():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the loop never got there")


@dataclass
class WatchStream:
    """A watch response: lines of events, then a cut connection (or a clean end)."""

    events: list[dict[str, Any]]
    cut: BaseException | None = None
    status: int = 200

    async def __aenter__(self) -> WatchStream:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    @property
    def content(self) -> Any:
        async def lines() -> Any:
            for event in self.events:
                yield (json.dumps(event) + "\n").encode()
            if self.cut is not None:
                raise self.cut

        return lines()


def wobj(name: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}


@pytest.mark.parametrize("err", LOOP_ERRORS[:3], ids=lambda e: type(e).__name__)
async def test_a_watch_cut_mid_stream_resumes_from_its_last_event_without_a_relist(
    err: BaseException,
) -> None:
    streams = [
        WatchStream([{"type": "MODIFIED", "object": wobj("a", 11)}], cut=err),
        WatchStream([{"type": "ADDED", "object": wobj("b", 12)}]),
    ]
    asked: list[str] = []
    done = asyncio.Event()

    class Api:
        async def request(self, method: str, path: str, **_: Any) -> k.Obj:
            return {"items": [wobj("a", 1)], "metadata": {"resourceVersion": "10"}}

        async def raw(self, method: str, path: str, *, query: dict[str, Any], **_: Any) -> Any:
            asked.append(query["resourceVersion"])
            if not streams:
                done.set()
                await asyncio.Event().wait()  # a quiet watch, until cancelled
            return streams.pop(0)

    store = Store(k.WORKLOADS)
    watcher = Watcher(Api(), store)  # type: ignore[arg-type]
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(done.wait(), 30)  # a hang guard
    finally:
        task.cancel()
    assert asked == ["10", "11", "12"]
    assert watcher.relists == 1
    assert {key: o["metadata"]["resourceVersion"] for key, o in store.objects.items()} == {
        ("ns", "a"): "11",
        ("ns", "b"): "12",
    }


OUTCOME = st.sampled_from(["ok", "ok", "before", "after", "late"])


@settings(max_examples=200, deadline=None)
@given(plan=st.lists(st.tuples(OUTCOME, st.sampled_from(ERRORS[:4] + ERRORS[5:])), max_size=6))
async def test_whatever_fails_in_transit_the_core_charges_exactly_what_the_api_admitted(
    plan: list[tuple[str, BaseException]],
) -> None:
    w, faults, key, admission = await queued_world()
    for how, err in plan:  # the admission write first, then the fences that follow
        faults.fail(workload_write, err, "pass" if how == "ok" else how)
    admitted = await w.decisions(sleep=Sleeps()).admit(key, admission)
    for late in list(faults.late):  # what the client gave up on reaches the server now
        faults.late = [late]
        with contextlib.suppress(KubeError):
            await faults.replay_late()
    wl = api_workload(w)
    assert admitted == WorkloadView(wl).holds_quota
    assert usage(w) == (8 if WorkloadView(wl).holds_quota else 0)
    assert admissions_landed(faults) == (1 if admitted else 0)


def served_down_to(outcomes: list[Any], c: Controller, left: int) -> bool:
    return len(outcomes) == left and not c.keys.active


async def test_a_key_that_keeps_failing_backs_off_and_a_success_resets_it() -> None:
    now = [1_000.0]
    c = Controller(FakeKube(), clock=lambda: now[0])  # type: ignore[arg-type]
    outcomes = [KubeError(422, "Invalid", "x")] * 8 + [None, KubeError(503, "", "")]

    async def serve(_: str) -> None:
        err = outcomes.pop(0)
        if err is not None:
            raise err

    c._serve = serve  # type: ignore[method-assign]
    worker = asyncio.create_task(c._worker())
    delays = []
    try:
        for left in range(len(outcomes) - 1, -1, -1):
            c.enqueue("job:Job/ns/train")
            await settle_loop(functools.partial(served_down_to, outcomes, c, left))
            if c.keys.timers:
                delays.append(heapq.heappop(c.keys.timers)[0] - now[0])
    finally:
        worker.cancel()
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60, 1]
