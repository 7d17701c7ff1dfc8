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

from queuectl.core import parking, patience, reasons, start_gate
from queuectl.core.admission_pass import AdmissionPass, wake_waiting_preemptors
from queuectl.core.assign import assign
from queuectl.core.book import Book, Deferred
from queuectl.core.outcomes import Out, admit, report
from queuectl.core.queues import Bucket, PendingQueue, sort_key
from queuectl.core.results import CycleResult, Eviction, PendingInfo


def run_cycle(book: Book, now: float) -> CycleResult:
    book.now = now
    book.state.ensure_tree()
    parking.credit_turned(book, book.state.bank.settle(now, book.state.tree.queues))
    patience.record_freed(book, now)
    out = Out()
    _timers(book, now, out)
    _settle_nominations(book, now, out)
    parking.wake(book)
    wake_waiting_preemptors(book)
    start_gate.wake(book)
    parking.behind_own_work(book)
    parking.carry_over(book, [a.key for a in out.admitted])
    _idle_queues(book, out)
    _admission_loop(book, now, out)
    if book.fresh:
        out.pending.extend(book.fresh[k] for k in sorted(book.fresh))
        book.fresh.clear()
    book.state.bank.observe(book.state.tree.queues)
    return CycleResult(
        admitted=tuple(out.admitted),
        preemptions=tuple(out.preemptions),
        evictions=tuple(out.evictions),
        pending=tuple(out.pending),
        problems=tuple(book.state.tree.problems),
        next_wakeup=_next_wakeup(book),
        evaluated=out.evaluated,
    )


def _timers(book: Book, now: float, out: Out) -> None:
    state = book.state
    while book.waiting and book.waiting[0][0] <= now:
        t, key = heapq.heappop(book.waiting)
        if book.waiting_at.get(key) == t:
            del book.waiting_at[key]
            book.fresh.pop(key, None)
            w = state.workloads[key]
            book.pending.setdefault(w.cluster_queue, PendingQueue()).add(w)
    while book.retries and book.retries[0][0] <= now:
        _, cq = heapq.heappop(book.retries)
        rq = book.pending.get(cq)
        if rq is not None:
            rq.unpark_all()
    while book.deadlines and book.deadlines[0][0] <= now:
        t, key = heapq.heappop(book.deadlines)
        dw = state.workloads.get(key)
        charge = state.charges.get(key)
        if (
            dw is None
            or charge is None
            or dw.max_execution_seconds is None
            or charge.admitted_at + dw.max_execution_seconds != t
            or key in state.evicting
        ):
            continue
        state.evicting.add(key)
        out.evictions.append(
            Eviction(
                key,
                reasons.EVICTED_MAX_EXEC_TIME,
                f"exceeded its maximum execution time of {dw.max_execution_seconds:g}s",
            )
        )
    for name, spec in state.queues.items():
        if spec.stop_policy != "HoldAndDrain":
            continue
        for key in sorted(state.by_cq.get(name, {})):
            if key not in state.evicting and key not in state.victim_of:
                state.evicting.add(key)
                out.evictions.append(
                    Eviction(
                        key,
                        reasons.EVICTED_STOPPED,
                        f"ClusterQueue {name} is stopped (HoldAndDrain)",
                    )
                )


def _settle_nominations(book: Book, now: float, out: Out) -> None:
    """A preemptor whose victims are all gone takes the quota they held, first; so does one
    that waits for completions instead of preempting (`patience`), or it preempts now."""
    state = book.state
    check, book.to_settle = book.to_settle, set()
    state.pooling = True
    try:
        _settle(book, now, out, check)
    finally:
        state.pooling = False
        state.cache.usable_memo.clear()


