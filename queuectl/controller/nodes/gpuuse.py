"""GPU use per Workload, from the node agents' reports, and the ClusterQueues' idle policies.

Each agent writes one report per window on its Node (`gpu.queuectl.io/gpu-use`: which
container held which GPUs and how busy they were). A new report is grouped by Workload
through each pod's verified owner chain, and each Workload's share becomes an action under
its work key: fold it into `status.gpuUsage` (`core/gpuuse.fold`), ask its ClusterQueue's
idle policy (`core/gpuuse.verdict`), and write the status with the `GPUIdle` condition. A
workload idle for the window gets a Warning Event; under `Requeue` or `Stop` it is also
preempted the way the core preempts (condition `Preempted`, the notice on its job and pods,
its priority class's grace period; then requeued, or for `Stop` deactivated).

The report is the agent's, the status the controller's: nothing a user writes decides.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from queuectl import metrics
from queuectl.api import gpuuse, names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.admission import status
from queuectl.controller.nodes.gpuuse_status import (
    HeldGpu,
    admitted_at,
    group,
    idle_message,
    idle_policy,
    status_patch,
    use_from_status,
)
from queuectl.controller.watch import kube as k
from queuectl.controller.watch import podowners
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Obj
from queuectl.controller.workloads import settle
from queuectl.controller.workloads.events import EventRecorder
from queuectl.controller.workloads.workload_writes import WorkloadWrites, split_key
from queuectl.core.gpuuse import IdleAction, IdlePolicy, NodeReport, Verdict, fold, verdict
from queuectl.core.results import Preemption

log = logging.getLogger(__name__)

EnqueueAction = Callable[[str, Callable[[], Awaitable[None]]], None]


def report_text(node: Obj | None) -> str | None:
    return ObjectView(node).annotations.get(names.ANNOTATION_GPU_USE) if node else None


class GpuUseTracker:
    """Folds each node's new GPU-use report into its Workloads' statuses (on the leader)."""

    def __init__(
        self,
        cache: Cache,
        writes: WorkloadWrites,
        events: EventRecorder,
        enqueue: EnqueueAction,
        clock: Callable[[], float] = time.time,
        collector: metrics.HeldGpuCollector = metrics.HELD_GPU_COLLECTOR,
    ) -> None:
        self.cache = cache
        self.writes = writes
        self.events = events
        self.enqueue = enqueue
        self.clock = clock
        self.collector = collector
        self.owners = cache.pod_owners()
        self.pending: dict[str, str] = {}
        """Node name -> its report not taken yet (a newer one replaces it)."""
        self.bad: dict[str, str] = {}
        """Node name -> why its report did not parse (logged once per problem)."""
        self.wake = asyncio.Event()
        cache.store(k.NODES).listeners.append(self._on_node)

    def _on_node(self, kind: str, obj: Obj, old: Obj | None) -> None:
        name = obj["metadata"]["name"]
        text = None if kind == "DELETED" else report_text(obj)
        if text is None:
            self.pending.pop(name, None)
            self.collector.update(name, None)
        elif text != report_text(old) or old is None:
            self.pending[name] = text
            self.wake.set()

    async def run(self, wait_leading: Callable[[], Awaitable[None]]) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            await wait_leading()
            taken, self.pending = self.pending, {}
            for node, text in taken.items():
                self.take(node, text)

    def take(self, node: str, text: str) -> None:
        """One node's report: the per-GPU series now, each Workload's share as an action."""
        try:
            report = gpuuse.decode(text)
        except gpuuse.BadReport as exc:
            if self.bad.get(node) != str(exc):
                log.warning("node %s: GPU-use report ignored: %s", node, exc)
            self.bad[node] = str(exc)
            return
        self.bad.pop(node, None)
        shares, held = group(node, report, self._workload_of)
        self.collector.update(node, [self._sample(node, h) for h in held])
        for key, share in sorted(shares.items()):
            self.enqueue(key, self._action(key, share))

    def _workload_of(self, namespace: str, pod: str) -> str | None:
        obj = self.cache.get(k.PODS, pod, namespace)
        return podowners.pod_workload(obj, self.owners) if obj is not None else None

    def _cluster_queue(self, key: str | None) -> str:
        if key is None:
            return ""
        ns, name = split_key(key)
        wl = self.cache.get(k.WORKLOADS, name, ns)
        admission = WorkloadView(wl).admission if wl is not None else None
        return str((admission or {}).get("clusterQueue") or "")

    def _sample(self, node: str, h: HeldGpu) -> metrics.HeldGpuSample:
        workload = split_key(h.workload)[1] if h.workload else ""
        return metrics.HeldGpuSample(
            node,
            h.uuid,
            h.namespace,
            h.pod,
            h.container,
            workload,
            self._cluster_queue(h.workload),
            h.utilization / 100.0,
        )

    def _action(self, key: str, share: NodeReport) -> Callable[[], Awaitable[None]]:
        async def act() -> None:
            ns, name = split_key(key)
            wl = self.cache.get(k.WORKLOADS, name, ns)
            if wl is not None and WorkloadView(wl).holds_quota:
                await self.fold_into(wl, share)

        return act

    async def fold_into(self, wl: Obj, share: NodeReport) -> None:
        """Count `share` on the Workload holding quota `wl`; flag or stop it if its queue's
        idle policy says so. A write that loses a conflict drops this share: the next report
        from that node covers its time."""
        view = WorkloadView(wl)
        cq = str((view.admission or {}).get("clusterQueue") or "")
        policy = idle_policy(self.cache.get(k.CLUSTER_QUEUES, cq))
        folded = fold(
            use_from_status(wl),
            share,
            admitted_at=admitted_at(wl),
            threshold=policy.threshold if policy else None,
        )
        if folded is None:
            return
        use, counted = folded
        decided = verdict(use, policy, share.end)
        was_idle = view.is_true(names.COND_GPU_IDLE)
        written = await self.writes.write_status(
            wl, status_patch(wl, use, decided, policy, self.clock())
        )
        if written is None:
            return
        metrics.CONTROLLER_USED_GPU_SECONDS.labels(cq).inc(counted.used_gpu_seconds)
        metrics.CONTROLLER_IDLE_GPU_SECONDS.labels(cq).inc(counted.idle_gpu_seconds)
        if decided is Verdict.IN_USE or policy is None:
            return
        if not was_idle:
            metrics.CONTROLLER_IDLE_ACTIONS.labels(cq, policy.action.value).inc()
            note = idle_message(use, policy, share.end)
            self.events.emit(written, "Warning", names.EVENT_GPU_IDLE, "Idle", note)
        if decided is Verdict.STOP:
            await self._preempt(written, use.idle_since, policy)

    async def _preempt(self, wl: Obj, idle_since: float | None, policy: IdlePolicy) -> None:
        """The notice the core's preemptions write, with the victim's grace period; its
        reconcile serves it (the job and pods annotated, then evicted; Stop deactivates)."""
        view = WorkloadView(wl)
        if view.is_true(names.COND_PREEMPTED):
            return
        now = self.clock()
        stop = policy.action is IdleAction.STOP
        reason = names.REASON_GPU_IDLE_STOP if stop else names.REASON_GPU_IDLE
        idle_min = (now - (idle_since or now)) / 60
        message = (
            f"GPUs idle (under {policy.threshold:.0f}% utilization) for {idle_min:.0f} min; "
            f"ClusterQueue idle policy {policy.action.value}"
        )
        p = Preemption(
            view.key,
            names.PREEMPTOR_IDLE_POLICY,
            reason,
            message,
            now + self._grace(wl),
        )

        def patch_for(w: Obj) -> dict[str, Any] | None:
            return (
                None
                if WorkloadView(w).is_true(names.COND_PREEMPTED)
                else status.preempted(w, p, now)
            )

        written = await settle.write_settled(self.writes, wl, patch_for)
        if written is not None:
            self.writes.count("preempted")
            self.events.emit(written, "Warning", names.EVENT_PREEMPTED, "Preempt", message)

    def _grace(self, wl: Obj) -> float:
        spec = WorkloadView(wl).spec
        pc: str = spec.get("priorityClassName") or ""
        namespace = wl["metadata"].get("namespace") or ""
        if not pc or not self.cache.priority_class_allowed(pc, namespace):
            return 0.0
        info = self.cache.priority_class_value(pc)
        return info[1] if info is not None else 0.0
