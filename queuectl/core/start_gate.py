"""Holding candidates back while a gang starts in their flavor (block admission).

The cycle's side of `starting`: a candidate whose decision uses a flavor that a starting
workload holds is parked with reason WaitingForPodsReady instead of being admitted (or
preempting); each cycle wakes the parked ones whose flavors no starting workload holds any
more (it became Ready, was evicted, or finished).
"""

from __future__ import annotations

from queuectl.core import reasons
from queuectl.core.book import Book
from queuectl.core.decision import Decision
from queuectl.core.outcomes import Out, report, tell_those_behind
from queuectl.core.queues import Bucket, PendingQueue, SortKey
from queuectl.core.results import PendingInfo
from queuectl.core.starting import flavors_of, holder
from queuectl.core.types import Workload


def blocker(book: Book, w: Workload, d: Decision) -> tuple[str, str] | None:
    """(flavor, starting workload) that `w` must wait for before `d` may go on; None: none."""
    starts = book.starts
    if not starts.on or not starts.by_flavor:
        return None
    state = book.state
    return holder(starts, state.queues, state.workloads, w.key, needs(d))


def needs(d: Decision) -> frozenset[str]:
    """The flavors a decision would admit its workload into."""
    if d.admission is not None:
        return flavors_of(d.admission)
    return frozenset(f for f, _ in d.need)


def wait(
    book: Book,
    name: str,
    q: PendingQueue,
    sk: SortKey,
    bucket: Bucket,
    w: Workload,
    d: Decision,
    held: tuple[str, str],
    strict: bool,
    out: Out,
) -> None:
    """Park `w`'s bucket until `wake` finds its flavors free of starting workloads; a
    StrictFIFO queue waits whole, as for any head that cannot be admitted."""
    flavor, other = held
    _reset_wake(bucket)
    report(book, q, bucket, waiting_info(w.key, flavor, other), out)
    if strict:
        q.blocked_at = sk
        tell_those_behind(book, name, bucket, out)
    else:
        q.park(bucket)
    book.starts.waiting[name, bucket.shape] = (bucket, w.key, needs(d))


def wake(book: Book) -> None:
    """Unpark the waiting buckets whose flavors no starting workload holds any more."""
    starts = book.starts
    if not starts.waiting:
        return
    state = book.state
    for (name, shape), (bucket, key, flavors) in list(starts.waiting.items()):
        q = book.pending.get(name)
        if q is not None and q.buckets.get(shape) is bucket:
            if holder(starts, state.queues, state.workloads, key, flavors) is not None:
                continue
            q.unpark(bucket)
            q.blocked_at = None
        del starts.waiting[name, shape]


def waiting_info(key: str, flavor: str, other: str) -> PendingInfo:
    return PendingInfo(
        key,
        reasons.WAITING_FOR_PODS_READY,
        f"flavor {flavor} is held until workload {other}'s pods are all Ready (block "
        "admission: one gang at a time starts in a flavor); that workload is evicted if they "
        "are not Ready within its startup timeout",
        flavor=flavor,
    )


def _reset_wake(bucket: Bucket) -> None:
    """Parked with nothing that wakes it but `wake`: quota freed does not help it."""
    bucket.wake, bucket.avail_at, bucket.need = [], None, None
    bucket.cross = bucket.borrows = bucket.on_release = bucket.topology = False
    bucket.depends, bucket.within, bucket.recheck = (), None, False
    bucket.reclaim_need = None
    bucket.borrowing_helps = False
    bucket.signature = None  # the starting workload it names may have changed: tell it again
