"""Parking: when a bucket of pending workloads that did not fit is worth another look.

A cycle must not re-evaluate thousands of workloads whose answer cannot have changed. A bucket
that failed records what would have to change (`set_wake`); events mark cohort trees dirty;
`wake` unparks the buckets those events could help; `still_short` answers "certainly no" for
a woken one-pod-set bucket without a full evaluation.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from functools import partial

from queuectl.core.book import Book
from queuectl.core.decision import Decision
from queuectl.core.queues import Bucket, SortKey, stops_borrowing, woken_by_growth
from queuectl.core.quota import available

REFRESH_SECONDS = 30.0
"""A parked bucket's reason keeps the figures of its last full evaluation while its queue's
releases cannot change its answer (`released_matters`), but never longer than this: a release
then evaluates it in full all the same."""


def wake(book: Book) -> None:
    """Unpark the buckets that what changed since the last wake (`State.wake`) could help."""
    state = book.state
    notes = state.wake
    if notes.all_dirty:
        for q in book.pending.values():
            q.unpark_all()
    else:
        roots = notes.dirty_roots | notes.borrowed.keys()
        for name in notes.admitted_low:
            root = state.root_of(name)
            if root is not None:
                roots.add(root)
        for root in roots:
            freed = notes.freed.get(root, {})
            borrowed = notes.borrowed.get(root, set())
            grown = notes.grown.get(root, set())
            for leaf in state.tree.leaves.get(root, ()):
                lq = book.pending.get(leaf.name)
                if lq is None:
                    continue
                owed = lq.unpark_freed(
                    freed,
                    borrowed,
                    notes.admitted_low.get(leaf.name),
                    grown,
                    leaf.name in notes.released_since,
                    notes.taken.get(leaf.name, 0),
                    partial(released_matters, book, leaf.name),
                )
                quiet_ok = owed and may_stay_quiet(book, leaf.name)
                for bucket in owed:
                    if quiet_ok and settled(book, leaf.name, bucket):
                        book.quiet.setdefault(leaf.name, []).append(bucket)
                    elif quiet_ok and set_aside_now(book, leaf.name, bucket):
                        book.set_aside.add(leaf.name, bucket, True)
                    else:
                        lq.unpark(bucket, recheck=True)
        if notes.nodes_dirty or notes.nodes_freed:
            for q in book.pending.values():
                q.unpark_all(topology_only=True)
    notes.woken()


def behind_own_work(book: Book) -> None:
    """After `wake` (and the heads that waited are back): a parked bucket that would gain
    candidates by borrowing (`Bucket.borrowing_helps`) is unparked, its cheap re-check owed,
    when its queue has unparked work ahead of it. A fresh evaluation takes its turn after that
    work, which the first pass may admit within the queue's own quota first: then it would
    borrow, and may preempt in the borrowing pass in this very cycle (`still_short` sees the
    growth through `WakeNotes.taken`). With nothing unparked ahead, its turn comes before any
    admission of its queue and could only fail as before; later growth wakes it in `wake`."""
    for name in list(book.borrowing_helps):
        q = book.pending.get(name)
        flagged = [b for b in q.buckets.values() if b.borrowing_helps] if q is not None else []
        if q is None or not flagged:
            book.borrowing_helps.discard(name)
            continue
        head = q.head()
        if head is None:
            continue
        for bucket in flagged:
            key = q.head_key(bucket) if bucket.parked else None
            if key is not None and head[0] < key:
                q.unpark(bucket, recheck=True)


def borrowing_helps(book: Book, cq: str) -> bool:
    """Could a workload of this queue that fails without borrowing gain preemption candidates
    by borrowing? A borrower takes from other queues' borrowed work under borrowWithinCohort,
    and with GPU time credit (reclaim not Never) also work of its own priority from queues
    without credit; a queue within its quota takes what reclaimWithinCohort allows. Only where
    the first set is not contained in the second: reclaim Never with a borrowWithinCohort
    policy, or reclaim LowerPriority with a bank. Elsewhere growth of its own usage, which
    only lowers what it could take, cannot turn a "no" into a "yes"."""
    state = book.state
    spec = state.queues[cq]
    if state.tree.queues[cq].parent is None:
        return False
    policy = spec.preemption
    if policy.reclaim_within_cohort == "Never":
        return policy.borrow_within_cohort.policy != "Never"
    return policy.reclaim_within_cohort == "LowerPriority" and spec.gpu_time_bank is not None


def may_stay_quiet(book: Book, cq: str) -> bool:
    """May a bucket of this queue whose re-check cannot but fail be left parked? Not in a
    StrictFIFO queue (it stops whole in the first pass) nor an idle one (never looked at)."""
    spec = book.state.queues.get(cq)
    return (
        spec is not None and spec.queueing_strategy != "StrictFIFO" and book.idle_reason(cq) is None
    )


def settled(book: Book, cq: str, bucket: Bucket) -> bool:
    """Would `still_short` answer "yes" for this parked bucket at any later point of this
    cycle's admission loop? Then its turn would change nothing, and it stays parked
    (`Book.quiet`). Sure only when nothing the loop does can change the answer: inside the
    loop availability only shrinks and its queue frees nothing, so it must be short now
    without the help of "more available than when parked" (which new borrowing can revive
    through `hopeless`), and neither new borrowing (`cross`) nor usage growth (`depends`) may
    wake it, nor may its own queue have taken more since it failed without borrowing
    (`borrowing_helps`: it may borrow now); and it must have nothing to tell (new members hear
    their reason at its turn)."""
    avail_at, need = bucket.avail_at, bucket.need
    state = book.state
    if (
        avail_at is None
        or need is None
        or bucket.unreported
        or bucket.cross
        or bucket.depends
        or _released(book, cq, bucket)
        or (bucket.borrowing_helps and state.wake.taken.get(cq, 0) != bucket.taken_at)
    ):
        return False
    node = state.tree.queues[cq]
    for fr, a in avail_at.items():
        now = available(node, fr)
        if now >= need[fr] or now > a:
            return False
    return True


def set_aside_now(book: Book, cq: str, bucket: Bucket) -> bool:
    """Would its first-pass turn only set it aside for the borrowing pass, re-check owed?
    Sure when it would borrow: then a "still short" answer sets it aside as certainly as
    `certainly_borrows` does (which holds for the whole loop), and it has nothing to tell."""
    return bucket.borrows and not bucket.unreported and certainly_borrows(book, cq, bucket)


def sweep(book: Book, cq: str, aside: Mapping[Bucket, object]) -> None:
    """Borrowing pass, before the queue's next head is looked for: park (quietly) its buckets
    owed a re-check that is now sure to say "still short" (`settled`), as their turns would
    (nothing is set aside in this pass). Borrowers that went before took the freed quota that
    woke them; this saves each its turn on the cycle's heap."""
    q = book.pending[cq]
    for bucket in q.buckets.values():
        if (
            not bucket.parked
            and bucket.recheck
            and bucket not in aside
            and settled(book, cq, bucket)
        ):
            bucket.recheck = False
            q.park(bucket)
            book.quiet.setdefault(cq, []).append(bucket)


