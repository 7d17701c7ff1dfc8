"""The cluster as the scheduler sees it: list everything once, feed a fresh core, ask it questions.

The objects go through the controller's own cache and feed
(`queuectl.controller.watch.cache.Cache`, `queuectl.controller.feed.feed.Feed`), so LocalQueue
resolution, priority classes, withheld workloads and the API->core conversion are the
controller's code, not a copy. No cycle is run: the core's `explain` replays the decision for
one workload against the quota held right now, and the pending order is the core's own queue
order.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from queuectl.api import names
from queuectl.api import resource as rest
from queuectl.api.resource import Resource
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.cli import _kube as kube
from queuectl.cli._kube import CliError, Obj
from queuectl.core import Eta, Explanation, RuntimeHistory, Scheduler, estimate_starts, fleet

if TYPE_CHECKING:
    from queuectl.controller.feed.feed import Feed
    from queuectl.controller.watch.cache import Cache

# Fed in this order: everything a Workload is resolved against comes before the Workloads.
LOAD_ORDER: tuple[Resource, ...] = (
    rest.NAMESPACES,
    rest.RESOURCE_FLAVORS,
    rest.TOPOLOGIES,
    rest.COHORTS,
    rest.CLUSTER_QUEUES,
    rest.ADMISSION_CHECKS,
    rest.LOCAL_QUEUES,
    rest.PRIORITY_CLASSES_OURS,
    rest.PRIORITY_CLASSES,
    rest.NODES,
    rest.WORKLOADS,
)
# Resources a namespace-scoped user may not be allowed to list; we go on without them, and say so.
OPTIONAL: frozenset[str] = frozenset({"nodes", "namespaces", "priorityclasses", "admissionchecks"})

Objects = Mapping[str, list[Obj]]
"""plural -> objects"""


def _namespaces_from(objects: Objects) -> list[Obj]:
    """Stand-ins for namespaces we may not list: name and the label every namespace has."""
    seen = sorted(
        {
            ObjectView(o).namespace
            for plural in ("workloads", "localqueues")
            for o in objects.get(plural, ())
        }
        - {""}
    )
    return [{"metadata": {"name": n, "labels": {"kubernetes.io/metadata.name": n}}} for n in seen]


@dataclass
class Snapshot:
    """A core Scheduler fed with one consistent listing, plus the objects themselves."""

    sched: Scheduler
    cache: Cache
    feed: Feed
    now: float
    objects: dict[str, list[Obj]]
    notes: list[str] = field(default_factory=list)
    _etas: dict[str, Eta] = field(default_factory=dict)

    @classmethod
    def from_objects(
        cls, objects: Objects, now: float | None = None, notes: Iterable[str] = ()
    ) -> Snapshot:
        """Build from listed objects (plural -> items); missing kinds count as empty."""
        from queuectl.controller.feed.feed import Feed
        from queuectl.controller.watch.cache import Cache
        from queuectl.controller.watch.kube import Kube as AsyncKube

        objs = {k.plural: list(objects.get(k.plural, ())) for k in LOAD_ORDER}
        if "namespaces" not in objects:
            objs["namespaces"] = _namespaces_from(objs)
        cache = Cache(cast(AsyncKube, None))  # never started: its stores are filled below
        sched = Scheduler()
        at = time.time() if now is None else now
        sched.now = at  # the core's clock: back-offs that ended before `at` are over
        noop: Callable[..., None] = lambda *_: None  # noqa: E731
        feed = Feed(cache, sched, noop, noop, noop)
        # Pod groups are complete or not by their pods: known before their Workloads are fed.
        cache.queued_pods.replace(list(objects.get(rest.PODS.plural, ())))
        for k in LOAD_ORDER:
            cache.store(k).replace(objs[k.plural])
        return cls(sched, cache, feed, at, objs, list(notes))

    @classmethod
    def load(cls, api: kube.Kube) -> Snapshot:
        """List every kind once (the optional ones only if allowed) and build the snapshot."""
        from queuectl.cli._kube import ApiFailure

        objects: dict[str, list[Obj]] = {}
        notes: list[str] = []
        for k in LOAD_ORDER:
            try:
                objects[k.plural] = api.list(k)
            except CliError as err:
                cause = err.__cause__
                denied = isinstance(cause, ApiFailure) and cause.status == 403
                if not (denied and k.plural in OPTIONAL):
                    raise
                notes.append(f"cannot list {k.plural} (access denied); {_WITHOUT[k.plural]}")
        try:  # only the queued ones: bare pods of pod groups and LeaderWorkerSets
            objects[rest.PODS.plural] = api.list(rest.PODS, label_selector=names.LABEL_QUEUE_NAME)
        except CliError as err:
            cause = err.__cause__
            if not (isinstance(cause, ApiFailure) and cause.status == 403):
                raise
            notes.append(f"cannot list pods (access denied); {_WITHOUT['pods']}")
        return cls.from_objects(objects, notes=notes)

    def warn(self) -> None:
        for note in self.notes:
            print(f"queuectl: note: {note}", file=sys.stderr)

    # --- questions ------------------------------------------------------------------------
    def get(self, kind: Resource, name: str, namespace: str = "") -> Obj | None:
        for o in self.objects.get(kind.plural, ()):
            meta = ObjectView(o).meta
            if meta.get("name") == name and (meta.get("namespace") or "") == namespace:
                return o
        return None

    def withheld(self, key: str) -> tuple[str, str] | None:
        """(reason, message) when the controller would not even show the workload to the core."""
        return self.feed.withheld.get(key)

    def explain(self, key: str) -> Explanation:
        return self.sched.explain(key, self.now)

    def cluster_queue_of(self, wl: Obj) -> str | None:
        """The ClusterQueue the workload is admitted to or queued in (None if unresolved)."""
        view = WorkloadView(wl)
        admission = view.admission or {}
        if admission.get("clusterQueue"):
            return str(admission["clusterQueue"])
        cq, _ = self.feed.resolve(wl)
        if cq is None:  # withheld (stopped LocalQueue, namespace not selected): name it anyway
            lq = self.get(rest.LOCAL_QUEUES, view.queue_name, view.namespace)
            cq = str(ObjectView(lq or {}).spec.get("clusterQueue") or "") or None
        return cq

    def order(self, cluster_queue: str) -> tuple[str, ...]:
        return fleet.pending_order(self.sched, cluster_queue)

    def positions(self) -> dict[str, int]:
        """Workload key -> 1-based position in its ClusterQueue's line (pending, in line only)."""
        out: dict[str, int] = {}
        for cq in sorted({w.cluster_queue for w in self.sched.workloads().values()}):
            for i, key in enumerate(self.order(cq), 1):
                out[key] = i
        return out

    def runtimes(self) -> RuntimeHistory:
        """Finished workloads still in the cluster: how long work of each ClusterQueue and
        priority runs (the controller's `etas.runtime_history`, the same samples)."""
        from queuectl.controller.etas import runtime_history

        return runtime_history(self.objects.get("workloads", ()))

    def etas(self, keys: Iterable[str]) -> dict[str, Eta]:
        """Estimated starts of these pending workloads (one bounded replay for those not yet
        asked about; keys the core does not hold are left out)."""
        keys = list(keys)
        wanted = [k for k in keys if k not in self._etas]
        if wanted:
            self._etas.update(estimate_starts(self.sched, self.now, self.runtimes(), wanted))
        return {k: self._etas[k] for k in keys if k in self._etas}


_WITHOUT = {
    "nodes": "node capacity and topology placement are not checked",
    "namespaces": "namespaceSelectors are matched on namespace names only",
    "priorityclasses": "PriorityClass priorities are taken from the Workloads",
    "admissionchecks": "queues with admission checks are shown as waiting for them",
    "pods": "pod groups are shown as waiting for their pods",
}
