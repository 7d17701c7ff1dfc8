"""The preemption notice on the victim's running pods, where its containers can read it.

A preempted Workload keeps running through its grace period. Its deadline is on the Workload
(`status.preemption.deadline`) and on its job, neither of which a container sees; so every
running pod of the victim (bound, not finished, not being deleted: the pods that will be
stopped) gets the annotation `queuectl.io/preemption-deadline` too, the deadline in RFC 3339
(UTC, seconds). Mounted through a downwardAPI volume of `metadata.annotations`, the kubelet
keeps it current in a file the trainer watches (the contract: docs/design/jobs.md, "The
preemption notice for trainers").

Every kind alike: a job's pods come from the pod index (`watch/workload_pods.py`), a plain pod
group's from its own pods. The writes are cheap and never in the way:
- only pods that lack the current stamp are written, one merge patch each, guarded by the
  pod's uid; a pod gone or replaced meanwhile (404, 409) is skipped;
- nothing is written once the deadline has passed (the caller evicts then), so an API server
  that refuses these writes never holds the eviction back; a refused write is tried again a
  few seconds later, until the deadline;
- replacement pods of a requeued job are made from its template, which never carries the key
  (it is owned: only the controller may write it, `api/owned.py`), so they start without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Final

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import ObjectView
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import KubeError, Obj
from queuectl.controller.watch.podowners import finished
from queuectl.controller.watch.watcher import key_of
from queuectl.controller.workloads.workload_writes import WorkloadWrites
from queuectl.jobs import JobKind

log = logging.getLogger(__name__)

RETRY_S: Final = 5.0
"""A refused write is tried again this much later (never after the deadline)."""


def running(pod: Obj) -> bool:
    """Bound, not finished, not being deleted: a pod the eviction will stop (a gated or
    pending pod is not told; it is told on its next event once it runs)."""
    view = ObjectView(pod)
    return bool(view.spec.get("nodeName")) and not finished(pod) and not view.deleting


def lacking(pods: Iterable[Obj], stamp: str) -> list[Obj]:
    """The running pods whose notice is not `stamp` yet."""
    return [
        p
        for p in pods
        if running(p) and ObjectView(p).annotation(names.ANNOTATION_PREEMPTION_DEADLINE) != stamp
    ]


class PodNotices:
    """Writes the notice on a job (`on_job`) and on pods (`serve`); shared by the job and the
    pod-group steps."""

    def __init__(self, writes: WorkloadWrites, at: Callable[[float, str], None]) -> None:
        self.writes = writes
        self.kube = writes.kube
        self.cache = writes.cache
        self.count = writes.count
        self.at = at
        """at(when, workload key): reconcile that workload again at `when`."""

    async def on_job(self, adapter: JobKind | None, job: Obj | None, deadline: float) -> None:
        """The notice on the job object itself (for tools that read jobs, not pods)."""
        if adapter is None or job is None:
            return
        stamp = convert.format_time(deadline)
        if ObjectView(job).annotation(names.ANNOTATION_PREEMPTION_DEADLINE) != stamp:
            patch = {"metadata": {"annotations": {names.ANNOTATION_PREEMPTION_DEADLINE: stamp}}}
            await self.writes.patch_job(adapter, job, patch)

    async def serve(self, key: str, pods: Iterable[Obj], deadline: float, now: float) -> None:
        """Before the deadline, stamp every running pod of Workload `key` that lacks it."""
        if now >= deadline:
            return
        stamp = convert.format_time(deadline)
        refused = False
        for pod in lacking(pods, stamp):
            refused = not await self._stamp(pod, stamp) or refused
        if refused:
            self.at(min(deadline, now + RETRY_S), key)

    async def _stamp(self, pod: Obj, stamp: str) -> bool:
        """One pod's notice; False when the API server refused it (gone or replaced is fine)."""
        meta = pod["metadata"]
        body = {
            "metadata": {
                "uid": meta["uid"],
                "annotations": {names.ANNOTATION_PREEMPTION_DEADLINE: stamp},
            }
        }
        try:
            new = await self.kube.patch(k.PODS, meta["name"], body, meta["namespace"])
        except KubeError as err:
            if err.not_found or err.conflict:
                return True
            log.warning(
                "preemption notice on pod %s/%s refused: %s",
                meta["namespace"],
                meta["name"],
                err.message,
            )
            self.count("pod_notices_refused")
            return False
        self.count("pod_notices")
        for store in (self.cache.store(k.PODS), self.cache.queued_pods):
            if key_of(new) in store.objects:
                store.upsert_local(new)
        return True