def left_quiet(book: Book, cq: str, waiting: SortKey, first_pass: bool) -> None:
    """Its queue stops for this cycle at the head `waiting` (it waits instead of preempting):
    the buckets left parked because their turn would change nothing end as that turn would
    have left them. A turn not reached leaves a bucket unparked, re-check owed; in the first
    pass one that would borrow is unparked anyway (set aside for the borrowing pass, which
    never reaches a waiting queue)."""
    q = book.pending[cq]
    for bucket in book.quiet.pop(cq, ()):
        if not bucket.parked or q.buckets.get(bucket.shape) is not bucket:
            continue
        head = q.head_key(bucket)
        if (first_pass and bucket.borrows) or (head is not None and head > waiting):
            q.unpark(bucket, recheck=True)


def carry_over(book: Book, admitted: list[str]) -> None:
    """Work admitted before `wake` in this cycle becomes a preemption candidate only in the next
    one: mark it again so that the next `wake` looks at the buckets it may help."""
    state = book.state
    for key in admitted:
        charge = state.charges.get(key)
        node = state.tree.queues.get(charge.cq) if charge is not None else None
        if charge is not None and node is not None:
            state.note_new_work(node, charge)


def borrowers_to_recheck(book: Book, strict: set[str]) -> list[str]:
    """Before the borrowing pass: parked buckets that would borrow and whose answer borrowing
    in this cycle may change (new victims, or a flavor taken from them) get the cheap re-check
    there, as if evaluated again in the first pass; returns their queues."""
    names = []
    for name, q in book.pending.items():
        if name in strict:
            continue
        woken = False
        for bucket in q.buckets.values():
            if bucket.parked and bucket.borrows and (bucket.cross or bucket.depends):
                q.unpark(bucket, recheck=True)
                woken = True
        if woken:
            names.append(name)
    return names


