"""Choosing victims: the fewest, lowest-priority, most recently admitted that make room.

Who may be taken (the policies, along the cohort tree) is `candidates.py`. Candidates are
removed in order (other queues before our own; among them those met at the lowest common
cohort first; then queues without GPU time credit before queues with some (`bank.has_credit`),
then the largest fair share of their branch at that cohort, then of the queue; then lowest
priority, then newest) until the preemptor fits; then each victim but the last is put back if
the preemptor still fits without taking it. No fit, no preemption.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from queuectl.core import reasons
from queuectl.core.candidates import (
    Candidates,
    across_rule,
    from_other_queues,
    from_own_queue,
    in_order,
    still_lent,
)
from queuectl.core.charges import Charge
from queuectl.core.decision import Decision
from queuectl.core.quota import QNode, available
from queuectl.core.reach import Reach
from queuectl.core.results import PendingInfo, waiting_for_quota
from queuectl.core.state import State
from queuectl.core.types import ClusterQueue, FlavorResource, Workload


def fits_in(node: QNode, need: dict[FlavorResource, int]) -> bool:
    return all(n <= available(node, fr) for fr, n in need.items())


def search(
    state: State,
    w: Workload,
    cq: ClusterQueue,
    node: QNode,
    need: dict[FlavorResource, int],
    placeable: Callable[[], bool],
    now: float,
) -> Decision:
    """Victims that make room for `w` in its queue `node`, or why there are none:
    1. the candidates each policy allows, in its own queue and across the cohort tree;
    2. a cheap check that together they hold at least what it is short of;
    3. the fewest of them, in victim order, that make room (quota and node placement)."""
    # Only victims holding something the preemptor is short of can help it.
    frs = frozenset(fr for fr, n in need.items() if n > available(node, fr)) or frozenset(need)
    policy = cq.preemption
    would_borrow = any(node.borrows(fr, n) for fr, n in need.items())
    found = Candidates()
    reach = Reach(state, node)
    """Where other queues meet the preemptor's in the tree."""

    # 1. Candidates.
    if policy.within_cluster_queue != "Never":
        from_own_queue(state, w, cq.name, policy.within_cluster_queue, frs, now, found)
    reclaim_within = (
        would_borrow and node.parent is not None and policy.reclaim_within_cohort != "Never"
    )
    credit = reclaim_within and state.bank.has_credit(cq.name)
    across = across_rule(policy, w, would_borrow, credit)
    if node.parent is not None and across is not None:
        from_other_queues(state, w, node, frs, across, reach, now, found)

    # 2. Enough between them?
    def fail(hopeless: bool = False) -> Decision:
        return Decision(
            "fail",
            info=no_victims(w, cq, need, node, found.any()),
            retry_at=found.retry,
            need=dict(need) if reclaim_within else {},
            cross=across is not None,
            hopeless=hopeless,
            reclaim_within=reclaim_within,
            borrows=would_borrow,
        )

    if not enough(node, need, found.takeable):
        return fail(hopeless=not (found.any() or found.blocked))

    # 3. The fewest that make room.
    placeable, needs_room = room_needed(placeable)

    def fits() -> bool:
        return fits_in(node, need) and placeable()

    victims = _fewest_victims(state, in_order(found.groups, found.own), frs, reach, fits)
    if victims is None:
        return fail()
    return Decision(
        "preempt",
        victims=victims,
        need=dict(need),
        retry_at=found.retry,
        borrows=would_borrow,
        needs_room=needs_room,
    )


def room_needed(placeable: Callable[[], bool]) -> tuple[Callable[[], bool], bool]:
    """`placeable` as the victim search asks it, and whether the preemptor needs room on the
    nodes, decided once before any victim is taken: taking victims only frees room, which never
    makes a placement impossible, so a preemptor that the nodes already hold needs only quota
    from its victims (no placement per candidate victim set, and room freed later cannot
    change its victims)."""
    if placeable():
        return _always, False
    return placeable, True


def _always() -> bool:
    return True


def _fewest_victims(
    state: State,
    order: Iterator[tuple[Charge, str]],
    frs: frozenset[FlavorResource],
    reach: Reach,
    fits: Callable[[], bool],
) -> list[tuple[Charge, str]] | None:
    """The minimal victim set (as Kueue's): take candidates in victim order until the
    preemptor fits, then put back each one taken but the last, the latest taken first, when it
    still fits without taking it. The state is as found on return. None: all of them together
    do not make room."""
    removed: list[tuple[Charge, str]] = []
    for c, why in order:
        if why != reasons.PREEMPTED_WITHIN_CQ and not still_lent(state, reach, c, frs):
            continue
        state.apply(c, -1, mark=False)
        removed.append((c, why))
        if fits():
            break
    else:
        for c, _ in reversed(removed):
            state.apply(c, 1, mark=False)
        return None
    victims = list(removed)
    for i in range(len(removed) - 2, -1, -1):
        c, why = removed[i]
        state.apply(c, 1, mark=False)
        if fits():
            victims.remove((c, why))
        else:
            state.apply(c, -1, mark=False)
    for c, _ in victims:
        state.apply(c, 1, mark=False)
    return victims


def enough(
    node: QNode, need: dict[FlavorResource, int], takeable: dict[FlavorResource, int]
) -> bool:
    """Cheap necessary condition: the candidates hold at least the shortfall of each need."""
    for fr, n in need.items():
        short = n - max(0, available(node, fr))
        if short > 0 and takeable.get(fr, 0) < short:
            return False
    return True


def no_victims(
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
