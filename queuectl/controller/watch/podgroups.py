"""Plain pod groups in the controller: which pods make a group, and which group a Workload is.

Read from the cache's queued-pods store (every pod with the queue label, any phase). A group's
Workload carries the label `queuectl.io/pod-group-name`; a single pod's Workload is owned by the
pod (a controller ownerReference of kind Pod). The reconcile steps are `podgroup_steps.py`.
"""

from __future__ import annotations

from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Obj
from queuectl.jobs.podgroup import group as pg


def group_of_workload(wl: Obj) -> pg.GroupKey | None:
    view = ObjectView(wl)
    ns = view.namespace
    if name := view.labels.get(names.LABEL_POD_GROUP_NAME):
        return pg.GroupKey(ns, str(name), False)
    for ref in view.owner_refs:
        if ref.get("controller") and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
            return pg.GroupKey(ns, str(ref.get("name") or ""), True)
    return None


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
    key = group_of_workload(wl)
    if key is None:
        return None
    want = sum(int(ps.get("count", 1)) for ps in WorkloadView(wl).pod_sets)
    have = sum(1 for p in group_pods(cache, key) if pg.active(p))
    if have >= want:
        return None
    what = "pod" if key.single else f"pod group {key.name!r}"
    return (
        f"{have} of the {want} pods of {what} exist; it is admitted once all do (after a "
        "preemption its pods are deleted: create replacements with the same group name)"
    )
