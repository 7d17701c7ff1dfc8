"""Courtesy writes never crowd out the ones that matter: two work-queue lanes, paced pending
messages, and an Event budget."""

from __future__ import annotations

import asyncio

from controller_fakes import World, new_job, queued

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.workloads.events import EventRecorder
from queuectl.controller.workloads.pacing import PendingRefresh, TokenBucket
from queuectl.controller.workqueue import WorkQueue


def drain(q: WorkQueue) -> list[str]:
    out = []
    while (key := q.pop_nowait()) is not None:
        out.append(key)
    return out


def test_admissions_overtake_a_backlog_of_pending_reason_refreshes() -> None:
    q = WorkQueue()
    for i in range(3):
        q.put(f"wl:ns/pending-{i}", urgent=False)
    q.put("wl:ns/admit-me")
    q.put("job:Job/ns/train")
    assert drain(q) == [
        "wl:ns/admit-me",
        "job:Job/ns/train",
        "wl:ns/pending-0",
        "wl:ns/pending-1",
        "wl:ns/pending-2",
    ]


def test_a_background_key_that_turns_urgent_is_promoted_and_served_once() -> None:
    q = WorkQueue()
    q.put("wl:ns/a", urgent=False)
    q.put("wl:ns/b", urgent=False)
    q.put("wl:ns/b")  # an admission for b arrives
    q.put("wl:ns/b", urgent=False)  # and the next cycle lists it as pending again: stays urgent
    assert len(q) == 2 and q.depth(urgent=True) == 1
    assert drain(q) == ["wl:ns/b", "wl:ns/a"]
    q.put("wl:ns/b", urgent=False)  # queued again after it was served: once more, in its lane
    assert drain(q) == ["wl:ns/b"]


async def test_a_worker_waiting_on_an_empty_queue_wakes_on_put() -> None:
    q = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.put("wl:ns/a", urgent=False)
    assert await asyncio.wait_for(getter, 1.0) == "wl:ns/a"
    assert "wl:ns/a" not in q


def test_the_event_budget_allows_a_burst_then_its_rate() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=0.0)
    assert [bucket.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.take(0.5) and not bucket.take(0.5)  # one token per half second
    assert [bucket.take(100.0) for _ in range(4)] == [True, True, True, False]  # capped at burst


def test_pending_refresh_memory_stays_bounded() -> None:
    refresh = PendingRefresh(interval_s=30.0)
    for i in range(10_000):
        refresh.wrote(f"ns/w{i}", now=float(i))
    assert len(refresh._written) < 5_000
    assert not refresh.due("ns/w9999", 9_999.0) and refresh.due("ns/w0", 9_999.0)


async def test_events_over_budget_are_dropped_not_queued() -> None:
    w = World()
    recorder = EventRecorder(w.kube, "test", qps=0.001, burst=2)  # type: ignore[arg-type]
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}
    for _ in range(5):
        recorder.emit(obj, "Normal", "Admitted", "Admit", "admitted")
    await recorder.drain()
    assert [wr[0] for wr in w.kube.writes if wr[1] == "events"] == ["create", "create"]


async def test_routine_events_yield_while_status_writes_queue_up_but_preemptions_are_told() -> None:
    w = World()
    backlog = True
    recorder = EventRecorder(w.kube, "test", busy=lambda: backlog)  # type: ignore[arg-type]
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}
    recorder.emit(obj, "Normal", names.EVENT_ADMITTED, "Admit", "admitted")
    recorder.emit(obj, "Normal", names.EVENT_FINISHED, "Finish", "finished")
    recorder.emit(obj, "Normal", names.EVENT_PREEMPTED, "Preempt", "preempted by a/urgent")
    backlog = False
    recorder.emit(obj, "Normal", names.EVENT_ADMITTED, "Admit", "admitted again")
    await recorder.drain()
    sent = sorted(
        obj["note"] for (plural, _, _), obj in w.kube.objects.items() if plural == "events"
    )
    assert sent == ["admitted again", "preempted by a/urgent"]


async def test_a_waiting_workloads_reason_is_written_at_once_and_its_numbers_at_a_pace() -> None:
    """The core says "needs 8, 3 free", then "needs 8, 5 free" a second later: the second
    message waits for the refresh interval; a new reason never waits."""
    w = World()
    await queued(w, new_job())

    def status_writes() -> int:
        return sum(1 for wr in w.kube.writes if wr[0] == "patch/status")

    def message() -> tuple[str, str]:
        cond = WorkloadView(w.workload()).condition(names.COND_QUOTA_RESERVED) or {}
        return cond.get("reason", ""), cond.get("message", "")

    async def core_says(reason: str, msg: str) -> None:
        await w.rec.pending.write(w.workload(), reason, msg, w.now)

    before = status_writes()
    await core_says("InsufficientQuota", "needs 8, 3 free")
    assert message() == ("InsufficientQuota", "needs 8, 3 free")
    w.now += 1
    await core_says("InsufficientQuota", "needs 8, 5 free")
    assert message() == ("InsufficientQuota", "needs 8, 3 free")
    await core_says("Preempting", "waiting for 2 victims")
    assert message() == ("Preempting", "waiting for 2 victims")
    w.now += 1
    await core_says("Preempting", "waiting for 1 victim")
    assert message()[1] == "waiting for 2 victims"
    w.now += 30
    await core_says("Preempting", "waiting for 1 victim")
    assert message() == ("Preempting", "waiting for 1 victim")
    assert status_writes() - before == 3


def test_pending_writes_share_one_budget_a_burst_then_the_rate() -> None:
    refresh = PendingRefresh(interval_s=30.0, qps=1.0, burst=2)
    first = [refresh.allow(f"ns/w{i}", 0.0, same_reason=False) for i in range(3)]
    assert first == [True, True, False] and refresh.deferred == 1
    assert refresh.allow("ns/w2", 1.0, same_reason=False)  # a second later: one more token


async def test_a_reason_refused_for_budget_is_left_stale_for_the_sweep_to_retry() -> None:
    """A flood of arrivals: the budget is spent, so this Workload's new reason is not written
    now; its condition disagrees with the core, which is what the pending sweep looks for, and
    once the budget refills the write goes out."""
    w = World()
    w.rec.pending.refresh = PendingRefresh(qps=0.01, burst=1)
    await queued(w, new_job())
    await w.rec.pending.write(w.workload(), "InsufficientQuota", "needs 8, 3 free", w.now)
    await w.rec.pending.write(w.workload(), "Preempting", "waiting for 2 victims", w.now)
    cond = WorkloadView(w.workload()).condition(names.COND_QUOTA_RESERVED) or {}
    assert cond.get("reason") == "InsufficientQuota"
    assert w.rec.pending.refresh.deferred == 1
    w.now += 100
    await w.rec.pending.write(w.workload(), "Preempting", "waiting for 2 victims", w.now)
    cond = WorkloadView(w.workload()).condition(names.COND_QUOTA_RESERVED) or {}
    assert cond.get("reason") == "Preempting"