def set_wake(book: Book, cq: str, bucket: Bucket, d: Decision, head: SortKey) -> None:
    """Remember what must happen before this bucket is worth another look."""
    state = book.state
    bucket.topology = d.topology
    node = state.tree.queues[cq]
    root = node.root
    freed = state.wake.freed.get(root, {})
    # With candidates to preempt, any freed amount of a short (flavor, resource) may be enough
    # together with them; without, only the whole shortfall is.
    bucket.wake = [(fr, freed.get(fr, 0) + (short if d.hopeless else 1)) for fr, short in d.shorts]
    bucket.cross = bool(d.shorts) and d.cross
    bucket.depends = tuple(dict.fromkeys(d.depends))
    bucket.on_release = d.reclaim_within
    bucket.reclaim_need = dict(d.need) if d.reclaim_within and d.need else None
    bucket.evaluated_at = book.now
    bucket.borrows = d.borrows
    policy = state.queues[cq].preemption.within_cluster_queue
    bucket.within = None
    bucket.borrowing_helps = (
        not d.borrows and (bool(d.shorts) or d.topology) and borrowing_helps(book, cq)
    )
    if bucket.borrowing_helps:
        bucket.taken_at = state.wake.taken.get(cq, 0)
        book.borrowing_helps.add(cq)
    if d.shorts and policy != "Never":
        bucket.within = -head[0] - (1 if policy == "LowerPriority" else 0)
    bucket.avail_at = None
    bucket.must_borrow = False
    if d.shorts and not d.topology and isinstance(bucket.shape, tuple) and len(bucket.shape) == 1:
        # One pod set: each short (flavor, resource) needs a fixed amount, so while none of
        # them is more available than now (and nothing else woke it) the answer stays "no".
        bucket.avail_at = {fr: available(node, fr) for fr, _ in d.shorts}
        bucket.need = {fr: short + max(0, bucket.avail_at[fr]) for fr, short in d.shorts}
        bucket.hopeless = d.hopeless
        bucket.epoch_at = state.wake.borrow_epoch.get(root, 0)
        bucket.released_at = state.wake.released.get(cq, 0)
        bucket.must_borrow = _must_borrow(book, cq, bucket.shape[0])


def _must_borrow(book: Book, cq: str, podset: Hashable) -> bool:
    """Would every flavor of some resource group take it beyond its queue's own quota? That
    stays true while the queue frees nothing (its usage only grows) and no spec changes."""
    state = book.state
    node, spec, covering = state.tree.queues[cq], state.queues[cq], state.tree.covering[cq]
    count, requests = podset[0], podset[1]  # type: ignore[index]
    totals = {r: v * count for r, v in requests if v > 0}
    usage, quota = node.usage, node.subtree
    for gi, group in enumerate(spec.resource_groups):
        rs = [r for r in totals if covering.get(r) == gi]
        if not rs:
            continue
        for fq in group.flavors:  # every flavor must borrow (`QNode.borrows`, spelled out)
            f = fq.name
            if not any(usage.get((f, r), 0) + totals[r] > quota.get((f, r), 0) for r in rs):
                break
        else:
            return True
    return False


