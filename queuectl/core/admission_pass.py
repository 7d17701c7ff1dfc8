"""One pass of the admission loop (`cycle`): each head popped from the heap takes a turn.

A turn, in steps: (1) a stale heap key is recomputed and pushed again; (2) a re-check owed
since the head's bucket woke answers without an evaluation when it can; (3) the head is
evaluated (`assign`, or only that it would borrow, `foresee`); (4) the decision is acted on:
admit, wait for the borrowing pass, preempt (or wait a cycle instead), or park with the reason.
"""

from __future__ import annotations

import heapq

from queuectl.core import parking, patience, start_gate
from queuectl.core.assign import assign
from queuectl.core.book import Book, Deferred
from queuectl.core.decision import Decision
from queuectl.core.foresee import fits_only_by_borrowing
from queuectl.core.outcomes import Out, admit, report, tell_those_behind
from queuectl.core.queues import Bucket, PendingQueue, SortKey
from queuectl.core.quota import available, share_path
from queuectl.core.results import PendingInfo, waiting_for_quota
from queuectl.core.types import Workload

WAITED = (
    "it fitted when this cycle began, so it is tried again next cycle before anything is "
    "preempted for it"
)
"""Why a head that would preempt waits instead (its WaitingForQuota message ends so)."""

MAX_WAITS = 8
"""Cycles in a row a preemptor may wait because work admitted (or quota held for a preemptor)
before it in the cycle took the fit it had when the cycle began (`_wait_instead_of_preempting`)."""


Order = tuple[bool, tuple[float, ...], SortKey]


def order(book: Book, cq: str, head: SortKey, borrowing: bool) -> Order:
    """Heap key: in the borrowing pass queues with GPU time credit first (`bank.has_credit`),
    then fair share (share path), then the head's own order."""
    first = borrowing and not book.state.bank.has_credit(cq)
    return first, share_path(book.state.tree.queues[cq]), head


class AdmissionPass:
    """One pass of the admission loop (`_admission_loop`): each popped head takes a turn
    (`turn`), and what waits for the borrowing pass is gathered in `deferred`: (queue, bucket
    set aside or None for a whole StrictFIFO queue, whether the bucket's cheap re-check is
    owed). `aside`: the untold reason of a bucket that failed in the first pass while it would
    borrow (the second pass, where others start borrowing, may still find it victims)."""

    __slots__ = ("aside", "book", "borrowing", "deferred", "heap", "now", "out", "strict")

    def __init__(
        self,
        book: Book,
        now: float,
        out: Out,
        strict: set[str],
        aside: dict[Bucket, PendingInfo],
        borrowing: bool,
    ) -> None:
        self.book, self.now, self.out, self.strict = book, now, out, strict
        self.aside, self.borrowing = aside, borrowing
        self.heap: list[tuple[Order, str]] = []
        self.deferred = Deferred()

    def run(self, names: list[str]) -> Deferred:
        for name in names:
            self.push(name)
        while self.heap:
            key, name = heapq.heappop(self.heap)
            if self.turn(key, name):
                self.push(name)
        return self.deferred

    def push(self, name: str) -> None:
        """The queue's next head on the heap (in the borrowing pass, after its sweep)."""
        if self.borrowing and name not in self.strict:
            parking.sweep(self.book, name, self.aside)
        push_head(self.book, self.heap, name, self.borrowing)

    def turn(self, key: Order, name: str) -> bool:
        """One head's turn; True when its queue's next head goes on the heap."""
        book = self.book
        q = book.pending[name]
        head = q.head()
        if head is None or q.blocked_at is not None:
            return False
        # 1. A stale heap key (shares only grow within a cycle) is recomputed and pushed again.
        current = order(book, name, head[0], self.borrowing)
        if current != key:
            heapq.heappush(self.heap, (current, name))
            return False
        sk, wkey, bucket = head
        aside_ok = (
            not self.borrowing and name not in self.strict
        )  # a bucket that would borrow waits
        # 2. A re-check owed since its bucket woke: answered without an evaluation if it can be.
        rechecked = bucket.recheck
        if rechecked:
            bucket.recheck = False
            if self.recheck(name, q, bucket, aside_ok):
                return True
        # 3. Evaluate it: `assign`, or only that it would borrow when that sets it aside.
        self.aside.pop(bucket, None)
        w = book.state.workloads[wkey]
        self.out.evaluated += 1
        if aside_ok and fits_only_by_borrowing(book.state, w):
            # What `assign` would answer sets it aside unchanged (step 4): skip building it.
            q.park(bucket)
            self.deferred.add(name, bucket, rechecked)
            return True
        d = assign(book.state, w, self.now)
        # 4. Act on the decision.
        return self.act(name, q, sk, bucket, w, d, rechecked, aside_ok)

    def recheck(self, name: str, q: PendingQueue, bucket: Bucket, aside_ok: bool) -> bool:
        """Step 2: the bucket's parked record answers when what woke it was taken before its
        turn (the same failure), or when it could only be admitted by borrowing in the first
        pass (set aside unevaluated). True: answered."""
        book = self.book
        if parking.still_short(book, name, bucket):
            q.park(bucket)
            untold = self.aside.pop(bucket, None)
            if untold is not None:
                report(book, q, bucket, untold, self.out)
            elif bucket.unreported and bucket.info is not None:
                report(book, q, bucket, bucket.info, self.out)
            if bucket.borrows and aside_ok:
                self.deferred.add(name, bucket, True)  # others may start borrowing there
            return True
        if aside_ok and parking.certainly_borrows(book, name, bucket):
            q.park(bucket)  # set aside unevaluated: it could only be admitted by borrowing
            self.deferred.add(name, bucket, True)
            return True
        return False

    def act(
        self,
        name: str,
        q: PendingQueue,
        sk: SortKey,
        bucket: Bucket,
        w: Workload,
        d: Decision,
        rechecked: bool,
        aside_ok: bool,
    ) -> bool:
        """Step 4: admit, wait for the borrowing pass, preempt (or wait a cycle instead), or
        park with its reason. True when its queue's next head goes on the heap."""
        book, out = self.book, self.out
        if d.borrows and not self.borrowing and d.kind != "fail":
            # Its parked record still holds: if what it borrows is gone by the second pass,
            # the cheap re-check answers without a second full evaluation.
            if name in self.strict:
                bucket.recheck = rechecked
                self.deferred.add(name, None, rechecked)
                return False
            q.park(bucket)
            self.deferred.add(name, bucket, rechecked)
        elif d.kind != "fail" and (held := start_gate.blocker(book, w, d)) is not None:
            strict = name in self.strict
            start_gate.wait(book, name, q, sk, bucket, w, d, held, strict, out)
            return not strict
        elif d.kind == "fit" and d.admission is not None:
            q.remove(w.key)
            admit(book, w, d.admission, self.now, out)
        elif d.kind == "preempt":
            if book.waits.get(w.key, 0) < MAX_WAITS and book.state.fitted_when_loop_began(
                book.state.tree.queues[name], d.need
            ):
                _wait_instead_of_preempting(book, name, bucket, w.key, d, out)
                parking.left_quiet(book, name, sk, first_pass=not self.borrowing)
                return False  # its queue admits nothing else in this cycle
            q.remove(w.key)
            patience.preempt_or_wait(book, w, d, self.now, out)
        else:
            self.park(name, q, sk, bucket, d, aside_ok)
        return True

    def park(
        self, name: str, q: PendingQueue, sk: SortKey, bucket: Bucket, d: Decision, aside_ok: bool
    ) -> None:
        """A failure: parked with what wakes it, its reason told (in the first pass, when it
        would borrow, only after its re-check in the second); a StrictFIFO queue blocks."""
        book, out = self.book, self.out
        assert d.info is not None
        parking.set_wake(book, name, bucket, d, sk)
        if d.retry_at is not None:
            heapq.heappush(book.retries, (d.retry_at, name))
        if d.borrows and aside_ok:
            self.aside[bucket] = d.info  # told after its cheap re-check in the second pass
            q.park(bucket)
            self.deferred.add(name, bucket, True)
        else:
            report(book, q, bucket, d.info, out)
            if name in self.strict:
                q.blocked_at = sk
                tell_those_behind(book, name, bucket, out)
            else:
                q.park(bucket)


