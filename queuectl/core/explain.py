"""Why is this workload where it is: the cycle's own reasoning, replayed without side effects."""

from __future__ import annotations

from dataclasses import replace

from queuectl.core import reasons, start_gate
from queuectl.core.assign import assign
from queuectl.core.book import Book
from queuectl.core.results import Explanation, PendingInfo


def pending_info(book: Book, key: str) -> PendingInfo | None:
    """The last reason known for a pending workload (None if admitted or unknown)."""
    state = book.state
    w = state.workloads.get(key)
    if w is None or key in state.charges:
        return None
    if key in book.nominated_info:
        return book.nominated_info[key]
    if key in book.fresh:
        return book.fresh[key]
    if key in book.inactive:
        return PendingInfo(key, reasons.INACTIVE, "the workload is not active")
    if key in book.waiting_at:
        return PendingInfo(
            key, reasons.PENDING, f"requeued; backing off until {book.waiting_at[key]:.3f}"
        )
    idle = book.idle_reason(w.cluster_queue)
    if idle is not None:
        return replace(idle, key=key)
    q = book.pending.get(w.cluster_queue)
    entry = q.entries.get(key) if q is not None else None
    if q is not None and entry is not None:
        bucket = q.buckets.get(entry[1])
        if bucket is not None and bucket.info is not None:
            return replace(bucket.info, key=key)
    return PendingInfo(key, reasons.PENDING, "not evaluated yet")


def explain(book: Book, key: str, now: float) -> Explanation:
    state = book.state
    state.ensure_tree()
    w = state.workloads.get(key)
    if w is None:
        return Explanation(key, "unknown")
    charge = state.charges.get(key)
    if charge is not None:
        return Explanation(key, "admitted", admission=charge.admission)
    waited = book.patient.get(key)
    if waited is not None:
        # It waits for completions instead of preempting (`patience`): the victims it names are
        # those it would have taken at its last evaluation that still run (one may have
        # finished since, before the next cycle looks again).
        return Explanation(
            key,
            "pending",
            pending=book.nominated_info.get(key),
            preemption_possible=True,
            would_evict=tuple(v for v in waited.victims if v in state.charges),
        )
    if key in book.nominations:
        return Explanation(
            key,
            "nominated",
            pending=book.nominated_info.get(key),
            preemption_possible=True,
            would_evict=tuple(sorted(book.nominations[key])),
        )
    if key in book.inactive:
        return Explanation(key, "inactive", pending=pending_info(book, key))
    info = pending_info(book, key)
    if key in book.waiting_at or (
        info is not None
        and info.reason
        in (
            reasons.CLUSTER_QUEUE_NOT_FOUND,
            reasons.CLUSTER_QUEUE_INACTIVE,
            reasons.CLUSTER_QUEUE_STOPPED,
        )
    ):
        return Explanation(key, "pending", pending=info)
    d = assign(state, w, now)
    held = start_gate.blocker(book, w, d) if d.kind != "fail" else None
    if held is not None:  # it fits (or would preempt), but a gang starts in its flavor
        return Explanation(key, "pending", pending=start_gate.waiting_info(key, *held))
    if d.kind == "fit":
        message = "fits now: the next cycle admits it unless someone ahead takes the quota first"
        waits = book.waiting_preemptors.get(w.cluster_queue)
        strict_wait = _held_by_strict_head(book, w.cluster_queue, key, now)
        if strict_wait is not None:
            message = strict_wait
        elif waits is not None and waits[1] != key:
            # The cycle holds its queue back while the head waits instead of preempting (so
            # that this workload does not take the quota the head waits for and become its
            # victim).
            message = (
                f"fits now, but {waits[1]} ahead of it in ClusterQueue {w.cluster_queue} waits "
                "for quota instead of preempting, and the queue admits nothing else until it "
                "is admitted or preempts"
            )
        return Explanation(
            key,
            "pending",
            pending=PendingInfo(key, reasons.PENDING, message),
            admission=d.admission,
        )
    if d.kind == "preempt":
        victims = tuple(sorted(c.key for c, _ in d.victims))
        waits = book.waiting_preemptors.get(w.cluster_queue)
        if waits is not None and waits[1] == key and info is not None:
            # The cycle let it wait instead of preempting (`admission_pass.MAX_WAITS`): say so,
            # and what the next cycle does if the quota it waits for is still taken then.
            return Explanation(
                key,
                "pending",
                pending=replace(
                    info,
                    message=f"{info.message}; if it still does not fit then, it preempts "
                    f"{len(victims)} workload(s): {', '.join(victims)}",
                    victims=victims,
                ),
                preemption_possible=True,
                would_evict=victims,
            )
        return Explanation(
            key,
            "pending",
            pending=PendingInfo(
                key,
                reasons.PENDING,
                f"fits by preempting {len(victims)} workload(s): {', '.join(victims)}",
                victims=victims,
            ),
            preemption_possible=True,
            would_evict=victims,
        )
    assert d.info is not None
    result = d.info
    if result.flavor is not None and result.resource is not None:
        result = replace(
            result, holders=book.holders(w.cluster_queue, result.flavor, result.resource)
        )
    return Explanation(key, "pending", pending=result)


def _held_by_strict_head(book: Book, cq: str, key: str, now: float) -> str | None:
    """Why a fitting workload still waits in a StrictFIFO queue: its head does not fit, and
    nothing behind a head that does not fit is admitted (None when that is not the case)."""
    spec = book.state.queues.get(cq)
    q = book.pending.get(cq)
    if spec is None or spec.queueing_strategy != "StrictFIFO" or q is None or key not in q.entries:
        return None
    head = min(q.entries, key=lambda k: q.entries[k][0])
    other = book.state.workloads.get(head)
    if head == key or other is None:
        return None
    d = assign(book.state, other, now)
    if d.kind == "fit":
        return None
    why = d.info.reason if d.info is not None else "it would preempt"
    return (
        f"fits now, but ClusterQueue {cq} is StrictFIFO and its head {head} does not fit "
        f"({why}): nothing behind it is admitted until it is"
    )
