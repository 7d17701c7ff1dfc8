"""The Job -> Workload half: a queued job gets its own Workload, and only its own.

A Workload is adopted only when its controller ownerReference carries the job's uid; one that
squats the name (made by hand, or raced in) is reported and remembered, and the job gets its
own Workload once the squatter is gone. Deleting a job deletes its Workload at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView, owner_reference
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import KubeError, Obj
from queuectl.controller.workloads.priority import resolve_priority
from queuectl.controller.workloads.workload_writes import WorkloadWrites
from queuectl.jobs import JobKind
from queuectl.jobs.registry import queued_whole

log = logging.getLogger(__name__)


def owned_by(wl: Obj, job: Obj) -> bool:
    """Whether the Workload's controller ownerReference is this very job (by uid, not name)."""
    uid = job["metadata"].get("uid")
    refs = ObjectView(wl).owner_refs
    return bool(uid) and any(r.get("controller") and r.get("uid") == uid for r in refs)


class JobWorkloads:
    """The job-side steps of `Reconciler`: a queued job's Workload made, adopted or deleted."""

    def __init__(self, writes: WorkloadWrites, adapters: Mapping[str, JobKind]) -> None:
        self.writes = writes
        self.kube = writes.kube
        self.cache = writes.cache
        self.adapters = adapters
        self.squatters: dict[str, tuple[str, str]] = {}
        """Workload key -> (job kind, job name) of a job blocked by that foreign Workload."""

    def squatter_gone(self, key: str) -> tuple[str, str] | None:
        """(job kind, job name) of the job that waited for the foreign Workload `key` to go."""
        return self.squatters.pop(key, None)

    def owner_job(self, wl: Obj) -> tuple[JobKind, Obj | None] | None:
        """(adapter, the owning job or None if it is gone); None for a Workload without one."""
        for ref in ObjectView(wl).owner_refs:
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
        if job is None or not queued_whole(adapter, job, self.adapters):
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
                await self.writes.patch_job(
                    adapter, job, {"metadata": {"labels": {names.LABEL_WORKLOAD: wl_name}}}
                )
            return key
        if adapter.finished(job) is not None or job["metadata"].get("deletionTimestamp"):
            return None
        await self._create_workload(adapter, job, wl_name)
        return key

    def _report_foreign_workload(self, job: Obj, wl: Obj) -> None:
        """A Workload squats the job's Workload name without being owned by it (made by hand,
        or raced in): never adopt it, so neither its spec nor its admission speaks for the job."""
        self.writes.count("foreign_workloads")
        meta = wl["metadata"]
        note = (
            f"Workload {meta['namespace']}/{meta['name']} has this Job's Workload name but is not "
            f"owned by it (no controller ownerReference with uid {job['metadata'].get('uid')}), "
            "so queuectl does not adopt it and the Job stays suspended. Delete that Workload: "
            "the Job then gets its own."
        )
        log.warning("%s", note)
        self.writes.events.emit(job, "Warning", names.EVENT_FOREIGN_WORKLOAD, "Adopt", note)

    async def _create_workload(self, adapter: JobKind, job: Obj, wl_name: str) -> None:
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
                "labels": {names.LABEL_QUEUE_NAME: WorkloadView.of_spec(spec).queue_name},
                "ownerReferences": [owner_reference(job, adapter.resource)],
            },
            "spec": spec,
        }
        try:
            created = await self.kube.create(k.WORKLOADS, body, meta["namespace"])
        except KubeError as err:
            if err.conflict:  # AlreadyExists: an earlier attempt or a previous leader made it
                return
            raise
        self.writes.count("workloads_created")
        self.cache.store(k.WORKLOADS).upsert_local(created)
        await self.writes.patch_job(
            adapter, job, {"metadata": {"labels": {names.LABEL_WORKLOAD: wl_name}}}
        )

    async def job_deleted(self, namespace: str, wl_name: str) -> None:
        """Deleting a Job deletes its Workload (the GC would too; this frees quota at once)."""
        key = f"{namespace}/{wl_name}"
        self.writes.feed.forget(key)
        try:
            await self.kube.delete(k.WORKLOADS, wl_name, namespace)
        except KubeError as err:
            if not err.not_found:
                raise
