"""Per-Workload reconciliation: from the Workload, its Job and the clock, do the next step.

Level-triggered: each call reads the current objects from the cache and takes whichever single
step is due (create the Workload, start the Job, mark it Finished, serve a preemption notice,
suspend after the grace period, release quota once the pods are gone, re-suspend a Job someone
unsuspended). Because every step is decided from API state, a restarted controller continues
exactly where the previous one stopped.

This module holds the Workload's own steps; the job side (creating and adopting Workloads) is
`adoption.py`, the pod-group side `podgroup_steps.py`, the admission checks' step
`check_steps.py`, the drain of an evicted Workload `drain_steps.py`, pending reasons
`pending.py`, and the shared writes `workload_writes.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import checks, placement, status
from queuectl.controller.admission.builtin_checks import BuiltinChecks
from queuectl.controller.feed.feed import Feed, local_queue_stop
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.controller.watch.workload_pods import WorkloadPods
from queuectl.controller.workloads.adoption import JobWorkloads
from queuectl.controller.workloads.check_steps import CheckSteps
from queuectl.controller.workloads.children import place_children
from queuectl.controller.workloads.drain_steps import DrainSteps
from queuectl.controller.workloads.drift import admitted_pod_sets, drift, follow_job
from queuectl.controller.workloads.events import EventRecorder
from queuectl.controller.workloads.notice import PodNotices
from queuectl.controller.workloads.pacing import PendingRefresh
from queuectl.controller.workloads.pending import PendingReasons
from queuectl.controller.workloads.podgroup_steps import PodGroupSteps
from queuectl.controller.workloads.pods_ready import PodsReadyOptions
from queuectl.controller.workloads.pods_ready_steps import PodsReadySteps
from queuectl.controller.workloads.priority import follow_priority_class
from queuectl.controller.workloads.workload_writes import CoreActions, WorkloadWrites, split_key
from queuectl.jobs import JobKind, PlacesChildren, PodSetPlacement
from queuectl.jobs import podgroup as pg
from queuectl.jobs.kind import CountsSucceeded


def _without_value(message: str) -> str:
    """An Invalid answer without the whole template it quotes: `...: spec.template: field is
    immutable`."""
    head, sep, rest = message.partition("Invalid value: ")
    if sep and "}: " in rest:
        return head + rest.rsplit("}: ", 1)[1]
    return message[:300]


class Reconciler:
    """Every reconcile step of the controller, one object shared by the workers and the
    decisions. Its collaborators are explicit: the writes (`workload_writes`), the job side
    (`adoption`), the pending reasons (`pending`), the pod groups (`podgroup_steps`), the
    admission checks' step (`check_steps`), the drain (`drain_steps`) and the admission checks
    queuectl decides itself (`builtin_checks`)."""

    def __init__(
        self,
        kube: Kube,
        cache: Cache,
        feed: Feed,
        sched: CoreActions,
        adapters: Mapping[str, JobKind],
        events: EventRecorder,
        at: Callable[[float, str], None],
        clock: Callable[[], float] = time.time,
        pending_refresh: PendingRefresh | None = None,
        pods_ready: PodsReadyOptions | None = None,
        ready_pods: WorkloadPods | None = None,
    ) -> None:
        self.cache = cache
        self.feed = feed
        self.sched = sched
        self.at = at
        """at(when, workload key): reconcile that workload again at `when`."""
        self.clock = clock
        self.pods_ready = pods_ready or PodsReadyOptions()
        backoff = dict(status.BACKOFF)
        backoff[names.REASON_EVICTED_PODS_READY_TIMEOUT] = (
            self.pods_ready.backoff_base_s,
            self.pods_ready.backoff_max_s,
        )
        self.writes = WorkloadWrites(kube, cache, feed, events, clock, backoff)
        self.jobs = JobWorkloads(self.writes, adapters)
        self.pending = PendingReasons(self.writes, feed, sched, pending_refresh or PendingRefresh())
        self.ready_steps = PodsReadySteps(self.writes, self.pods_ready, ready_pods, at, self.evict)
        self.ready_pods = ready_pods
        self.notices = PodNotices(self.writes, at)
        self.groups = PodGroupSteps(
            self.writes, sched, self.pending, at, self.evict, self.ready_steps.check, self.notices
        )
        self.builtin_checks = BuiltinChecks(kube, cache, clock, at)
        self.check_steps = CheckSteps(self.writes, self.builtin_checks, self.evict)
        self.drains = DrainSteps(self.writes, cache, sched)

    async def reconcile(self, key: str) -> None:
        """Take the one step due for the Workload `key`, in this order:

        1. tidy what a built-in check asked for a workload that left;
        2. a foreign Workload that blocked a job is gone: queue that job now;
        3. gone, being deleted or Finished: nothing more (forgotten by the core);
        4. a plain pod group's Workload: its own steps (`podgroup_steps`);
        5. its job is gone: delete the Workload;
        6. its job finished: mark it Finished;
        7. its job's priority class label changed: follow it;
        8. holding quota: evict, serve a notice, gate on checks or start the job (`_holding`);
        9. waiting: keep the job suspended, follow it, say why it waits (`_waiting`).
        """
        ns, name = split_key(key)
        wl = self.cache.get(k.WORKLOADS, name, ns)
        await self.builtin_checks.tidy(key, wl)  # 1
        if wl is None and (squatted := self.jobs.squatter_gone(key)) is not None:  # 2
            kind, job_name = squatted
            if (own := await self.jobs.reconcile_job(kind, ns, job_name)) is not None:
                self.at(self.clock(), own)
            return
        if wl is None or wl["metadata"].get("deletionTimestamp"):  # 3
            return
        if WorkloadView(wl).is_true(names.COND_FINISHED):
            self.feed.forget(key)
            return
        if await self.groups.reconcile_group_workload(key, wl, self.clock()):  # 4
            return
        owner = self.jobs.owner_job(wl)
        adapter, job = owner if owner else (None, None)
        if owner is not None and job is None:  # 5
            await self.jobs.job_deleted(ns, name)
            return
        now = self.clock()
        if adapter is not None and job is not None:
            if fin := adapter.finished(job):  # 6
                if await self.writes.write_status(
                    wl, status.finished(wl, fin.reason, fin.message, now)
                ):
                    self.feed.forget(key)
                    self.writes.count("finished")
                    self.writes.events.emit(
                        wl, "Normal", names.EVENT_FINISHED, "Finish", fin.message
                    )
                return
            if await follow_priority_class(self.writes.kube, self.cache, adapter, job, wl):  # 7
                self.writes.count("priority_changed")
                return  # its new version comes back on its event
        if WorkloadView(wl).holds_quota:  # 8
            await self._holding(key, wl, adapter, job, now)
        else:  # 9
            await self._waiting(key, wl, adapter, job, now)

    # --- the entry points of the other keys ---------------------------------------------------
    async def reconcile_job(self, kind: str, namespace: str, name: str) -> str | None:
        """A queued job has its Workload (`adoption`); that Workload's key."""
        return await self.jobs.reconcile_job(kind, namespace, name)

    async def reconcile_group(self, key: pg.GroupKey) -> str | None:
        """A complete pod group has its Workload (`podgroup_steps`); that Workload's key."""
        return await self.groups.reconcile_group(key)

    async def job_deleted(self, namespace: str, wl_name: str) -> None:
        await self.jobs.job_deleted(namespace, wl_name)

    @property
    def stats(self) -> dict[str, int]:
        return self.writes.stats

    async def evict(self, wl: Obj, reason: str, message: str) -> None:
        """Evict from within a step, then take the next step (suspend the job) at once."""
        written = await self.writes.evict(wl, reason, message)
        if written is not None:
            await self.reconcile(WorkloadView(written).key)

    async def _holding(
        self, key: str, wl: Obj, adapter: JobKind | None, job: Obj | None, now: float
    ) -> None:
        """The steps of a Workload holding quota, the first that applies:

        1. Evicted: drain it (`drain_steps`);
        2. preempted: write the notice on the job and its running pods (`notice`); evict once
           the grace period is over (deactivated first when its idle policy said Stop);
        3. its LocalQueue stopped with HoldAndDrain: evict;
        4. admission checks not all Ready: wait, retry or deactivate (`check_steps`);
        5. the job changed under its quota: evict, to requeue it as it is now;
        6. the job still suspended: place it (and the children its operator does not place,
           `children`) and start it; started, such a child made unplaced is placed, or the
           job evicted when that child started so;
        7. running: its pods Ready in time, or evict (`pods_ready`).
        """
        st = WorkloadView(wl).status
        if WorkloadView(wl).is_true(names.COND_EVICTED):
            await self.drains.drain(key, wl, adapter, job, now)
            return
        deadline = convert.parse_time((st.get("preemption") or {}).get("deadline"))
        if WorkloadView(wl).is_true(names.COND_PREEMPTED) and deadline is not None:
            await self.notices.on_job(adapter, job, deadline)
            if now < deadline:
                self.at(deadline, key)
                pods = self.ready_pods.pods(key) if self.ready_pods is not None else []
                await self.notices.serve(key, pods, deadline, now)
                return
            cond = WorkloadView(wl).condition(names.COND_PREEMPTED) or {}
            if cond.get("reason") == names.REASON_GPU_IDLE_STOP:  # idle policy Stop
                wl = await self.writes.deactivate(wl) or wl
            await self.evict(
                wl,
                names.REASON_EVICTED_PREEMPTION,
                f"Grace period over: {cond.get('message', 'preempted')}",
            )
            return
        if local_queue_stop(self.cache, wl) == "HoldAndDrain":
            await self.evict(
                wl, names.REASON_LOCAL_QUEUE_STOPPED, "LocalQueue stopped with HoldAndDrain"
            )
            return
        if checks.entries(wl):
            gated = await self.check_steps.gate(wl, now)
            if gated is None:
                return
            wl = gated
        if (
            adapter is not None
            and job is not None
            and (changes := drift(adapter.workload_spec(job), wl, self._placed(adapter, job, wl)))
        ):
            # Its quota no longer describes the job (the webhook refuses this while admitted,
            # but its cache may lag the admission): never start or keep it running so.
            await self.evict(
                wl,
                names.REASON_EVICTED_JOB_CHANGED,
                "The Job changed while it held quota (" + "; ".join(changes) + "); stopped and "
                "requeued as it is now",
            )
            return
        if adapter is not None and job is not None and adapter.is_suspended(job):
            placed = self._placements(wl)
            await place_children(self.writes, self.cache, adapter, job, wl, placed)
            patch = adapter.run_patch(job, WorkloadView(wl).pod_sets, placed)
            try:
                started = await self.writes.patch_job(adapter, job, patch)
            except KubeError as err:
                if err.status != 422 or not any(p.gpu_resource for p in placed):
                    raise
                await self._gpu_resource_refused(wl, job, err)
                return
            if started is None:
                return
            self.writes.count("jobs_started")
            job = started  # and its startup clock is set below
        elif adapter is not None and job is not None and isinstance(adapter, PlacesChildren):
            placed = self._placements(wl)  # a child its operator made unplaced after the start
            frozen = await place_children(
                self.writes, self.cache, adapter, job, wl, placed, started=True
            )
            if frozen:
                await self.evict(
                    wl,
                    names.REASON_EVICTED_CHILD_UNPLACED,
                    f"{', '.join(frozen)} started without the placement (its operator made it "
                    "from the job before the job was placed); stopped and requeued at its "
                    "position, to start placed",
                )
                return
        if adapter is not None and job is not None:
            done = adapter.succeeded_pods(job) if isinstance(adapter, CountsSucceeded) else 0
            await self.ready_steps.check(key, wl, now, done)

    def _placements(self, wl: Obj) -> list[PodSetPlacement]:
        """What the Workload's admission places each pod set on (its flavors' node labels and
        tolerations, its topology domain, per-pod pins of a sliced pod set)."""
        admission = convert.admission_from_status(wl["status"]["admission"])
        flavors = {f["metadata"]["name"]: f for f in self.cache.store(k.RESOURCE_FLAVORS).values()}
        return placement.placements(admission, flavors, WorkloadView(wl).pod_sets)

    def _placed(self, adapter: JobKind, job: Obj, wl: Obj) -> list[Obj] | None:
        """The job's pod sets as the controller places them for this admission: a job that
        differs from both these and the recorded ones was moved by someone else (drift.py).
        None without an admission to place by (compared with the recorded ones alone)."""
        if not WorkloadView(wl).admission:
            return None
        return admitted_pod_sets(adapter, job, wl, self._placements(wl))

    async def _gpu_resource_refused(self, wl: Obj, job: Obj, err: KubeError) -> None:
        """The API server would not rename nvidia.com/gpu in the suspended Job (Kubernetes
        before 1.36, or MutablePodResourcesForSuspendedJobs off): retrying only holds quota
        for a Job that never starts, so deactivate it and say why, on the Job and the Workload."""
        note = (
            "The API server refused to rewrite the suspended Job's containers to its flavor's "
            "gpuResource (this needs MutablePodResourcesForSuspendedJobs: Kubernetes 1.36+, or "
            f"the feature gate on): {_without_value(err.message)}"
        )
        self.writes.events.emit(
            job, "Warning", names.EVENT_GPU_RESOURCE_REFUSED, "Start", f"{note}; deactivated"
        )
        deactivated = await self.writes.deactivate(wl)
        if deactivated is not None:
            await self.evict(deactivated, names.REASON_EVICTED_GPU_RESOURCE_REFUSED, note)

    async def _waiting(
        self, key: str, wl: Obj, adapter: JobKind | None, job: Obj | None, now: float
    ) -> None:
        """The steps of a waiting Workload: re-suspend a job someone started by hand, put its
        template back after an eviction, follow a job that changed, else say why it waits."""
        if adapter is not None and job is not None:
            if not adapter.is_suspended(job):  # someone unsuspended it by hand: undo that
                if await self.writes.patch_job(
                    adapter, job, adapter.suspend_patch(job), strict=True
                ):
                    self.writes.count("resuspended")
                    self.writes.events.emit(
                        job,
                        "Warning",
                        names.EVENT_SUSPENDED,
                        "Suspend",
                        "Suspended again: the job is not admitted by its queue",
                    )
                return
            restore = adapter.restore_patch(job, WorkloadView(wl).pod_sets)
            if restore is not None and adapter.can_restore(job):
                await self.writes.patch_job(adapter, job, restore, strict=True)
            elif restore is None and (
                changes := await follow_job(self.writes.kube, self.cache, adapter, job, wl)
            ):
                self.writes.count("workloads_followed")
                self.writes.events.emit(
                    wl, "Normal", names.EVENT_UPDATED_WORKLOAD, "Update", "; ".join(changes)
                )
                return  # its new version is reconciled (and fed to the core) on its event
        await self.pending.sync(key, wl, now)
