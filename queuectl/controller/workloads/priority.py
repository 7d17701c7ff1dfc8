"""A Workload's priority: resolved from its Job when created, and following the Job's priority
class label afterwards."""

from __future__ import annotations

from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.jobs import JobKind


def class_value(cache: Cache, name: str, namespace: str) -> int | None:
    """The value of WorkloadPriorityClass name for a Workload in `namespace`; None when the
    class does not exist or its namespaceSelector leaves the namespace out (then the Workload
    waits, `Feed.resolve`, and never runs at the class's priority)."""
    info = cache.priority_class_value(name)
    if info is None or not cache.priority_class_allowed(name, namespace):
        return None
    return info[0]


def resolve_priority(cache: Cache, adapter: JobKind, job: Obj, wpc: str | None) -> int | None:
    """The WorkloadPriorityClass's value, else the pod template's PriorityClass's, else 0.
    None while the named WorkloadPriorityClass does not exist or may not be used in the job's
    namespace: the Workload waits for it (`Feed.resolve`) and takes its value once it may."""
    if wpc:
        return class_value(cache, wpc, job["metadata"].get("namespace") or "")
    if (pod_pc := adapter.pod_priority_class(job)) is not None:
        return cache.pod_priority_value(pod_pc) or 0
    return 0


async def follow_priority_class(
    kube: Kube, cache: Cache, adapter: JobKind, job: Obj, wl: Obj
) -> bool:
    """A Job relabelled with another priority class moves its Workload to that priority
    (queued: it is reordered; admitted: it is judged at that priority for preemption), as
    Kueue lets a workload's priority change. A class the namespace may not use gives no
    priority (the webhook refuses such a label; this covers its cache lagging): waiting, the
    Workload is withheld; holding quota, it counts as priority 0. A new value of the same
    class does not re-prioritise existing Workloads (as Kueue). True when the Workload was
    changed."""
    # The label itself, not adapter.workload_spec(job): this runs on every Job event.
    labels = ObjectView(job).labels
    wanted = labels.get(names.LABEL_PRIORITY_CLASS) or None
    spec = WorkloadView(wl).spec
    same_class = wanted == spec.get("priorityClassName")
    if same_class and (spec.get("priority") is not None or wanted is None):
        return False  # the common case, decided without a lookup
    value = resolve_priority(cache, adapter, job, wanted)  # the one lookup
    if same_class and value is None:
        return False  # its class still does not exist (or may not be used here)
    meta = wl["metadata"]
    patch = {
        "metadata": {"resourceVersion": meta["resourceVersion"]},
        "spec": {"priorityClassName": wanted, "priority": value},
    }
    try:
        new = await kube.patch(k.WORKLOADS, meta["name"], patch, meta["namespace"])
    except KubeError as err:
        if err.not_found or err.conflict:  # gone, or moved on: its event brings us back
            return False
        raise
    cache.store(k.WORKLOADS).upsert_local(new)
    return True
