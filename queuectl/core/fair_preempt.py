"""Fair-sharing preemption: a borrowing preemptor takes back from queues above their fair share.

Off unless the scheduler is given rules (`Scheduler(fair_preemption=...)`). Then it decides for
a preemptor that must borrow (admitting it takes its queue beyond its own quota) and whose
queue may take other queues' work (`reclaimWithinCohort`, `borrowWithinCohort` or GPU time
credit); a preemptor within its own quota reclaims as before (`preempt`): what others borrowed
from it is its own.

Candidates: the preemptor's own queue as `withinClusterQueue` allows, and the work of other
queues that borrow where they meet the preemptor's branch of the tree (`reach`), of the
priorities its policies allow (reclaimWithinCohort `Any`: all, `LowerPriority`: lower than the
preemptor's; borrowWithinCohort and credit as in `preempt`). Every other queue's victim must
pass a share rule: without it the preemptor's queue could take work it would lose back.

Shares are compared where the two branches meet: for a candidate of queue T, P and Q are the
children of their lowest common cohort on the preemptor's side and on T's. A share is the
weighted dominant-resource share at that cohort (`quota.share`: the largest fraction of the
cohort's pool the node uses beyond its own quota, over the node's weight), so cohort weights
count at every level; it is read as it will be once the preemptor is admitted and what is on its
way out is gone (`fair_shares.Shares`). The rules (Kueue's fair-sharing rules S2-a and S2-b),
tried in the configured order, each over the queues highest share path first (re-read after
every victim):
- `LessThanOrEqualToFinalShare`: P's share is at most Q's once the victims are gone;
- `LessThanInitialShare`: P's share is below Q's with the victim back (one victim per queue
  when it comes second: the candidates left failed the first rule).
Then the preemptor's own queue, by rank, until it fits. Every victim taken so far must still
pass its rule after each new one (`_holds`), and its queue must borrow again with it back: a
returning victim is a borrower, never an owner reclaiming its quota. So when nothing else
changes, a victim coming back can never take the preemptor's work in turn (no flip-flop).
As in `preempt`, each victim but the last is then put back if the preemptor still fits and
every rule still holds.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Final

from queuectl.core import preempt, reasons
from queuectl.core.candidates import (
    Across,
    Candidates,
    across_rule,
    borrowing,
    from_own_queue,
    still_lent,
    usable_pool,
)
from queuectl.core.charges import Charge, victim_rank
from queuectl.core.decision import Decision
from queuectl.core.fair_shares import Shares
from queuectl.core.preempt import enough, fits_in, no_victims
from queuectl.core.quota import QNode, available
from queuectl.core.reach import Reach
from queuectl.core.state import State
from queuectl.core.types import ClusterQueue, FairPreemptionStrategy, FlavorResource, Workload

FINAL: Final = "LessThanOrEqualToFinalShare"
INITIAL: Final = "LessThanInitialShare"
DEFAULT: Final[tuple[FairPreemptionStrategy, ...]] = (FINAL, INITIAL)
"""Kueue's default order: the strict rule first, the looser one for what it leaves."""
_ALLOWED: Final[tuple[tuple[FairPreemptionStrategy, ...], ...]] = (DEFAULT, (FINAL,), (INITIAL,))
UNFAIR: Final = (
    "within fair shares: the queues that borrow it are not above this queue's weighted share "
    "where their branches meet"
)
"""Ends the reason of a preemptor whose candidates the share rules all refused."""


def strategies(values: Iterable[str]) -> tuple[FairPreemptionStrategy, ...]:
    """The rules to configure, checked: one of them, or both with the strict one first
    (the looser one first would leave nothing for the strict one). Empty: off."""
    got = tuple(values)
    if not got:
        return ()
    for allowed in _ALLOWED:
        if got == allowed:
            return allowed
    raise ValueError(
        f"fair-sharing preemption strategies {', '.join(got)}: give {FINAL}, {INITIAL}, "
        f"or both in that order (none turns fair-sharing preemption off)"
    )


