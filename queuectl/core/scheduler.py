"""The public face of the core: feed it objects, run a cycle, read decisions.

`Scheduler` turns events into changes of its `Book` (where every workload is, and the
bookkeeping that lets a cycle skip what cannot have changed) and of the `State` the book holds.
The cycle itself lives in `queuectl.core.cycle`, explanations in `queuectl.core.explain`; both
read the book, and neither imports this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from queuectl.core.book import Book
from queuectl.core.charges import charge_for
from queuectl.core.cycle import run_cycle
from queuectl.core.explain import explain, pending_info
from queuectl.core.fair_preempt import strategies
from queuectl.core.patience import DEFAULT_PATIENCE_SECONDS, MAX_ALLOWANCE_SECONDS
from queuectl.core.queues import shape_of
from queuectl.core.quota import available, share
from queuectl.core.results import (
    CycleResult,
    Explanation,
    PendingInfo,
    Problem,
    QueueHolding,
    QueueStatus,
    QuotaHold,
)
from queuectl.core.starting import note_workload
from queuectl.core.types import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    Flavor,
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

    def __init__(
        self,
        preemption_patience: float = DEFAULT_PATIENCE_SECONDS,
        fair_preemption: Iterable[str] = (),
        block_admission: bool = False,
    ) -> None:
        """`preemption_patience`: seconds a would-be preemptor may wait for completions that
        return the quota it lacks instead of preempting (`core.patience`; 0 = never).
        `fair_preemption`: fair-sharing preemption's rules in the order tried
        (`LessThanOrEqualToFinalShare`, `LessThanInitialShare`; `core.fair_preempt`); empty:
        off. A bad list raises ValueError. `block_admission`: for queues that do not say, a
        starting workload holds its flavors (`core.starting`)."""
        self.book = Book()
        self.book.patience = self.book.freed_keep = preemption_patience
        self.state = self.book.state
        self.state.fair_strategies = strategies(fair_preemption)
        self.book.starts.configure(block_admission, self.state.queues)
        """The core's state: for the core and its tests; callers use the read methods below."""

    @property
    def now(self) -> float:
        """The core's clock: the `now` of the last cycle (back-offs before it are over)."""
        return self.book.now

    @now.setter
    def now(self, value: float) -> None:
        self.book.now = value

    # --- specs ------------------------------------------------------------------------------
    def upsert_flavor(self, flavor: Flavor) -> None:
        if self.state.flavors.get(flavor.name) != flavor:
            self.state.flavors[flavor.name] = flavor
            self._specs_changed()

    def delete_flavor(self, name: str) -> None:
        if self.state.flavors.pop(name, None) is not None:
            self._specs_changed()

    def upsert_topology(self, topology: Topology) -> None:
        if self.state.topologies.get(topology.name) != topology:
            self.state.topologies[topology.name] = topology
            self.state.wake.all_dirty = True

    def delete_topology(self, name: str) -> None:
        if self.state.topologies.pop(name, None) is not None:
            self.state.wake.all_dirty = True

    def upsert_cohort(self, cohort: Cohort) -> None:
        if self.state.cohorts.get(cohort.name) != cohort:
            self.state.cohorts[cohort.name] = cohort
            self._specs_changed()

    def delete_cohort(self, name: str) -> None:
        if self.state.cohorts.pop(name, None) is not None:
            self._specs_changed()

    def upsert_cluster_queue(self, cq: ClusterQueue) -> None:
        if self.state.queues.get(cq.name) != cq:
            self.state.queues[cq.name] = cq
            self._specs_changed()

    def delete_cluster_queue(self, name: str) -> None:
        if self.state.queues.pop(name, None) is not None:
            self._specs_changed()

    def upsert_admission_check(self, check: AdmissionCheck) -> None:
        if self.state.checks.get(check.name) != check:
            self.state.checks[check.name] = check
            if any(check.name in q.admission_checks for q in self.state.queues.values()):
                self._specs_changed()

    def delete_admission_check(self, name: str) -> None:
        gone = self.state.checks.pop(name, None)
        if gone is not None and any(name in q.admission_checks for q in self.state.queues.values()):
            self._specs_changed()

    def upsert_node(self, node: Node) -> None:
        if self.state.nodes.get(node.name) != node:
            self.state.set_node(node, node.name)

    def delete_node(self, name: str) -> None:
        if name in self.state.nodes:
            self.state.set_node(None, name)

    def _specs_changed(self) -> None:
        self.state.stale_tree = True
        self.book.starts.configure(self.book.starts.default, self.state.queues)
        self.state.cache.flavor_nodes.clear()
        self.state.cache.placement.clear()
        for q in self.book.pending.values():
            for bucket in q.buckets.values():
                bucket.signature = None  # the reason may read differently now: tell it again

    # --- workloads --------------------------------------------------------------------------
    def upsert_workload(self, w: Workload) -> None:
        state = self.state
        grace = min(w.preemption_grace_seconds, MAX_ALLOWANCE_SECONDS)
        if grace > self.book.freed_keep and self.book.patience > 0.0:
            self.book.freed_keep = grace  # a waiter may look back so far
        old = state.workloads.get(w.key)
        state.workloads[w.key] = w
        note_workload(self.book.starts, w)
        charge = state.charges.get(w.key)
        if charge is not None:
            if w.admission is not None and w.admission != charge.admission:
                state.drop(w.key)
                state.apply(charge, -1)
                state.admit(
                    charge_for(w, w.admission, w.admitted_at or charge.admitted_at, state.flavors)
                )
            else:
                charge.priority = w.priority
                charge.min_runtime = w.minimum_runtime_seconds
                state.cache.old_work.pop(charge.cq, None)
            self.book.track_deadline(w.key)
            return
        if w.admission is not None:
            if old is not None:
                self.book.unqueue(old)
            self.book.cancel_nomination(w.key)
            state.admit(
                charge_for(
                    w,
                    w.admission,
                    w.admitted_at if w.admitted_at is not None else self.now,
                    state.flavors,
                )
            )
            self.book.track_deadline(w.key)
            return
        if w.key in self.book.nominations:
            same = (
                old is not None
                and old.active == w.active
                and old.cluster_queue == w.cluster_queue
                and old.priority == w.priority
                and shape_of(old) == shape_of(w)
            )
            if same:
                return
            self.book.cancel_nomination(w.key)
        if old is not None:
            self.book.unqueue(old)
        self.book.enqueue(w)

    def delete_workload(self, key: str) -> None:
        """The workload is gone or finished: release whatever it holds."""
        w = self.state.workloads.pop(key, None)
        self.book.starts.note(key, frozenset())
        if key in self.state.charges:
            self.book.release(key)
        self.book.cancel_nomination(key)
        if w is not None:
            self.book.unqueue(w)
        self.book.fresh.pop(key, None)

    def requeue_workload(self, key: str, *, not_before: float = 0.0, front: bool = False) -> None:
        """Its admission ended without finishing: release its quota and queue it again."""
        w = self.state.workloads.get(key)
        if w is None:
            return
        if key in self.state.charges:
            self.book.release(key)
        self.book.unqueue(w)
        self.book.starts.note(key, frozenset())
        w = replace(
            w,
            admission=None,
            admitted_at=None,
            not_before=not_before,
            front=front,
            starting=False,
        )
        self.state.workloads[key] = w
        self.book.enqueue(w)

    # --- the cycle and what it can tell -----------------------------------------------------
    def run_cycle(self, now: float) -> CycleResult:
        book = self.book
        book.caching = True
        try:
            return run_cycle(book, now)
        finally:
            book.caching = False
            book.holders_cache.clear()

    def explain(self, key: str, now: float) -> Explanation:
        return explain(self.book, key, now)

    def pending_info(self, key: str) -> PendingInfo | None:
        return pending_info(self.book, key)

    def problems(self) -> tuple[Problem, ...]:
        self.state.ensure_tree()
        return tuple(self.state.tree.problems)

    def holders(
        self, cq: str, flavor: str, resource: str, limit: int = 5
    ) -> tuple[QueueHolding, ...]:
        """Queues of `cq`'s cohort tree that hold the (flavor, resource), most first."""
        return self.book.holders(cq, flavor, resource, limit)

    # --- read methods: what callers outside the core may look at (read-only views) --------------
    def workload(self, key: str) -> Workload | None:
        """The workload as the core last heard it (None when unknown or deleted)."""
        return self.state.workloads.get(key)

    def workloads(self) -> Mapping[str, Workload]:
        return MappingProxyType(self.state.workloads)

    def cluster_queues(self) -> Mapping[str, ClusterQueue]:
        return MappingProxyType(self.state.queues)

    def cohorts(self) -> Mapping[str, Cohort]:
        """Cohort objects upserted (see `cohort_names` for implicit ones too)."""
        return MappingProxyType(self.state.cohorts)

    def cohort_names(self) -> tuple[str, ...]:
        """Every cohort of the quota tree, sorted: upserted or only named by a queue or child."""
        self.state.ensure_tree()
        return tuple(sorted(self.state.tree.cohorts))

    def admission_checks(self) -> Mapping[str, AdmissionCheck]:
        return MappingProxyType(self.state.checks)

    def flavors(self) -> Mapping[str, Flavor]:
        return MappingProxyType(self.state.flavors)

    def nodes(self) -> Mapping[str, Node]:
        return MappingProxyType(self.state.nodes)

    def is_admitted(self, key: str) -> bool:
        """Does the core count the workload's quota (admitted, or preempted and draining)?"""
        return key in self.state.charges

    def held_quota(self, key: str) -> QuotaHold | None:
        """What an admitted workload holds, since when (None when it holds nothing)."""
        charge = self.state.charges.get(key)
        if charge is None:
            return None
        return QuotaHold(key, charge.cq, dict(charge.usage), charge.admitted_at)

    def gpu_time_bank(self, name: str, now: float) -> float | None:
        """The queue's GPU time credit in GPU-hours as of `now` (None: the queue has no bank)."""
        self.state.ensure_tree()
        return self.state.bank.balance(name, now)

    def restore_gpu_time_bank(self, name: str, balance: float) -> None:
        """Start from a balance kept outside the core (the ClusterQueue's status, read back at
        a controller's start); call it before the first cycle. Kept for a queue with a bank."""
        self.state.ensure_tree()
        if name in self.state.bank.banks:
            self.state.bank.restore(name, balance)

    def cluster_queue_status(self, name: str) -> QueueStatus | None:
        state = self.state
        state.ensure_tree()
        node = state.tree.queues.get(name)
        if node is None:
            return None
        pending_keys = self._pending_keys(name)
        return QueueStatus(
            name=name,
            active=name not in state.tree.inactive,
            problem=state.tree.inactive.get(name),
            reason=state.tree.inactive_reason.get(name),
            pending=len(pending_keys),
            admitted=len(state.by_cq.get(name, {})),
            usage=dict(node.usage),
            borrowed={fr: node.borrowed(fr) for fr in node.usage if node.borrowed(fr) > 0},
            weighted_share=share(node),
            nominal=dict(node.nominal),
            available={fr: available(node, fr) for fr in node.nominal},
            pending_requests=self._requests(pending_keys),
        )

    def _pending_keys(self, name: str) -> list[str]:
        """The queue's pending workloads: queued, backing off, inactive or nominated."""
        state, book = self.state, self.book
        q = book.pending.get(name)
        keys = list(q.entries) if q is not None else []
        keys += [
            k
            for k in (*book.waiting_at, *book.inactive, *book.nominations)
            if state.workloads[k].cluster_queue == name
        ]
        return keys

    def _requests(self, keys: list[str]) -> dict[str, int]:
        """What these workloads ask for in all, per resource."""
        state = self.state
        out: dict[str, int] = {}
        for key in keys:
            for ps in state.workloads[key].podsets:
                for res, amount in ps.requests.items():
                    out[res] = out.get(res, 0) + amount * ps.count
        return out
