"""The enforcement loop: what runs is the truth. From the pods the controller already watches
(bound and unfinished, cache.py), it reads each Workload's pods from the index the pods-ready
timeouts keep (`WorkloadPods`: the workload label on the pod or its uid-checked controllers,
one owner-chain walk per pod event for both) and compares them with the admission
(`enforce.excess`); pods beyond it stop the Workload.

- A job kind's Workload is evicted with reason PodsExceedAdmission, as for any eviction: the
  job is suspended, its pods go, the Workload is requeued.
- A plain pod group's excess pods are deleted (a bare pod cannot be suspended; Kueue does the
  same): the group keeps running with what was admitted. So are a group's pods that run while
  its Workload holds no quota (`enforce.without_quota`: deleted, or made again under the same
  name and waiting), checked on their pods' events and on the Workload's.
Either way a Warning Event names the pods and `queuectl_pods_exceed_admission_total` counts it.

A pod event checks at once whether its Workload now runs more pods or GPUs than admitted, or
the pod sits on another flavor's node (cheap: running totals per Workload), so a pod that the
Job controller releases or deletes a moment later is caught all the same; the whole comparison
(per pod set, per GPU flavor) runs for the Workloads whose pods changed, at most every
`interval_s`. A walk that stops at an owner the cache has not seen yet leaves the pod out
until its next event or the next full pass (`resync_s`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from queuectl import convert, metrics
from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.admission import placement
from queuectl.controller.enforcement.enforce import (
    FLAVOR,
    Excess,
    admitted_devices,
    describe,
    excess,
    gpu_names,
    without_quota,
)
from queuectl.controller.enforcement.enforce import pod_gpus as gpus_of
from queuectl.controller.nodes.drain import should_evict
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.controller.watch.watcher import Key, key_of
from queuectl.controller.watch.workload_pods import WorkloadPods
from queuectl.controller.workloads.events import EventRecorder
from queuectl.controller.workloads.workload_writes import WorkloadWrites, split_key
from queuectl.jobs import podgroup as pg

log = logging.getLogger(__name__)

EnqueueAction = Callable[[str, Callable[[], Awaitable[None]]], None]
"""enqueue(workload key, action): run `action` under that Workload's work-queue key."""


@dataclass(frozen=True)
class EnforceOptions:
    enabled: bool = True
    interval_s: float = 1.0
    """How often the Workloads whose pods changed are compared whole."""
    resync_s: float = 60.0
    """How often every pod is mapped to its Workload again (owners seen after their pods)."""
    acting_s: float = 60.0
    """How long a Workload whose action is queued is left alone (an action another one on
    its key kept from running is tried again after this)."""