def search(
    state: State,
    w: Workload,
    cq: ClusterQueue,
    node: QNode,
    need: dict[FlavorResource, int],
    placeable: Callable[[], bool],
    now: float,
) -> Decision:
    """Victims that make room for `w` (`preempt.search` unless fair sharing decides)."""
    if not state.fair_strategies or node.parent is None:
        return preempt.search(state, w, cq, node, need, placeable, now)
    policy = cq.preemption
    borrows = any(node.borrows(fr, n) for fr, n in need.items())
    classic = across_rule(policy, w, True, state.bank.has_credit(cq.name)) if borrows else None
    if not borrows or (policy.reclaim_within_cohort == "Never" and classic is None):
        return preempt.search(state, w, cq, node, need, placeable, now)
    frs = frozenset(fr for fr, n in need.items() if n > available(node, fr)) or frozenset(need)
    found = Candidates()
    if policy.within_cluster_queue != "Never":
        from_own_queue(state, w, cq.name, policy.within_cluster_queue, frs, now, found)
    reach = Reach(state, node)
    targets = _targets(state, w, node, frs, classic, reach, now, found)

    def fail(hopeless: bool = False) -> Decision:
        info = no_victims(w, cq, need, node, bool(found.own or targets))
        if targets and info.reason == reasons.WAITING_FOR_QUOTA:
            info = replace(info, message=f"{info.message} {UNFAIR}")
        return Decision(
            "fail",
            info=info,
            retry_at=found.retry,
            need=dict(need),
            cross=True,
            hopeless=hopeless,
            reclaim_within=policy.reclaim_within_cohort != "Never",
            borrows=True,
        )

    if not enough(node, need, found.takeable):
        return fail(hopeless=not (found.own or targets or found.blocked))

    placeable, needs_room = preempt.room_needed(placeable)

    def fits() -> bool:
        return fits_in(node, need) and placeable()

    shares = Shares(state, w.key, node, need)
    victims = _fewest(state, frs, reach, shares, targets, found.own, fits)
    if victims is None:
        return fail()
    return Decision(
        "preempt",
        victims=victims,
        need=dict(need),
        retry_at=found.retry,
        borrows=True,
        needs_room=needs_room,
    )


@dataclass(slots=True)
class _Target:
    """Another queue's candidates, and where its branch meets the preemptor's."""

    node: QNode
    theirs: QNode
    """Q: the child of the lowest common cohort on its side."""
    mine: QNode
    """P: the child of that cohort on the preemptor's side."""
    left: list[Charge] = field(default_factory=list)
    """Its candidates not yet tried, in victim order (`victim_rank`)."""


@dataclass(slots=True)
class _Taken:
    charge: Charge
    rule: str | None
    """The share rule it passed (None: the preemptor's own queue)."""
    target: _Target | None


def _targets(
    state: State,
    w: Workload,
    node: QNode,
    frs: frozenset[FlavorResource],
    classic: Across | None,
    reach: Reach,
    now: float,
    found: Candidates,
) -> list[_Target]:
    """Other queues that borrow some of `frs` where they meet the preemptor, with the prefix of
    their ranked work the policies allow (`found` gets what they hold and when protected work
    comes of age, as in `preempt`)."""
    reclaim = state.queues[node.name].preemption.reclaim_within_cohort
    names: set[str] = set()
    by_fr = state.borrowers.get(node.root, {})
    for fr in frs:
        names.update(by_fr.get(fr, ()))
    out: list[_Target] = []
    for name in sorted(names):
        other = state.tree.queues[name]
        if other is node or not borrowing(state, other, frs):
            continue
        pool = usable_pool(state, name, frs, now)
        if pool.end is not None:
            found.retry_at(pool.end)
        if not pool.usable:
            continue
        ranked = pool.rank(frs)
        k = 0
        if reclaim != "Never":
            k = len(ranked) if reclaim == "Any" else bisect_left(pool.prios, w.priority)
        if classic is not None:
            k = max(k, bisect_left(pool.prios, classic.bound) if classic.bound is not None else 0)
            if classic.credit and not state.bank.has_credit(name):
                k = max(k, bisect_left(pool.prios, w.priority + 1))
        if not k:
            continue
        met = reach.meet(other, frs)
        if met is None:
            found.blocked = True  # its branch runs on its own quota where it meets ours
            continue
        level, theirs = met
        out.append(_Target(other, theirs, node.chain[level - 1], [c for _, c in ranked[:k]]))
        for fr in frs:
            found.takeable[fr] = found.takeable.get(fr, 0) + pool.cum[fr][k]
    return out


