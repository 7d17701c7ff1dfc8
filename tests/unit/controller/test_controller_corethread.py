"""The scheduling cycle runs off the event loop (issue 11 (1), issue 12 finding 6).

A slow cycle must not stall the loop; inputs that arrive while it runs reach the core after it,
in order, none lost; the loop never reads a core that is half-way through a cycle.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import threading
import time
from typing import Any

from controller_fakes import World, merge, new_job
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl import metrics
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.feed.corethread import CoreThread
from queuectl.controller.manager import Controller
from queuectl.controller.watch import kube as k
from queuectl.core import (
    GPU,
    ClusterQueue,
    CycleResult,
    Flavor,
    FlavorQuotas,
    PodSet,
    ResourceGroup,
    ResourceQuota,
    Scheduler,
    Workload,
)


class HeldCycle:
    """Stands in for `Scheduler.run_cycle`: says when the core thread entered it, waits to be
    released (or spins on the CPU for `spin_s`, holding the GIL as a real cycle does), then
    runs the real cycle."""

    def __init__(self, sched: Scheduler, *, spin_s: float = 0.0, held: bool = False) -> None:
        self.real = sched.run_cycle
        self.spin_s = spin_s
        self.entered = threading.Event()
        self.release = threading.Event()
        if not held:
            self.release.set()
        self.thread = ""
        self.ran_s = 0.0
        self.span = (0.0, 0.0)
        sched.run_cycle = self  # type: ignore[method-assign]

    def __call__(self, now: float) -> CycleResult:
        started = time.perf_counter()
        self.thread = threading.current_thread().name
        self.entered.set()
        self.release.wait(30)
        while time.perf_counter() - started < self.spin_s:
            sum(range(1_000))
        result = self.real(now)
        ended = time.perf_counter()
        self.ran_s, self.span = ended - started, (started, ended)
        return result

    async def wait_entered(self) -> None:
        while not self.entered.is_set():
            await asyncio.sleep(0.001)


class Ticker:
    """An asyncio task that wakes every 10 ms and records when it woke."""

    def __init__(self) -> None:
        self.woke: list[float] = []
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            self.woke.append(time.perf_counter())

    def during(self, span: tuple[float, float]) -> int:
        """How often the loop woke while `span` lasted."""
        return sum(1 for t in self.woke if span[0] < t < span[1])

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def controller() -> tuple[Controller, World]:
    """A Controller over the reconcile tests' fake API server, with its queues and classes."""
    w = World()
    c = Controller(w.kube, clock=lambda: w.now)  # type: ignore[arg-type]
    for res in (
        k.NAMESPACES,
        k.RESOURCE_FLAVORS,
        k.CLUSTER_QUEUES,
        k.LOCAL_QUEUES,
        k.PRIORITY_CLASSES_OURS,
    ):
        for obj in w.cache.store(res).values():
            c.cache.store(res).apply("ADDED", obj)
    return c, w


async def queue_job(c: Controller, w: World, name: str = "train", gpus: int = 8) -> str:
    job = copy.deepcopy(new_job())
    job["metadata"]["name"] = name
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["resources"]["requests"][names.GPU_RESOURCE] = str(gpus)
    c.cache.store(k.JOBS).apply("ADDED", w.kube.put(k.JOBS, job))
    key = await c.reconciler.reconcile_job("Job", "ns", name)
    assert key is not None
    return key


# --- the loop goes on --------------------------------------------------------------------
async def test_the_loop_keeps_answering_while_a_slow_cycle_runs() -> None:
    c, _ = controller()
    cycle = HeldCycle(c.sched, spin_s=1.5)
    ticker = Ticker()
    await asyncio.sleep(0.05)
    await c.run_cycle()
    await asyncio.sleep(0.05)  # the tick after a stall, if there was one, records it
    await ticker.stop()
    assert cycle.ran_s >= 1.5  # the cycle really held the CPU that long
    # On the loop, the loop could not wake at all while the cycle ran; off it, the loop gets
    # the interpreter every few milliseconds (the bound leaves a wide margin for a loaded
    # machine, and counts wakes rather than timing them).
    assert ticker.during(cycle.span) >= 5, ticker.during(cycle.span)
    assert cycle.thread.startswith("queuectl-core")


async def test_a_cycle_that_fails_leaves_the_core_idle_with_its_inbox_applied() -> None:
    sched = Scheduler()
    core = CoreThread(sched)

    def broken(now: float) -> CycleResult:
        time.sleep(0.05)
        raise RuntimeError("core bug")

    sched.run_cycle = broken  # type: ignore[method-assign]
    running = asyncio.create_task(_enter(core, 1.0))
    await asyncio.sleep(0.01)
    core.upsert_flavor(Flavor("h100"))
    try:
        await running
    except RuntimeError as err:
        assert str(err) == "core bug"
    else:
        raise AssertionError("the cycle's error was swallowed")
    assert not core.busy
    assert "h100" in (await core.idle()).flavors()
    core.close()


