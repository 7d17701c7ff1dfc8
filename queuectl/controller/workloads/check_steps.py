"""The admission checks' step for a Workload holding quota: two-phase admission.

Every check Ready: Admitted is written and the Workload goes on to start; Retry releases the
reservation (an eviction, requeued with back-off by the drain); Rejected deactivates it. The
verdict over the checks is `admission/checks.py`; the checks queuectl decides itself are
`admission/builtin_checks.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from queuectl import convert, metrics
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import checks, status
from queuectl.controller.admission.builtin_checks import BuiltinChecks
from queuectl.controller.watch.kube import Obj
from queuectl.controller.workloads.workload_writes import WorkloadWrites


class CheckSteps:
    def __init__(
        self,
        writes: WorkloadWrites,
        builtin_checks: BuiltinChecks,
        evict: Callable[[Obj, str, str], Awaitable[None]],
    ) -> None:
        self.writes = writes
        self.builtin_checks = builtin_checks
        self.evict = evict
        """evict(wl, reason, message): evict, then take the next step (`Reconciler.evict`)."""

    async def gate(self, wl: Obj, now: float) -> Obj | None:
        """Two-phase admission: the Workload to go on with once every check is Ready (Admitted
        written), else None: it waits holding its quota, or a Retry releases the reservation
        (requeued with back-off by the drain), or a Rejected deactivates it."""
        wl = await self.builtin_checks.decide(wl) or wl  # checks queuectl itself decides
        v = checks.of(wl)
        if v == "admitted":
            if WorkloadView(wl).is_true(names.COND_ADMITTED):
                return wl
            patch = status.checks_passed(wl, now)
            written = await self.writes.write_status(wl, patch) if patch is not None else None
            if written is not None:
                reserved = WorkloadView(written).condition(names.COND_QUOTA_RESERVED) or {}
                since = convert.parse_time(reserved.get("lastTransitionTime"))
                if since is not None:
                    queue = (WorkloadView(written).admission or {}).get("clusterQueue", "")
                    metrics.CONTROLLER_RESERVATION_TO_ADMISSION.labels(queue).observe(
                        max(0.0, now - since)
                    )
                note = f"Every admission check is Ready ({checks.summary(written)})"
                self.writes.events.emit(written, "Normal", names.EVENT_ADMITTED, "Admit", note)
            return written
        if v == "waiting":
            return None  # a check controller's write brings it back here
        said = "; ".join(f"{n}: {m}" if m else n for n, m in checks.deciding(wl, v))
        if v == "retry":
            await self.evict(
                wl,
                names.REASON_EVICTED_CHECK_RETRY,
                f"Admission check(s) said Retry ({said}); quota released, tried again later",
            )
            return None
        deactivated = await self.writes.deactivate(wl)
        if deactivated is not None:
            await self.evict(
                deactivated,
                names.REASON_EVICTED_CHECK_REJECTED,
                f"Admission check(s) rejected the workload ({said})",
            )
        return None
