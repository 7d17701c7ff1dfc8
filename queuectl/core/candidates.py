"""Who a victim search may take, before it tries any of them.

Candidates come from the preemptor's own queue (withinClusterQueue) and from queues of the same
cohort tree that are borrowing the contended quota (reclaimWithinCohort when the preemptor would
stay within its own quota, borrowWithinCohort when it would itself borrow, and GPU time credit:
a borrowing preemptor whose queue has credit may take work of no higher priority from borrowers
without credit). Another queue is a candidate only along the tree (`reach`): below the lowest
cohort it shares with the preemptor, its queue and every cohort up to that one's child must
use more than their own quota, so reclaim takes borrowed quota back from the branch that
borrowed it and nothing else, and the preemptor, then within its quota, can never be reclaimed
from in turn: no loops. `in_order` gives them in victim order; `preempt` takes the fewest.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from queuectl.core import reasons
from queuectl.core.caches import Pool
from queuectl.core.charges import Charge, Rank, victim_rank
from queuectl.core.quota import QNode, share
from queuectl.core.reach import Reach
from queuectl.core.state import State
from queuectl.core.types import FlavorResource, PreemptionPolicy, Workload


def usable_pool(state: State, queue: str, frs: frozenset[FlavorResource], now: float) -> Pool:
    """The queue's work holding some of `frs` that is old enough to preempt and not already being
    stopped, and when the first of its protected work holding some of `frs` comes of age."""
    work = state.preemptible(queue, now)
    memoise = state.in_cycle or state.pooling
    memo = state.cache.usable_memo.get(queue) if memoise else None
    hit = memo.get(frs) if memo is not None else None
    if hit is not None and hit.work is work:
        return hit
    old, protected = work
    end: float | None = None
    victim_of, evicting = state.victim_of, state.evicting
    for c in protected:  # in coming-of-age order: the first that counts is the earliest
        if c.key not in victim_of and c.key not in evicting and not frs.isdisjoint(c.usage):
            end = c.admitted_at + c.min_runtime
            break
    usable = [
        c
        for c in old
        if c.key not in victim_of and c.key not in evicting and not frs.isdisjoint(c.usage)
    ]
    pool = Pool(work, usable, end)
    if memoise:
        state.cache.usable_memo.setdefault(queue, {})[frs] = pool
    return pool


def borrowing(state: State, node: QNode, frs: frozenset[FlavorResource]) -> bool:
    """Is the queue's own running work over its quota (quota held for others aside)?"""
    holds = state.queue_holds.get(node.name)
    for fr in frs:  # noqa: SIM110 (a plain loop: this runs ~50 times per victim search)
        if node.borrows(fr, -holds.get(fr, 0) if holds else 0):
            return True
    return False


NOBODY = -(2**62)
"""A priority bound below every priority: no candidates."""

_Group = tuple[tuple[int, bool, float, float], list[tuple[Rank, Charge]], int, str]
"""Another queue's candidates: ((level of the lowest cohort it shares with the preemptor,
whether it has GPU time credit, minus its branch's share there, minus its own share), its
ranked work, how many of them, reason)."""


def in_order(groups: list[_Group], own: list[Charge]) -> Iterator[tuple[Charge, str]]:
    """Candidates in victim order, produced lazily (a search usually needs the first few):
    other queues first, the nearest first, those without credit first, the largest share first,
    then by rank; then the own queue by rank."""
    groups.sort(key=lambda g: g[0])
    i = 0
    while i < len(groups):
        j = i + 1
        while j < len(groups) and groups[j][0] == groups[i][0]:
            j += 1
        if j == i + 1:
            _, ranked, k, reason = groups[i]
            for _, c in islice(ranked, k):
                yield c, reason
        else:  # equal shares: their candidates interleave by rank (ranks are unique: keys)
            tied = [((r, c, g[3]) for r, c in islice(g[1], g[2])) for g in groups[i:j]]
            for _, c, reason in heapq.merge(*tied):
                yield c, reason
        i = j
    for _, c in sorted((victim_rank(c), c) for c in own):
        yield c, reasons.PREEMPTED_WITHIN_CQ


class Candidates:
    """What one victim search may take, gathered before any of it is tried."""

    __slots__ = ("blocked", "groups", "own", "retry", "takeable")

    def __init__(self) -> None:
        self.own: list[Charge] = []
        """Own-queue candidates, ranked only if the shortfall check lets the search go on."""
        self.groups: list[_Group] = []
        """Other queues' candidates, one group per queue."""
        self.takeable: dict[FlavorResource, int] = {}
        """What the candidates hold of each (flavor, resource) the preemptor is short of."""
        self.blocked = False
        """Some borrower had candidates but shares no borrowing branch with the preemptor."""
        self.retry: float | None = None
        """When protected work met on the way comes of age: more candidates then."""

    def any(self) -> bool:
        return bool(self.own or self.groups)

    def retry_at(self, t: float) -> None:
        self.retry = t if self.retry is None else min(self.retry, t)


def within_queue_allows(policy: str, w: Workload, c: Charge) -> bool:
    """withinClusterQueue: `LowerPriority` takes the queue's work of lower priority than the
    preemptor's; `LowerOrNewerEqualPriority` also work of equal priority created after it."""
    if c.priority < w.priority:
        return True
    return (
        policy == "LowerOrNewerEqualPriority" and c.priority == w.priority and c.created > w.created
    )


