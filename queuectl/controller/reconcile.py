"""Per-Workload reconciliation: from the Workload, its Job and the clock, do the next step.

Level-triggered: each call reads the current objects from the cache and takes whichever single
step is due (create the Workload, start the Job, mark it Finished, serve a preemption notice,
suspend after the grace period, release quota once the pods are gone, re-suspend a Job someone
unsuspended). Because every step is decided from API state, a restarted controller continues
exactly where the previous one stopped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from queuectl.api import names
from queuectl.controller import convert, placement, settle, status
from queuectl.controller import kube as k
from queuectl.controller.cache import Cache
from queuectl.controller.events import EventRecorder
from queuectl.controller.feed import Feed, local_queue_stop
from queuectl.controller.jobs.base import JobAdapter
from queuectl.controller.jobs.drift import drift, follow_job
from queuectl.controller.kube import Kube, KubeError, Obj
from queuectl.controller.pacing import PendingRefresh
from queuectl.controller.priority import follow_priority_class, resolve_priority
from queuectl.core.results import PendingInfo

log = logging.getLogger(__name__)
JOB_CHANGED_HOLD_S = 5.0
"""How long a Workload requeued for a changed Job stays out of the core until it follows."""


class CoreActions(Protocol):
    """What reconciliation tells the core."""

    def requeue_workload(
        self, key: str, *, not_before: float = 0.0, front: bool = False
    ) -> None: ...

    def delete_workload(self, key: str) -> None: ...

    def pending_info(self, key: str) -> PendingInfo | None:
        """None if admitted, unknown, or asked while a cycle runs (then asked again after)."""
        ...


def split_key(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


def owned_by(wl: Obj, job: Obj) -> bool:
    """Whether the Workload's controller ownerReference is this very job (by uid, not name)."""
    uid = job["metadata"].get("uid")
    refs = (wl.get("metadata") or {}).get("ownerReferences") or ()
    return bool(uid) and any(r.get("controller") and r.get("uid") == uid for r in refs)


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        cache: Cache,
        feed: Feed,
        sched: CoreActions,
        adapters: Mapping[str, JobAdapter],
        events: EventRecorder,
        at: Callable[[float, str], None],
        clock: Callable[[], float] = time.time,
        pending_refresh: PendingRefresh | None = None,
    ) -> None:
        self.kube = kube
        self.pending_refresh = pending_refresh or PendingRefresh()
        self.cache = cache
        self.feed = feed
        self.sched = sched
        self.adapters = adapters
        self.events = events
        self.at = at
        """at(when, workload key): reconcile that workload again at `when`."""
        self.clock = clock
        self.stats: dict[str, int] = {}
        self.squatters: dict[str, tuple[str, str]] = {}
        """Workload key -> (job kind, job name) of a job blocked by that foreign Workload."""

    def _count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    # --- writes that keep the cache current ------------------------------------------------
    async def write_status(self, wl: Obj, patch: dict[str, Any]) -> Obj | None:
        """Patch the status subresource conditional on the version decided on. On a conflict,
        re-read (the caller re-decides on the fresh object); None when nothing was written."""
        ns, name = wl["metadata"].get("namespace"), wl["metadata"]["name"]
        try:
            new = await self.kube.patch(k.WORKLOADS, name, patch, ns, sub="status")
        except KubeError as err:
            if err.not_found:
                self.feed.forget(convert.workload_key(wl))
                return None
            if not err.conflict:
                raise
            self._count("status_conflicts")
            try:
                fresh = await self.kube.get(k.WORKLOADS, name, ns)
            except KubeError as gerr:
                if gerr.not_found:
                    return None
                raise
            self.cache.store(k.WORKLOADS).apply("MODIFIED", fresh)
            return None
        self.cache.store(k.WORKLOADS).upsert_local(new)
        return new

    async def patch_job(
        self, adapter: JobAdapter, job: Obj, patch: dict[str, Any], *, strict: bool = False
    ) -> Obj | None:
        """Patch the job we decided on: always that very object (uid); with `strict`, only the
        version we read (for decisions that depend on the job's own state, e.g. re-suspending
        a job nobody admitted). Patches decided from the Workload alone (start with placement,
        labels, annotations) need not lose a race with the Job controller's status updates."""
        meta = job["metadata"]
        guard = {"uid": meta["uid"]}
        if strict:
            guard["resourceVersion"] = meta["resourceVersion"]
        body = {**patch, "metadata": {**patch.get("metadata", {}), **guard}}
        try:
            new = await self.kube.patch(adapter.resource, meta["name"], body, meta["namespace"])
        except KubeError as err:
            if err.not_found:
                return None
            if err.conflict:  # the Job moved on; its watch event brings us back here
                self._count("job_conflicts")
                return None
            raise
        self.cache.store(adapter.resource).upsert_local(new)
        return new

    # --- jobs ----------------------------------------------------------------------------
    def owner_job(self, wl: Obj) -> tuple[JobAdapter, Obj | None] | None:
        """(adapter, the owning job or None if it is gone); None for a Workload without one."""
        for ref in (wl.get("metadata") or {}).get("ownerReferences") or ():
            adapter = self.adapters.get(ref.get("kind", ""))
            if ref.get("controller") and adapter is not None:
                job = self.cache.get(adapter.resource, ref["name"], wl["metadata"]["namespace"])
                if job is not None and job["metadata"].get("uid") != ref.get("uid"):
                    job = None  # a newer job with the same name is not our owner
                return adapter, job
        return None

    async def reconcile_job(self, kind: str, namespace: str, name: str) -> str | None:
        """Make sure a queued job has its Workload; returns that Workload's key."""
        adapter = self.adapters[kind]
        job = self.cache.get(adapter.resource, name, namespace)
        if job is None or adapter.queue_name(job) is None:
            return None
        wl_name = adapter.workload_name(job)
        key = f"{namespace}/{wl_name}"
        if (wl := self.cache.get(k.WORKLOADS, wl_name, namespace)) is not None:
            if not owned_by(wl, job):
                self.squatters[key] = (kind, name)
                self._report_foreign_workload(job, wl)
                return None
            labels = job["metadata"].get("labels") or {}
            if labels.get(names.LABEL_WORKLOAD) != wl_name:
                await self.patch_job(
                    adapter, job, {"metadata": {"labels": {names.LABEL_WORKLOAD: wl_name}}}
                )
            if await follow_priority_class(self.kube, self.cache, adapter, job, wl):
                self._count("priority_changed")
            return key
        if adapter.finished(job) is not None or job["metadata"].get("deletionTimestamp"):
            return None
        await self._create_workload(adapter, job, wl_name)
        return key

    def _report_foreign_workload(self, job: Obj, wl: Obj) -> None:
        """A Workload squats the job's Workload name without being owned by it (made by hand,
        or raced in): never adopt it, so neither its spec nor its admission speaks for the job."""
        self._count("foreign_workloads")
        meta = wl["metadata"]
        note = (
            f"Workload {meta['namespace']}/{meta['name']} has this Job's Workload name but is not "
            f"owned by it (no controller ownerReference with uid {job['metadata'].get('uid')}), "
            "so queuectl does not adopt it and the Job stays suspended. Delete that Workload: "
            "the Job then gets its own."
        )
        log.warning("%s", note)
        self.events.emit(job, "Warning", names.EVENT_FOREIGN_WORKLOAD, "Adopt", note)

    async def _create_workload(self, adapter: JobAdapter, job: Obj, wl_name: str) -> None:
        meta = job["metadata"]
        spec = adapter.workload_spec(job)
        priority = resolve_priority(self.cache, adapter, job, spec.get("priorityClassName"))
        if priority is not None:  # else the class is missing: resolved when it is created
            spec["priority"] = priority
        body = {
            "apiVersion": names.API_VERSION,
            "kind": "Workload",
            "metadata": {
                "name": wl_name,
                "namespace": meta["namespace"],
                "labels": {names.LABEL_QUEUE_NAME: spec.get("queueName", "")},
                "ownerReferences": [
                    {
                        "apiVersion": adapter.resource.api_version,
                        "kind": adapter.resource.kind,
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": spec,
        }
        try:
            created = await self.kube.create(k.WORKLOADS, body, meta["namespace"])
        except KubeError as err:
            if err.conflict:  # AlreadyExists: an earlier attempt or a previous leader made it
                return
            raise
        self._count("workloads_created")
        self.cache.store(k.WORKLOADS).upsert_local(created)
        await self.patch_job(
            adapter, job, {"metadata": {"labels": {names.LABEL_WORKLOAD: wl_name}}}
        )

    async def job_deleted(self, namespace: str, wl_name: str) -> None:
        """Deleting a Job deletes its Workload (the GC would too; this frees quota at once)."""
        key = f"{namespace}/{wl_name}"
        self.feed.forget(key)
        try:
            await self.kube.delete(k.WORKLOADS, wl_name, namespace)
        except KubeError as err:
            if not err.not_found:
                raise

    # --- workloads -----------------------------------------------------------------------
    async def reconcile(self, key: str) -> None:
        ns, name = split_key(key)
        wl = self.cache.get(k.WORKLOADS, name, ns)
        if wl is None and key in self.squatters:  # the squatter is gone: queue its job now
            kind, job_name = self.squatters.pop(key)
            if (own := await self.reconcile_job(kind, ns, job_name)) is not None:
                self.at(self.clock(), own)
            return
        if wl is None or wl["metadata"].get("deletionTimestamp"):
            return
        if convert.is_true(wl, names.COND_FINISHED):
            self.feed.forget(key)
            return
        owner = self.owner_job(wl)
        adapter, job = owner if owner else (None, None)
        if owner is not None and job is None:  # its job is gone: so is the workload
            await self.job_deleted(ns, name)
            return
        now = self.clock()
        if adapter is not None and job is not None and (fin := adapter.finished(job)):
            if await self.write_status(wl, status.finished(wl, fin.reason, fin.message, now)):
                self.feed.forget(key)
                self._count("finished")
                self.events.emit(wl, "Normal", names.EVENT_FINISHED, "Finish", fin.message)
            return
        if convert.holds_quota(wl):
            await self._holding(key, wl, adapter, job, now)
        else:
            await self._waiting(key, wl, adapter, job, now)

    async def _holding(
        self, key: str, wl: Obj, adapter: JobAdapter | None, job: Obj | None, now: float
    ) -> None:
        st = wl.get("status") or {}
        if convert.is_true(wl, names.COND_EVICTED):
            await self._drain(key, wl, adapter, job, now)
            return
        deadline = convert.parse_time((st.get("preemption") or {}).get("deadline"))
        if convert.is_true(wl, names.COND_PREEMPTED) and deadline is not None:
            if adapter is not None and job is not None:
                annotations = job["metadata"].get("annotations") or {}
                stamp = convert.format_time(deadline)
                if annotations.get(names.ANNOTATION_PREEMPTION_DEADLINE) != stamp:
                    await self.patch_job(
                        adapter,
                        job,
                        {
                            "metadata": {
                                "annotations": {names.ANNOTATION_PREEMPTION_DEADLINE: stamp}
                            }
                        },
                    )
            if now < deadline:
                self.at(deadline, key)
                return
            cond = convert.condition(wl, names.COND_PREEMPTED) or {}
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
        if (
            adapter is not None
            and job is not None
            and (changes := drift(adapter.workload_spec(job), wl))
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
            admission = convert.admission_from_status(st["admission"])
            flavors = {
                f["metadata"]["name"]: f for f in self.cache.store(k.RESOURCE_FLAVORS).values()
            }
            patch = adapter.run_patch(
                job,
                (wl.get("spec") or {}).get("podSets") or [],
                placement.placements(admission, flavors),
            )
            if await self.patch_job(adapter, job, patch):
                self._count("jobs_started")

    async def _drain(
        self, key: str, wl: Obj, adapter: JobAdapter | None, job: Obj | None, now: float
    ) -> None:
        """Evicted: suspend, wait for the pods to go, put the template back, release quota."""
        if adapter is not None and job is not None:
            if not adapter.is_suspended(job):
                await self.patch_job(adapter, job, adapter.suspend_patch(job))
                return
            if not adapter.pods_gone(job):
                return  # the Job's status update brings us back
            pod_sets = (wl.get("spec") or {}).get("podSets") or []
            restore = adapter.restore_patch(job, pod_sets)
            if restore is not None:
                if not adapter.can_restore(job):
                    return  # the Job controller has yet to clear startTime
                if await self.patch_job(adapter, job, restore, strict=True) is None:
                    return
                job = (
                    self.cache.get(
                        adapter.resource, job["metadata"]["name"], job["metadata"]["namespace"]
                    )
                    or job
                )
            if (job["metadata"].get("annotations") or {}).get(names.ANNOTATION_PREEMPTION_DEADLINE):
                await self.patch_job(
                    adapter,
                    job,
                    {"metadata": {"annotations": {names.ANNOTATION_PREEMPTION_DEADLINE: None}}},
                )
        written = await settle.write_settled(  # a requeue lost in transit would leak quota
            self,
            wl,
            lambda w: (
                status.requeued(w, now, status.admitted_seconds(w, now))
                if convert.holds_quota(w)
                else None
            ),
        )
        if written is not None:
            # Evicted because its Job changed: the core must not admit the stale shape again
            # before the Workload follows the Job (that write refeeds it, clearing the hold).
            why = (convert.condition(written, names.COND_REQUEUED) or {}).get("reason")
            stale = why == names.REASON_EVICTED_JOB_CHANGED
            self.sched.requeue_workload(
                key,
                not_before=now + JOB_CHANGED_HOLD_S if stale else 0.0,
                front=convert.requeued_for_node_failure(written),
            )
            self._count("requeued")
            self.events.emit(
                wl,
                "Normal",
                names.EVENT_REQUEUED,
                "Requeue",
                "Pods are gone; quota released; requeued at its original position",
            )

    async def _waiting(
        self, key: str, wl: Obj, adapter: JobAdapter | None, job: Obj | None, now: float
    ) -> None:
        if adapter is not None and job is not None:
            if not adapter.is_suspended(job):  # someone unsuspended it by hand: undo that
                if await self.patch_job(adapter, job, adapter.suspend_patch(job), strict=True):
                    self._count("resuspended")
                    self.events.emit(
                        job,
                        "Warning",
                        names.EVENT_SUSPENDED,
                        "Suspend",
                        "Suspended again: the job is not admitted by its queue",
                    )
                return
            restore = adapter.restore_patch(job, (wl.get("spec") or {}).get("podSets") or [])
            if restore is not None and adapter.can_restore(job):
                await self.patch_job(adapter, job, restore, strict=True)
            elif restore is None and (
                changes := await follow_job(self.kube, self.cache, adapter, job, wl)
            ):
                self._count("workloads_followed")
                self.events.emit(
                    wl, "Normal", names.EVENT_UPDATED_WORKLOAD, "Update", "; ".join(changes)
                )
                return  # its new version is reconciled (and fed to the core) on its event
            # Its priority class was created after it: write the value the core already uses.
            if await follow_priority_class(self.kube, self.cache, adapter, job, wl):
                self._count("priority_changed")
                return
        await self.sync_pending(key, wl, now)

    async def sync_pending(self, key: str, wl: Obj, now: float) -> None:
        """Write the reason the workload waits, unless the core has not evaluated it since its
        last change (that placeholder would race with the cycle's real reason)."""
        withheld = self.feed.withheld.get(key)
        if withheld is not None:
            await self.write_pending(wl, *withheld, now)
            return
        info = self.sched.pending_info(key)
        if info is None or info.reason == names.REASON_PENDING:
            return
        await self.write_pending(wl, info.reason, info.message, now)

    def pending_stale(self, key: str, wl: Obj) -> bool:
        """Whether the QuotaReserved condition disagrees with the core's current reason."""
        info = self.feed.withheld.get(key)
        if info is None:
            pi = self.sched.pending_info(key)
            if pi is None or pi.reason == names.REASON_PENDING:
                return False
            info = (pi.reason, pi.message)
        cond = convert.condition(wl, names.COND_QUOTA_RESERVED) or {}
        return (cond.get("reason"), cond.get("message")) != info

    async def write_pending(self, wl: Obj, reason: str, message: str, now: float) -> None:
        """A new reason is written as soon as the pending budget allows; a new message under the
        same reason is paced as well (PendingRefresh)."""
        key = convert.workload_key(wl)
        cond = convert.condition(wl, names.COND_QUOTA_RESERVED) or {}
        same_reason = cond.get("status") == "False" and cond.get("reason") == reason
        if not self.pending_refresh.allow(key, now, same_reason=same_reason):
            return
        patch = status.pending(wl, reason, message, now)
        if patch is not None and await self.write_status(wl, patch) is not None:
            self.pending_refresh.wrote(key, now)

    async def evict(self, wl: Obj, reason: str, message: str) -> None:
        written = await settle.write_settled(
            self,
            wl,
            lambda w: (
                None
                if convert.is_true(w, names.COND_EVICTED)
                else status.evicted(w, reason, message, self.clock())
            ),
        )
        if written is None:
            return
        self._count("evicted")
        self.events.emit(written, "Warning", names.EVENT_EVICTED, "Evict", message)
        await self.reconcile(convert.workload_key(written))
