"""Choosing victims: the fewest, lowest-priority, most recently admitted that make room.

Candidates come from the preemptor's own queue (withinClusterQueue) and from queues of the same
cohort tree that are borrowing the contended quota (reclaimWithinCohort when the preemptor would
stay within its own quota, borrowWithinCohort when it would itself borrow). Reclaim only ever
takes from a queue while it is over its own quota, so it takes back borrowed quota and nothing
else, and the preemptor, then within its quota, can never be reclaimed from in turn: no loops.

Candidates are removed in order (other queues before our own, the largest fair share first, then
lowest priority, then newest) until the preemptor fits; then each victim but the last is put back
if the preemptor still fits without taking it. No fit, no preemption.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from queuectl.core import reasons
from queuectl.core.quota import QNode, available, share
from queuectl.core.results import PendingInfo
from queuectl.core.state import Charge, State
from queuectl.core.types import ClusterQueue, FlavorResource, Workload

if TYPE_CHECKING:
    from queuectl.core.assign import Decision


_Key = tuple[int, float, int, float, float, str]


def _order(own_queue: int, neg_share: float, c: Charge) -> _Key:
    """Other queues first, the largest share first, lowest priority, newest admitted, newest."""
    return (own_queue, neg_share, c.priority, -c.admitted_at, -c.created, c.key)


def _borrowing(st: State, node: QNode, frs: frozenset[FlavorResource]) -> bool:
    """Is the queue's own running work over its quota (quota held for others aside)?"""
    held = st.held.get(node.name)
    usage, quota = node.usage, node.subtree
    for fr in frs:  # noqa: SIM110 (a plain loop: this runs ~50 times per victim search)
        if usage.get(fr, 0) - (held.get(fr, 0) if held else 0) > quota.get(fr, 0):
            return True
    return False


def _usable(
    st: State, queue: str, frs: frozenset[FlavorResource], now: float
) -> tuple[list[Charge], float | None]:
    """The queue's work holding some of `frs` that is old enough to preempt and not already being
    stopped, and when the first of its protected work holding some of `frs` comes of age."""
    work = st.preemptible(queue, now)
    memo = st.usable_memo.get(queue) if st.in_cycle else None
    hit = memo.get(frs) if memo is not None else None
    if hit is not None and hit[0] is work:
        return hit[1], hit[2]
    old, protected = work
    end: float | None = None
    victim_of, evicting = st.victim_of, st.evicting
    for c in protected:
        if c.key not in victim_of and c.key not in evicting and frs & c.usage.keys():
            t = c.admitted_at + c.min_runtime
            end = t if end is None else min(end, t)
    usable = [
        c for c in old if c.key not in victim_of and c.key not in evicting and frs & c.usage.keys()
    ]
    if st.in_cycle:
        st.usable_memo.setdefault(queue, {})[frs] = (work, usable, end)
    return usable, end


def _fits(node: QNode, need: dict[FlavorResource, int]) -> bool:
    return all(n <= available(node, fr) for fr, n in need.items())


