"""The public face of the core: feed it objects, run a cycle, read decisions.

`Scheduler` keeps where every workload is (pending in a queue, waiting out a back-off, inactive,
nominated as a preemptor, or admitted) and the bookkeeping that lets a cycle skip what cannot have
changed. The cycle itself lives in `queuectl.core.cycle`.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from queuectl.core import reasons
from queuectl.core.queues import Bucket, PendingQueue, shape_of
from queuectl.core.quota import QNode
from queuectl.core.results import (
    CycleResult,
    Explanation,
    PendingInfo,
    Problem,
    QueueHolding,
    QueueStatus,
)
from queuectl.core.state import State, charge_for
from queuectl.core.types import (
    ClusterQueue,
    Cohort,
    Flavor,
    FlavorResource,
    Node,
    Topology,
    Workload,
)


def backoff_seconds(requeue_count: int, base: float = 1.0, cap: float = 600.0) -> float:
    """Exponential back-off for a workload evicted `requeue_count` times (for requeueState)."""
    if requeue_count <= 0:
        return 0.0
    return float(min(cap, base * 2 ** min(requeue_count - 1, 30)))


class Scheduler:
    """State built from watch events plus one admission cycle at a time. Not thread-safe."""

    def __init__(self) -> None:
        self.st = State()
        self.pq: dict[str, PendingQueue] = {}
        self.waiting: list[tuple[float, str]] = []
        self.waiting_at: dict[str, float] = {}
        self.inactive: set[str] = set()
        self.nominations: dict[str, set[str]] = {}
        self.nominated_info: dict[str, PendingInfo] = {}
        self.retries: list[tuple[float, str]] = []
        self.waiting_preemptors: dict[str, tuple[Bucket, str]] = {}
        """queue -> (its head bucket, the head) that would have preempted for quota that work
        admitted in the same cycle took: woken by the next cycle, its queue held back till then"""
        self.waits: dict[str, int] = {}
        """Workloads that waited so in the previous cycle -> how many cycles in a row."""
        self.deadlines: list[tuple[float, str]] = []
        self.fresh: dict[str, PendingInfo] = {}
        """Reasons decided outside a cycle (inactive, back-off), told by the next cycle."""
        self.now = float("-inf")
        self.caching = False
        self.holders_cache: dict[tuple[QNode, FlavorResource], tuple[QueueHolding, ...]] = {}
        """Inside a cycle: who holds a (flavor, resource) is computed once per tree."""

    # --- specs ------------------------------------------------------------------------------
    def upsert_flavor(self, flavor: Flavor) -> None:
        if self.st.flavors.get(flavor.name) != flavor:
            self.st.flavors[flavor.name] = flavor
            self._specs_changed()

    def delete_flavor(self, name: str) -> None:
        if self.st.flavors.pop(name, None) is not None:
            self._specs_changed()

    def upsert_topology(self, topology: Topology) -> None:
        if self.st.topologies.get(topology.name) != topology:
            self.st.topologies[topology.name] = topology
            self.st.all_dirty = True

    def delete_topology(self, name: str) -> None:
        if self.st.topologies.pop(name, None) is not None:
            self.st.all_dirty = True

    def upsert_cohort(self, cohort: Cohort) -> None:
        if self.st.cohorts.get(cohort.name) != cohort:
            self.st.cohorts[cohort.name] = cohort
            self._specs_changed()

    def delete_cohort(self, name: str) -> None:
        if self.st.cohorts.pop(name, None) is not None:
            self._specs_changed()

    def upsert_cluster_queue(self, cq: ClusterQueue) -> None:
        if self.st.queues.get(cq.name) != cq:
            self.st.queues[cq.name] = cq
            self._specs_changed()

    def delete_cluster_queue(self, name: str) -> None:
        if self.st.queues.pop(name, None) is not None:
            self._specs_changed()

    def upsert_node(self, node: Node) -> None:
        if self.st.nodes.get(node.name) != node:
            self.st.set_node(node, node.name)

    def delete_node(self, name: str) -> None:
        if name in self.st.nodes:
            self.st.set_node(None, name)

    def _specs_changed(self) -> None:
        self.st.stale_tree = True
        self.st.flavor_nodes.clear()
        for q in self.pq.values():
            for bucket in q.buckets.values():
                bucket.signature = None  # the reason may read differently now: tell it again

    # --- workloads --------------------------------------------------------------------------
    def upsert_workload(self, w: Workload) -> None:
        st = self.st
        old = st.workloads.get(w.key)
        st.workloads[w.key] = w
        charge = st.charges.get(w.key)
        if charge is not None:
            if w.admission is not None and w.admission != charge.admission:
                st.drop(w.key)
                st.apply(charge, -1)
                st.admit(charge_for(w, w.admission, w.admitted_at or charge.admitted_at))
            else:
                charge.priority = w.priority
                charge.min_runtime = w.minimum_runtime_seconds
                st.old_work.pop(charge.cq, None)
            self._track_deadline(w.key)
            return
        if w.admission is not None:
            if old is not None:
                self._unqueue(old)
            self._cancel_nomination(w.key)
            st.admit(
                charge_for(w, w.admission, w.admitted_at if w.admitted_at is not None else self.now)
            )
            self._track_deadline(w.key)
            return
        if w.key in self.nominations:
            same = (
                old is not None
                and old.active == w.active
                and old.cluster_queue == w.cluster_queue
                and old.priority == w.priority
                and shape_of(old) == shape_of(w)
            )
            if same:
                return
            self._cancel_nomination(w.key)
        if old is not None:
            self._unqueue(old)
        self._enqueue(w)

    def delete_workload(self, key: str) -> None:
        """The workload is gone or finished: release whatever it holds."""
        w = self.st.workloads.pop(key, None)
        if key in self.st.charges:
            self._release(key)
        self._cancel_nomination(key)
        if w is not None:
            self._unqueue(w)
        self.fresh.pop(key, None)

    def requeue_workload(self, key: str, *, not_before: float = 0.0, front: bool = False) -> None:
        """Its admission ended without finishing: release its quota and queue it again."""
        w = self.st.workloads.get(key)
        if w is None:
            return
        if key in self.st.charges:
            self._release(key)
        self._unqueue(w)
        w = replace(w, admission=None, admitted_at=None, not_before=not_before, front=front)
        self.st.workloads[key] = w
        self._enqueue(w)

    def _release(self, key: str) -> None:
        st = self.st
        charge = st.drop(key)
        if charge is None:
            return
        st.evicting.discard(key)
        preemptor = st.victim_of.pop(key, None)
        if preemptor is not None and preemptor in self.nominations:
            st.hold(preemptor, charge, counted=True)  # its quota stays held for the preemptor
        else:
            st.apply(charge, -1)

    def _cancel_nomination(self, key: str) -> None:
        victims = self.nominations.pop(key, None)
        self.nominated_info.pop(key, None)
        if victims is None:
            return
        st = self.st
        for v in victims:
            if st.victim_of.get(v) == key:
                del st.victim_of[v]
                if v in st.charges:
                    st.evicting.add(v)  # already told to stop; never chosen twice
        st.release_held(key)

    def _unqueue(self, w: Workload) -> None:
        q = self.pq.get(w.cluster_queue)
        if q is not None:
            q.remove(w.key)
        self.waiting_at.pop(w.key, None)
        self.inactive.discard(w.key)

    def _enqueue(self, w: Workload) -> None:
        if not w.active:
            self.inactive.add(w.key)
            self.fresh[w.key] = PendingInfo(w.key, reasons.INACTIVE, "the workload is not active")
        elif w.not_before > 0.0 and w.not_before > self.now:
            self.waiting_at[w.key] = w.not_before
            heapq.heappush(self.waiting, (w.not_before, w.key))
            self.fresh[w.key] = PendingInfo(
                w.key, reasons.PENDING, f"requeued; backing off until {w.not_before:.3f}"
            )
        else:
            self.pq.setdefault(w.cluster_queue, PendingQueue()).add(w)

    def _track_deadline(self, key: str) -> None:
        w = self.st.workloads.get(key)
        charge = self.st.charges.get(key)
        if w is not None and charge is not None and w.max_execution_seconds is not None:
            heapq.heappush(self.deadlines, (charge.admitted_at + w.max_execution_seconds, key))

    # --- the cycle and what it can tell -----------------------------------------------------
    def run_cycle(self, now: float) -> CycleResult:
        from queuectl.core.cycle import run_cycle

        self.caching = True
        try:
            return run_cycle(self, now)
        finally:
            self.caching = False
            self.holders_cache.clear()

    def explain(self, key: str, now: float) -> Explanation:
        from queuectl.core.explain import explain

        return explain(self, key, now)

    def pending_info(self, key: str) -> PendingInfo | None:
        from queuectl.core.explain import pending_info

        return pending_info(self, key)

    def problems(self) -> tuple[Problem, ...]:
        self.st.ensure_tree()
        return tuple(self.st.tree.problems)

    def holders(
        self, cq: str, flavor: str, resource: str, limit: int = 5
    ) -> tuple[QueueHolding, ...]:
        """Queues of `cq`'s cohort tree that hold the (flavor, resource), most first."""
        root = self.st.root_of(cq)
        if root is None:
            return ()
        fr = (flavor, resource)
        cached = self.holders_cache.get((root, fr))
        if cached is not None:
            return cached
        held = [
            QueueHolding(n.name, n.usage[fr], n.borrowed(fr))
            for n in self.st.tree.leaves.get(root, ())
            if n.usage.get(fr, 0) > 0
        ]
        held.sort(key=lambda h: (-h.usage, h.cluster_queue))
        result = tuple(held[:limit])
        if self.caching:
            self.holders_cache[(root, fr)] = result
        return result

    def cluster_queue_status(self, name: str) -> QueueStatus | None:
        from queuectl.core.quota import share

        st = self.st
        st.ensure_tree()
        node = st.tree.queues.get(name)
        if node is None:
            return None
        q = self.pq.get(name)
        pending = len(q) if q is not None else 0
        pending += sum(
            1
            for k in (*self.waiting_at, *self.inactive, *self.nominations)
            if st.workloads[k].cluster_queue == name
        )
        return QueueStatus(
            name=name,
            active=name not in st.tree.inactive,
            problem=st.tree.inactive.get(name),
            pending=pending,
            admitted=len(st.by_cq.get(name, {})),
            usage=dict(node.usage),
            borrowed={fr: node.borrowed(fr) for fr in node.usage if node.borrowed(fr) > 0},
            weighted_share=share(node),
        )