@dataclass(frozen=True, slots=True)
class Across:
    """Which work of other queues of the tree a preemptor may take: every policy takes a prefix
    of a queue's ranked work (`victim_rank`), so it is a priority bound."""

    bound: int | None
    """Work of priority below it is a candidate (None: any priority)."""
    reason: str
    """What its victims are told."""
    credit: bool
    """The preemptor's queue has GPU time credit and must borrow: from queues without credit it
    may also take work of no higher priority than its own (docs/design/banking.md)."""


def across_rule(
    policy: PreemptionPolicy, w: Workload, would_borrow: bool, credit: bool
) -> Across | None:
    """The candidate policy across queues (None: no other queue's work is a candidate).

    Within its own quota a preemptor reclaims what others borrowed (reclaimWithinCohort: `Any`
    priority, or `LowerPriority` than its own). Itself borrowing, it may take lower priority
    work (borrowWithinCohort `LowerPriority`, below `maxPriorityThreshold` too when set), and
    with GPU time credit work of no higher priority from queues without credit."""
    if not would_borrow:
        if policy.reclaim_within_cohort == "Never":
            return None
        bound = None if policy.reclaim_within_cohort == "Any" else w.priority
        return Across(bound, reasons.PREEMPTED_RECLAIM, credit)
    bw = policy.borrow_within_cohort
    if bw.policy == "Never" and not credit:
        return None
    bound = w.priority
    if bw.max_priority_threshold is not None:
        bound = min(w.priority, bw.max_priority_threshold + 1)
    if bw.policy == "Never":
        bound = NOBODY
    return Across(bound, reasons.PREEMPTED_BORROW, credit)


def from_own_queue(
    state: State,
    w: Workload,
    queue: str,
    policy: str,
    frs: frozenset[FlavorResource],
    now: float,
    found: Candidates,
) -> None:
    """The preemptor's own queue: its work old enough to preempt that `policy`
    (withinClusterQueue) allows."""
    pool = usable_pool(state, queue, frs, now)
    if pool.end is not None:
        found.retry_at(pool.end)
    found.own = [c for c in pool.usable if within_queue_allows(policy, w, c)]
    for fr in frs:
        found.takeable[fr] = sum(c.usage.get(fr, 0) for c in found.own)


def from_other_queues(
    state: State,
    w: Workload,
    node: QNode,
    frs: frozenset[FlavorResource],
    across: Across,
    reach: Reach,
    now: float,
    found: Candidates,
) -> None:
    """Other queues' candidates: each queue of the tree whose own running work is over its
    quota of `frs` (`borrowing`), met along the tree (`reach`), gives the prefix of its ranked
    work that `across` allows. Their protected work coming of age sets `found.retry`."""
    root = node.root
    memo = _nobody_else(state, node, frs)
    if memo is not None:
        for q, t in memo:
            if q != node.name:
                found.retry_at(t)
        return
    epoch = state.cache.cross_epoch.get(root, 0)
    found_in: set[str] = set()
    ends: list[tuple[str, float]] = []
    by_fr = state.borrowers.get(root, {})
    names: set[str] = set()
    for fr in frs:
        names.update(by_fr.get(fr, ()))
    for other_name in sorted(names):
        other = state.tree.queues[other_name]
        if not borrowing(state, other, frs):
            continue
        pool = usable_pool(state, other_name, frs, now)
        end = pool.end
        if end is not None:
            ends.append((other_name, end))
        if pool.usable:
            found_in.add(other_name)
        if other is node:
            continue
        if end is not None:
            found.retry_at(end)
        if not pool.usable:
            continue
        ranked = pool.rank(frs)
        k = len(ranked) if across.bound is None else bisect_left(pool.prios, across.bound)
        why = across.reason
        if across.credit and not state.bank.has_credit(other_name):
            upto = bisect_left(pool.prios, w.priority + 1)
            if upto > k:
                k, why = upto, reasons.PREEMPTED_CREDIT
        if not k:
            continue
        met = reach.meet(other, frs)
        if met is None:
            # Its branch runs on its own quota where it meets the preemptor's: a candidate
            # only if that branch starts borrowing (not "hopeless").
            found.blocked = True
            continue
        level, branch = met
        order = (level, state.bank.has_credit(other_name), -share(branch), -share(other))
        found.groups.append((order, ranked, k, why))
        for fr in frs:
            found.takeable[fr] = found.takeable.get(fr, 0) + pool.cum[fr][k]
    if state.in_cycle:
        state.cache.no_cross[(root, frs)] = (epoch, found_in, ends)


def _nobody_else(
    state: State, node: QNode, frs: frozenset[FlavorResource]
) -> list[tuple[str, float]] | None:
    """The cross-branch memo, inside an admission loop: when a scan of the tree for `frs`
    found nothing to take in any queue but (perhaps) the preemptor's own, and no queue of the
    tree has started borrowing since (its `cross_epoch`), a new scan finds nothing either: its
    answer is the protected work's coming of age, (queue, when), without visiting a borrower.
    None: scan."""
    if not state.in_cycle:
        return None
    root = node.root
    hit = state.cache.no_cross.get((root, frs))
    if hit is None or hit[0] != state.cache.cross_epoch.get(root, 0) or not hit[1] <= {node.name}:
        return None
    return hit[2]


def still_lent(state: State, reach: Reach, c: Charge, frs: frozenset[FlavorResource]) -> bool:
    """Is another queue's candidate still on borrowed quota? Earlier victims may have brought
    its branch back within its own quota: nothing borrowed is left there to take."""
    owner = state.tree.queues[c.cq]
    short = frs.intersection(c.usage)
    return borrowing(state, owner, short) and reach.meet(owner, short) is not None