def search(
    st: State,
    w: Workload,
    cq: ClusterQueue,
    node: QNode,
    need: dict[FlavorResource, int],
    placeable: Callable[[], bool],
    now: float,
) -> Decision:
    from queuectl.core.assign import Decision

    # Only victims holding something the preemptor is short of can help it.
    frs = frozenset(fr for fr, n in need.items() if n > available(node, fr)) or frozenset(need)
    policy = cq.preemption
    would_borrow = any(
        node.usage.get(fr, 0) + n > node.subtree.get(fr, 0) for fr, n in need.items()
    )
    retry: float | None = None
    cands: list[tuple[_Key, Charge, str]] = []

    def usable_of(queue: str) -> list[Charge]:
        """The queue's work that is old enough to preempt and not already being stopped."""
        nonlocal retry
        usable, end = _usable(st, queue, frs, now)
        if end is not None:
            retry = end if retry is None else min(retry, end)
        return usable

    within = policy.within_cluster_queue
    if within != "Never":
        for c in usable_of(cq.name):
            lower = c.priority < w.priority or (
                within == "LowerOrNewerEqualPriority"
                and c.priority == w.priority
                and c.created > w.created
            )
            if lower:
                cands.append((_order(1, 0.0, c), c, reasons.PREEMPTED_WITHIN_CQ))
    bw = policy.borrow_within_cohort
    cross = bw.policy != "Never" if would_borrow else policy.reclaim_within_cohort != "Never"
    if node.parent is not None and cross:
        root = node.root
        ckey = (root, frs)
        epoch = st.cross_epoch.get(root, 0)
        hit = st.no_cross.get(ckey) if st.in_cycle else None
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
                usable, end = _usable(st, other_name, frs, now)
                if end is not None:
                    ends.append((other_name, end))
                if usable:
                    found_in.add(other_name)
                if other is node:
                    continue
                if end is not None:
                    retry = end if retry is None else min(retry, end)
                if not usable:
                    continue
                weight = share(other)
                for c in usable:
                    if would_borrow:
                        ok = (
                            bw.policy == "LowerPriority"
                            and c.priority < w.priority
                            and (
                                bw.max_priority_threshold is None
                                or c.priority <= bw.max_priority_threshold
                            )
                        )
                        reason = reasons.PREEMPTED_BORROW
                    else:
                        rc = policy.reclaim_within_cohort
                        ok = rc == "Any" or (rc == "LowerPriority" and c.priority < w.priority)
                        reason = reasons.PREEMPTED_RECLAIM
                    if ok:
                        cands.append((_order(0, -weight, c), c, reason))
            if st.in_cycle:
                st.no_cross[ckey] = (epoch, found_in, ends)
    cands.sort(key=lambda t: t[0])
    if not _enough(node, need, cands):
        return Decision(
            "fail",
            info=_no_victims(w, cq, need, node, cands),
            retry_at=retry,
            cross=cross,
            hopeless=not cands,
        )

    def fits() -> bool:
        return _fits(node, need) and placeable()

    removed: list[tuple[Charge, str]] = []
    found = False
    for _, c, reason in cands:
        if reason != reasons.PREEMPTED_WITHIN_CQ:
            owner = st.tree.queues[c.cq]
            if not _borrowing(st, owner, frs.intersection(c.usage)):
                continue  # that queue is back within its own quota: nothing borrowed left to take
        st.apply(c, -1, mark=False)
        removed.append((c, reason))
        if fits():
            found = True
            break
    if not found:
        for c, _ in reversed(removed):
            st.apply(c, 1, mark=False)
        return Decision(
            "fail", info=_no_victims(w, cq, need, node, cands), retry_at=retry, cross=cross
        )
    victims = list(removed)
    for i in range(len(removed) - 2, -1, -1):
        c, reason = removed[i]
        st.apply(c, 1, mark=False)
        if fits():
            victims.remove((c, reason))
        else:
            st.apply(c, -1, mark=False)
    for c, _ in victims:
        st.apply(c, 1, mark=False)
    return Decision(
        "preempt", victims=victims, need=dict(need), retry_at=retry, borrows=would_borrow
    )


def _enough(
    node: QNode, need: dict[FlavorResource, int], cands: list[tuple[_Key, Charge, str]]
) -> bool:
    """Cheap necessary condition: the candidates hold at least the shortfall of each need."""
    for fr, n in need.items():
        short = n - max(0, available(node, fr))
        if short > 0 and sum(c.usage.get(fr, 0) for _, c, _ in cands) < short:
            return False
    return True


def _no_victims(
    w: Workload,
    cq: ClusterQueue,
    need: dict[FlavorResource, int],
    node: QNode,
    cands: list[tuple[_Key, Charge, str]],
) -> PendingInfo:
    for fr, n in sorted(need.items()):
        a = max(0, available(node, fr))
        if n > a:
            flavor, res = fr
            why = "no preemption would make it fit" if cands else "no workload may be preempted"
            return PendingInfo(
                w.key,
                reasons.WAITING_FOR_QUOTA,
                f"insufficient {res} in flavor {flavor}: needs {n}, {a} available to "
                f"ClusterQueue {cq.name} (short by {n - a}); {why}",
                resource=res,
                flavor=flavor,
                requested=n,
                available=a,
                shortfall=n - a,
            )
    return PendingInfo(
        w.key,
        reasons.TOPOLOGY_PLACEMENT_FAILED,
        "quota allows it but no node placement exists, even after preemption",
    )
