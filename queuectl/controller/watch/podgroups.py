"""Plain pod groups in the controller: the pods of a group, read from the cache.

Read from the cache's queued-pods store (every pod with the queue label, any phase). A group's
Workload carries the label `queuectl.io/pod-group-name`; a single pod's Workload is owned by the
pod (`jobs/podgroup.group_of_workload`). The reconcile steps are `podgroup_steps.py`.
"""

from __future__ import annotations

from queuectl.api.views import ObjectView
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Obj
from queuectl.jobs import podgroup as pg


def group_pods(cache: Cache, key: pg.GroupKey) -> list[Obj]:
    """The group's pods the cache holds, by name (a scan of the namespace's queued pods)."""
    out = [
        pod
        for pod in cache.queued_pods.values()
        if ObjectView(pod).meta.get("namespace") == key.namespace
        and pg.is_queued_pod(pod, cache.kinds)
        and pg.group_of(pod) == key
    ]
    return sorted(out, key=lambda p: str(p["metadata"]["name"]))


def incomplete(cache: Cache, wl: Obj) -> str | None:
    """Why a pod group's Workload must not be admitted now (its pods do not all exist: before
    the first admission, or after preemption deleted them); None when it may be, or when the
    Workload is no pod group's."""
    key = pg.group_of_workload(wl)
    if key is None:
        return None
    return pg.missing_pods(wl, key, group_pods(cache, key))
