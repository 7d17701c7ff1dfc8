"""Why is this workload where it is: the cycle's own reasoning, replayed without side effects."""

from __future__ import annotations

from dataclasses import replace

from queuectl.core import reasons
from queuectl.core.assign import assign
from queuectl.core.book import Book
from queuectl.core.results import Explanation, PendingInfo


def pending_info(s: Book, key: str) -> PendingInfo | None:
    """The last reason known for a pending workload (None if admitted or unknown)."""
    st = s.st
    w = st.workloads.get(key)
    if w is None or key in st.charges:
        return None
    if key in s.nominated_info:
        return s.nominated_info[key]
    if key in s.fresh:
        return s.fresh[key]
    if key in s.inactive:
        return PendingInfo(key, reasons.INACTIVE, "the workload is not active")
    if key in s.waiting_at:
        return PendingInfo(
            key, reasons.PENDING, f"requeued; backing off until {s.waiting_at[key]:.3f}"
        )
    idle = s.idle_reason(w.cluster_queue)
    if idle is not None:
        return replace(idle, key=key)
    q = s.pq.get(w.cluster_queue)
    entry = q.entries.get(key) if q is not None else None
    if q is not None and entry is not None:
        bucket = q.buckets.get(entry[1])
        if bucket is not None and bucket.info is not None:
            return replace(bucket.info, key=key)
    return PendingInfo(key, reasons.PENDING, "not evaluated yet")


def explain(s: Book, key: str, now: float) -> Explanation:
    st = s.st
    st.ensure_tree()
    w = st.workloads.get(key)
    if w is None:
        return Explanation(key, "unknown")
    charge = st.charges.get(key)
    if charge is not None:
        return Explanation(key, "admitted", admission=charge.admission)
    waited = s.patient.get(key)
    if waited is not None:
        # It waits for completions instead of preempting (`patience`): the victims it names are
        # those it would have taken at its last evaluation that still run (one may have
        # finished since, before the next cycle looks again).
        return Explanation(
            key,
            "pending",
            pending=s.nominated_info.get(key),
            preemption_possible=True,
            would_evict=tuple(v for v in waited.victims if v in st.charges),
        )
    if key in s.nominations:
        return Explanation(
            key,
            "nominated",
            pending=s.nominated_info.get(key),
            preemption_possible=True,
            would_evict=tuple(sorted(s.nominations[key])),
        )
    if key in s.inactive:
        return Explanation(key, "inactive", pending=pending_info(s, key))
    info = pending_info(s, key)
    if key in s.waiting_at or (
        info is not None
        and info.reason
        in (
            reasons.CLUSTER_QUEUE_NOT_FOUND,
            reasons.CLUSTER_QUEUE_INACTIVE,
            reasons.CLUSTER_QUEUE_STOPPED,
        )
    ):
        return Explanation(key, "pending", pending=info)
    d = assign(st, w, now)
    if d.kind == "fit":
        message = "fits now: the next cycle admits it unless someone ahead takes the quota first"
        waits = s.waiting_preemptors.get(w.cluster_queue)
        held = _held_by_strict_head(s, w.cluster_queue, key, now)
        if held is not None:
            message = held
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
        waits = s.waiting_preemptors.get(w.cluster_queue)
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
        result = replace(result, holders=s.holders(w.cluster_queue, result.flavor, result.resource))
    return Explanation(key, "pending", pending=result)


def _held_by_strict_head(s: Book, cq: str, key: str, now: float) -> str | None:
    """Why a fitting workload still waits in a StrictFIFO queue: its head does not fit, and
    nothing behind a head that does not fit is admitted (None when that is not the case)."""
    spec = s.st.queues.get(cq)
    q = s.pq.get(cq)
    if spec is None or spec.queueing_strategy != "StrictFIFO" or q is None or key not in q.entries:
        return None
    head = min(q.entries, key=lambda k: q.entries[k][0])
    other = s.st.workloads.get(head)
    if head == key or other is None:
        return None
    d = assign(s.st, other, now)
    if d.kind == "fit":
        return None
    why = d.info.reason if d.info is not None else "it would preempt"
    return (
        f"fits now, but ClusterQueue {cq} is StrictFIFO and its head {head} does not fit "
        f"({why}): nothing behind it is admitted until it is"
    )
