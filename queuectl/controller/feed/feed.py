"""Watch events -> the core's inputs, synchronously, as each event lands.

Also decides which pending Workloads the core must not see at all, with the reason their
QuotaReserved condition should carry: a missing or stopped LocalQueue, or a namespace that the
ClusterQueue does not select (the core knows nothing of LocalQueues or namespaces).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from queuectl import convert
from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.admission import checks
from queuectl.controller.feed.foreign import ForeignPods
from queuectl.controller.watch import kube as k
from queuectl.controller.watch import podgroups
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Obj
from queuectl.core import types as core

log = logging.getLogger(__name__)


class CoreInputs(Protocol):
    """The part of `queuectl.core.Scheduler` the feed drives (in the controller, through
    `CoreThread`, which queues them while a cycle runs)."""

    def upsert_flavor(self, flavor: core.Flavor) -> None: ...
    def delete_flavor(self, name: str) -> None: ...
    def upsert_topology(self, topology: core.Topology) -> None: ...
    def delete_topology(self, name: str) -> None: ...
    def upsert_cohort(self, cohort: core.Cohort) -> None: ...
    def delete_cohort(self, name: str) -> None: ...
    def upsert_cluster_queue(self, cq: core.ClusterQueue) -> None: ...
    def delete_cluster_queue(self, name: str) -> None: ...
    def upsert_admission_check(self, check: core.AdmissionCheck) -> None: ...
    def delete_admission_check(self, name: str) -> None: ...
    def upsert_node(self, node: core.Node) -> None: ...
    def delete_node(self, name: str) -> None: ...
    def upsert_workload(self, workload: core.Workload) -> None: ...
    def delete_workload(self, key: str) -> None: ...


def _same_spec(obj: Obj, old: Obj | None) -> bool:
    """Whether an update left the spec alone (a status write; generation is unchanged)."""
    if old is None:
        return False
    gen, old_gen = obj["metadata"].get("generation"), old["metadata"].get("generation")
    return gen is not None and gen == old_gen and obj.get("spec") == old.get("spec")


def _only_gpu_use_changed(obj: Obj, old: Obj | None) -> bool:
    """Whether a Node update changed nothing but its agent's GPU-use report (once a minute per
    node; the core reads nothing of it, so it must not re-feed the Node and wake a cycle)."""
    if old is None:
        return False

    def without(node: Obj) -> Obj:
        annotations = dict(node["metadata"].get("annotations") or {})
        annotations.pop(names.ANNOTATION_GPU_USE, None)
        meta = {**node["metadata"], "annotations": annotations}
        meta.pop("resourceVersion", None)
        return {**node, "metadata": meta}

    return without(obj) == without(old)


def _core_view(wl: Obj) -> tuple[Any, ...]:
    """The parts of a Workload the core's input is built from."""
    view = WorkloadView(wl)
    st = view.status
    return (
        wl.get("spec"),
        wl["metadata"].get("deletionTimestamp"),
        st.get("admission"),
        st.get("requeueState"),
        st.get("accumulatedPastExecutionTimeSeconds"),
        view.holds_quota,
        view.is_true(names.COND_ADMITTED),  # the execution clock starts (checks passed)
        view.is_true(names.COND_FINISHED),
        view.is_true(names.COND_PODS_READY),  # starting or not (block admission)
    )


def local_queue_stop(cache: Cache, wl: Obj) -> str:
    """The stopPolicy of the workload's LocalQueue ("None" if it has none or no queue)."""
    view = WorkloadView(wl)
    lq = cache.get(k.LOCAL_QUEUES, view.queue_name, view.namespace)
    return str(ObjectView(lq or {}).spec.get("stopPolicy") or "None")