def _borrows_with(state: State, shares: Shares, t: _Taken) -> bool:
    """With the victim back (it is off the tree), does its queue use more than its own quota
    of something the victim holds? Then, returning, it borrows: it is never an owner
    reclaiming its quota from the preemptor."""
    assert t.target is not None
    queue = t.target.node
    state.apply(t.charge, 1, mark=False)
    try:
        return any(shares.usage(queue, fr) > queue.subtree.get(fr, 0) for fr in t.charge.usage)
    finally:
        state.apply(t.charge, -1, mark=False)


def _mine(state: State, shares: Shares, side: QNode, taken: list[_Taken]) -> float:
    """The share of the preemptor's side `side`, with the victims taken inside it back: its
    own branch's victims are no credit against others (they may come back at once into what
    is left free, and the share that let the preemptor take from others is gone)."""
    inside = [t.charge for t in taken if side in state.tree.queues[t.charge.cq].chain]
    for c in inside:
        state.apply(c, 1, mark=False)
    try:
        return shares.of(side)
    finally:
        for c in inside:
            state.apply(c, -1, mark=False)


def _holds(state: State, shares: Shares, taken: list[_Taken]) -> bool:
    """With every victim of `taken` off the tree: does each other queue's victim still pass
    its rule, and would its queue borrow again with it back?"""
    for t in taken:
        if t.target is None:
            continue
        mine = _mine(state, shares, t.target.mine, taken)
        if t.rule == FINAL and not mine <= shares.of(t.target.theirs):
            return False
        if t.rule == INITIAL:
            state.apply(t.charge, 1, mark=False)
            try:
                before = shares.of(t.target.theirs)
            finally:
                state.apply(t.charge, -1, mark=False)
            if not mine < before:
                return False
        if not _borrows_with(state, shares, t):
            return False
    return True


def _round(
    state: State,
    rule: str,
    once: bool,
    frs: frozenset[FlavorResource],
    reach: Reach,
    shares: Shares,
    targets: list[_Target],
    taken: list[_Taken],
    fits: Callable[[], bool],
) -> tuple[bool, list[_Target]]:
    """One rule over the targets, the highest share path first (re-read after every victim);
    `once`: one victim per queue. Returns whether the preemptor fits, and the candidates that
    failed the rule (for the next one)."""
    live = [t for t in targets if t.left]
    failed: dict[str, _Target] = {}
    while live:
        live.sort(key=lambda t: (shares.path(t.node), t.node.name))
        t = live[0]
        took = False
        while t.left and not took:
            c = t.left.pop(0)
            if not still_lent(state, reach, c, frs):
                continue  # its branch no longer borrows: nothing of it is left to take
            state.apply(c, -1, mark=False)
            taken.append(_Taken(c, rule, t))
            if _holds(state, shares, taken):
                took = True
                break
            taken.pop()
            state.apply(c, 1, mark=False)
            kept = failed.setdefault(t.node.name, _Target(t.node, t.theirs, t.mine))
            kept.left.append(c)
        if took and fits():
            return True, []
        if not t.left or (took and once):
            live.remove(t)
    return False, [failed[n] for n in sorted(failed)]


def _fewest(
    state: State,
    frs: frozenset[FlavorResource],
    reach: Reach,
    shares: Shares,
    targets: list[_Target],
    own: list[Charge],
    fits: Callable[[], bool],
) -> list[tuple[Charge, str]] | None:
    """The victims, the fewest as `preempt._fewest_victims` finds them, every rule kept. The
    state is as found on return. None: no set of them makes room."""
    taken: list[_Taken] = []
    done = False
    for i, rule in enumerate(state.fair_strategies):
        done, targets = _round(state, rule, i > 0, frs, reach, shares, targets, taken, fits)
        if done:
            break
    if not done:
        for c in sorted(own, key=victim_rank):
            state.apply(c, -1, mark=False)
            taken.append(_Taken(c, None, None))
            if fits():
                done = True
                break
    if not done:
        for t in taken:
            state.apply(t.charge, 1, mark=False)
        return None
    kept = list(taken)
    for t in reversed(taken[:-1]):
        state.apply(t.charge, 1, mark=False)
        rest = [v for v in kept if v is not t]
        if fits() and _holds(state, shares, rest):
            kept = rest
        else:
            state.apply(t.charge, -1, mark=False)
    for t in kept:
        state.apply(t.charge, 1, mark=False)
    return [
        (t.charge, reasons.PREEMPTED_WITHIN_CQ if t.target is None else reasons.PREEMPTED_FAIR)
        for t in kept
    ]
