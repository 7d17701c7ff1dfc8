"""The reconcile steps of plain pod groups: make the Workload once the group is complete, lift
the gates on admission, stop a preempted group by deleting its pods.

A bare pod cannot be suspended, so what a Job does with `spec.suspend` a group does with pods:
- admitted: every gated pod of the group gets its placement and loses the gate;
- preempted: the running pods get the deadline annotation (the notice, `notice.py`); after
  the grace period the Workload is evicted and the group's pods are deleted; once they are
  gone the quota is released and the Workload is requeued at its original position, where it
  is withheld from admission (feed.py, `podgroups.incomplete`) until replacement pods of the
  same group exist, as Kueue does for pod groups. A single pod's Workload is owned by the
  pod, so deleting the pod deletes it: a preempted single pod is gone, and so is its Workload;
- finished: every pod of the group Succeeded (a Failed pod may be replaced) or a single pod
  ended.
A group whose pods were all deleted by hand (while admitted, or waiting before it ever ran) has
its Workload deleted, which frees its quota; one requeued after an eviction keeps waiting for
replacement pods (delete the Workload to give up on it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import WorkloadView, owner_reference
from queuectl.controller.admission import placement, status
from queuectl.controller.feed.feed import local_queue_stop
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import KubeError, Obj
from queuectl.controller.watch.podgroups import group_pods
from queuectl.controller.workloads import settle
from queuectl.controller.workloads.notice import PodNotices
from queuectl.controller.workloads.pending import PendingReasons
from queuectl.controller.workloads.priority import resolve_priority
from queuectl.controller.workloads.workload_writes import CoreActions, WorkloadWrites
from queuectl.jobs import podgroup as pg


class PodGroupSteps:
    """The pod-group steps of `Reconciler`: pods -> Workload, and the Workload's steps."""

    def __init__(
        self,
        writes: WorkloadWrites,
        sched: CoreActions,
        pending: PendingReasons,
        at: Callable[[float, str], None],
        evict: Callable[[Obj, str, str], Awaitable[None]],
        check_pods_ready: Callable[[str, Obj, float], Awaitable[None]],
        notices: PodNotices,
    ) -> None:
        self.writes = writes
        self.kube = writes.kube
        self.cache = writes.cache
        self.feed = writes.feed
        self.events = writes.events
        self.sched = sched
        self.pending = pending
        self.at = at
        self.evict = evict
        """evict(wl, reason, message): evict, then take the next step (`Reconciler.evict`)."""
        self.check_pods_ready = check_pods_ready
        """check_pods_ready(key, wl, now): the startup and recovery timeouts (`pods_ready`)."""
        self.notices = notices

    # --- the group side: pods -> Workload ---------------------------------------------------
    async def reconcile_group(self, key: pg.GroupKey) -> str | None:
        """Make sure a complete group has its Workload; the Workload's key when it has one."""
        pods = group_pods(self.cache, key)
        if key.single and not pods:
            return None
        uid = str(pods[0]["metadata"].get("uid") or "") if key.single and pods else ""
        wl_name = pg.workload_name(key, uid)
        wl_key = f"{key.namespace}/{wl_name}"
        wl = self.cache.get(k.WORKLOADS, wl_name, key.namespace)
        if wl is not None:
            if not WorkloadView(wl).holds_quota:  # its pods came or went: withheld or offered again
                self.feed.refeed_group(wl)
            return wl_key
        if not pg.readiness(key, pods).ready:
            return None
        await self._create_group_workload(key, pods, wl_name)
        return wl_key

    async def _create_group_workload(self, key: pg.GroupKey, pods: list[Obj], name: str) -> None:
        spec = pg.group_workload_spec(pods)
        first = pods[0]
        priority = resolve_priority(
            self.cache,
            pg.PodPriority(),  # type: ignore[arg-type]
            first,
            spec.get("priorityClassName"),
        )
        if priority is not None:
            spec["priority"] = priority
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": key.namespace,
            "labels": {names.LABEL_QUEUE_NAME: WorkloadView.of_spec(spec).queue_name},
        }
        if key.single:
            metadata["ownerReferences"] = [owner_reference(first, k.PODS)]
        else:
            metadata["labels"][names.LABEL_POD_GROUP_NAME] = key.name
        body = {
            "apiVersion": names.API_VERSION,
            "kind": "Workload",
            "metadata": metadata,
            "spec": spec,
        }
        try:
            created = await self.kube.create(k.WORKLOADS, body, key.namespace)
        except KubeError as err:
            if err.conflict:
                return
            raise
        self.writes.count("workloads_created")
        self.cache.store(k.WORKLOADS).upsert_local(created)

    # --- the Workload side --------------------------------------------------------------------
    async def reconcile_group_workload(self, key: str, wl: Obj, now: float) -> bool:
        """The steps of a pod group's Workload; False when `wl` is no pod group's."""
        group = pg.group_of_workload(wl)
        if group is None:
            return False
        pods = group_pods(self.cache, group)
        if (fin := pg.finished(group, wl, pods)) is not None:
            succeeded, message = fin
            reason = names.REASON_FINISHED_SUCCEEDED if succeeded else names.REASON_FINISHED_FAILED
            if await self.writes.write_status(wl, status.finished(wl, reason, message, now)):
                self.feed.forget(key)
                self.writes.count("finished")
                self.events.emit(wl, "Normal", names.EVENT_FINISHED, "Finish", message)
            return True
        holding = WorkloadView(wl).holds_quota
        if not pods and not holding and not WorkloadView(wl).condition(names.COND_REQUEUED):
            await self._delete_workload(key, wl)  # abandoned before it ever ran
            return True
        if not holding:
            await self.pending.sync(key, wl, now)
            return True
        if WorkloadView(wl).is_true(names.COND_EVICTED):
            await self._stop_group(key, wl, pods, now)
            return True
        if not pods:  # every pod deleted by hand while admitted: the job is gone, so is its quota
            await self._delete_workload(key, wl)
            return True
        deadline = convert.parse_time(
            (WorkloadView(wl).status.get("preemption") or {}).get("deadline")
        )
        if WorkloadView(wl).is_true(names.COND_PREEMPTED) and deadline is not None:
            if now < deadline:
                self.at(deadline, key)
                await self.notices.serve(key, pods, deadline, now)
                return True
            cond = WorkloadView(wl).condition(names.COND_PREEMPTED) or {}
            await self.evict(
                wl,
                names.REASON_EVICTED_PREEMPTION,
                f"Grace period over: {cond.get('message', 'preempted')}",
            )
            return True
        if local_queue_stop(self.cache, wl) == "HoldAndDrain":
            await self.evict(
                wl, names.REASON_LOCAL_QUEUE_STOPPED, "LocalQueue stopped with HoldAndDrain"
            )
            return True
        await self._start_group(wl, pods)
        await self.check_pods_ready(key, wl, now)
        return True

    async def _start_group(self, wl: Obj, pods: list[Obj]) -> None:
        admission = convert.admission_from_status(WorkloadView(wl).status["admission"])
        flavors = {f["metadata"]["name"]: f for f in self.cache.store(k.RESOURCE_FLAVORS).values()}
        placements = placement.placements(admission, flavors, WorkloadView(wl).pod_sets)
        gated = pg.to_ungate(pods, WorkloadView(wl).pod_sets, placements)
        for pod in gated:
            patch = pg.ungate_patch(pod, pg.placement_for(pod, placements), wl["metadata"]["name"])
            if await self._patch_pod(pod, patch) is not None:
                self.writes.count("pods_ungated")

    async def _stop_group(self, key: str, wl: Obj, pods: list[Obj], now: float) -> None:
        """Evicted: delete the group's ungated pods, wait until they are gone, release quota.
        Gated pods stay: replacements already made (by a user, or an LWS's StatefulSets,
        which recreate a deleted pod at once) are held by their gates and wait for the next
        admission."""
        live = [p for p in pods if not pg.ended(p) and not pg.is_gated(p)]
        for pod in live:
            if not pod["metadata"].get("deletionTimestamp"):
                await self._delete_pod(pod)
        if live:
            return  # each pod's deletion event brings us back
        written = await settle.write_requeued(self.writes, wl, now)
        if written is not None:
            self.sched.requeue_workload(key, front=WorkloadView(written).requeued_for_node_failure)
            self.feed.refeed_group(written)  # withheld until replacement pods exist
            self.writes.count("requeued")
            self.events.emit(
                wl,
                "Normal",
                names.EVENT_REQUEUED,
                "Requeue",
                "The group's pods are deleted (bare pods cannot be suspended); quota released; "
                "requeued at its original position, admitted again once replacement pods of the "
                "group exist",
            )

    async def _patch_pod(self, pod: Obj, patch: dict[str, Any]) -> Obj | None:
        meta = pod["metadata"]
        body = {**patch, "metadata": {**patch.get("metadata", {}), "uid": meta["uid"]}}
        try:
            new = await self.kube.patch(k.PODS, meta["name"], body, meta["namespace"])
        except KubeError as err:
            if err.not_found or err.conflict:
                return None
            raise
        self.cache.queued_pods.upsert_local(new)
        return new

    async def _delete_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        try:
            await self.kube.delete(k.PODS, meta["name"], meta["namespace"])
        except KubeError as err:
            if not err.not_found:
                raise
        self.writes.count("pods_deleted")

    async def _delete_workload(self, key: str, wl: Obj) -> None:
        self.feed.forget(key)
        try:
            await self.kube.delete(k.WORKLOADS, wl["metadata"]["name"], wl["metadata"]["namespace"])
        except KubeError as err:
            if not err.not_found:
                raise
