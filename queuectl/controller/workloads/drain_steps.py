"""The drain of an evicted Workload: suspend its job, wait for the pods to go, put the
template back, then release the quota and requeue it (back-off, or a hold after a changed Job).
"""

from __future__ import annotations

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Obj
from queuectl.controller.workloads import settle
from queuectl.controller.workloads.workload_writes import CoreActions, WorkloadWrites
from queuectl.jobs import JobKind

JOB_CHANGED_HOLD_S = 5.0
"""How long a Workload requeued for a changed Job stays out of the core until it follows."""


class DrainSteps:
    def __init__(self, writes: WorkloadWrites, cache: Cache, sched: CoreActions) -> None:
        self.writes = writes
        self.cache = cache
        self.sched = sched

    async def drain(
        self, key: str, wl: Obj, adapter: JobKind | None, job: Obj | None, now: float
    ) -> None:
        """Evicted: suspend, wait for the pods to go, put the template back, release quota."""
        if adapter is not None and job is not None:
            if not adapter.is_suspended(job):
                await self.writes.patch_job(adapter, job, adapter.suspend_patch(job))
                return
            if not adapter.pods_gone(job):
                return  # the Job's status update brings us back
            pod_sets = WorkloadView(wl).pod_sets
            restore = adapter.restore_patch(job, pod_sets)
            if restore is not None:
                if not adapter.can_restore(job):
                    return  # the Job controller has yet to clear startTime
                if await self.writes.patch_job(adapter, job, restore, strict=True) is None:
                    return
                job = (
                    self.cache.get(
                        adapter.resource, job["metadata"]["name"], job["metadata"]["namespace"]
                    )
                    or job
                )
            if (job["metadata"].get("annotations") or {}).get(names.ANNOTATION_PREEMPTION_DEADLINE):
                await self.writes.patch_job(
                    adapter,
                    job,
                    {"metadata": {"annotations": {names.ANNOTATION_PREEMPTION_DEADLINE: None}}},
                )
        written = await settle.write_requeued(self.writes, wl, now)
        if written is not None:
            # Evicted because its Job changed: the core must not admit the stale shape again
            # before the Workload follows the Job (that write refeeds it, clearing the hold).
            why = (WorkloadView(written).condition(names.COND_REQUEUED) or {}).get("reason")
            stale = why == names.REASON_EVICTED_JOB_CHANGED
            not_before = now + JOB_CHANGED_HOLD_S if stale else 0.0
            if why in self.writes.backoff:  # backs off before it reserves again
                requeue = WorkloadView(written).status.get("requeueState") or {}
                not_before = convert.parse_time(requeue.get("requeueAt")) or now
            self.sched.requeue_workload(
                key, not_before=not_before, front=WorkloadView(written).requeued_for_node_failure
            )
            self.writes.count("requeued")
            self.writes.events.emit(
                wl,
                "Normal",
                names.EVENT_REQUEUED,
                "Requeue",
                "Pods are gone; quota released; requeued at its original position",
            )
