"""Writing out a cycle's decisions: admissions, preemption notices, evictions.

Each runs as an action under the Workload's own work-queue key; the worker then reconciles that
key once (`Reconciler.reconcile`), which takes the next step (start the Job, serve the notice,
drain). A decision never reconciles by itself.

A write that fails in transit (dropped connection, timeout, 5xx) may or may not have landed.
Notices and evictions are retried until the Workload says they are done (`settle`). An
admission has already been charged in the core, so it is settled exactly: a conditional write
on the resourceVersion the admission was decided on (a "fence") either lands, and then the
admission never can and the core's reservation is released, or conflicts, and then the fresh
object says whether the admission landed. Never both; never a second admission.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.api.errors import is_transient
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import checks, status
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import KubeError, Obj
from queuectl.controller.workloads import settle
from queuectl.controller.workloads.adoption import JobWorkloads
from queuectl.controller.workloads.workload_writes import CoreActions, WorkloadWrites, split_key
from queuectl.core import types as core
from queuectl.core.results import Eviction, Preemption

log = logging.getLogger(__name__)

REQUEUE_BACKOFF_S = 1.0


class Decisions:
    """The core's decisions written to the Workloads: admissions, notices, evictions."""

    def __init__(
        self,
        writes: WorkloadWrites,
        jobs: JobWorkloads,
        sched: CoreActions,
        at: Callable[[float, str], None],
        *,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.writes = writes
        self.cache = writes.cache
        self.jobs = jobs
        self.sched = sched
        self.at = at
        self.sleep = sleep

    async def admit(self, key: str, admission: core.Admission) -> bool:
        """Write the core's admission; on a conflict re-decide on the fresh object, at most
        once more. The core's reservation is released if the write cannot be made."""
        for _ in range(2):
            ns, name = split_key(key)
            wl = self.cache.get(k.WORKLOADS, name, ns)
            if wl is None or WorkloadView(wl).is_true(names.COND_FINISHED):
                self.sched.delete_workload(key)
                return False
            if WorkloadView(wl).holds_quota:
                return False  # already admitted by an earlier writer: its status is the truth
            gates = checks.queue_checks(self.cache.get(k.CLUSTER_QUEUES, admission.cluster_queue))
            try:
                written = await self.writes.write_status(
                    wl, status.admit(wl, admission, self.writes.clock(), gates)
                )
            except Exception as err:
                if not is_transient(err):
                    if not isinstance(err, KubeError):
                        raise
                    log.warning("admitting %s failed: %s", key, err)
                    break  # refused: it did not land
                written = await self._settle_admission(key, wl, admission, err)
                if written is None:
                    return False  # requeued in the core, or gone
            if written is not None:
                self.writes.count("admitted")
                note = f"Admitted by ClusterQueue {admission.cluster_queue}"
                if gates:
                    note = (
                        f"Quota reserved in ClusterQueue {admission.cluster_queue}; waiting for "
                        f"admission checks {', '.join(gates)}"
                    )
                event = names.EVENT_QUOTA_RESERVED if gates else names.EVENT_ADMITTED
                self.writes.events.emit(written, "Normal", event, "Admit", note)
                return True
        self._requeue(key)
        return False

    def _requeue(self, key: str) -> None:
        """Release the core's reservation; the key's timer also wakes the cycle that may admit
        it again once the back-off is over (nothing else would: the Workload did not change)."""
        not_before = self.writes.clock() + REQUEUE_BACKOFF_S
        self.sched.requeue_workload(key, not_before=not_before)
        self.at(not_before, key)

    async def _settle_admission(
        self, key: str, decided: Obj, admission: core.Admission, err: BaseException
    ) -> Obj | None:
        """The admission write on `decided` failed in transit. Returns the Workload if the
        admission landed; otherwise releases the core's reservation (or forgets a Workload that
        is gone) and returns None. Retries with back-off while the API server is away: until
        then the reservation stays, so the quota can never be given twice."""
        log.warning("admitting %s: %s: %s; settling it", key, type(err).__name__, err)
        delay = settle.FIRST_BACKOFF_S
        while True:
            try:
                landed, fresh = await self._fence(decided, admission, type(err).__name__)
            except Exception as ferr:
                if not is_transient(ferr):
                    raise
                landed = None
            if landed is not None:
                break
            await self.sleep(delay)
            delay = min(delay * 2, settle.MAX_BACKOFF_S)
        if fresh is None:
            self.writes.feed.forget(key)
            return None
        if landed:
            return fresh
        self._requeue(key)
        return None

    async def _fence(
        self, decided: Obj, admission: core.Admission, cause: str
    ) -> tuple[bool | None, Obj | None]:
        """One settling attempt: (landed, the Workload now) or (None, None) when still
        undecided. The fence is a pending condition written on the decided resourceVersion."""
        ns, name = decided["metadata"].get("namespace"), decided["metadata"]["name"]
        now = self.writes.clock()
        message = (
            f"the admission to ClusterQueue {admission.cluster_queue} was interrupted "
            f"({cause} at {convert.format_time(now)}); it is decided again"
        )
        fence = status.pending(decided, names.REASON_PENDING, message, now)
        if fence is not None:
            try:
                fenced = await self.writes.kube.patch(k.WORKLOADS, name, fence, ns, sub="status")
            except KubeError as err:
                if err.not_found:
                    return False, None
                if not err.conflict:
                    raise
            else:
                self.cache.store(k.WORKLOADS).upsert_local(fenced)
                return False, fenced  # the decided version is gone: the admission never lands
        fresh = await settle.read_back(self.writes, decided)
        if fresh is None:
            return False, None
        if WorkloadView(fresh).holds_quota:
            return True, fresh  # it landed: keep it
        if fresh["metadata"]["resourceVersion"] != decided["metadata"]["resourceVersion"]:
            return False, fresh  # it did not, and its version is gone: it never will
        return None, None

    async def preempt(self, p: Preemption) -> None:
        ns, name = split_key(p.victim)
        wl = self.cache.get(k.WORKLOADS, name, ns)
        if wl is None or WorkloadView(wl).is_true(names.COND_PREEMPTED):
            return
        written = await settle.write_settled(
            self.writes,
            wl,
            lambda w: (
                None
                if WorkloadView(w).is_true(names.COND_PREEMPTED)
                else status.preempted(w, p, self.writes.clock())
            ),
            sleep=self.sleep,
        )
        if written is None:
            return
        self.writes.count("preempted")
        note = (
            f"{p.message}; preempted by {p.preemptor}, stops at {convert.format_time(p.deadline)}"
        )
        self.writes.events.emit(written, "Warning", names.EVENT_PREEMPTED, "Preempt", note)
        owner = self.jobs.owner_job(written)
        if owner and owner[1] is not None:
            self.writes.events.emit(owner[1], "Warning", names.EVENT_PREEMPTED, "Preempt", note)

    async def apply_eviction(self, e: Eviction) -> None:
        ns, name = split_key(e.key)
        wl = self.cache.get(k.WORKLOADS, name, ns)
        if wl is None or WorkloadView(wl).is_true(names.COND_EVICTED):
            return
        if e.reason == names.REASON_EVICTED_MAX_EXEC_TIME:
            delay = settle.FIRST_BACKOFF_S
            while True:  # an unconditional merge patch: repeating it is harmless
                try:
                    wl = await self.writes.kube.patch(
                        k.WORKLOADS, name, {"spec": {"active": False}}, ns
                    )
                    break
                except Exception as err:
                    if not is_transient(err):
                        if not isinstance(err, KubeError):
                            raise
                        log.warning("deactivating %s failed: %s", e.key, err)
                        return
                    log.warning("deactivating %s: %s; retrying", e.key, type(err).__name__)
                await self.sleep(delay)
                delay = min(delay * 2, settle.MAX_BACKOFF_S)
            self.cache.store(k.WORKLOADS).upsert_local(wl)
        await self.writes.evict(wl, e.reason, e.message)
