"""Preemption patience: a would-be preemptor waits for running work to finish first when the
quota it lacks is coming back anyway.

Evicting admitted work throws it away; a scheduler that admits every fit every cycle meets full
cohorts all the time, and would otherwise evict whenever a higher-priority head arrives, even
when completions return what it needs a second later. So a head that would preempt first looks
at how much of each (flavor, resource) its cohort tree got back from finished work in the last
`patience` seconds. When that covers what it is short of, it waits instead, at most `patience`
seconds: everything freed in its tree meanwhile that it can use is held for it (a reservation,
as for a nominated preemptor), before any other queue may take it, and each cycle it is tried
first. It preempts as soon as the recent flow no longer covers its shortfall or its time is up,
so it never waits longer than `patience` and never starves. Slow fleets (hour-long jobs) rarely
see that much quota return in a few seconds, so there it preempts at once, as before.
"""

from __future__ import annotations

from collections import deque

from queuectl.core import reasons
from queuectl.core.book import Book, Freed
from queuectl.core.decision import Decision
from queuectl.core.outcomes import Out, nominate
from queuectl.core.quota import QNode, available
from queuectl.core.results import PendingInfo
from queuectl.core.state import Charge
from queuectl.core.types import FlavorResource, Workload

DEFAULT_PATIENCE_SECONDS = 5.0
"""How long a would-be preemptor may wait for completions (the controller's and simulate's
default; 0 turns patience off)."""


def record_freed(s: Book, now: float) -> None:
    """Move what finished work freed since the last cycle into each tree's recent window, and
    drop what is older than the window."""
    window = s.patience
    for root, freed in s.freed_since.items():
        log = s.freed_log.setdefault(root, (deque(), {}))
        log[0].append((now, freed))
        totals = log[1]
        for fr, n in freed.items():
            totals[fr] = totals.get(fr, 0) + n
    s.freed_since = {}
    for root in list(s.freed_log):
        entries, totals = s.freed_log[root]
        while entries and entries[0][0] < now - window:
            _, old = entries.popleft()
            for fr, n in old.items():
                left = totals[fr] - n
                if left > 0:
                    totals[fr] = left
                else:
                    del totals[fr]
        if not entries:
            del s.freed_log[root]


def _recent(s: Book, node: QNode) -> Freed:
    log = s.freed_log.get(node.root.name)
    return log[1] if log is not None else {}


def shortfall(node: QNode, need: dict[FlavorResource, int]) -> dict[FlavorResource, int]:
    """What the queue lacks of `need` right now, per (flavor, resource)."""
    short = {fr: n - available(node, fr) for fr, n in need.items()}
    return {fr: n for fr, n in short.items() if n > 0}


def waits(s: Book, w: Workload, d: Decision, now: float) -> float | None:
    """The time until which the would-be preemptor `w` waits instead of preempting (None: it
    preempts now)."""
    if s.patience <= 0.0:
        return None
    started = s.patient.get(w.key)
    until = started[0] if started is not None else now + s.patience
    if now >= until:
        return None
    node = s.st.tree.queues[w.cluster_queue]
    recent = _recent(s, node)
    short = shortfall(node, d.need)
    if not short or any(recent.get(fr, 0) < n for fr, n in short.items()):
        return None
    return until


def wait_message(w: Workload, d: Decision, until: float) -> PendingInfo:
    victims = sorted(c.key for c, _ in d.victims)
    return PendingInfo(
        w.key,
        reasons.WAITING_FOR_QUOTA,
        f"finished work in its cohort returned enough quota recently: it waits for that "
        f"instead of preempting {len(victims)} workload(s), holding what is freed meanwhile; "
        f"it preempts at {until:.3f} if it still does not fit",
        victims=tuple(victims),
    )


def preempt_or_wait(
    s: Book, w: Workload, d: Decision, now: float, out: Out, mark: bool = True
) -> None:
    """Nominate the preemptor, or let it wait for completions while holding what is free."""
    until = waits(s, w, d, now)
    if until is None:
        s.patient.pop(w.key, None)
        s.nominated_info.pop(w.key, None)
        nominate(s, w, d, now, out, mark=mark)
        return
    info = wait_message(w, d, until)
    nominate(s, w, d, now, out, waiting=info, mark=mark)
    s.patient[w.key] = (until, info.victims)


def lets_go(s: Book, key: str, before: list[Charge]) -> bool:
    """Does `key` now hold less of some (flavor, resource) than `before`?"""
    now_held: dict[FlavorResource, int] = {}
    for c in s.st.ghosts.get(key, ()):
        for fr, n in c.usage.items():
            now_held[fr] = now_held.get(fr, 0) + n
    return any(n > now_held.get(fr, 0) for c in before for fr, n in c.usage.items())


def mark_freed(s: Book, released: list[Charge]) -> None:
    """Quota released unmarked turned out freed for others: mark it so (wakes parked work)."""
    for charge in released:
        s.st.apply(charge, 1, mark=False)
        s.st.apply(charge, -1)
