"""What a decision does: the cycle's output lists, telling a bucket its reason, admitting,
and nominating a preemptor (holding its quota, telling its victims)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from queuectl.core import reasons
from queuectl.core.book import Book
from queuectl.core.charges import Charge, charge_for
from queuectl.core.decision import Decision
from queuectl.core.queues import Bucket, PendingQueue
from queuectl.core.quota import available
from queuectl.core.results import Admitted, Eviction, PendingInfo, Preemption
from queuectl.core.starting import flavors_of
from queuectl.core.types import Admission, FlavorResource, Workload


@dataclass(slots=True)
class Out:
    admitted: list[Admitted] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    pending: list[PendingInfo] = field(default_factory=list)
    evaluated: int = 0


def report(book: Book, q: PendingQueue, bucket: Bucket, info: PendingInfo, out: Out) -> None:
    """Tell every member of the bucket whose reason changed (or who never heard it)."""
    sig = (info.reason, info.flavor, info.resource)
    if sig != bucket.signature:
        keys = q.members(bucket)
        bucket.signature = sig
    else:
        keys = sorted(bucket.unreported)
    bucket.unreported.clear()
    if keys and info.flavor is not None and info.resource is not None and not info.holders:
        cq = book.state.workloads[keys[0]].cluster_queue
        info = replace(info, holders=book.holders(cq, info.flavor, info.resource))
    bucket.info = info
    i = info
    out.pending.extend(
        PendingInfo(
            k,
            i.reason,
            i.message,
            i.resource,
            i.flavor,
            i.requested,
            i.available,
            i.shortfall,
            i.holders,
            i.victims,
        )
        for k in keys
    )


def tell_those_behind(book: Book, name: str, head: Bucket, out: Out) -> None:
    """A StrictFIFO queue's head does not fit: the rest of the queue is not evaluated, so tell
    its other members why they wait (once: `report` tells only a changed reason)."""
    q = book.pending[name]
    behind = PendingInfo(
        "",
        reasons.PENDING,
        f"ClusterQueue {name} is StrictFIFO and a workload ahead of this one does not fit: "
        "nothing behind it is admitted until it is (`queuectl describe` names it)",
    )
    for bucket in list(q.buckets.values()):
        if bucket is not head:
            report(book, q, bucket, behind, out)


def admit(book: Book, w: Workload, admission: Admission, now: float, out: Out) -> None:
    book.state.admit(charge_for(w, admission, now, book.state.flavors))
    starting = book.starts.on  # then starting until the controller feeds its PodsReady
    if starting:
        book.starts.note(w.key, flavors_of(admission))
    book.state.workloads[w.key] = replace(
        w, admission=admission, admitted_at=now, starting=starting
    )
    book.track_deadline(w.key)
    out.admitted.append(Admitted(w.key, admission))


def nominate(
    book: Book,
    w: Workload,
    d: Decision,
    now: float,
    out: Out,
    waiting: PendingInfo | None = None,
    mark: bool = True,
) -> None:
    """Tell the victims, and hold for the preemptor the free part of what it needs.

    `waiting`: it waits for completions instead (`patience`): nothing is preempted yet, the free
    part is held all the same, and this is its reason (told only when it changed). `mark=False`:
    it held at least as much until just now (`State.hold`).

    The victims' part is held by keeping them counted (then in `State.held_for`) until the
    preemptor is admitted; the part that is free right now is held by a reservation charged to
    its queue, so that nobody admitted in between can take it. Per (flavor, resource) the
    reservation is at most what is available, so it never breaks a limit.
    """
    state = book.state
    victims = [] if waiting is not None else d.victims
    keys = sorted(c.key for c, _ in victims)
    book.nominate(w.key, set(keys))
    state.claims[w.key] = (w.cluster_queue, dict(d.need))
    node = state.tree.queues[w.cluster_queue]
    free_now = {fr: min(n, available(node, fr)) for fr, n in d.need.items()}
    reserve(book, w, {fr: n for fr, n in free_now.items() if n > 0}, now, mark)
    for c, reason in sorted(victims, key=lambda v: v[0].key):
        state.mark_victim(c, w.key)
        vw = state.workloads.get(c.key)
        grace = vw.preemption_grace_seconds if vw is not None else 0.0
        out.preemptions.append(
            Preemption(
                c.key,
                w.key,
                reason,
                f"preempted to make room for {w.key} (priority {w.priority}) in ClusterQueue "
                f"{w.cluster_queue}: {_why(reason)}",
                deadline=now + grace,
            )
        )
    before = book.nominated_info.get(w.key)
    info = waiting or PendingInfo(
        w.key,
        reasons.WAITING_FOR_PREEMPTED,
        f"waiting for {len(keys)} preempted workload(s) to stop: {', '.join(keys)}",
        victims=tuple(keys),
    )
    book.nominated_info[w.key] = info
    if info != before:
        out.pending.append(info)


def reserve(
    book: Book, w: Workload, usage: dict[FlavorResource, int], now: float, mark: bool
) -> None:
    """Hold `usage` (free right now) for the preemptor `w`: charged to its queue, so that
    nobody admitted in between can take it."""
    if not usage:
        return
    reservation = Charge(
        key=f"{w.key}#reserved",
        cq=w.cluster_queue,
        usage=usage,
        nodes={},
        priority=w.priority,
        created=w.created,
        admitted_at=now,
        min_runtime=0.0,
        admission=Admission(w.cluster_queue, ()),
    )
    book.state.hold(w.key, reservation, counted=False, mark=mark)


def _why(reason: str) -> str:
    return {
        reasons.PREEMPTED_WITHIN_CQ: "lower priority in the same ClusterQueue",
        reasons.PREEMPTED_RECLAIM: "its ClusterQueue borrows quota the preemptor's queue reclaims",
        reasons.PREEMPTED_BORROW: "lower priority, and the preemptor may borrow over it",
        reasons.PREEMPTED_CREDIT: "its ClusterQueue borrows without GPU time credit, and the "
        "preemptor's queue borrows with credit",
        reasons.PREEMPTED_FAIR: "its ClusterQueue's share of the borrowed quota stays at least "
        "the preemptor's (fair sharing)",
    }[reason]
