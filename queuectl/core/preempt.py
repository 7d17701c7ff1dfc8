"""Choosing victims: the fewest, lowest-priority, most recently admitted that make room.

Candidates come from the preemptor's own queue (withinClusterQueue) and from queues of the same
cohort tree that are borrowing the contended quota (reclaimWithinCohort when the preemptor would
stay within its own quota, borrowWithinCohort when it would itself borrow, and GPU time credit:
a borrowing preemptor whose queue has credit may take work of no higher priority from borrowers
without credit). Another queue is a candidate only along the tree (`reach`): below the lowest
cohort it shares with the preemptor, its queue and every cohort up to that one's child must
use more than their own quota, so reclaim takes borrowed quota back from the branch that
borrowed it and nothing else, and the preemptor, then within its quota, can never be reclaimed
from in turn: no loops.

Candidates are removed in order (other queues before our own; among them those met at the
lowest common cohort first; then queues without GPU time credit before queues with some
(`bank.has_credit`), then the largest fair share of their branch at that cohort, then of the
queue; then lowest priority, then newest) until the preemptor fits; then each victim but the
last is put back if the preemptor still fits without taking it. No fit, no preemption.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Iterator
from itertools import islice

from queuectl.core import reasons
from queuectl.core.decision import Decision
from queuectl.core.quota import QNode, available, share
from queuectl.core.reach import Reach
from queuectl.core.results import PendingInfo, waiting_for_quota
from queuectl.core.state import Charge, Pool, Rank, State, victim_rank
from queuectl.core.types import ClusterQueue, FlavorResource, Workload


def _pool(st: State, queue: str, frs: frozenset[FlavorResource], now: float) -> Pool:
    """The queue's work holding some of `frs` that is old enough to preempt and not already being
    stopped, and when the first of its protected work holding some of `frs` comes of age."""
    work = st.preemptible(queue, now)
    memoise = st.in_cycle or st.pooling
    memo = st.cache.usable_memo.get(queue) if memoise else None
    hit = memo.get(frs) if memo is not None else None
    if hit is not None and hit.work is work:
        return hit
    old, protected = work
    end: float | None = None
    victim_of, evicting = st.victim_of, st.evicting
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
        st.cache.usable_memo.setdefault(queue, {})[frs] = pool
    return pool


def _borrowing(st: State, node: QNode, frs: frozenset[FlavorResource]) -> bool:
    """Is the queue's own running work over its quota (quota held for others aside)?"""
    held = st.held.get(node.name)
    for fr in frs:  # noqa: SIM110 (a plain loop: this runs ~50 times per victim search)
        if node.borrows(fr, -held.get(fr, 0) if held else 0):
            return True
    return False


def _fits(node: QNode, need: dict[FlavorResource, int]) -> bool:
    return all(n <= available(node, fr) for fr, n in need.items())


NOBODY = -(2**62)
"""A priority bound below every priority: no candidates."""

_Group = tuple[tuple[int, bool, float, float], list[tuple[Rank, Charge]], int, str]
"""Another queue's candidates: ((level of the lowest cohort it shares with the preemptor,
whether it has GPU time credit, minus its branch's share there, minus its own share), its
ranked work, how many of them, reason)."""


def _in_order(groups: list[_Group], own: list[Charge]) -> Iterator[tuple[Charge, str]]:
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