def _wait_instead_of_preempting(
    book: Book, name: str, bucket: Bucket, key: str, d: Decision, out: Out
) -> None:
    """A preemptor whose need fitted in what was free when this cycle began (work admitted, or
    quota held for a preemptor, earlier in the cycle took it) waits for the next cycle instead
    of preempting: completions before then may let it in for nothing. Its queue admits nothing
    else in this cycle, so that lower-priority work does not take what it waits for (and become
    its victim next cycle).
    It waits at most `MAX_WAITS` cycles in a row, then preempts if it still must: it cannot
    starve. (Each further wait needs quota freed between two cycles: with no event, the next
    cycle starts without the fit and it preempts at once.)"""
    q = book.pending[name]
    node = book.state.tree.queues[name]
    short = sorted((fr, n, available(node, fr)) for fr, n in d.need.items())
    fr, n, a = next((x for x in short if x[1] > x[2]), short[0])
    info = waiting_for_quota("", name, fr, n, a, why=WAITED)
    # Parked with nothing that wakes it but the next cycle (see `wake_waiting_preemptors`).
    bucket.wake, bucket.avail_at, bucket.need = [], None, None
    bucket.cross = bucket.borrows = bucket.on_release = bucket.topology = False
    bucket.depends, bucket.within, bucket.recheck = (), None, False
    bucket.reclaim_need = None
    bucket.borrowing_helps = False
    q.park(bucket)
    report(book, q, bucket, info, out)
    book.waiting_preemptors[name] = (bucket, key)


def wake_waiting_preemptors(book: Book) -> None:
    before, book.waits = book.waits, {}
    for name, (bucket, key) in book.waiting_preemptors.items():
        book.waits[key] = before.get(key, 0) + 1
        q = book.pending.get(name)
        if q is not None and q.buckets.get(bucket.shape) is bucket:
            q.unpark(bucket)
    book.waiting_preemptors.clear()


def push_head(book: Book, heap: list[tuple[Order, str]], name: str, borrowing: bool) -> None:
    """Put the queue's best unparked workload (if any, and the queue is not blocked) on the heap."""
    q = book.pending[name]
    if not q.heap:
        return  # every bucket parked (the usual case after a turn): no head to look for
    nxt = q.head()
    if nxt is not None and q.blocked_at is None and name not in book.waiting_preemptors:
        heapq.heappush(heap, (order(book, name, nxt[0], borrowing), name))
