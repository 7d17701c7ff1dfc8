"""Every object the controller reads, held in memory and kept current by watches.

Nothing in the controller asks the API server a question it can answer from here: the webhooks'
lookups, the scheduling inputs and the reconcile decisions all read this cache. The one read
it makes itself (`read_input`) is for an object a webhook decision must see as it stands now
(one the watch has not delivered yet, or a TrainJob's runtime at the job's create).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.api.selectors import namespace_selected
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.controller.watch.podowners import Owners
from queuectl.controller.watch.watcher import Store, Watcher
from queuectl.jobs import JobKind
from queuectl.jobs.registry import KINDS, input_resources

log = logging.getLogger(__name__)

READ_INPUT_TIMEOUT_S = 3.0
"""How long a webhook call waits to read a job's input the cache lacks (the API server gives
the whole call 10 s)."""

WATCHED: tuple[Resource, ...] = (
    k.NAMESPACES,
    k.RESOURCE_FLAVORS,
    k.TOPOLOGIES,
    k.COHORTS,
    k.CLUSTER_QUEUES,
    k.ADMISSION_CHECKS,
    k.LOCAL_QUEUES,
    k.PRIORITY_CLASSES_OURS,
    k.PRIORITY_CLASSES,
    k.NODES,
    k.WORKLOADS,
    k.PODS,
)
"""Watched from the start; the job kinds' watches start once each is served (kinds.py)."""
# Pods: only those bound to a node and not finished, for the GPUs (and CPU, memory, pod slots)
# that pods outside queuectl take on a node. A pod that finishes leaves the selection, which a
# watch reports as DELETED.
FIELD_SELECTORS: Mapping[str, str] = {
    k.PODS.plural: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
}