def search(
    st: State,
    w: Workload,
    cq: ClusterQueue,
    node: QNode,
    need: dict[FlavorResource, int],
    placeable: Callable[[], bool],
    now: float,
) -> Decision:
    # Only victims holding something the preemptor is short of can help it.
    frs = frozenset(fr for fr, n in need.items() if n > available(node, fr)) or frozenset(need)
    policy = cq.preemption
    would_borrow = any(node.borrows(fr, n) for fr, n in need.items())
    retry: float | None = None
    own: list[Charge] = []
    """Own-queue candidates, ranked only if the shortfall check lets the search go on."""
    groups: list[_Group] = []
    held: dict[FlavorResource, int] = {}
    """What the candidates hold of each (flavor, resource) of `frs`."""
    blocked = False
    """Some borrower had candidates but shares no borrowing branch with the preemptor."""
    reach = Reach(st, node)
    """Where other queues meet the preemptor's in the tree."""

    within = policy.within_cluster_queue
    if within != "Never":
        pool = _pool(st, cq.name, frs, now)
        if pool.end is not None:
            retry = pool.end
        prio, newer = w.priority, within == "LowerOrNewerEqualPriority"
        for c in pool.usable:
            if c.priority < prio or (newer and c.priority == prio and c.created > w.created):
                own.append(c)
        for fr in frs:
            held[fr] = sum(c.usage.get(fr, 0) for c in own)
    bw = policy.borrow_within_cohort
    reclaim_within = (
        would_borrow and node.parent is not None and policy.reclaim_within_cohort != "Never"
    )
    # GPU time credit: a queue with credit that must borrow may take, from queues without
    # credit, work of no higher priority that runs on borrowed quota (docs/design/banking.md).
    credit = reclaim_within and st.bank.has_credit(cq.name)
    if would_borrow:
        cross = bw.policy != "Never" or credit
    else:
        cross = policy.reclaim_within_cohort != "Never"
    if node.parent is not None and cross:
        # Every policy takes a prefix of a queue's ranked work: priority below a bound.
        if would_borrow:
            reason = reasons.PREEMPTED_BORROW
            bound: int | None = w.priority  # bw.policy == "LowerPriority"
            if bw.max_priority_threshold is not None:
                bound = min(w.priority, bw.max_priority_threshold + 1)
            if bw.policy == "Never":
                bound = NOBODY
        else:
            reason = reasons.PREEMPTED_RECLAIM
            bound = None if policy.reclaim_within_cohort == "Any" else w.priority
        root = node.root
        ckey = (root, frs)
        epoch = st.cache.cross_epoch.get(root, 0)
        hit = st.cache.no_cross.get(ckey) if st.in_cycle else None
        if hit is not None and hit[0] == epoch and hit[1] <= {node.name}:
            # Nobody else of the tree had anything to take when last looked, and no queue has
            # started borrowing since: the same (empty) answer, without visiting every borrower.
            for q, t in hit[2]:
                if q != node.name:
                    retry = t if retry is None else min(retry, t)
        else:
            found_in: set[str] = set()
            ends: list[tuple[str, float]] = []
            by_fr = st.borrowers.get(root, {})
            names: set[str] = set()
            for fr in frs:
                names.update(by_fr.get(fr, ()))
            for other_name in sorted(names):
                other = st.tree.queues[other_name]
                if not _borrowing(st, other, frs):
                    continue
                pool = _pool(st, other_name, frs, now)
                end = pool.end
                if end is not None:
                    ends.append((other_name, end))
                if pool.usable:
                    found_in.add(other_name)
                if other is node:
                    continue
                if end is not None:
                    retry = end if retry is None else min(retry, end)
                if not pool.usable:
                    continue
                ranked = pool.rank(frs)
                k = len(ranked) if bound is None else bisect_left(pool.prios, bound)
                why = reason
                if credit and not st.bank.has_credit(other_name):
                    upto = bisect_left(pool.prios, w.priority + 1)
                    if upto > k:
                        k, why = upto, reasons.PREEMPTED_CREDIT
                if not k:
                    continue
                met = reach.meet(other, frs)
                if met is None:
                    # Its branch runs on its own quota where it meets the preemptor's: a
                    # candidate only if that branch starts borrowing (not "hopeless").
                    blocked = True
                    continue
                level, branch = met
                order = (level, st.bank.has_credit(other_name), -share(branch), -share(other))
                groups.append((order, ranked, k, why))
                for fr in frs:
                    held[fr] = held.get(fr, 0) + pool.cum[fr][k]
            if st.in_cycle:
                st.cache.no_cross[ckey] = (epoch, found_in, ends)
    any_cands = bool(own or groups)
    if not _enough(node, need, held):
        return Decision(
            "fail",
            info=_no_victims(w, cq, need, node, any_cands),
            retry_at=retry,
            cross=cross,
            hopeless=not (any_cands or blocked),
            reclaim_within=reclaim_within,
            borrows=would_borrow,
        )

    def fits() -> bool:
        return _fits(node, need) and placeable()

    removed: list[tuple[Charge, str]] = []
    found = False
    for c, why in _in_order(groups, own):
        if why != reasons.PREEMPTED_WITHIN_CQ:
            owner = st.tree.queues[c.cq]
            short = frs.intersection(c.usage)
            if not _borrowing(st, owner, short) or reach.meet(owner, short) is None:
                continue  # its branch is back within its own quota: nothing borrowed left to take
        st.apply(c, -1, mark=False)
        removed.append((c, why))
        if fits():
            found = True
            break
    if not found:
        for c, _ in reversed(removed):
            st.apply(c, 1, mark=False)
        return Decision(
            "fail",
            info=_no_victims(w, cq, need, node, any_cands),
            retry_at=retry,
            cross=cross,
            reclaim_within=reclaim_within,
            borrows=would_borrow,
        )
    victims = list(removed)
    for i in range(len(removed) - 2, -1, -1):
        c, why = removed[i]
        st.apply(c, 1, mark=False)
        if fits():
            victims.remove((c, why))
        else:
            st.apply(c, -1, mark=False)
    for c, _ in victims:
        st.apply(c, 1, mark=False)
    return Decision(
        "preempt", victims=victims, need=dict(need), retry_at=retry, borrows=would_borrow
    )


def _enough(node: QNode, need: dict[FlavorResource, int], held: dict[FlavorResource, int]) -> bool:
    """Cheap necessary condition: the candidates hold at least the shortfall of each need."""
    for fr, n in need.items():
        short = n - max(0, available(node, fr))
        if short > 0 and held.get(fr, 0) < short:
            return False
    return True


def _no_victims(
    w: Workload,
    cq: ClusterQueue,
    need: dict[FlavorResource, int],
    node: QNode,
    any_cands: bool,
) -> PendingInfo:
    for fr, n in sorted(need.items()):
        a = available(node, fr)
        if n > max(0, a):
            why = "no preemption would make it fit" if any_cands else "no workload may be preempted"
            return waiting_for_quota(w.key, cq.name, fr, n, a, why=why)
    return PendingInfo(
        w.key,
        reasons.TOPOLOGY_PLACEMENT_FAILED,
        "quota allows it but no node placement exists, even after preemption",
    )
