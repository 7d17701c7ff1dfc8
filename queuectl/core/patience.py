"""Preemption patience: a would-be preemptor waits for running work to finish first when the
quota it lacks is coming back anyway.

Evicting admitted work throws it away; a scheduler that admits every fit every cycle meets full
cohorts all the time, and would otherwise evict whenever a higher-priority head arrives, even
when completions return what it needs a second later. So a head that would preempt first looks
at how much of each (flavor, resource) its cohort tree got back from finished work in the last
`patience` seconds (or its victims' grace period, when longer: they would take that long to
stop anyway). When that covers what it is short of, it waits instead, at most that long:
everything freed in its tree meanwhile that it can use is held for it (a reservation,
as for a nominated preemptor), before any other queue may take it, and each cycle it is tried
first. It preempts as soon as the recent flow no longer covers its shortfall or its time is up,
so it never waits longer than that and never starves. Slow fleets (hour-long jobs) rarely
see that much quota return in a few seconds, so there it preempts at once, as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from queuectl.core import reasons
from queuectl.core.book import Book, Waiting
from queuectl.core.charges import Charge
from queuectl.core.decision import Decision
from queuectl.core.freedlog import Freed
from queuectl.core.outcomes import Out, nominate, reserve
from queuectl.core.quota import QNode, available
from queuectl.core.results import PendingInfo
from queuectl.core.state import State
from queuectl.core.types import FlavorResource, Workload

DEFAULT_PATIENCE_SECONDS = 5.0
"""How long a would-be preemptor may wait for completions (the controller's and simulate's
default; 0 turns patience off)."""


MAX_ALLOWANCE_SECONDS = 3600.0
"""The longest a grace period lets a waiter wait (and the freed log reach back): a priority
class with a day of grace must not keep a day of per-cycle log entries."""


def record_freed(book: Book, now: float) -> None:
    """Log what finished work returned since the last cycle, and drop what no waiter can look
    back to any more (`Book.freed_keep`)."""
    book.flows.record(now, now - book.freed_keep)


def usable(
    book: Book, node: QNode, now: float, window: float, frs: Iterable[FlavorResource]
) -> Freed:
    """What finished work returned in the last `window` seconds that could reach the queue, per
    (flavor, resource) of `frs`: its tree's whole flow where it may borrow; where its
    borrowingLimit is 0, only its own work's and, while it lends, loans coming home."""
    t = now - window
    root = node.root.name
    tree = book.flows.since(("tree", root), t)
    fenced = [fr for fr in frs if node.borrowing_limit.get(fr) == 0]
    if not fenced:
        return tree
    own = book.flows.since(("queue", node.name), t)
    loans = book.flows.since(("loans", root), t)
    out = dict(tree)
    for fr in fenced:
        lends = node.usage.get(fr, 0) < node.subtree.get(fr, 0)
        out[fr] = own.get(fr, 0) + (loans.get(fr, 0) if lends else 0)
    return out


def allowance(book: Book, d: Decision) -> float:
    """How long it may wait: `patience`, or longer when its victims would take longer than
    that to stop anyway (their grace period): waiting that long for completions instead costs
    the preemptor nothing when they come, and saves the victims' work."""
    grace = 0.0
    for c, _ in d.victims:
        vw = book.state.workloads.get(c.key)
        if vw is not None and vw.preemption_grace_seconds > grace:
            grace = vw.preemption_grace_seconds
    return max(book.patience, min(grace, MAX_ALLOWANCE_SECONDS))


def shortfall(node: QNode, need: dict[FlavorResource, int]) -> dict[FlavorResource, int]:
    """What the queue lacks of `need` right now, per (flavor, resource)."""
    short = {fr: n - available(node, fr) for fr, n in need.items()}
    return {fr: n for fr, n in short.items() if n > 0}