class Cache:
    """One `Store` per watched kind, plus the questions asked of them."""

    def __init__(
        self,
        kube: Kube,
        resources: tuple[Resource, ...] = WATCHED,
        job_kinds: tuple[Resource, ...] | None = None,
        inputs: tuple[Resource, ...] | None = None,
        kinds: Mapping[str, JobKind] = KINDS,
    ) -> None:
        self.kube = kube
        self.kinds = kinds
        """The job kinds, by name: a queued pod whose controller is one of them is its
        owner's business, not a plain pod group (`group.is_queued_pod`), here as in the
        webhooks, which are given the same kinds."""
        self.stores: dict[str, Store] = {r.plural: Store(r) for r in resources}
        self.watchers = [
            Watcher(kube, s, field_selector=FIELD_SELECTORS.get(name))
            for name, s in self.stores.items()
        ]
        self.job_kinds = (
            tuple(kind.resource for kind in KINDS.values()) if job_kinds is None else job_kinds
        )
        """Every job kind's resource (default: the registered kinds): a store each from the
        start, empty until its watch starts (controller/watch/kinds.py)."""
        self.inputs = input_resources(KINDS.values()) if inputs is None else inputs
        """What job kinds read their pod sets from (a TrainJob's runtimes): watched like the
        kinds, once served, for the webhooks' `input_object`."""
        for res in (*self.job_kinds, *self.inputs):
            self.stores.setdefault(res.plural, Store(res))
        self.queued_pods = Store(k.PODS)
        """Pods carrying the queue label, in every phase and bound or not (the PODS store
        holds bound, unfinished pods only): plain pod groups are read from here."""
        if k.PODS in resources:
            self.watchers.append(
                Watcher(kube, self.queued_pods, label_selector=names.LABEL_QUEUE_NAME)
            )

    @classmethod
    def for_kinds(cls, kube: Kube, kinds: Iterable[JobKind]) -> Cache:
        """A cache with a store for each of these kinds and for what they read (`inputs`)."""
        kinds = list(kinds)
        return cls(
            kube,
            job_kinds=tuple(kind.resource for kind in kinds),
            inputs=input_resources(kinds),
            kinds={kind.resource.kind: kind for kind in kinds},
        )

    def watch(self, res: Resource) -> Watcher:
        """A watcher for `res`'s store, counted by `synced` from now on; the caller runs it."""
        watcher = Watcher(self.kube, self.stores[res.plural])
        self.watchers.append(watcher)
        return watcher

    def pod_owners(self) -> Owners:
        """Resolves a pod's controllers through the job kinds held here (podowners.py)."""
        held = [r for r in (k.JOBS, *self.job_kinds) if r.plural in self.stores]
        return Owners(self.get, held)

    def store(self, res: Resource) -> Store:
        return self.stores[res.plural]

    def get(self, res: Resource, name: str, namespace: str = "") -> Obj | None:
        return self.stores[res.plural].get(namespace, name)

    def synced(self) -> bool:
        return all(w.synced.is_set() for w in self.watchers)

    async def wait_synced(self) -> None:
        for w in self.watchers:
            await w.synced.wait()

    # --- the webhooks' QueueLookup questions (answered from memory) -----------------------
    def local_queue(self, namespace: str, name: str) -> str | None:
        lq = self.get(k.LOCAL_QUEUES, name, namespace)
        return None if lq is None else str(ObjectView(lq).spec.get("clusterQueue", ""))

    def cluster_queue_selector(self, name: str) -> tuple[bool, Mapping[str, Any] | None]:
        """(exists, spec.namespaceSelector)."""
        cq = self.get(k.CLUSTER_QUEUES, name)
        if cq is None:
            return False, None
        return True, ObjectView(cq).spec.get("namespaceSelector")

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        ns = self.get(k.NAMESPACES, namespace)
        return None if ns is None else dict(ObjectView(ns).labels)

    def is_job_admitted(self, namespace: str, job_name: str, resource: Resource = k.JOBS) -> bool:
        store = self.stores.get(resource.plural)
        job = store.get(namespace, job_name) if store is not None else None
        wl_name = ObjectView(job or {}).labels.get(names.LABEL_WORKLOAD)
        wl = self.get(k.WORKLOADS, wl_name, namespace) if wl_name else None
        return (
            wl is not None
            and WorkloadView(wl).is_admitted  # quota reserved is not enough: checks must pass
            and not WorkloadView(wl).is_true(names.COND_EVICTED)
        )

    def input_object(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        store = self.stores.get(resource.plural)
        return None if store is None else store.get(namespace, name)

    async def read_input(self, resource: Resource, namespace: str, name: str) -> None:
        """One GET, bounded by `READ_INPUT_TIMEOUT_S` (the API server waits 10 s at most for
        the whole webhook call); what it finds goes into the store as the watch would put it.
        An unwatched resource (its CRD not served) is left alone."""
        store = self.stores.get(resource.plural)
        if store is not None:
            await self._read(store, resource, namespace, name)

    def owner_object(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        return self.input_object(resource, namespace, name)

    async def read_owner(self, resource: Resource, namespace: str, name: str) -> None:
        """As `read_input`: the caller found the owner under another uid (deleted and created
        again since the watch's last word). An older answer never replaces a newer one
        (`Store.upsert_local`)."""
        await self.read_input(resource, namespace, name)

    async def _read(self, store: Store, resource: Resource, namespace: str, name: str) -> None:
        try:
            obj = await asyncio.wait_for(
                self.kube.get(resource, name, namespace or None), READ_INPUT_TIMEOUT_S
            )
        except Exception as err:  # best effort: the decision answers from the cache as before
            if not (isinstance(err, KubeError) and err.not_found):
                log.warning("webhook read of %s %s/%s: %r", resource.kind, namespace, name, err)
            return
        store.upsert_local(obj)

    def cohort_parent(self, name: str) -> str | None:
        co = self.get(k.COHORTS, name)
        return None if co is None else ObjectView(co).spec.get("parentName") or None

    def priority_class_exists(self, name: str) -> bool:
        return self.get(k.PRIORITY_CLASSES_OURS, name) is not None

    def priority_class_selector(self, name: str) -> Mapping[str, Any] | None:
        wpc = self.get(k.PRIORITY_CLASSES_OURS, name)
        selector = None if wpc is None else wpc.get("namespaceSelector")
        return None if selector is None else dict(selector)

    # --- scheduling questions -------------------------------------------------------------
    def namespace_selected(self, cluster_queue: str, namespace: str) -> bool:
        """Whether the ClusterQueue's namespaceSelector selects the namespace (nil: none; an
        unseen namespace is known by its name label alone, `namespace_selected`)."""
        exists, selector = self.cluster_queue_selector(cluster_queue)
        if not exists:
            return True  # the core reports ClusterQueueNotFound itself
        return namespace_selected(selector, namespace, self.namespace_labels(namespace))

    def priority_class_allowed(self, name: str, namespace: str) -> bool:
        """Whether Jobs in `namespace` may use WorkloadPriorityClass name: it has no
        namespaceSelector, or its selector selects the namespace (`namespace_selected`: an
        unseen namespace is known by its name label alone)."""
        selector = self.priority_class_selector(name)
        if selector is None:
            return True
        return namespace_selected(selector, namespace, self.namespace_labels(namespace))

    def priority_class_value(self, name: str) -> tuple[int, float, float] | None:
        """(value, grace seconds, minimum runtime seconds) of a WorkloadPriorityClass."""
        wpc = self.get(k.PRIORITY_CLASSES_OURS, name)
        if wpc is None:
            return None
        return (
            int(wpc.get("value") or 0),
            float(wpc.get("preemptionGracePeriodSeconds") or 0),
            float(wpc.get("minimumRuntimeSeconds") or 0),
        )

    def pod_priority_value(self, name: str) -> int | None:
        pc = self.get(k.PRIORITY_CLASSES, name)
        return None if pc is None else int(pc.get("value") or 0)
