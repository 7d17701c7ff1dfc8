"""Writing out a cycle's decisions: admissions, preemption notices, evictions.

Each runs under the Workload's own work-queue key, then lets `Reconciler.reconcile` take the
next step (start the Job, serve the notice, drain).
"""

from __future__ import annotations

import logging

from queuectl.api import names
from queuectl.controller import convert, status
from queuectl.controller import kube as k
from queuectl.controller.kube import KubeError
from queuectl.controller.reconcile import Reconciler, split_key
from queuectl.core import types as core
from queuectl.core.results import Eviction, Preemption

log = logging.getLogger(__name__)


class Decisions:
    def __init__(self, rec: Reconciler) -> None:
        self.rec = rec

    async def admit(self, key: str, admission: core.Admission) -> bool:
        """Write the core's admission; on a conflict re-decide on the fresh object, at most
        once more. The core's reservation is released if the write cannot be made."""
        for _ in range(2):
            ns, name = split_key(key)
            wl = self.rec.cache.get(k.WORKLOADS, name, ns)
            if wl is None or convert.is_true(wl, names.COND_FINISHED):
                self.rec.sched.delete_workload(key)
                return False
            if convert.holds_quota(wl):
                return False  # already admitted by an earlier writer: its status is the truth
            try:
                written = await self.rec.write_status(
                    wl, status.admit(wl, admission, self.rec.clock())
                )
            except KubeError as err:
                log.warning("admitting %s failed: %s", key, err)
                break
            if written is not None:
                self.rec._count("admitted")
                note = f"Admitted by ClusterQueue {admission.cluster_queue}"
                self.rec.events.emit(written, "Normal", names.EVENT_ADMITTED, "Admit", note)
                await self.rec.reconcile(key)
                return True
        self.rec.sched.requeue_workload(key, not_before=self.rec.clock() + 1.0)
        return False

    async def preempt(self, p: Preemption) -> None:
        ns, name = split_key(p.victim)
        wl = self.rec.cache.get(k.WORKLOADS, name, ns)
        if wl is None or convert.is_true(wl, names.COND_PREEMPTED):
            return
        written = await self.rec.write_status(wl, status.preempted(wl, p, self.rec.clock()))
        if written is None:
            return
        self.rec._count("preempted")
        note = (
            f"{p.message}; preempted by {p.preemptor}, stops at {convert.format_time(p.deadline)}"
        )
        self.rec.events.emit(written, "Warning", names.EVENT_PREEMPTED, "Preempt", note)
        owner = self.rec.owner_job(written)
        if owner and owner[1] is not None:
            self.rec.events.emit(owner[1], "Warning", names.EVENT_PREEMPTED, "Preempt", note)
        await self.rec.reconcile(p.victim)

    async def apply_eviction(self, e: Eviction) -> None:
        ns, name = split_key(e.key)
        wl = self.rec.cache.get(k.WORKLOADS, name, ns)
        if wl is None or convert.is_true(wl, names.COND_EVICTED):
            return
        if e.reason == names.REASON_EVICTED_MAX_EXEC_TIME:
            try:
                wl = await self.rec.kube.patch(k.WORKLOADS, name, {"spec": {"active": False}}, ns)
            except KubeError as err:
                log.warning("deactivating %s failed: %s", e.key, err)
                return
            self.rec.cache.store(k.WORKLOADS).upsert_local(wl)
        await self.rec.evict(wl, e.reason, e.message)
