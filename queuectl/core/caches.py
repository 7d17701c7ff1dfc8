"""Answers the core remembers while what they depend on is unchanged (`State.cache`).

None of it is state: dropping any of it changes no decision, only the work to reach it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from queuectl.core.charges import Charge, Rank, victim_rank
from queuectl.core.node_index import PlacementKey, ShapeIndex
from queuectl.core.quota import QNode
from queuectl.core.types import FlavorResource, Node


@dataclass(slots=True, eq=False)
class Pool:
    """One queue's preemptible work holding some of a short set of (flavor, resource)s."""

    work: tuple[list[Charge], list[Charge]]
    """The `State.old_work` entry it was computed from (a new entry: the queue changed)."""
    usable: list[Charge]
    end: float | None
    """When its first protected work holding some of the short set comes of age."""
    ranked: list[tuple[Rank, Charge]] | None = None
    prios: list[int] = field(default_factory=list)
    cum: dict[FlavorResource, list[int]] = field(default_factory=dict)
    """(flavor, resource) -> usage of the first k ranked, at index k: every policy takes a
    prefix of `ranked` (a priority bound), so a search sums candidates without visiting them."""

    def rank(self, frs: frozenset[FlavorResource]) -> list[tuple[Rank, Charge]]:
        if self.ranked is None:
            self.ranked = sorted((victim_rank(c), c) for c in self.usable)
            self.prios = [c.priority for _, c in self.ranked]
            for fr in frs:
                acc, total = [0], 0
                for _, c in self.ranked:
                    total += c.usage.get(fr, 0)
                    acc.append(total)
                self.cum[fr] = acc
        return self.ranked


@dataclass(slots=True)
class Caches:
    """Remembered answers, each valid while what it depends on is unchanged (see each field);
    dropping any of them changes no decision, only the work to reach it."""

    flavor_nodes: dict[str, list[Node]] = field(default_factory=dict)
    """flavor -> its schedulable nodes; cleared on any node or spec change"""
    placement: dict[PlacementKey, ShapeIndex] = field(default_factory=dict)
    """(flavor, pod selector, tolerations, Topology levels, per-pod node requests) -> what its
    nodes hold of that shape (`node_index`), following `State.node_log`; cleared with
    `flavor_nodes`"""
    old_work: dict[str, tuple[list[Charge], list[Charge]]] = field(default_factory=dict)
    """queue -> (admitted before `old_work_at`, still protected by minimum runtime) at that
    time: victim searches of one cycle share it; any change of the queue's charges drops it"""
    old_work_at: float = float("nan")
    cross_epoch: dict[QNode, int] = field(default_factory=dict)
    """root -> how many times a queue of the tree went over its own quota (held quota aside) of
    something: only that can bring new reclaim candidates inside one admission loop (it stamps
    `no_cross`)"""
    no_cross: dict[
        tuple[QNode, frozenset[FlavorResource]],
        tuple[int, set[str], list[tuple[str, float]]],
    ] = field(default_factory=dict)
    """(root, short (flavor, resource)s) -> (cross epoch, queues that had preemptible work of
    them, (queue, end) of protected work): the last victim search over the tree's borrowers;
    kept only inside an admission loop (see `preempt.search`)"""
    usable_memo: dict[str, dict[frozenset[FlavorResource], Pool]] = field(default_factory=dict)
    """queue -> short (flavor, resource)s -> its `Pool`: a successful search walks ~150
    borrowers, most unchanged since the last walk. Kept only inside an admission loop, where
    `evicting` does not change and `mark_victim` drops the queue's entries."""
