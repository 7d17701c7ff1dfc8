"""The scheduler's bookkeeping: where every workload is, and what a cycle must remember.

One object that the cycle (`cycle`, `parking`, `outcomes`) and `explain` take as their argument:
pending queues, back-off and deadline timers, nominated preemptors, heads that wait instead of
preempting, and reasons still to be told. `Scheduler` (the public face) feeds it events; it
never imports the modules that read it, so the core has no import cycle.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import NamedTuple

from queuectl.core import reasons
from queuectl.core.charges import Charge
from queuectl.core.freedlog import Flows, Freed
from queuectl.core.queues import Bucket, PendingQueue
from queuectl.core.quota import QNode
from queuectl.core.results import PendingInfo, QueueHolding
from queuectl.core.starting import Starts
from queuectl.core.state import State
from queuectl.core.types import FlavorResource, Workload


class Waiting(NamedTuple):
    """A would-be preemptor waiting for completions instead (`patience`)."""

    until: float
    """When it stops waiting and preempts if it still must."""
    window: float
    """How far back it counts returned quota (its allowance)."""
    victims: tuple[str, ...]
    """Whom it would preempt now."""
    short: Freed
    """What it lacked when last evaluated."""
    need: Freed
    """What it needs in all, per (flavor, resource) (`Decision.need`)."""
    one_flavor: bool
    """Its queue offers one flavor per resource group: only its `need` can ever fit it."""
    seen: Freed
    """Its tree's cumulative freed quota (`WakeNotes.freed`) when it was last evaluated."""
    borrows: bool
    """Whether admitting it would borrow, when it was last evaluated (the policy that applies)."""
    released: tuple[tuple[str, int], ...]
    """Its victims' other queues and their release counters (`WakeNotes.released`) then."""
    retry_at: float | None = None
    """When protected work its victim search met comes of age (`Decision.retry_at`): more
    candidates may change the search's answer then."""
    own: Freed = {}
    """Its queue's usage of `need`, less what it holds itself, when it was last evaluated: more
    admitted since may put the queue at its borrowing limit, where no victim makes it fit."""
    needs_room: bool = False
    """Its answer read the nodes' free room (`Decision.needs_room`): room freed anywhere may
    change it. Without, only node changes do (room freed cannot)."""


class Deferred:
    """Work that waits for the borrowing pass, in order: (queue, the bucket set aside or None
    for a whole StrictFIFO queue, whether its cheap re-check is owed).

    Three parallel lists, not a tuple per entry: a large cycle defers thousands of buckets,
    and such tuples (they hold a `Bucket`, so CPython's cyclic collector tracks them) live
    through the first pass, so its young collections promote them to the oldest generation
    and bring on full collections over the whole backlog (~0.1 s each at 50,000 pending)
    sooner: with tuples, a full one every ~7 steady gpu large core bench cycles."""

    __slots__ = ("buckets", "names", "rechecked")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.buckets: list[Bucket | None] = []
        self.rechecked: list[bool] = []

    def add(self, name: str, bucket: Bucket | None, rechecked: bool) -> None:
        self.names.append(name)
        self.buckets.append(bucket)
        self.rechecked.append(rechecked)

    def extend(self, other: Deferred) -> None:
        self.names += other.names
        self.buckets += other.buckets
        self.rechecked += other.rechecked

    def __iter__(self) -> Iterator[tuple[str, Bucket | None, bool]]:
        return zip(self.names, self.buckets, self.rechecked, strict=True)

    def __len__(self) -> int:
        return len(self.names)