async def test_a_cycle_cancelled_at_shutdown_keeps_the_core_to_its_thread_until_it_ends() -> None:
    sched = Scheduler()
    core = CoreThread(sched)
    cycle = HeldCycle(sched, held=True)
    running = asyncio.create_task(_enter(core, 1.0))
    await cycle.wait_entered()
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    core.upsert_flavor(Flavor("h100"))
    assert core.busy and "h100" not in sched.flavors()  # the thread still runs the cycle
    cycle.release.set()
    await core.idle()
    assert "h100" in sched.flavors()
    core.close()


async def _enter(core: CoreThread, now: float) -> None:
    async with core.cycle(now):
        pass


# --- inputs during a cycle ---------------------------------------------------------------
async def test_a_job_queued_during_a_cycle_is_fed_after_it_and_admitted_by_the_next() -> None:
    c, w = controller()
    cycle = HeldCycle(c.sched, held=True)
    running = asyncio.create_task(c.run_cycle())
    await cycle.wait_entered()

    key = await queue_job(c, w)  # the Workload is created and its event fed meanwhile
    assert c.core.busy
    assert c.sched.workload(key) is None  # queued: the core thread owns the core now

    cycle.release.set()
    await running
    assert not c.core.busy
    assert c.sched.workload(key) is not None
    assert c._wake.is_set()  # the news wakes the next cycle

    await c.run_cycle()
    assert c.keys.actions.get(f"wl:{key}")  # which admits it: its write is queued


async def test_a_reason_asked_for_during_a_cycle_is_written_after_it() -> None:
    c, w = controller()
    key = await queue_job(c, w, gpus=16)  # more than the queue's 8 GPUs, ever
    await c.run_cycle()  # reports ExceedsMaxQuota; say its write was lost to a conflict
    drop_queued(c)

    cycle = HeldCycle(c.sched, held=True)
    running = asyncio.create_task(c.run_cycle())
    await cycle.wait_entered()
    await c.reconciler.reconcile(key)  # a Job event: the busy core cannot answer now
    assert WorkloadView(workload(c, key)).condition(names.COND_QUOTA_RESERVED) is None
    cycle.release.set()
    await running  # unchanged reason: not in this cycle's report

    await serve(c)
    cond = WorkloadView(workload(c, key)).condition(names.COND_QUOTA_RESERVED)
    assert cond is not None and cond["reason"] == names.REASON_EXCEEDS_MAX_QUOTA


def drop_queued(c: Controller) -> None:
    while c.keys.queue.pop_nowait() is not None:
        pass
    c.keys.actions.clear()


async def serve(c: Controller) -> None:
    """What the workers would do: serve every queued key."""
    while (key := c.keys.queue.pop_nowait()) is not None:
        await c._serve(key)


def workload(c: Controller, key: str) -> dict[str, Any]:
    namespace, _, name = key.partition("/")
    wl = c.cache.get(k.WORKLOADS, name, namespace)
    assert wl is not None
    return wl


@settings(max_examples=40, deadline=None)
@given(
    before=st.lists(st.tuples(st.sampled_from("uudrx"), st.integers(0, 4)), max_size=8),
    during=st.lists(st.tuples(st.sampled_from("uudrx"), st.integers(0, 4)), max_size=12),
)
def test_inputs_during_a_cycle_land_before_the_next_in_order_and_none_lost(
    before: list[tuple[str, int]], during: list[tuple[str, int]]
) -> None:
    """Upserts (u), deletes (d), requeues (r) and deactivations (x) made while a cycle runs on
    the core thread leave the core exactly as the same calls made after that cycle, one by
    one on one thread, do: the next cycle decides the same, every reason reads the same."""

    def reference() -> tuple[object, ...]:
        s = cluster(Scheduler())
        apply(s, before)
        s.run_cycle(10.0)
        apply(s, during)
        return snapshot(s, s.run_cycle(11.0))

    async def threaded() -> tuple[object, ...]:
        sched = Scheduler()
        core = CoreThread(sched)
        cluster(core)
        apply(core, before)
        cycle = HeldCycle(sched, held=True)
        running = asyncio.create_task(_enter(core, 10.0))
        await cycle.wait_entered()
        untouched = dict(sched.workloads())
        apply(core, during)
        assert sched.workloads() == untouched  # nothing reached the core mid-cycle
        cycle.release.set()
        await running
        async with core.cycle(11.0) as result:
            pass
        core.close()
        return snapshot(sched, result)

    assert asyncio.run(threaded()) == reference()