def certainly_borrows(book: Book, cq: str, bucket: Bucket) -> bool:
    """A woken bucket whose admission would borrow for sure: the first pass need not evaluate
    it, it waits for the borrowing pass (with its cheap re-check still owed)."""
    return bucket.must_borrow and book.state.wake.released.get(cq, 0) == bucket.released_at


def still_short(book: Book, cq: str, bucket: Bucket) -> bool:
    """Is the parked answer certainly unchanged? (Then it needs no full evaluation.)

    Every flavor it tried is still short of its recorded (flavor, resource), nothing of its own
    queue was freed (it might stop borrowing and so reclaim), and either no short amount is more
    available than when it was parked, or no victim was a candidate then and no queue of the
    tree has started borrowing since.
    """
    state = book.state
    avail_at, need = bucket.avail_at, bucket.need
    if avail_at is None or need is None or _released(book, cq, bucket):
        return False
    if bucket.borrowing_helps and state.wake.taken.get(cq, 0) != bucket.taken_at:
        return False  # its queue took more: it may borrow now, with other candidates
    node = state.tree.queues[cq]
    # What `wake` would have woken it for, had it happened before this cycle's wake: a queue
    # that newly borrows what it is short of (its older work may be reclaimed now; work
    # admitted in this cycle is nobody's victim before the next one), or a flavor it chose
    # for one part that someone else now uses.
    if (bucket.cross or bucket.depends) and woken_by_growth(
        bucket, state.wake.borrowed.get(node.root), state.wake.grown.get(node.root)
    ):
        return False
    hopeless = bucket.hopeless and state.wake.borrow_epoch.get(node.root, 0) == bucket.epoch_at
    for fr, a in avail_at.items():
        now = available(node, fr)
        if now >= need[fr] or (now > a and not hopeless):
            return False
    return True


def released_matters(book: Book, cq: str, bucket: Bucket) -> bool:
    """Its queue freed quota of its own since it was parked: is it worth a full evaluation?

    What its own queue frees changes its answer only by ending its borrowing where it could
    then reclaim within its own quota (`on_release`: reclaimWithinCohort, not
    borrowWithinCohort, picks its candidates), so only once its need no longer borrows
    (`reclaim_need`); otherwise a release raises what it may take (the re-check compares
    availability itself) or removes its own work (fewer candidates in its queue, never more).
    (`certainly_borrows` keeps its own check: any release voids it.) Its reason's figures are
    refreshed all the same while members wait to be told it, and once they are
    `REFRESH_SECONDS` old."""
    if bucket.unreported or book.now - bucket.evaluated_at >= REFRESH_SECONDS:
        return True
    need = bucket.reclaim_need
    return need is not None and stops_borrowing(book.state.tree.queues[cq], need)


def _released(book: Book, cq: str, bucket: Bucket) -> bool:
    """Did its queue free quota since it was parked, in a way that may change its answer?"""
    return book.state.wake.released.get(cq, 0) != bucket.released_at and released_matters(
        book, cq, bucket
    )


def credit_turned(book: Book, names: set[str]) -> None:
    """GPU time credit changed sign for these queues (`Ledger.settle`). Credit decides who may
    take from whom (`preempt.search`): a queue that gained it may, when it must borrow, take
    borrowed work from queues without credit, so its parked buckets are looked at again; the
    borrowed work of a queue that lost it becomes a candidate for those with credit, which
    wakes parked work as new borrowing does (it may give a hopeless bucket candidates)."""
    state = book.state
    for name in sorted(names):
        node = state.tree.queues.get(name)
        if node is None:
            continue
        if state.bank.has_credit(name):
            q = book.pending.get(name)
            if q is not None:
                q.unpark_all()
            continue
        borrowed = {fr for fr in node.usage if node.borrows(fr)}
        if borrowed:
            root = node.root
            state.wake.borrowed.setdefault(root, set()).update(borrowed)
            state.wake.borrow_epoch[root] = state.wake.borrow_epoch.get(root, 0) + 1
