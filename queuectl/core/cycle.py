"""One admission cycle.

Order of work, each step cheap when nothing happened:
1. time-driven changes: back-offs that ended, protected victims that came of age, workloads past
   their maximum execution time, queues draining (HoldAndDrain);
2. nominated preemptors whose victims are all gone take the quota held for them, before anyone;
3. parked buckets of every cohort tree where quota was freed (or nodes changed) wake up, and
   so do heads that waited instead of preempting in the previous cycle;
4. the admission loop: one heap over the heads of all active queues, ordered by fair share (the
   lowest weighted dominant-resource share first, compared from the top cohort down), then
   priority, then age. Each pop evaluates one workload; the queue's next head goes back on the
   heap. In the borrowing pass, queues with GPU time credit come first (`bank.has_credit`;
   balances are settled once, at the start of the cycle). Within a cycle usage only grows, so
   shares only grow and a stale heap key is simply recomputed and pushed again. The loop runs
   until no queue has a candidate left: a deep queue is drained in one cycle. A head that would
   preempt although it fitted when the loop began (work admitted or quota held earlier in the
   loop took its fit) waits for the next cycle instead, its queue held back meanwhile, at most
   `MAX_WAITS` cycles in a row. Each head's turn is in numbered steps (`admission_pass`).
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from queuectl.core import parking, patience, reasons
from queuectl.core.admission_pass import AdmissionPass, wake_waiting_preemptors
from queuectl.core.assign import assign
from queuectl.core.book import Book, Deferred
from queuectl.core.outcomes import Out, admit, report
from queuectl.core.queues import Bucket, PendingQueue, sort_key
from queuectl.core.results import CycleResult, Eviction, PendingInfo


def run_cycle(s: Book, now: float) -> CycleResult:
    s.now = now
    s.st.ensure_tree()
    parking.credit_turned(s, s.st.bank.settle(now, s.st.tree.queues))
    patience.record_freed(s, now)
    out = Out()
    _timers(s, now, out)
    _settle_nominations(s, now, out)
    parking.wake(s)
    wake_waiting_preemptors(s)
    parking.behind_own_work(s)
    parking.carry_over(s, [a.key for a in out.admitted])
    _idle_queues(s, out)
    _admission_loop(s, now, out)
    if s.fresh:
        out.pending.extend(s.fresh[k] for k in sorted(s.fresh))
        s.fresh.clear()
    s.st.bank.observe(s.st.tree.queues)
    return CycleResult(
        admitted=tuple(out.admitted),
        preemptions=tuple(out.preemptions),
        evictions=tuple(out.evictions),
        pending=tuple(out.pending),
        problems=tuple(s.st.tree.problems),
        next_wakeup=_next_wakeup(s),
        evaluated=out.evaluated,
    )


def _timers(s: Book, now: float, out: Out) -> None:
    st = s.st
    while s.waiting and s.waiting[0][0] <= now:
        t, key = heapq.heappop(s.waiting)
        if s.waiting_at.get(key) == t:
            del s.waiting_at[key]
            s.fresh.pop(key, None)
            w = st.workloads[key]
            s.pq.setdefault(w.cluster_queue, PendingQueue()).add(w)
    while s.retries and s.retries[0][0] <= now:
        _, cq = heapq.heappop(s.retries)
        rq = s.pq.get(cq)
        if rq is not None:
            rq.unpark_all()
    while s.deadlines and s.deadlines[0][0] <= now:
        t, key = heapq.heappop(s.deadlines)
        dw = st.workloads.get(key)
        charge = st.charges.get(key)
        if (
            dw is None
            or charge is None
            or dw.max_execution_seconds is None
            or charge.admitted_at + dw.max_execution_seconds != t
            or key in st.evicting
        ):
            continue
        st.evicting.add(key)
        out.evictions.append(
            Eviction(
                key,
                reasons.EVICTED_MAX_EXEC_TIME,
                f"exceeded its maximum execution time of {dw.max_execution_seconds:g}s",
            )
        )
    for name, spec in st.queues.items():
        if spec.stop_policy != "HoldAndDrain":
            continue
        for key in sorted(st.by_cq.get(name, {})):
            if key not in st.evicting and key not in st.victim_of:
                st.evicting.add(key)
                out.evictions.append(
                    Eviction(
                        key,
                        reasons.EVICTED_STOPPED,
                        f"ClusterQueue {name} is stopped (HoldAndDrain)",
                    )
                )


def _settle_nominations(s: Book, now: float, out: Out) -> None:
    """A preemptor whose victims are all gone takes the quota they held, first; so does one
    that waits for completions instead of preempting (`patience`), or it preempts now."""
    st = s.st
    check, s.to_settle = s.to_settle, set()
    st.pooling = True
    try:
        _settle(s, now, out, check)
    finally:
        st.pooling = False
        st.cache.usable_memo.clear()


def _settle(s: Book, now: float, out: Out, check: set[str]) -> None:
    st = s.st
    ready = [
        p
        for p in check
        if p in s.nominations and not any(v in st.charges for v in s.nominations[p])
    ]
    for key in sorted(ready, key=lambda k: sort_key(st.workloads[k])):
        w = st.workloads[key]
        told, waited = s.nominated_info.get(key), s.patient.get(key)
        if waited is not None and patience.keeps_waiting(s, w, now):
            s.to_settle.add(key)  # decided without an evaluation
            continue
        # What a waiter held is released unmarked: parked work is not woken for quota that
        # it takes back at once (admitted, or held again), only when it really lets go (below).
        held = s.cancel_nomination(key, mark=waited is None)
        if s.idle_reason(w.cluster_queue) is None:
            out.evaluated += 1
            d = assign(st, w, now)
            if d.kind == "fit" and d.admission is not None:
                admit(s, w, d.admission, now, out)
                if waited is not None and patience.lets_go(s, key, held):
                    patience.mark_freed(s, held)  # admitted in another flavor than it held
                continue
            if d.kind == "preempt" and waited is not None:
                s.patient[key] = waited
                if told is not None:
                    s.nominated_info[key] = told
                patience.preempt_or_wait(s, w, d, now, out, mark=False)
                if patience.lets_go(s, key, held):  # held elsewhere now (another flavor): mark it
                    patience.mark_freed(s, held)
                continue
            if waited is not None and d.info is not None:
                # It waited for completions and now cannot even preempt: say so at once (its
                # queue may not evaluate it this cycle, e.g. behind a StrictFIFO head).
                out.pending.append(replace(d.info, key=key))
        if waited is not None:
            patience.mark_freed(s, held)
        s.enqueue(w)


def _idle_queues(s: Book, out: Out) -> None:
    for name in sorted(s.pq):
        q = s.pq[name]
        if not q.entries:
            continue
        info = s.idle_reason(name)
        if info is not None:
            for bucket in list(q.buckets.values()):
                report(s, q, bucket, info, out)


def _admission_loop(s: Book, now: float, out: Out) -> None:
    """Two passes: first what fits in queues' own quota, then borrowers by fair share.

    A bucket whose best member would borrow (or preempt while borrowing) waits for the second
    pass, while the rest of its queue goes on in the first: the queue's own quota goes to its
    own work before anyone may borrow it (otherwise the owner reclaims it in the next cycle:
    preemptions for nothing). A StrictFIFO queue waits whole, its head first.
    """
    active = [
        name
        for name, q in s.pq.items()
        if q.blocked_at is None and q.entries and s.idle_reason(name) is None
    ]
    strict = {n for n, spec in s.st.queues.items() if spec.queueing_strategy == "StrictFIFO"}
    s.st.begin_loop()
    try:
        aside: dict[Bucket, PendingInfo] = {}
        deferred = AdmissionPass(s, now, out, strict, aside, borrowing=False).run(active)
        deferred.extend(s.set_aside)
        second: dict[str, None] = {}
        # Quiet buckets that would borrow were set aside by their (skipped) turn: their turn
        # in the second pass would change nothing either.
        quiet = {n: [b for b in bs if b.borrows and b.parked] for n, bs in s.quiet.items()}
        for name, bucket, rechecked in deferred:
            if bucket is None:
                second[name] = None
            elif (
                rechecked
                and bucket not in aside
                and name not in s.waiting_preemptors
                and parking.settled(s, name, bucket)
            ):
                quiet.setdefault(name, []).append(bucket)
            else:
                s.pq[name].unpark(bucket, recheck=rechecked)
                second[name] = None
        s.quiet = {n: bs for n, bs in quiet.items() if bs}
        for name in parking.borrowers_to_recheck(s, strict):
            second[name] = None
        AdmissionPass(s, now, out, strict, aside, borrowing=True).run(list(second))
    finally:
        s.quiet, s.set_aside = {}, Deferred()
        s.st.end_loop()


def _next_wakeup(s: Book) -> float | None:
    times = []
    while s.waiting and s.waiting_at.get(s.waiting[0][1]) != s.waiting[0][0]:
        heapq.heappop(s.waiting)
    for h in (s.waiting, s.retries, s.deadlines):
        if h:
            times.append(h[0][0])
    if s.waiting_preemptors:
        times.append(s.now)  # the next cycle decides for them, with or without events
    if s.patient:
        times.append(min(waiting.until for waiting in s.patient.values()))
    # Credit changes who may take from whom (`parking.credit_turned`) and no event says when:
    # a balance running out matters to whoever waits, credit coming in to the queue's own work.
    ledger = s.st.bank
    for name in ledger.banks if ledger.banks and any(s.pq.values()) else ():
        if ledger.has_credit(name) or s.pq.get(name):
            t = ledger.turns(name)
            if t is not None:
                times.append(t)
    return min(times) if times else None