class Book:
    """Where every workload is (pending in a queue, waiting out a back-off, inactive,
    nominated as a preemptor, or admitted in `state`) and the timers and notes between cycles."""

    def __init__(self) -> None:
        self.state = State()
        self.pending: dict[str, PendingQueue] = {}
        self.waiting: list[tuple[float, str]] = []
        """Back-off timers: (not before, key); stale unless `waiting_at[key]` agrees."""
        self.waiting_at: dict[str, float] = {}
        self.inactive: set[str] = set()
        self.nominations: dict[str, set[str]] = {}
        """Nominated preemptor -> its victims still counted."""
        self.nominated_info: dict[str, PendingInfo] = {}
        self.nominated_by: dict[str, set[str]] = {}
        """Victim -> the nominated preemptors that wait for it to stop being counted."""
        self.to_settle: set[str] = set()
        """Nominations that may have no victim counted any more: new ones, and those a victim
        of which was released since the last cycle. Only these can be ready (a victim leaves
        `state.charges` only through `release`), so the cycle checks only these."""
        self.retries: list[tuple[float, str]] = []
        """(when a protected victim comes of age, queue): its parked buckets wake then."""
        self.waiting_preemptors: dict[str, tuple[Bucket, str]] = {}
        """queue -> (its head bucket, the head) that would have preempted for quota that work
        admitted in the same cycle took: woken by the next cycle, its queue held back till then"""
        self.quiet: dict[str, list[Bucket]] = {}
        """Inside a cycle: queue -> parked buckets owed a turn in the running pass whose cheap
        re-check could only answer "still short" (`parking.settled`), left parked instead."""
        self.set_aside = Deferred()
        """Inside a cycle: (queue, bucket) woken for a re-check whose first-pass turn could
        only set it aside for the borrowing pass (`parking.set_aside_now`): set aside at once."""
        self.borrowing_helps: set[str] = set()
        """Queues that parked a bucket with `Bucket.borrowing_helps` (`parking.behind_own_work`
        looks only at these)."""
        self.waits: dict[str, int] = {}
        """Workloads that waited so in the previous cycle -> how many cycles in a row."""
        self.patience = 0.0
        """Seconds a would-be preemptor may wait for completions instead (`patience`)."""
        self.patient: dict[str, Waiting] = {}
        """Would-be preemptors waiting for completions (held as nominations without
        victims)."""
        self.flows = Flows()
        """What finished work returned, per cycle, over the last `freed_keep` seconds: to each
        tree, as loans coming home, and to each fenced queue (`freedlog.Flows`)."""
        self.freed_keep = 0.0
        """How far back a waiter may look: `patience`, or the longest grace period seen."""
        self.deadlines: list[tuple[float, str]] = []
        """Maximum execution time timers: (deadline, key)."""
        self.fresh: dict[str, PendingInfo] = {}
        """Reasons decided outside a cycle (inactive, back-off), told by the next cycle."""
        self.starts = Starts()
        """Flavors held by workloads whose pods are not all Ready yet (block admission)."""
        self.now = float("-inf")
        self.caching = False
        self.holders_cache: dict[tuple[QNode, FlavorResource], tuple[QueueHolding, ...]] = {}
        """Inside a cycle: who holds a (flavor, resource) is computed once per tree."""

    # --- where a workload is ----------------------------------------------------------------
    def enqueue(self, w: Workload) -> None:
        """Put a pending workload where it belongs: inactive, backing off, or its queue."""
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
            self.pending.setdefault(w.cluster_queue, PendingQueue()).add(w)

    def unqueue(self, w: Workload) -> None:
        q = self.pending.get(w.cluster_queue)
        if q is not None:
            q.remove(w.key)
        self.waiting_at.pop(w.key, None)
        self.inactive.discard(w.key)

    def release(self, key: str) -> None:
        """An admitted workload stopped: its quota goes back, or stays held for its preemptor."""
        state = self.state
        charge = state.drop(key)
        if charge is None:
            return
        self.to_settle.update(self.nominated_by.get(key, ()))
        state.evicting.discard(key)
        preemptor = state.victim_of.pop(key, None)
        if preemptor is not None and preemptor in self.nominations:
            state.hold(preemptor, charge, counted=True)  # its quota stays held for the preemptor
        elif self.patience <= 0.0:
            state.apply(charge, -1)
        else:
            node = state.tree.queues.get(charge.cq)
            if node is None:
                state.apply(charge, -1)
                return
            # What it had borrowed, read before its usage goes: the loans coming home.
            loans = {fr: min(n, node.borrowed(fr)) for fr, n in charge.usage.items()}
            state.apply(charge, -1)
            root = node.root.name
            self.flows.note(("tree", root), charge.usage)
            self.flows.note(("loans", root), loans)
            if 0 in node.borrowing_limit.values():  # fenced: only its own work returns it quota
                self.flows.note(("queue", charge.cq), charge.usage)

    def nominate(self, key: str, victims: set[str]) -> None:
        """Record a nominated preemptor and the victims it waits for."""
        self.nominations[key] = victims
        self.to_settle.add(key)
        for v in victims:
            self.nominated_by.setdefault(v, set()).add(key)

    def cancel_nomination(self, key: str, mark: bool = True) -> list[Charge]:
        """Forget a nomination and release what was held for it (returned); `mark=False`:
        see `State.release_held`."""
        self.patient.pop(key, None)
        self.state.claims.pop(key, None)
        victims = self.nominations.pop(key, None)
        self.nominated_info.pop(key, None)
        if victims is None:
            return []
        self.to_settle.discard(key)
        state = self.state
        for v in victims:
            waiting = self.nominated_by.get(v)
            if waiting is not None:
                waiting.discard(key)
                if not waiting:
                    del self.nominated_by[v]
            if state.victim_of.get(v) == key:
                del state.victim_of[v]
                if v in state.charges:
                    state.evicting.add(v)  # already told to stop; never chosen twice
        return state.release_held(key, mark)

    def track_deadline(self, key: str) -> None:
        w = self.state.workloads.get(key)
        charge = self.state.charges.get(key)
        if w is not None and charge is not None and w.max_execution_seconds is not None:
            heapq.heappush(self.deadlines, (charge.admitted_at + w.max_execution_seconds, key))

    # --- what the cycle and explain read ----------------------------------------------------
    def idle_reason(self, cq: str) -> PendingInfo | None:
        """Why a queue admits nothing at all (None when it is active)."""
        state = self.state
        spec = state.queues.get(cq)
        if spec is None:
            return PendingInfo("", reasons.CLUSTER_QUEUE_NOT_FOUND, f"ClusterQueue {cq} not found")
        why = state.tree.inactive.get(cq)
        if why is not None:
            return PendingInfo(
                "", reasons.CLUSTER_QUEUE_INACTIVE, f"ClusterQueue {cq} is inactive: {why}"
            )
        if spec.stop_policy != "None":
            return PendingInfo(
                "",
                reasons.CLUSTER_QUEUE_STOPPED,
                f"ClusterQueue {cq} is stopped ({spec.stop_policy})",
            )
        return None

    def holders(
        self, cq: str, flavor: str, resource: str, limit: int = 5
    ) -> tuple[QueueHolding, ...]:
        """Queues of `cq`'s cohort tree that hold the (flavor, resource), most first."""
        root = self.state.root_of(cq)
        if root is None:
            return ()
        fr = (flavor, resource)
        cached = self.holders_cache.get((root, fr))
        if cached is not None:
            return cached
        holders = [
            QueueHolding(n.name, n.usage[fr], n.borrowed(fr))
            for n in self.state.tree.leaves.get(root, ())
            if n.usage.get(fr, 0) > 0
        ]
        holders.sort(key=lambda h: (-h.usage, h.cluster_queue))
        result = tuple(holders[:limit])
        if self.caching:
            self.holders_cache[(root, fr)] = result
        return result
