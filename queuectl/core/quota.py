"""The quota tree: cohorts of any depth with ClusterQueues as leaves.

Every node keeps, per (flavor, resource):
- `subtree`: its nominal quota plus what its children lend it (child subtree minus the part the
  child keeps for itself when it has a lendingLimit);
- `guaranteed`: the part of `subtree` only this node's subtree may use (subtree - lendingLimit);
- `usage`: for a queue, the sum of what its admitted workloads hold; for a cohort, what its children
  use beyond their guaranteed part (so a child's own guaranteed quota never shows up upstairs).

`available(node)` is what the node could take now: its unused guaranteed part plus what its parent
could give it, capped by its borrowingLimit. The invariant the scheduler keeps, and the property
tests check independently: at every node usage fits that node's limits (see `violations`).

`available` and `share` are asked the same questions many times between two usage changes (one
evaluation asks `available` ~10 times, the cycle's heap recomputes share paths at every pop), so
each node remembers its last answers, stamped with usage versions: `ver` grows whenever the
node's own usage changes, and quotas and limits never change after `compute_subtree`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from queuectl.core.types import FlavorResource


class QNode:
    """One node of the tree: a cohort or a ClusterQueue."""

    __slots__ = (
        "avail_memo",
        "borrowing_limit",
        "chain",
        "children",
        "guaranteed",
        "is_queue",
        "lending_limit",
        "name",
        "nominal",
        "parent",
        "pot_memo",
        "share_memo",
        "subtree",
        "tree_ver",
        "usage",
        "ver",
        "weight",
    )

    def __init__(self, name: str, is_queue: bool, weight: float = 1.0) -> None:
        self.name = name
        self.is_queue = is_queue
        self.weight = weight if weight >= 0 else 1.0
        self.parent: QNode | None = None
        self.children: list[QNode] = []
        self.nominal: dict[FlavorResource, int] = {}
        self.borrowing_limit: dict[FlavorResource, int] = {}
        self.lending_limit: dict[FlavorResource, int] = {}
        self.subtree: dict[FlavorResource, int] = {}
        self.guaranteed: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        self.ver = 0
        """Bumped on every change of `usage`: stamps the memos below."""
        self.tree_ver = 0
        """On a root: bumped on every usage change anywhere in its tree (`add_usage`)."""
        self.avail_memo: dict[FlavorResource, tuple[int, int, int]] = {}
        """fr -> (the root's `tree_ver`, sum of `ver` from here to the root, `available`) when
        last computed or confirmed."""
        self.share_memo: tuple[int, float] = (-1, 0.0)
        """(`ver`, `share`) when last computed."""
        self.pot_memo: dict[FlavorResource, int] = {}
        """fr -> `potential` (quotas and limits never change after `compute_subtree`)."""
        self.chain: tuple[QNode, ...] = ()
        """This node and its ancestors, leaf first (set by `compute_subtree`; the tree's shape
        never changes after it): `available` sums their versions on every call."""

    @property
    def root(self) -> QNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def borrowed(self, fr: FlavorResource) -> int:
        """What this node uses beyond its own subtree quota."""
        return max(0, self.usage.get(fr, 0) - self.subtree.get(fr, 0))

    def borrows(self, fr: FlavorResource, more: int = 0) -> bool:
        """Would this node use more than its own subtree quota of `fr` with `more` added to its
        usage? The one home of "is this queue borrowing": `more=0` asks about now, a need asks
        about admitting it, minus held quota asks about the queue's own running work."""
        return self.usage.get(fr, 0) + more > self.subtree.get(fr, 0)


def compute_subtree(node: QNode) -> None:
    """Fill `subtree` and `guaranteed` bottom-up from nominal quotas and lending limits."""
    node.chain = _chain(node)
    for child in node.children:
        compute_subtree(child)
    subtree = dict(node.nominal)
    for child in node.children:
        for fr, quota in child.subtree.items():
            lent = quota - child.guaranteed.get(fr, 0)
            subtree[fr] = subtree.get(fr, 0) + lent
    node.subtree = subtree
    guaranteed: dict[FlavorResource, int] = {}
    if node.parent is not None:
        for fr, limit in node.lending_limit.items():
            quota = subtree.get(fr, 0)
            if quota > limit:
                guaranteed[fr] = quota - limit
    node.guaranteed = guaranteed
    node.avail_memo = {}
    node.pot_memo = {}
    node.share_memo = (-1, 0.0)


def add_usage(node: QNode | None, fr: FlavorResource, delta: int) -> None:
    """Add `delta` to a queue's usage and carry the part beyond guaranteed up the tree."""
    if node is None or not delta:
        return
    (node.chain or _chain(node))[-1].tree_ver += 1
    while node is not None and delta:
        g = node.guaranteed.get(fr, 0)
        before = node.usage.get(fr, 0)
        after = before + delta
        if after:
            node.usage[fr] = after
        else:
            node.usage.pop(fr, None)
        node.ver += 1
        if not g:
            node = node.parent
            continue
        delta = max(0, after - g) - max(0, before - g)
        node = node.parent


def available(node: QNode, fr: FlavorResource) -> int:
    """What `node` could take of `fr` right now without breaking any limit up the tree."""
    chain = node.chain or _chain(node)
    tv = chain[-1].tree_ver
    memo = node.avail_memo.get(fr)
    if memo is not None and memo[0] == tv:
        return memo[2]  # no usage changed anywhere in the tree
    stamp = 0
    for cur in chain:
        stamp += cur.ver
    # Versions only grow, so an unchanged sum means no usage on the path changed.
    if memo is not None and memo[1] == stamp:
        node.avail_memo[fr] = (tv, stamp, memo[2])
        return memo[2]
    parent = node.parent
    if parent is None:
        avail = node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    else:
        # What the parent could take is shared by all its children (and remembered there):
        # one step down from it, as `_down` takes each step.
        avail = available(parent, fr)
        g = node.guaranteed.get(fr, 0)
        u = node.usage.get(fr, 0)
        limit = node.borrowing_limit.get(fr)
        if limit is not None:
            cap = node.subtree.get(fr, 0) - g - (u - g if u > g else 0) + limit
            if cap < avail:
                avail = cap
        avail += g - u if g > u else 0
    node.avail_memo[fr] = (tv, stamp, avail)
    return avail


def _chain(node: QNode) -> tuple[QNode, ...]:
    """The node and its ancestors, leaf first."""
    chain: list[QNode] = []
    cur: QNode | None = node
    while cur is not None:
        chain.append(cur)
        cur = cur.parent
    return tuple(chain)


def available_then(
    node: QNode, fr: FlavorResource, then: Mapping[QNode, Mapping[FlavorResource, int]]
) -> int:
    """`available` as it was when the nodes in `then` had those usages (the others as now)."""
    chain: list[QNode] = []
    cur: QNode | None = node
    while cur is not None:
        chain.append(cur)
        cur = cur.parent
    return _down(chain, fr, then)


def _down(
    chain: list[QNode],
    fr: FlavorResource,
    then: Mapping[QNode, Mapping[FlavorResource, int]] | None,
) -> int:
    """Walk `chain` (leaf first) from the root down: the root's free quota, capped at each node
    by its borrowingLimit, plus each node's unused guaranteed part."""
    root = chain.pop()
    usage = then.get(root, root.usage) if then else root.usage
    avail = root.subtree.get(fr, 0) - usage.get(fr, 0)
    while chain:
        n = chain.pop()
        g = n.guaranteed.get(fr, 0)
        usage = then.get(n, n.usage) if then else n.usage
        u = usage.get(fr, 0)
        limit = n.borrowing_limit.get(fr)
        if limit is not None:
            stored = n.subtree.get(fr, 0) - g
            in_parent = u - g if u > g else 0
            cap = stored - in_parent + limit
            if cap < avail:
                avail = cap
        avail += g - u if g > u else 0
    return avail


def potential(node: QNode, fr: FlavorResource) -> int:
    """What `node` could take of `fr` if nobody else used anything: the most it can ever hold."""
    memo = node.pot_memo.get(fr)
    if memo is not None:
        return memo
    chain = list(node.chain or _chain(node))
    root = chain.pop()
    avail = root.subtree.get(fr, 0)
    while chain:
        n = chain.pop()
        g = n.guaranteed.get(fr, 0)
        limit = n.borrowing_limit.get(fr)
        if limit is not None:
            avail = min(avail, n.subtree.get(fr, 0) - g + limit)
        avail += g
    node.pot_memo[fr] = avail
    return avail


def share(node: QNode) -> float:
    """Weighted dominant-resource share: the largest fraction of its parent's pool it borrows."""
    parent = node.parent
    if parent is None:
        return 0.0
    memo = node.share_memo
    if memo[0] == node.ver:
        return memo[1]
    node.share_memo = (node.ver, share_on(node, parent, node.usage.items()))
    return node.share_memo[1]


def share_on(node: QNode, parent: QNode, usage: Iterable[tuple[FlavorResource, int]]) -> float:
    """`share` of `node` on the given usages (its own, or as they will be, fair_shares.Shares):
    the largest fraction of the parent's pool it uses beyond its own quota, over its weight."""
    best = 0.0
    for fr, used in usage:
        over = used - node.subtree.get(fr, 0)
        if over <= 0:
            continue
        pool = parent.subtree.get(fr, 0)
        frac = over / pool if pool > 0 else float(over)
        if frac > best:
            best = frac
    return weighted(best, node.weight)


def weighted(share: float, weight: float) -> float:
    """A share over its weight. Weight 0 means "borrow only what nobody else wants" (as in
    Kueue): any borrowing weighs more than every weighted share, none weighs nothing."""
    if weight > 0:
        return share / weight
    return math.inf if share > 0 else 0.0


def share_path(node: QNode) -> tuple[float, ...]:
    """Shares from the top cohort's child down to the queue; lexicographic order = tournament."""
    shares: list[float] = []
    cur: QNode | None = node
    while cur is not None and cur.parent is not None:
        shares.append(share(cur))
        cur = cur.parent
    shares.reverse()
    return tuple(shares)


def violations(nodes: Iterable[QNode]) -> list[str]:
    """Every node whose usage breaks its limits (empty when the tree is sound)."""
    out: list[str] = []
    for n in nodes:
        for fr, u in n.usage.items():
            if u < 0:
                out.append(f"{n.name} {fr}: negative usage {u}")
            if n.parent is None:
                if u > n.subtree.get(fr, 0):
                    out.append(f"{n.name} {fr}: usage {u} > quota {n.subtree.get(fr, 0)}")
                continue
            limit = n.borrowing_limit.get(fr)
            if limit is not None and u > n.subtree.get(fr, 0) + limit:
                out.append(f"{n.name} {fr}: usage {u} > quota+borrowingLimit")
    return out
