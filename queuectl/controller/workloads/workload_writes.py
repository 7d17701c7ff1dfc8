"""The writes every reconcile step shares, and the collaborators they need.

`WorkloadWrites` is one object, handed to each step group (`adoption.JobWorkloads`,
`pending.PendingReasons`, `podgroup_steps.PodGroupSteps`, `decisions.Decisions`) and to the
drainer and the enforcer. Its writes update the cache with what the API server answered, so
the next decision never reads a version older than our own write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import status
from queuectl.controller.feed.feed import Feed
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.controller.workloads import settle
from queuectl.controller.workloads.events import EventRecorder
from queuectl.core.results import PendingInfo
from queuectl.jobs import JobKind


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


class WorkloadWrites:
    """Status writes, job patches, deactivation and eviction, with a count of each outcome."""

    def __init__(
        self,
        kube: Kube,
        cache: Cache,
        feed: Feed,
        events: EventRecorder,
        clock: Callable[[], float],
        backoff: Mapping[str, tuple[float, float]] = status.BACKOFF,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.feed = feed
        self.events = events
        self.clock = clock
        self.backoff = backoff
        """Eviction reason -> (base, cap) of its requeue's back-off (`status.requeued`)."""
        self.stats: dict[str, int] = {}

    def count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    async def write_status(self, wl: Obj, patch: dict[str, Any]) -> Obj | None:
        """Patch the status subresource conditional on the version decided on. On a conflict,
        re-read (the caller re-decides on the fresh object); None when nothing was written."""
        ns, name = wl["metadata"].get("namespace"), wl["metadata"]["name"]
        try:
            new = await self.kube.patch(k.WORKLOADS, name, patch, ns, sub="status")
        except KubeError as err:
            if err.not_found:
                self.feed.forget(WorkloadView(wl).key)
                return None
            if not err.conflict:
                raise
            self.count("status_conflicts")
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
        self, adapter: JobKind, job: Obj, patch: dict[str, Any], *, strict: bool = False
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
                self.count("job_conflicts")
                return None
            raise
        self.cache.store(adapter.resource).upsert_local(new)
        return new

    async def deactivate(self, wl: Obj) -> Obj | None:
        """spec.active: false (a plain merge patch: repeating it is harmless); None if gone."""
        meta = wl["metadata"]
        try:
            written = await self.kube.patch(
                k.WORKLOADS, meta["name"], {"spec": {"active": False}}, meta.get("namespace")
            )
        except KubeError as err:
            if err.not_found:
                return None
            raise
        self.cache.store(k.WORKLOADS).upsert_local(written)
        return written

    async def evict(self, wl: Obj, reason: str, message: str) -> Obj | None:
        """Mark the Workload Evicted (settled: a write lost in transit is made again) with an
        Event; the Workload as written, or None when it was already evicted or is gone. The
        next reconcile of its key suspends the job and releases the quota."""
        written = await settle.write_settled(
            self,
            wl,
            lambda w: (
                None
                if WorkloadView(w).is_true(names.COND_EVICTED)
                else status.evicted(w, reason, message, self.clock())
            ),
        )
        if written is None:
            return None
        self.count("evicted")
        self.events.emit(written, "Warning", names.EVENT_EVICTED, "Evict", message)
        return written
