"""Why a waiting Workload waits: its QuotaReserved=False reason, from the feed or the core.

A reason the feed withholds (no LocalQueue, stopped queue, missing priority class) wins; else
the core's. Writes are paced by `PendingRefresh` (pending writes must not crowd out admissions).
"""

from __future__ import annotations

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import status
from queuectl.controller.feed.feed import Feed
from queuectl.controller.watch.kube import Obj
from queuectl.controller.workloads.pacing import PendingRefresh
from queuectl.controller.workloads.workload_writes import CoreActions, WorkloadWrites


class PendingReasons:
    """The pending-reason steps of `Reconciler`: the reason from the feed or the core, paced."""

    def __init__(
        self, writes: WorkloadWrites, feed: Feed, sched: CoreActions, refresh: PendingRefresh
    ) -> None:
        self.writes = writes
        self.feed = feed
        self.sched = sched
        self.refresh = refresh

    async def sync(self, key: str, wl: Obj, now: float) -> None:
        """Write the reason the workload waits, unless the core has not evaluated it since its
        last change (that placeholder would race with the cycle's real reason)."""
        withheld = self.feed.withheld.get(key)
        if withheld is not None:
            await self.write(wl, *withheld, now)
            return
        info = self.sched.pending_info(key)
        if info is None or info.reason == names.REASON_PENDING:
            return
        await self.write(wl, info.reason, info.message, now)

    def stale(self, key: str, wl: Obj) -> bool:
        """Whether the QuotaReserved condition disagrees with the core's current reason."""
        info = self.feed.withheld.get(key)
        if info is None:
            pi = self.sched.pending_info(key)
            if pi is None or pi.reason == names.REASON_PENDING:
                return False
            info = (pi.reason, pi.message)
        cond = WorkloadView(wl).condition(names.COND_QUOTA_RESERVED) or {}
        return (cond.get("reason"), cond.get("message")) != info

    async def write(self, wl: Obj, reason: str, message: str, now: float) -> None:
        """A new reason is written as soon as the pending budget allows; a new message under the
        same reason is paced as well (PendingRefresh)."""
        key = WorkloadView(wl).key
        cond = WorkloadView(wl).condition(names.COND_QUOTA_RESERVED) or {}
        same_reason = cond.get("status") == "False" and cond.get("reason") == reason
        if not self.refresh.allow(key, now, same_reason=same_reason):
            return
        patch = status.pending(wl, reason, message, now)
        if patch is not None and await self.writes.write_status(wl, patch) is not None:
            self.refresh.wrote(key, now)
