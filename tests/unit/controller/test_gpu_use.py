"""GPU use per Workload from the node agents' reports, over the in-memory API server of the
reconcile tests: a working job is counted and left alone; an idle one is flagged with a
Warning Event, and under Requeue preempted with its grace period, under Stop deactivated."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from controller_fakes import World, admitted_world, gpu_node, merge

from queuectl import convert, metrics
from queuectl.api import gpuuse, names
from queuectl.api.views import WorkloadView
from queuectl.controller.nodes.gpuuse import GpuUseTracker
from queuectl.controller.nodes.gpuuse_status import group
from queuectl.controller.watch import kube as k
from queuectl.core.gpuuse import NodeReport

Action = Callable[[], Awaitable[None]]
GPUS = tuple(f"GPU-{i}" for i in range(8))


class Harness:
    """The admitted Job `ns/train` with its pod on node n1, and a tracker whose actions are
    queued and served as the controller's worker serves them."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.queued: list[tuple[str, Action]] = []
        self.collector = metrics.HeldGpuCollector()
        w.add(k.NODES, gpu_node("n1"))
        job = w.job()
        ref = {"kind": "Job", "name": "train", "uid": job["metadata"]["uid"], "controller": True}
        w.add(
            k.PODS,
            {
                "metadata": {"name": "train-0", "namespace": "ns", "ownerReferences": [ref]},
                "spec": {"nodeName": "n1"},
                "status": {"phase": "Running"},
            },
        )
        self.tracker = GpuUseTracker(
            w.cache,
            w.rec.writes,
            w.rec.writes.events,
            lambda key, action: self.queued.append((key, action)),
            lambda: w.now,
            self.collector,
        )
        self.t = w.now

    def set_policy(self, **policy: Any) -> None:
        cq = copy.deepcopy(self.w.cache.get(k.CLUSTER_QUEUES, "cq"))
        assert cq is not None
        self.w.add(k.CLUSTER_QUEUES, merge(cq, {"spec": {"idlePolicy": policy}}))

    async def report(self, util: float, minutes: int = 1, *, pod: str = "train-0") -> None:
        """`minutes` one-minute reports from n1's agent, the job's 8 GPUs at `util` %."""
        for _ in range(minutes):
            use = gpuuse.ContainerUse("ns", pod, "c", GPUS, util, 1 << 30)
            text = gpuuse.encode(gpuuse.UseReport(self.t, self.t + 60, (use,)))
            self.t += 60
            self.w.now = self.t
            node = copy.deepcopy(self.w.cache.get(k.NODES, "n1"))
            assert node is not None
            self.w.add(
                k.NODES,
                merge(node, {"metadata": {"annotations": {names.ANNOTATION_GPU_USE: text}}}),
            )
            self.tracker.take("n1", text)
            while self.queued:
                key, action = self.queued.pop(0)
                await action()
                await self.w.rec.reconcile(key)
        await self.w.rec.writes.events.drain()

    def usage(self) -> dict[str, Any]:
        return dict(WorkloadView(self.w.workload()).status.get("gpuUsage") or {})

    def events(self, reason: str) -> list[str]:
        return [
            o["note"]
            for (plural, _, _), o in self.w.kube.objects.items()
            if plural == "events" and o["reason"] == reason
        ]


async def test_a_working_job_is_counted_and_left_alone() -> None:
    w, _ = await admitted_world()
    h = Harness(w)
    h.set_policy(thresholdPercent=5, windowSeconds=600, action="Requeue")
    await h.report(90, minutes=20)
    usage = h.usage()
    assert (usage["gpus"], usage["utilizationPercent"]) == (8, 90)
    assert usage["gpuSeconds"] == 8 * 60 * 20 and usage["usedGpuSeconds"] == 8 * 60 * 20 * 0.9
    assert usage.get("idleSince") is None
    assert WorkloadView(w.workload()).condition(names.COND_GPU_IDLE) is None
    assert not WorkloadView(w.workload()).is_true(names.COND_PREEMPTED)


async def test_a_report_seen_twice_counts_once() -> None:
    w, _ = await admitted_world()
    h = Harness(w)
    await h.report(50)
    text = w.cache.get(k.NODES, "n1")["metadata"]["annotations"][names.ANNOTATION_GPU_USE]  # type: ignore[index]
    h.tracker.take("n1", text)  # a relist brings the same annotation back
    while h.queued:
        await h.queued.pop(0)[1]()
    assert h.usage()["gpuSeconds"] == 8 * 60