class Feed:
    """Keeps the core's inputs equal to the cache; calls `on_change` so the loop wakes."""

    def __init__(
        self,
        cache: Cache,
        sched: CoreInputs,
        on_change: Callable[[], None],
        on_workload: Callable[[str], None],
        on_job: Callable[[str, Obj], None],
    ) -> None:
        self.cache = cache
        self.sched = sched
        self.on_change = on_change
        self.on_workload = on_workload
        self.on_job = on_job
        self.withheld: dict[str, tuple[str, str]] = {}
        """Workload key -> (reason, message) for pending workloads the core must not see."""
        self.fed: set[str] = set()
        self.foreign = ForeignPods(cache, self._refeed_node)
        simple: dict[
            Resource, tuple[Callable[[Obj], Any], Callable[[Any], None], Callable[[str], None]]
        ] = {
            k.RESOURCE_FLAVORS: (convert.flavor, sched.upsert_flavor, sched.delete_flavor),
            k.TOPOLOGIES: (convert.topology, sched.upsert_topology, sched.delete_topology),
            k.COHORTS: (convert.cohort, sched.upsert_cohort, sched.delete_cohort),
            k.CLUSTER_QUEUES: (
                convert.cluster_queue,
                sched.upsert_cluster_queue,
                sched.delete_cluster_queue,
            ),
            k.NODES: (self._node, sched.upsert_node, sched.delete_node),
        }
        for res, (conv, upsert, delete) in simple.items():
            cache.store(res).listeners.append(self._simple(conv, upsert, delete))
        cache.store(k.CLUSTER_QUEUES).listeners.append(
            lambda kind, obj, old: None if _same_spec(obj, old) else self.refeed_all()
        )
        cache.store(k.ADMISSION_CHECKS).listeners.append(self._admission_check)
        cache.store(k.LOCAL_QUEUES).listeners.append(self._local_queue)
        cache.store(k.NAMESPACES).listeners.append(self._namespace)
        cache.store(k.PRIORITY_CLASSES_OURS).listeners.append(
            lambda kind, obj, old: None if _same_spec(obj, old) else self.refeed_all()
        )
        cache.store(k.WORKLOADS).listeners.append(self._workload)
        for res in cache.job_kinds:
            cache.store(res).listeners.append(self._job)

    def _node(self, obj: Obj) -> core.Node:
        """A Node as the core sees it: with what foreign pods take there."""
        node = convert.node(obj)
        used = self.foreign.used(node.name)
        return replace(node, used=used) if used else node

    def _refeed_node(self, name: str) -> None:
        obj = self.cache.get(k.NODES, name)
        if obj is None:
            return  # the Node's own ADDED event feeds it, with this usage
        try:
            self.sched.upsert_node(self._node(obj))
        except (ValueError, KeyError, TypeError) as err:
            log.warning("ignoring Node %s: %s", name, err)
            return
        self.on_change()

    def _simple(
        self,
        conv: Callable[[Obj], Any],
        upsert: Callable[[Any], None],
        delete: Callable[[str], None],
    ) -> Callable[[str, Obj, Obj | None], None]:
        def listener(kind: str, obj: Obj, old: Obj | None) -> None:
            if kind != "DELETED" and _same_spec(obj, old) and obj.get("kind") != "Node":
                return  # our own status writes come back as events: nothing to feed
            if kind != "DELETED" and obj.get("kind") == "Node" and _only_gpu_use_changed(obj, old):
                return
            if kind == "DELETED":
                delete(obj["metadata"]["name"])
            else:
                try:
                    upsert(conv(obj))
                except (ValueError, KeyError, TypeError) as err:
                    log.warning("ignoring %s %s: %s", obj.get("kind"), obj["metadata"]["name"], err)
            self.on_change()

        return listener

    # --- workloads ----------------------------------------------------------------------
    def resolve(self, wl: Obj) -> tuple[str | None, tuple[str, str] | None]:
        """(ClusterQueue name, or None with the withholding reason and message)."""
        view = WorkloadView(wl)
        spec, namespace, queue = view.spec, view.namespace, view.queue_name
        lq = self.cache.get(k.LOCAL_QUEUES, queue, namespace)
        if lq is None:
            return None, (
                names.REASON_LOCAL_QUEUE_NOT_FOUND,
                f"LocalQueue {queue!r} does not exist in namespace {namespace}; create it or "
                f"label the job with an existing queue ({names.LABEL_QUEUE_NAME})",
            )
        cq = str(ObjectView(lq).spec.get("clusterQueue") or "")
        if local_queue_stop(self.cache, wl) != "None":
            return None, (
                names.REASON_LOCAL_QUEUE_STOPPED,
                f"LocalQueue {queue} is stopped (stopPolicy "
                f"{(lq.get('spec') or {}).get('stopPolicy')}); set it to None to resume",
            )
        if not self.cache.namespace_selected(cq, namespace):
            return None, (
                names.REASON_NAMESPACE_NOT_SELECTED,
                f"ClusterQueue {cq} does not select namespace {namespace} "
                "(its spec.namespaceSelector)",
            )
        pc = spec.get("priorityClassName")
        if pc and self.cache.priority_class_value(pc) is None:
            return None, (
                names.REASON_PRIORITY_CLASS_NOT_FOUND,
                f"WorkloadPriorityClass {pc} does not exist; create it, or relabel the job "
                f"with an existing class or none ({names.LABEL_PRIORITY_CLASS})",
            )
        if pc and not self.cache.priority_class_allowed(pc, namespace):
            return None, (
                names.REASON_PRIORITY_CLASS_NOT_ALLOWED,
                f"WorkloadPriorityClass {pc} may not be used in namespace {namespace} (its "
                f"namespaceSelector); relabel the job with a class this namespace may use or "
                f"none ({names.LABEL_PRIORITY_CLASS}), or ask an admin to extend the selector",
            )
        if (why := podgroups.incomplete(self.cache, wl)) is not None:
            return None, (names.REASON_POD_GROUP_INCOMPLETE, why)
        return cq, None

    def feed_workload(self, wl: Obj) -> None:
        view = WorkloadView(wl)
        key = view.key
        if view.is_true(names.COND_FINISHED) or view.deleting:
            self.forget(key)
            return
        holding = view.holds_quota
        cq, withheld = self.resolve(wl)
        if withheld and not holding:
            self.withheld[key] = withheld
            if key in self.fed:
                self.sched.delete_workload(key)
                self.fed.discard(key)
            return
        self.withheld.pop(key, None)
        if cq is None:  # holding quota under a queue that changed: keep it where it was
            cq = (WorkloadView(wl).admission or {}).get("clusterQueue", "")
        try:
            self.sched.upsert_workload(self._to_core(wl, cq or ""))
        except (ValueError, KeyError, TypeError) as err:
            log.warning("workload %s is malformed: %s", key, err)
            return
        self.fed.add(key)

    def _to_core(self, wl: Obj, cq: str) -> core.Workload:
        spec = WorkloadView(wl).spec
        pc: str = spec.get("priorityClassName") or ""
        grace = minimum = 0.0
        late: int | None = None
        namespace = wl["metadata"].get("namespace") or ""
        allowed = bool(pc) and self.cache.priority_class_allowed(pc, namespace)
        info = self.cache.priority_class_value(pc) if allowed else None  # else: no class value
        if info is not None:
            value, grace, minimum = info
            if spec.get("priority") is None:
                late = value  # the class was created after the Workload: its value now
        return convert.workload(
            wl, cq, grace_seconds=grace, minimum_runtime_seconds=minimum, priority=late
        )

    def forget(self, key: str) -> None:
        self.withheld.pop(key, None)
        if key in self.fed:
            self.sched.delete_workload(key)
            self.fed.discard(key)

    def _workload(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = WorkloadView(obj).key
        if kind == "DELETED":
            self.forget(key)
        elif old is not None and _core_view(obj) == _core_view(old):
            self.on_workload(key)  # only conditions moved (often our own write): no re-feed
            return
        else:
            self.feed_workload(obj)
        self.on_workload(key)
        self.on_change()

    def refeed_group(self, wl: Obj) -> None:
        """A pod group's pods came or went: withhold its Workload or offer it again, and wake
        the cycle when that changed (no Workload event says so: only its pods moved)."""
        key = WorkloadView(wl).key
        before = key in self.withheld, key in self.fed
        self.feed_workload(wl)
        if (key in self.withheld, key in self.fed) != before:
            self.on_change()

    def refeed(self, predicate: Callable[[Obj], bool]) -> None:
        for wl in self.cache.store(k.WORKLOADS).values():
            if predicate(wl):
                self.feed_workload(wl)
                self.on_workload(WorkloadView(wl).key)
        self.on_change()

    def refeed_all(self) -> None:
        self.refeed(lambda _: True)

    def _admission_check(self, kind: str, obj: Obj, old: Obj | None) -> None:
        """Its controller's Active condition is status, not spec: feed on either changing."""
        if (
            kind != "DELETED"
            and old is not None
            and checks.active_view(obj) == checks.active_view(old)
        ):
            return
        if kind == "DELETED":
            self.sched.delete_admission_check(obj["metadata"]["name"])
        else:
            self.sched.upsert_admission_check(checks.admission_check(obj))
        self.on_change()

    def _local_queue(self, kind: str, obj: Obj, old: Obj | None) -> None:
        if kind != "DELETED" and _same_spec(obj, old):
            return
        ns, name = obj["metadata"].get("namespace"), obj["metadata"]["name"]
        self.refeed(
            lambda wl: wl["metadata"].get("namespace") == ns and WorkloadView(wl).queue_name == name
        )

    def _namespace(self, kind: str, obj: Obj, old: Obj | None) -> None:
        if old is not None and (old["metadata"].get("labels") == obj["metadata"].get("labels")):
            return
        ns = obj["metadata"]["name"]
        self.refeed(lambda wl: wl["metadata"].get("namespace") == ns)

    def _job(self, kind: str, obj: Obj, old: Obj | None) -> None:
        self.on_job(kind, obj)