def waits(book: Book, w: Workload, d: Decision, now: float) -> Waiting | None:
    """How the would-be preemptor `w` waits instead of preempting (None: it preempts now)."""
    if book.patience <= 0.0:
        return None
    started = book.patient.get(w.key)
    window = allowance(book, d) if started is None else started.window
    until = started.until if started is not None else now + window
    if now >= until:
        return None
    node = book.state.tree.queues[w.cluster_queue]
    short = shortfall(node, d.need)
    if not short or not _covered(book, node, now, window, short):
        return None
    spec = book.state.queues.get(w.cluster_queue)
    one = spec is not None and all(len(rg.flavors) == 1 for rg in spec.resource_groups)
    victims = tuple(sorted(c.key for c, _ in d.victims))
    wake = book.state.wake
    seen = dict(wake.freed.get(node.root, {}))
    borrows = any(node.borrows(fr, n) for fr, n in d.need.items())
    others = sorted({c.cq for c, _ in d.victims} - {w.cluster_queue})
    released = tuple((q, wake.released.get(q, 0)) for q in others)
    own = _own_usage(node, d.need, _summed(book.state.held_for.get(w.key, ())))
    return Waiting(
        until,
        window,
        victims,
        short,
        dict(d.need),
        one,
        seen,
        borrows,
        released,
        d.retry_at,
        own,
        d.needs_room,
    )


def _across(state: State, node: QNode, victims: tuple[str, ...]) -> bool:
    """Is one of the victims in a queue that meets the waiter's above its own cohort? Then it
    is a victim only while every cohort between still borrows, which work anywhere in that
    branch (finished, stopped, or another preemptor's victim) can change: no shortcut."""
    mine = node.chain
    for key in victims:
        charge = state.charges.get(key)
        owner = state.tree.queues.get(charge.cq) if charge is not None else None
        if owner is not None and owner is not node and owner.parent not in mine:
            return True
    return False


def _own_usage(node: QNode, need: Freed, held_for_it: Freed) -> Freed:
    return {fr: node.usage.get(fr, 0) - held_for_it.get(fr, 0) for fr in need}


def _covered(book: Book, node: QNode, now: float, window: float, short: Freed) -> bool:
    recent = usable(book, node, now, window, short)
    return all(recent.get(fr, 0) >= n for fr, n in short.items())


def keeps_waiting(book: Book, w: Workload, now: float) -> bool:
    """Can a waiter go on waiting without a full evaluation (`assign`, victim search)? Only
    when that would decide the same: its time is not up, no spec or node changed, no protected
    work its victim search met came of age, none of the victims it would take was taken by a
    preemptor or stopped, none of its victims' other
    queues freed quota or holds any for a preemptor (each still borrows what made it a victim;
    lower priority in its own queue stays lower; a victim that stops holds its quota for its
    preemptor and frees nothing in the tree, but its queue's own usage falls), admitting it
    would borrow as before (the same policy applies), its queue admitted nothing more since (at
    its borrowing limit no victim set makes it fit), and
    either nothing was freed in its tree since its last evaluation, or its queue has one flavor
    (so only its `need` can fit it), no bank is configured and it is still short: then it takes
    what was freed of its need, as a full evaluation would hold it. Either way the recent flow
    must still cover its shortfall."""
    waiting = book.patient[w.key]
    state = book.state
    wake = state.wake
    if now >= waiting.until or wake.all_dirty or wake.nodes_dirty:
        return False
    if wake.nodes_freed and waiting.needs_room:
        return False  # freed room may place it, or change which victims free enough
    if waiting.retry_at is not None and now >= waiting.retry_at:
        return False  # protected work came of age: the victim search may answer otherwise
    if any(
        v in state.victim_of or v in state.evicting or v not in state.charges
        for v in waiting.victims
    ):
        return False
    node = state.tree.queues.get(w.cluster_queue)
    if node is None:
        return False
    if _across(state, node, waiting.victims):
        return False  # its victims' branch may have stopped borrowing (`reach`): look again
    if any(wake.released.get(q, 0) != n or q in state.queue_holds for q, n in waiting.released):
        return False  # a victim's queue freed quota or holds some: it may no longer borrow
    held_for_it = _summed(state.held_for.get(w.key, ()))
    if any(node.borrows(fr, n - held_for_it.get(fr, 0)) for fr, n in waiting.need.items()) != (
        waiting.borrows
    ):
        return False  # another preemption policy applies now (e.g. its queue admitted more)
    own = _own_usage(node, waiting.need, held_for_it)
    if any(n > waiting.own.get(fr, 0) for fr, n in own.items()):
        return False  # its queue admitted more: its borrowing limit may now leave no victim set
    freed = wake.freed.get(node.root, {})
    if freed == waiting.seen:  # nothing freed in its tree since it was evaluated
        return _covered(book, node, now, waiting.window, waiting.short)
    if not waiting.one_flavor or state.bank.banks:
        return False  # another flavor may fit now, or GPU time credit changed who may be taken
    free = {fr: max(0, available(node, fr)) for fr in waiting.need}
    short = {fr: n - held_for_it.get(fr, 0) - free[fr] for fr, n in waiting.need.items()}
    short = {fr: n for fr, n in short.items() if n > 0}
    if not short or not _covered(book, node, now, waiting.window, short):
        return False
    more = {fr: min(free[fr], n - held_for_it.get(fr, 0)) for fr, n in waiting.need.items()}
    reserve(book, w, {fr: n for fr, n in more.items() if n > 0}, now, mark=False)
    book.patient[w.key] = waiting._replace(short=short, seen=dict(freed))
    return True