async def test_an_idle_job_under_warn_is_flagged_once_and_cleared_when_it_works_again() -> None:
    w, _ = await admitted_world()
    h = Harness(w)
    h.set_policy(thresholdPercent=5, windowSeconds=600, action="Warn")
    await h.report(1, minutes=9)
    assert WorkloadView(w.workload()).condition(names.COND_GPU_IDLE) is None  # 9 min < 10
    await h.report(1, minutes=5)
    cond = WorkloadView(w.workload()).condition(names.COND_GPU_IDLE)
    assert cond is not None and cond["status"] == "True" and cond["reason"] == "IdleGPUs"
    assert "under the ClusterQueue's idle threshold of 5%" in cond["message"]
    [note] = h.events(names.EVENT_GPU_IDLE)
    assert "idle policy Warn: it keeps running" in note
    assert not WorkloadView(w.workload()).is_true(names.COND_PREEMPTED)
    await h.report(60)
    cond = WorkloadView(w.workload()).condition(names.COND_GPU_IDLE)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "GPUsInUse")
    assert h.usage().get("idleSince") is None


@pytest.mark.parametrize("action", ["Requeue", "Stop"])
async def test_an_idle_job_is_preempted_with_its_grace_period(action: str) -> None:
    """Class `low` gives 60 s of grace: the notice carries the deadline; once it passes the
    job is evicted; Requeue requeues it, Stop deactivates it first."""
    w, key = await admitted_world()
    h = Harness(w)
    h.set_policy(thresholdPercent=5, windowSeconds=600, action=action)
    await h.report(0, minutes=10)  # idle from the first report on: the window is full
    wl = w.workload()
    assert WorkloadView(wl).is_true(names.COND_GPU_IDLE)
    assert WorkloadView(wl).is_true(names.COND_PREEMPTED)
    preemption = WorkloadView(wl).status["preemption"]
    assert preemption["preemptor"] == names.PREEMPTOR_IDLE_POLICY
    assert convert.parse_time(preemption["deadline"]) == pytest.approx(w.now + 60, abs=1)
    assert WorkloadView(wl).spec.get("active", True) is True  # still running: grace period
    w.now += 61
    await w.rec.reconcile(key)
    wl = w.workload()
    assert WorkloadView(wl).is_true(names.COND_EVICTED)
    assert (WorkloadView(wl).spec.get("active", True) is False) == (action == "Stop")


async def test_a_requeued_job_starts_a_new_idle_clock_and_its_old_flag_says_so() -> None:
    """Flagged under Warn, then (for any reason) requeued and admitted again: the next idle
    report does not flag it at once; the condition says the window runs again."""
    w, _ = await admitted_world()
    h = Harness(w)
    h.set_policy(thresholdPercent=5, windowSeconds=600, action="Warn")
    await h.report(0, minutes=10)
    assert WorkloadView(w.workload()).is_true(names.COND_GPU_IDLE)
    wl = copy.deepcopy(w.workload())
    for cond in wl["status"]["conditions"]:
        if cond["type"] == names.COND_QUOTA_RESERVED:
            cond["lastTransitionTime"] = convert.format_time(h.t + 30)  # admitted again
    w.add(k.WORKLOADS, wl)
    await h.report(0, minutes=2)
    cond = WorkloadView(w.workload()).condition(names.COND_GPU_IDLE)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "IdleWindowNotFull")
    assert h.usage()["idleSince"] == convert.format_time(h.t - 120 + 30)


def test_group_sums_each_workloads_gpus_and_weights_their_utilization() -> None:
    report = gpuuse.UseReport(
        0,
        60,
        (
            gpuuse.ContainerUse("a", "w-0", "main", ("G0", "G1"), 90, 0),
            gpuuse.ContainerUse("a", "w-1", "main", ("G2",), 0, 0),
            gpuuse.ContainerUse("b", "other", "main", ("G3",), 50, 0),
        ),
    )
    owners = {("a", "w-0"): "a/job-w", ("a", "w-1"): "a/job-w"}
    shares, held = group("n1", report, lambda ns, pod: owners.get((ns, pod)))
    assert shares == {"a/job-w": NodeReport("n1", 0, 60, 3, 60.0)}
    assert [(h.uuid, h.workload) for h in held] == [
        ("G0", "a/job-w"),
        ("G1", "a/job-w"),
        ("G2", "a/job-w"),
        ("G3", None),
    ]


async def test_a_new_report_alone_does_not_refeed_the_node_or_wake_a_cycle() -> None:
    """Reports change a Node once a minute; the core reads nothing of them."""
    from controller_fakes import RecordingScheduler

    from queuectl.controller.feed.feed import Feed

    w, _ = await admitted_world()
    wakes: list[None] = []
    Feed(w.cache, RecordingScheduler(), lambda: wakes.append(None), lambda _: None, lambda *_: None)
    w.add(k.NODES, gpu_node("n1"))
    assert len(wakes) == 1

    def changed(**patch: Any) -> None:
        node = copy.deepcopy(w.cache.get(k.NODES, "n1"))
        assert node is not None
        w.add(k.NODES, merge(node, {"metadata": patch}))

    changed(annotations={names.ANNOTATION_GPU_USE: '{"v":1,"from":0,"to":60,"c":[]}'})
    changed(annotations={names.ANNOTATION_GPU_USE: '{"v":1,"from":60,"to":120,"c":[]}'})
    assert len(wakes) == 1
    changed(labels={names.LABEL_GPU_HEALTHY_COUNT: "7"})
    assert len(wakes) == 2