class Enforcer:
    def __init__(
        self,
        kube: Kube,
        cache: Cache,
        writes: WorkloadWrites,
        events: EventRecorder,
        enqueue: EnqueueAction,
        options: EnforceOptions = EnforceOptions(),
        leading: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        pods: WorkloadPods | None = None,
    ) -> None:
        """`pods`: the controller's pod index (one of its own without)."""
        self.kube = kube
        self.cache = cache
        self.writes = writes
        self.events = events
        self.enqueue = enqueue
        self.options = options
        self.leading = leading
        self.clock = clock
        self.pods = pods if pods is not None else WorkloadPods(cache, lambda _: None)
        self._gpus: dict[str, int] = {}
        """Workload key -> the GPUs its counted pods ask for."""
        self._pod_gpus: dict[Key, tuple[str, int]] = {}
        """Pod -> its Workload and its GPUs, as counted in `_gpus`."""
        self._dirty: set[str] = set()
        self._acting: dict[str, float] = {}
        """Workload key -> when its action was queued."""
        self.wake = asyncio.Event()
        if options.enabled:
            self.pods.subscribers.append(self._on_pod)
            cache.store(k.WORKLOADS).listeners.append(self._on_workload)

    # --- the index ------------------------------------------------------------------------
    def pods_of(self, wl_key: str) -> list[Obj]:
        return self.pods.pods(wl_key)

    def _on_pod(self, pod: Obj, before: str | None, wl_key: str | None) -> None:
        """A pod the index moved: keep the GPU totals, and check its Workload at once."""
        key = key_of(pod)
        self._drop(key)
        if wl_key is None:
            return
        gpus = gpus_of(pod, gpu_names(self.cache.store(k.RESOURCE_FLAVORS).values()))
        self._pod_gpus[key] = (wl_key, gpus)
        self._gpus[wl_key] = self._gpus.get(wl_key, 0) + gpus
        self._dirty.add(wl_key)
        self.wake.set()
        self._trip(wl_key, pod)

    def _on_workload(self, kind: str, obj: Obj, old: Obj | None) -> None:
        """A Workload that lets go of its quota (or goes) while its group's pods still run."""
        meta = ObjectView(obj).meta
        wl_key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        if self.pods.count(wl_key) and (kind == "DELETED" or not WorkloadView(obj).holds_quota):
            self.check(wl_key)

    def _drop(self, key: Key) -> None:
        found = self._pod_gpus.pop(key, None)
        if found is None:
            return
        wl_key, gpus = found
        self._gpus[wl_key] -= gpus
        if not self._gpus[wl_key] and not self.pods.count(wl_key):
            del self._gpus[wl_key]

    def reindex(self) -> None:
        """Take in the pods whose owners arrived after them, count every Workload's GPUs
        again (a flavor may have named another device since) and check each pod as on its
        event (a replica that just began to lead judges them all)."""
        self.pods.reindex()
        devices = gpu_names(self.cache.store(k.RESOURCE_FLAVORS).values())
        self._gpus.clear()
        self._pod_gpus.clear()
        counted = []
        for pod in self.cache.store(k.PODS).values():
            key = key_of(pod)
            if (wl_key := self.pods.workload_of(key)) is not None:
                gpus = gpus_of(pod, devices)
                self._pod_gpus[key] = (wl_key, gpus)
                self._gpus[wl_key] = self._gpus.get(wl_key, 0) + gpus
                counted.append((wl_key, pod))
        for wl_key, pod in counted:
            self._dirty.add(wl_key)
            self._trip(wl_key, pod)
        if counted:
            self.wake.set()

    # --- the checks -----------------------------------------------------------------------
    def _trip(self, wl_key: str, pod: Obj) -> None:
        """On a pod's event: its Workload's pod and GPU totals against the admission, and this
        pod's node; any excess is judged whole at once."""
        if self._unadmitted(wl_key) is not None:
            self.check(wl_key)
            return
        wl = self._workload(wl_key)
        if wl is None:
            return
        assignments = (WorkloadView(wl).admission or {}).get("podSetAssignments") or ()
        admitted_pods = sum(int(a.get("count", 0)) for a in assignments)
        flavors = self._flavors()
        admitted_gpus = sum(admitted_devices(wl, flavors).values())
        here = excess(wl, [pod], self._nodes([pod]), flavors)
        if (
            self.pods.count(wl_key) > admitted_pods
            or self._gpus.get(wl_key, 0) > admitted_gpus
            or any(e.kind == FLAVOR for e in here)
        ):
            self.check(wl_key)

    def _workload(self, wl_key: str) -> Obj | None:
        """The Workload to judge: holds quota, not evicted, no action of ours queued; None
        while this replica does not lead (the first pass after it does judges them all)."""
        if not self._may_judge(wl_key):
            return None
        ns, name = split_key(wl_key)
        wl = self.cache.get(k.WORKLOADS, name, ns)
        return wl if should_evict(wl) else None

    def _may_judge(self, wl_key: str) -> bool:
        """This replica leads, and no action of ours on the Workload is queued."""
        since = self._acting.get(wl_key)
        acting = since is not None and self.clock() - since < self.options.acting_s
        return not acting and self.leading()

    def _flavors(self) -> dict[str, Obj]:
        return {f["metadata"]["name"]: f for f in self.cache.store(k.RESOURCE_FLAVORS).values()}

    def _nodes(self, pods: list[Obj]) -> dict[str, Obj]:
        out = {}
        for pod in pods:
            name = str(ObjectView(pod).spec.get("nodeName") or "")
            if (node := self.cache.get(k.NODES, name)) is not None:
                out[name] = node
        return out

    def _unadmitted(self, wl_key: str) -> Excess | None:
        """A plain pod group's pods that run with no admission behind them (`without_quota`)."""
        if not self._may_judge(wl_key):
            return None
        ns, name = split_key(wl_key)
        wl = self.cache.get(k.WORKLOADS, name, ns)
        if wl is not None and WorkloadView(wl).holds_quota:
            return None  # the common case, on every pod event: nothing to gather
        pods = self.pods_of(wl_key)
        if wl is not None:
            group = pg.group_of_workload(wl) is not None
        else:  # gone: the pods say whether they were a group's (queued by queuectl itself)
            group = bool(pods) and all(pg.is_queued_pod(p, self.cache.kinds) for p in pods)
        return without_quota(wl, pods, group)

    def check(self, wl_key: str) -> list[Excess]:
        """Compare the Workload's pods with its admission; act on any excess."""
        if (orphans := self._unadmitted(wl_key)) is not None:
            self._acting[wl_key] = self.clock()
            self.enqueue(wl_key, self._delete_unadmitted(wl_key, orphans))
            return [orphans]
        wl = self._workload(wl_key)
        pods = self.pods_of(wl_key)
        if wl is None or not pods:
            return []
        flavors = self._flavors()
        pod_set_of = None
        if pg.group_of_workload(wl) is not None:
            admission = convert.admission_from_status(WorkloadView(wl).status["admission"])
            index = pg.PodSetIndex(
                WorkloadView(wl).pod_sets,
                placement.placements(admission, flavors, WorkloadView(wl).pod_sets),
            )
            pod_set_of = index.of
        found = excess(wl, pods, self._nodes(pods), flavors, pod_set_of)
        if found:
            self._acting[wl_key] = self.clock()
            self.enqueue(wl_key, self._action(wl_key, found))
        return found

    async def run(self, wait_leading: Callable[[], Awaitable[None]]) -> None:
        if not self.options.enabled:
            return
        await wait_leading()
        self.reindex()  # the caches are synced now: owners seen after their pods resolve
        since_resync = 0.0
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.options.resync_s)
            await asyncio.sleep(self.options.interval_s)
            self.wake.clear()
            await wait_leading()
            since_resync += self.options.interval_s
            if since_resync >= self.options.resync_s:
                since_resync = 0.0
                self.reindex()
            dirty, self._dirty = self._dirty, set()
            for wl_key in sorted(dirty):
                self.check(wl_key)

    # --- acting -----------------------------------------------------------------------------
    def _action(self, wl_key: str, found: list[Excess]) -> Callable[[], Awaitable[None]]:
        async def act() -> None:
            try:
                await self._act(wl_key, found)
            finally:
                self._acting.pop(wl_key, None)

        return act

    async def _act(self, wl_key: str, found: list[Excess]) -> None:
        ns, name = split_key(wl_key)
        wl = self.cache.get(k.WORKLOADS, name, ns)
        if not should_evict(wl):
            return
        assert wl is not None
        queue = str((WorkloadView(wl).admission or {}).get("clusterQueue", ""))
        said = describe(found)
        group = pg.group_of_workload(wl) is not None
        note = f"Pods exceed the admission: {said}; " + (
            "the excess pods are deleted" if group else "stopped and requeued"
        )
        log.warning("workload %s: %s", wl_key, note)
        for kind in sorted({e.kind for e in found}):
            metrics.CONTROLLER_PODS_EXCEED_ADMISSION.labels(queue, kind).inc()
        self.events.emit(wl, "Warning", names.EVENT_PODS_EXCEED_ADMISSION, "Enforce", note)
        if group:
            await self._delete(ns, sorted({p for e in found for p in e.pods}))
            return
        # queuectl_evicted_workloads_total counts it too, from the Workload's event (observe.py).
        await self.writes.evict(wl, names.REASON_EVICTED_PODS_EXCEED_ADMISSION, note)

    def _delete_unadmitted(self, wl_key: str, found: Excess) -> Callable[[], Awaitable[None]]:
        async def act() -> None:
            try:
                ns, name = split_key(wl_key)
                wl = self.cache.get(k.WORKLOADS, name, ns)
                if wl is not None and WorkloadView(wl).holds_quota:
                    return  # admitted again meanwhile: the pods are its own
                note = f"Pods run without an admission: {describe([found])}; they are deleted"
                log.warning("workload %s: %s", wl_key, note)
                queue = _cluster_queue(self.pods_of(wl_key))
                metrics.CONTROLLER_PODS_EXCEED_ADMISSION.labels(queue, found.kind).inc()
                if wl is not None:
                    self.events.emit(
                        wl, "Warning", names.EVENT_PODS_EXCEED_ADMISSION, "Enforce", note
                    )
                await self._delete(ns, list(found.pods))
            finally:
                self._acting.pop(wl_key, None)

        return act

    async def _delete(self, namespace: str, pods: list[str]) -> None:
        for pod in pods:
            try:
                await self.kube.delete(k.PODS, pod, namespace)
            except KubeError as err:
                if not err.not_found:
                    raise


def _cluster_queue(pods: list[Obj]) -> str:
    """The ClusterQueue a group's pods were queued to (the label our webhook set), for the
    metric when their Workload is gone."""
    for pod in pods:
        labels = ObjectView(pod).labels
        if queue := labels.get(names.LABEL_CLUSTER_QUEUE):
            return str(queue)
    return ""
