"""Pending workloads of one ClusterQueue, grouped into buckets of identical shape.

Two workloads of the same shape (same pod sets, requests and placement constraints) in the same
queue get the same answer from the quota tree, and within one cycle availability only shrinks. So
when the best workload of a bucket cannot be admitted, nobody behind it in that bucket can be
either (a later one has lower or equal priority, so it also has no more preemption candidates):
the whole bucket is parked at once, and stays parked until an event could change the answer.
That is what keeps a cycle from re-evaluating thousands of hopeless workloads.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

from queuectl.core.quota import QNode
from queuectl.core.results import PendingInfo
from queuectl.core.types import FlavorResource, Workload

SortKey = tuple[int, int, float, str]
Shape = Hashable


def sort_key(w: Workload) -> SortKey:
    """Higher priority first, then requeued-at-front, then older, then by key for determinism."""
    return (-w.priority, 0 if w.front else 1, w.created, w.key)


def shape_of(w: Workload) -> Shape:
    return tuple(
        (
            ps.count,
            tuple(sorted(ps.requests.items())),
            ps.topology,
            tuple(sorted(ps.node_selector.items())),
            ps.tolerations,
        )
        for ps in w.podsets
    )


@dataclass(slots=True, eq=False)
class Bucket:
    shape: Shape
    heap: list[tuple[SortKey, str]] = field(default_factory=list)
    parked: bool = False
    info: PendingInfo | None = None
    """Why the last evaluated member could not be admitted (applies to every member)."""
    signature: tuple[str, str | None, str | None] | None = None
    unreported: set[str] = field(default_factory=set)
    """Members that have not been told `info` yet."""
    topology: bool = False
    """Parked because of node placement: node events unpark it."""
    wake: list[tuple[FlavorResource, int]] | None = None
    """Parked until the cohort tree's freed counter of one of these (flavor, resource) reaches
    the given value; None: any freed quota in the tree wakes it; []: no freed quota can help."""
    cross: bool = False
    """Its queue may preempt borrowers of other queues: new borrowing of a (flavor, resource)
    in `wake` may give it candidates, so that wakes it too."""
    depends: tuple[FlavorResource, ...] = ()
    """(flavor, resource)s it chose while another flavor was possible: usage growth of one of
    them in the tree wakes it (it may take another flavor now)."""
    borrows: bool = False
    """Its last evaluation would have borrowed: in the first pass it waits for the second."""
    on_release: bool = False
    """It would borrow, and within its own quota it could reclaim: its own queue freeing quota
    wakes it, once that ends its borrowing (`reclaim_need`, `parking.released_matters`)."""
    reclaim_need: dict[FlavorResource, int] | None = None
    """With `on_release`: what the workload needs in all, per (flavor, resource)."""
    evaluated_at: float = float("-inf")
    """When it was last evaluated in full: its reason's figures are from then."""
    within: int | None = None
    """Its queue may preempt its own work admitted below this priority (inclusive bound)."""
    borrowing_helps: bool = False
    """It failed without borrowing, and as a borrower its queue's policy may take work that it
    may not take now (`parking.borrowing_helps`): growth of its own queue's usage, which can
    push it over its own quota, wakes it (`taken_at`)."""
    taken_at: int = 0
    """Its queue's usage-growth counter (`WakeNotes.taken`) when it was parked."""
    avail_at: dict[FlavorResource, int] | None = None
    """Quota re-check: what was available of each short (flavor, resource) when it was parked;
    None when the answer cannot be re-checked cheaply (it is evaluated in full)."""
    need: dict[FlavorResource, int] | None = None
    """What it needs of each short (flavor, resource)."""
    hopeless: bool = False
    """No victim was a candidate: more free quota that still falls short changes nothing."""
    epoch_at: int = 0
    """The tree's borrow epoch when parked (a new borrower may bring candidates)."""
    released_at: int = 0
    """Its queue's release counter when parked (own quota freed: evaluate in full)."""
    must_borrow: bool = False
    """With `avail_at`: when parked, every flavor of some resource group it needs would have taken
    it beyond its queue's own quota (see `parking.certainly_borrows`)."""
    recheck: bool = False
    """Woken only because quota was freed somewhere in its tree: before a full evaluation, the
    cycle checks that some short (flavor, resource) is now more available than when parked."""


def woken_by_growth(
    bucket: Bucket, borrowed: set[FlavorResource] | None, grown: set[FlavorResource] | None
) -> bool:
    """Did new borrowing (victims for a bucket that may take from others) or usage growth (a
    flavor it chose for one part taken by someone else) change what it may get?"""
    if borrowed and bucket.cross and bucket.wake and any(fr in borrowed for fr, _ in bucket.wake):
        return True
    return grown is not None and any(fr in grown for fr in bucket.depends)


