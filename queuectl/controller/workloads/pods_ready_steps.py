"""The pods-ready step's writes: PodsReady, the timer, the eviction (`pods_ready` decides)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import status
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import Obj
from queuectl.controller.watch.workload_pods import WorkloadPods
from queuectl.controller.workloads import pods_ready
from queuectl.controller.workloads.pods_ready import PodsReadyOptions
from queuectl.controller.workloads.workload_writes import WorkloadWrites


class PodsReadySteps:
    def __init__(
        self,
        writes: WorkloadWrites,
        options: PodsReadyOptions,
        ready_pods: WorkloadPods | None,
        at: Callable[[float, str], None],
        evict: Callable[[Obj, str, str], Awaitable[None]],
    ) -> None:
        self.writes = writes
        self.cache = writes.cache
        self.options = options
        self.ready_pods = ready_pods
        """Each Workload's Ready pods; None: no pods-ready timeouts (tests of other steps)."""
        self.at = at
        self.evict = evict
        """evict(wl, reason, message): evict, then take the next step (`Reconciler.evict`)."""

    async def check(self, key: str, wl: Obj, now: float, succeeded: int = 0) -> None:
        """A running Workload's pods Ready within the startup timeout, and back within the
        recovery timeout after one stopped being (`pods_ready.step`): write PodsReady, look
        again when a timeout falls due, or evict (deactivate at the requeue limit)."""
        if self.ready_pods is None:
            return
        queue = (WorkloadView(wl).admission or {}).get("clusterQueue", "")
        rules = pods_ready.policy(self.options, self.cache.get(k.CLUSTER_QUEUES, queue))
        ready = self.ready_pods.ready(key) + succeeded
        step = pods_ready.step(wl, ready, rules, now)
        if step.evict is not None:  # first count again from the cache (a pod indexed late)
            step = pods_ready.step(wl, self.ready_pods.recount(key) + succeeded, rules, now)
        if step.condition is not None:
            patch = status.pods_ready(wl, *step.condition, now)
            if patch is not None and await self.writes.write_status(wl, patch) is None:
                return  # a conflict: the fresh Workload comes back on its event
        if step.check_at is not None:
            self.at(step.check_at, key)
        if step.evict is None:
            return
        reason = names.REASON_EVICTED_PODS_READY_TIMEOUT
        if step.deactivate:
            deactivated = await self.writes.deactivate(wl)
            if deactivated is None:
                return
            wl, reason = deactivated, names.REASON_EVICTED_REQUEUE_LIMIT
        await self.evict(wl, reason, step.evict)