def _settle(book: Book, now: float, out: Out, check: set[str]) -> None:
    state = book.state
    ready = [
        p
        for p in check
        if p in book.nominations and not any(v in state.charges for v in book.nominations[p])
    ]
    for key in sorted(ready, key=lambda k: sort_key(state.workloads[k])):
        w = state.workloads[key]
        told, waited = book.nominated_info.get(key), book.patient.get(key)
        if waited is not None and patience.keeps_waiting(book, w, now):
            book.to_settle.add(key)  # decided without an evaluation
            continue
        # What a waiter held is released unmarked: parked work is not woken for quota that
        # it takes back at once (admitted, or held again), only when it really lets go (below).
        was_held = book.cancel_nomination(key, mark=waited is None)
        if book.idle_reason(w.cluster_queue) is None:
            out.evaluated += 1
            d = assign(state, w, now)
            if (
                d.kind == "fit"
                and d.admission is not None
                and start_gate.blocker(book, w, d) is None  # else it waits in its queue
            ):
                admit(book, w, d.admission, now, out)
                if waited is not None and patience.lets_go(book, key, was_held):
                    patience.mark_freed(book, was_held)  # admitted in another flavor than it held
                continue
            if d.kind == "preempt" and waited is not None:
                book.patient[key] = waited
                if told is not None:
                    book.nominated_info[key] = told
                patience.preempt_or_wait(book, w, d, now, out, mark=False)
                if patience.lets_go(
                    book, key, was_held
                ):  # held elsewhere now (another flavor): mark it
                    patience.mark_freed(book, was_held)
                continue
            if waited is not None and d.info is not None:
                # It waited for completions and now cannot even preempt: say so at once (its
                # queue may not evaluate it this cycle, e.g. behind a StrictFIFO head).
                out.pending.append(replace(d.info, key=key))
        if waited is not None:
            patience.mark_freed(book, was_held)
        book.enqueue(w)


def _idle_queues(book: Book, out: Out) -> None:
    for name in sorted(book.pending):
        q = book.pending[name]
        if not q.entries:
            continue
        info = book.idle_reason(name)
        if info is not None:
            for bucket in list(q.buckets.values()):
                report(book, q, bucket, info, out)


def _admission_loop(book: Book, now: float, out: Out) -> None:
    """Two passes: first what fits in queues' own quota, then borrowers by fair share.

    A bucket whose best member would borrow (or preempt while borrowing) waits for the second
    pass, while the rest of its queue goes on in the first: the queue's own quota goes to its
    own work before anyone may borrow it (otherwise the owner reclaims it in the next cycle:
    preemptions for nothing). A StrictFIFO queue waits whole, its head first.
    """
    active = [
        name
        for name, q in book.pending.items()
        if q.blocked_at is None and q.entries and book.idle_reason(name) is None
    ]
    strict = {n for n, spec in book.state.queues.items() if spec.queueing_strategy == "StrictFIFO"}
    book.state.begin_loop()
    try:
        aside: dict[Bucket, PendingInfo] = {}
        deferred = AdmissionPass(book, now, out, strict, aside, borrowing=False).run(active)
        deferred.extend(book.set_aside)
        second: dict[str, None] = {}
        # Quiet buckets that would borrow were set aside by their (skipped) turn: their turn
        # in the second pass would change nothing either.
        quiet = {n: [b for b in bs if b.borrows and b.parked] for n, bs in book.quiet.items()}
        for name, bucket, rechecked in deferred:
            if bucket is None:
                second[name] = None
            elif (
                rechecked
                and bucket not in aside
                and name not in book.waiting_preemptors
                and parking.settled(book, name, bucket)
            ):
                quiet.setdefault(name, []).append(bucket)
            else:
                book.pending[name].unpark(bucket, recheck=rechecked)
                second[name] = None
        book.quiet = {n: bs for n, bs in quiet.items() if bs}
        for name in parking.borrowers_to_recheck(book, strict):
            second[name] = None
        AdmissionPass(book, now, out, strict, aside, borrowing=True).run(list(second))
    finally:
        book.quiet, book.set_aside = {}, Deferred()
        book.state.end_loop()


def _next_wakeup(book: Book) -> float | None:
    times = []
    while book.waiting and book.waiting_at.get(book.waiting[0][1]) != book.waiting[0][0]:
        heapq.heappop(book.waiting)
    for h in (book.waiting, book.retries, book.deadlines):
        if h:
            times.append(h[0][0])
    if book.waiting_preemptors:
        times.append(book.now)  # the next cycle decides for them, with or without events
    if book.patient:
        times.append(min(waiting.until for waiting in book.patient.values()))
    # Credit changes who may take from whom (`parking.credit_turned`) and no event says when:
    # a balance running out matters to whoever waits, credit coming in to the queue's own work.
    ledger = book.state.bank
    for name in ledger.banks if ledger.banks and any(book.pending.values()) else ():
        if ledger.has_credit(name) or book.pending.get(name):
            t = ledger.turns(name)
            if t is not None:
                times.append(t)
    return min(times) if times else None