WAIT_PHRASE = "it waits for that instead of preempting"
"""In every waiter's message (`wait_message`); read only by `waits_for_completions`."""


def waits_for_completions(reason: str, message: str) -> bool:
    """Does a pending workload's (reason, message), as the controller wrote them, say that it
    waits for completions instead of preempting? The wording is the core's: it is read here,
    next to where it is written, so no caller matches the core's prose."""
    return reason == reasons.WAITING_FOR_QUOTA and WAIT_PHRASE in message


def wait_message(key: str, waiting: Waiting) -> PendingInfo:
    """Written once: a relative deadline stays true (the clock may be wall or virtual time)."""
    victims = waiting.victims
    return PendingInfo(
        key,
        reasons.WAITING_FOR_QUOTA,
        f"finished work in its cohort returned enough quota recently: {WAIT_PHRASE} "
        f"{len(victims)} workload(s), holding what is freed meanwhile; if it still does not fit "
        f"after {waiting.window:g}s of waiting, it preempts",
        victims=victims,
    )


def preempt_or_wait(
    book: Book, w: Workload, d: Decision, now: float, out: Out, mark: bool = True
) -> None:
    """Nominate the preemptor, or let it wait for completions while holding what is free."""
    waiting = waits(book, w, d, now)
    if waiting is None:
        book.patient.pop(w.key, None)
        book.nominated_info.pop(w.key, None)
        nominate(book, w, d, now, out, mark=mark)
        return
    nominate(book, w, d, now, out, waiting=wait_message(w.key, waiting), mark=mark)
    book.patient[w.key] = waiting


def _summed(charges: Iterable[Charge]) -> Freed:
    total: Freed = {}
    for c in charges:
        for fr, n in c.usage.items():
            total[fr] = total.get(fr, 0) + n
    return total


def lets_go(book: Book, key: str, before: list[Charge]) -> bool:
    """Does `key` now hold (held for it, or admitted) less of some (flavor, resource) than
    `before`?"""
    admitted = book.state.charges.get(key)
    now_held = _summed(
        [*book.state.held_for.get(key, ()), *([admitted] if admitted is not None else [])]
    )
    return any(n > now_held.get(fr, 0) for fr, n in _summed(before).items())


def mark_freed(book: Book, released: list[Charge]) -> None:
    """Quota released unmarked turned out freed for others: mark it so (wakes parked work)."""
    for charge in released:
        book.state.apply(charge, 1, mark=False)
        book.state.apply(charge, -1)