class PendingQueue:
    """Priority-then-age order over buckets, with lazy deletion."""

    __slots__ = ("blocked_at", "buckets", "entries", "heap")

    def __init__(self) -> None:
        self.entries: dict[str, tuple[SortKey, Shape]] = {}
        self.buckets: dict[Shape, Bucket] = {}
        self.heap: list[tuple[SortKey, Shape]] = []
        self.blocked_at: SortKey | None = None
        """StrictFIFO: this head could not be admitted; nothing moves until an event."""

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def add(self, w: Workload) -> None:
        if w.key in self.entries:
            self.remove(w.key)
        sk = sort_key(w)
        shape = shape_of(w)
        bucket = self.buckets.get(shape)
        if bucket is None:
            bucket = self.buckets[shape] = Bucket(shape)
        shape = bucket.shape  # one shape object per bucket, not one per pending workload
        self.entries[w.key] = (sk, shape)
        head = self._bucket_head(bucket)
        heapq.heappush(bucket.heap, (sk, w.key))
        bucket.unreported.add(w.key)
        if head is None or sk < head[0]:
            # A new best member may have preemption candidates the parked head had not: it is
            # evaluated in full, also when the bucket is already unparked with a cheap re-check
            # owed (that re-check reads the old head's record: its `hopeless`, its `within`).
            bucket.parked = False
            bucket.recheck = False
        if not bucket.parked and (head is None or sk < head[0]):
            heapq.heappush(self.heap, (sk, shape))
        if self.blocked_at is not None and sk < self.blocked_at:
            self.blocked_at = None

    def remove(self, key: str) -> bool:
        entry = self.entries.pop(key, None)
        if entry is None:
            return False
        bucket = self.buckets.get(entry[1])
        if bucket is not None:
            bucket.unreported.discard(key)
            head = self._bucket_head(bucket)
            if head is None:
                del self.buckets[entry[1]]
            elif not bucket.parked:
                heapq.heappush(self.heap, (head[0], entry[1]))
        return True

    def _bucket_head(self, bucket: Bucket) -> tuple[SortKey, str] | None:
        h = bucket.heap
        while h:
            sk, key = h[0]
            entry = self.entries.get(key)
            if entry is not None and entry[0] == sk and entry[1] == bucket.shape:
                return h[0]
            heapq.heappop(h)
        return None

    def head(self) -> tuple[SortKey, str, Bucket] | None:
        """The best workload of any unparked bucket."""
        h = self.heap
        while h:
            sk, shape = h[0]
            bucket = self.buckets.get(shape)
            if bucket is not None and not bucket.parked:
                bh = self._bucket_head(bucket)
                if bh is not None and bh[0] == sk:
                    return sk, bh[1], bucket
            heapq.heappop(h)
        return None

    def members(self, bucket: Bucket) -> list[str]:
        return [
            k for _, k in bucket.heap if k in self.entries and self.entries[k][1] == bucket.shape
        ]

    def park(self, bucket: Bucket) -> None:
        bucket.parked = True

    def unpark(self, bucket: Bucket, recheck: bool = False) -> None:
        """Back into the running; `recheck`: only a cheap quota check is owed first."""
        if bucket.parked:
            bucket.parked = False
            bucket.recheck = recheck and bucket.avail_at is not None
            head = self._bucket_head(bucket)
            if head is not None:
                heapq.heappush(self.heap, (head[0], bucket.shape))
        elif not recheck:
            bucket.recheck = False

    def unpark_all(self, topology_only: bool = False) -> None:
        for bucket in self.buckets.values():
            if not topology_only or bucket.topology:
                self.unpark(bucket)
        if not topology_only:
            self.blocked_at = None

    def unpark_freed(
        self,
        freed: dict[FlavorResource, int],
        borrowed: set[FlavorResource],
        own_admitted: int | None,
        grown: set[FlavorResource],
        released: bool,
        taken: int = 0,
        release_matters: Callable[[Bucket], bool] | None = None,
    ) -> list[Bucket]:
        """Something changed in the tree: wake the buckets it can help.

        `freed`: the tree's cumulative freed counters; `borrowed`: (flavor, resource)s that
        someone in the tree newly borrowed (new reclaim candidates); `own_admitted`: the lowest
        priority this queue admitted since the last wake (new in-queue candidates), or None;
        `grown`: (flavor, resource)s whose usage grew in the tree (another flavor may be chosen);
        `released`: this queue freed quota of its own (it may stop borrowing, and reclaim: the
        buckets for which `release_matters`);
        `taken`: this queue's usage-growth counter (it may start borrowing, see
        `Bucket.borrowing_helps`).
        Returns the buckets owed only a cheap re-check, still parked: the caller unparks them
        (`unpark(bucket, recheck=True)`) or leaves parked those whose re-check cannot but fail.
        """
        self.blocked_at = None
        recheck: list[Bucket] = []
        for bucket in self.buckets.values():
            if not bucket.parked:
                continue
            wake = bucket.wake
            if (
                wake is None
                or ((bucket.cross or bucket.depends) and woken_by_growth(bucket, borrowed, grown))
                or (
                    released
                    and bucket.on_release
                    and (release_matters is None or release_matters(bucket))
                )
                or (bucket.borrowing_helps and taken != bucket.taken_at)
                or (
                    own_admitted is not None
                    and bucket.within is not None
                    and own_admitted <= bucket.within
                )
            ):
                self.unpark(bucket)
            elif any(freed.get(fr, 0) >= at for fr, at in wake):
                recheck.append(bucket)
        return recheck

    def head_key(self, bucket: Bucket) -> SortKey | None:
        """The sort key of the bucket's best member (None when it has none)."""
        head = self._bucket_head(bucket)
        return head[0] if head is not None else None


def stops_borrowing(node: QNode, need: Mapping[FlavorResource, int]) -> bool:
    """Would `need` now fit within the queue's own quota in every (flavor, resource)? (As
    `preempt.search` decides whether its preemptor borrows.)"""
    return not any(node.borrows(fr, n) for fr, n in need.items())