def cluster(core: Any) -> Any:
    core.upsert_flavor(Flavor("h100"))
    group = ResourceGroup((GPU,), (FlavorQuotas("h100", (ResourceQuota(GPU, 8),)),))
    core.upsert_cluster_queue(ClusterQueue("cq", None, (group,)))
    return core


def apply(core: Any, ops: list[tuple[str, int]]) -> None:
    serial = itertools.count(len(ops) * 10)
    for op, i in ops:
        key = f"ns/w{i}"
        if op in "ux":
            gpus = 1 + (i * 3 + next(serial)) % 8
            core.upsert_workload(
                Workload(
                    key,
                    "cq",
                    (PodSet("main", 1, {GPU: gpus}),),
                    priority=i % 2,
                    created=float(i),
                    active=op == "u",
                )
            )
        elif op == "d":
            core.delete_workload(key)
        else:
            core.requeue_workload(key)


def snapshot(s: Scheduler, result: CycleResult) -> tuple[object, ...]:
    keys = [f"ns/w{i}" for i in range(5)]
    return (
        sorted(a.key for a in result.admitted),
        sorted(k for k in s.workloads() if s.is_admitted(k)),
        sorted(s.workloads()),
        [s.pending_info(key) for key in keys],
    )


# --- reads never see a half-run cycle ------------------------------------------------------
async def test_reads_wait_for_the_cycle_and_a_reason_asked_meanwhile_is_asked_again() -> None:
    sched = Scheduler()
    core = CoreThread(sched)
    cluster(core)
    core.upsert_workload(Workload("ns/big", "cq", (PodSet("main", 1, {GPU: 16}),)))
    cycle = HeldCycle(sched, held=True)
    running = asyncio.create_task(_enter(core, 1.0))
    await cycle.wait_entered()
    assert core.pending_info("ns/big") is None
    reader = asyncio.create_task(core.idle())
    await asyncio.sleep(0.05)
    assert not reader.done()  # a status read waits for the cycle (the loop does not)
    cycle.release.set()
    await running
    assert (await reader) is sched
    assert core.take_unanswered() == {"ns/big"}
    info = core.pending_info("ns/big")
    assert info is not None and info.reason == names.REASON_EXCEEDS_MAX_QUOTA
    assert core.take_unanswered() == set()
    core.close()


async def test_a_workload_finishing_during_a_cycle_is_charged_until_it_finished() -> None:
    c, w = controller()
    key = await queue_job(c, w)
    await c.run_cycle()
    for action in c.keys.actions.pop(f"wl:{key}"):
        await action()  # the admission is written; the core holds the charge
    assert c.sched.is_admitted(key)
    c.observer.refresh(w.now)  # the meter's first reading
    counter = _gpu_seconds

    before = counter()
    cycle = HeldCycle(c.sched, held=True)
    running = asyncio.create_task(c.run_cycle())
    await cycle.wait_entered()
    w.now += 10
    job = c.cache.get(k.JOBS, "train", "ns")
    assert job is not None
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    c.cache.store(k.JOBS).apply("MODIFIED", w.kube.put(k.JOBS, _merged(job, done)))
    await c.reconciler.reconcile(key)  # Finished: the release waits in the inbox
    assert c.sched.is_admitted(key)
    refreshed = c.observer.refreshed_at
    c.observer.after_cycle(w.now + 100)  # the metrics timer: no reading of a busy core
    assert c.observer.refreshed_at == refreshed
    w.now += 20  # the cycle goes on long after the finish
    cycle.release.set()
    await running
    assert not c.sched.is_admitted(key)
    assert counter() - before == 8 * 10  # charged up to the finish, once


def _gpu_seconds() -> float:
    return (
        metrics.CONTROLLER_REGISTRY.get_sample_value(
            "queuectl_gpu_seconds_total",
            {"namespace": "ns", "cluster_queue": "cq", "flavor": "h100"},
        )
        or 0.0
    )


def _merged(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    return merge(copy.deepcopy(obj), patch)


async def test_an_admission_is_written_and_its_job_started_by_one_reconcile() -> None:
    """The cycle admits the Job; the worker serving the Workload's key writes the admission
    and then reconciles that key once, which starts the Job (the decision itself does not
    reconcile, so nothing is read and decided twice)."""
    c, w = controller()
    key = await queue_job(c, w)
    drop_queued(c)
    await c.run_cycle()
    reconciled: list[str] = []
    reconcile = c.reconciler.reconcile

    async def counted(wl_key: str) -> None:
        reconciled.append(wl_key)
        await reconcile(wl_key)

    c.reconciler.reconcile = counted  # type: ignore[method-assign]
    await c._serve(f"wl:{key}")
    assert reconciled == [key]
    assert WorkloadView(workload(c, key)).holds_quota
    job = c.cache.get(k.JOBS, "train", "ns") or {}
    assert job["spec"]["suspend"] is False
