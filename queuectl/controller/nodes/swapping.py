"""The shell of node hot swap (`hotswap.py`): run under a Workload's key by the drainer before
it would evict the Workload from a drained node (failed, or with a bad GPU).

It writes the Workload's new topology assignment (conditional on the version it decided on),
then deletes the gang's pods on the failed node (at once where the node itself failed: no
kubelet will confirm them; with their grace period where only a GPU did): the job's own
controller recreates them, and their template's node affinity and the cordon put them on a
live node of the domain. The pods it deleted are remembered, so a drain pass that still sees
them in the cache does not take them for the gang's and evict it.
"""

from __future__ import annotations

import enum
import logging

from queuectl import metrics
from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.nodes import hotswap
from queuectl.controller.watch import kube as k
from queuectl.controller.watch import podowners
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.controller.workloads.events import EventRecorder
from queuectl.controller.workloads.workload_writes import WorkloadWrites

log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    SWAPPED = "swapped"
    """Its pods on the failed node are gone (now, or by an earlier swap): nothing to evict."""
    NONE = "none"
    """No swap: evict the gang."""
    RETRY = "retry"
    """The Workload moved on under us; the next drain pass decides again."""


class Swapper:
    def __init__(
        self, kube: Kube, cache: Cache, writes: WorkloadWrites, events: EventRecorder
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.writes = writes
        self.events = events
        self.owners = cache.pod_owners()
        self.deleted: set[str] = set()
        """uids of the pods deleted by a swap (the cache may still hold them a moment)."""

    def _live_pods(self) -> list[Obj]:
        pods = self.cache.store(k.PODS).values()
        return [p for p in pods if p["metadata"].get("uid") not in self.deleted]

    def pods_on(self, key: str, node_name: str) -> list[Obj]:
        """The Workload's pods bound to the node, but for those a swap has deleted already."""
        return [
            pod
            for pod in self._live_pods()
            if ObjectView(pod).spec.get("nodeName") == node_name
            and podowners.pod_workload(pod, self.owners) == key
        ]

    async def swap(
        self, wl: Obj, node_name: str, why_failed: str, *, force: bool
    ) -> tuple[Outcome, str]:
        """Move the gang's pods off `node_name` when its domain has room, and why not
        otherwise; `why_failed` says what is wrong with the node (for the Event). `force`: the
        node failed, so its pods are deleted at once (no kubelet will confirm them); on a node
        drained for a GPU its kubelet works, and the pods get their grace period to stop."""
        key = WorkloadView(wl).key
        pods = self.pods_on(key, node_name)
        if not pods and node_name not in hotswap.assigned_nodes(wl):
            return Outcome.SWAPPED, ""  # nothing of it is left there: an earlier swap moved it
        found = hotswap.plan(
            wl,
            node_name,
            len(pods),
            list(self.cache.store(k.NODES).values()),
            {f["metadata"]["name"]: f for f in self.cache.store(k.RESOURCE_FLAVORS).values()},
            hotswap.busy_nodes(self.cache.store(k.WORKLOADS).values(), self._live_pods()),
        )
        if isinstance(found, str):
            return Outcome.NONE, found
        if found.admission != WorkloadView(wl).admission:
            patch = {
                "metadata": {"resourceVersion": wl["metadata"].get("resourceVersion")},
                "status": {"admission": found.admission},
            }
            if await self.writes.write_status(wl, patch) is None:
                return Outcome.RETRY, ""
        for pod in pods:
            await self._delete(pod, force)
        metrics.CONTROLLER_NODE_HOT_SWAPS.inc()
        if found.replacement is None:
            note = (
                f"Node {node_name} {why_failed}: the gang's {len(pods)} pod(s) there are made "
                "again in its domain, where its admission counts them already; the rest of "
                "the gang keeps running"
            )
        else:
            note = (
                f"Node {node_name} {why_failed}: its {found.pods} pod(s) move to node "
                f"{found.replacement} of the same domain; the rest of the gang keeps running"
            )
        log.info("workload %s: %s", key, note)
        self.events.emit(wl, "Normal", names.EVENT_NODE_HOT_SWAPPED, "HotSwap", note)
        return Outcome.SWAPPED, ""

    async def _delete(self, pod: Obj, force: bool) -> None:
        meta = pod["metadata"]
        try:
            if force:
                await self.kube.delete(k.PODS, meta["name"], meta["namespace"], grace_period_s=0)
            else:
                await self.kube.delete(k.PODS, meta["name"], meta["namespace"])
        except KubeError as err:
            if not err.not_found:
                raise
        self.deleted.add(str(meta.get("uid")))
        if force:
            metrics.CONTROLLER_PODS_FORCE_DELETED.inc()
