"""What the nodes of one flavor hold of one pod shape, kept between evaluations.

A plain placement (`topology.place`) walks every node of the flavor: how many pods each still
holds, then the domains by their labels. A cycle evaluates hundreds of heads of a few shapes
while only the nodes of an admission (or of a victim tried) change, so on 640 nodes almost all
of that walk is done again for nothing. A `ShapeIndex` keeps, per (nodes, Topology levels, pod
shape), each node's room for that shape (uncapped: `topology.pods_fit` with no limit), each
domain's nodes at every level, and per domain its rooms sorted with prefix sums, so that what a
domain holds of a gang of `count` pods (sum of min(room, count)) is one bisection.

It follows node usage through `ChangeLog`: `State.apply` logs the nodes of every charge added
or taken away (admissions, releases, the victim searches' trials), and an index re-counts only
the nodes logged since it last looked; a log that grew past `ChangeLog.KEEP` is dropped and an
index that had not caught up counts every node again. Anything else that changes what a node
holds (a Node, flavor or Topology changed) drops the indexes (`Caches.placement`).

Whole answers are memoised per (request, count) until a room changes (`ShapeIndex.memo`):
between two admissions the heads of one shape get the same placement. The answers are exactly
those of the plain walk (`topology.place_on` runs the same algorithm on either view), which a
property test checks on random fleets.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from functools import partial

from queuectl.core.slices import Chain, SliceDomain
from queuectl.core.slots import Slot
from queuectl.core.topology import NodeUse, place_on, pods_fit
from queuectl.core.types import Node, Toleration, TopologyAssignment, TopologyRequest

PlacementKey = tuple[
    str,
    tuple[tuple[str, str], ...],
    tuple[Toleration, ...],
    tuple[str, ...],
    tuple[tuple[str, int], ...],
]
"""(flavor, the pod set's node selector, its tolerations, the Topology's levels, per-pod node
requests): what decides a `ShapeIndex`'s nodes and rooms."""

MAX_INDEXES = 64
"""Indexes kept (the least recently used goes first): each costs memory per node, and a cluster
whose pods ask for many different amounts would otherwise keep one per amount."""

UNCAPPED = 1 << 62
"""The limit given to `pods_fit` for a room not yet capped by a gang's count."""


class ChangeLog:
    """The names of nodes whose usage changed, in order, for indexes to catch up from."""

    KEEP = 4096
    """Entries kept; an index further behind counts every node again."""

    __slots__ = ("base", "names")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.base = 0
        """The position of `names[0]` since the log began."""

    @property
    def end(self) -> int:
        return self.base + len(self.names)

    def add(self, names: Iterable[str]) -> None:
        if len(self.names) >= self.KEEP:
            self.base += len(self.names)
            self.names = []
        self.names.extend(names)

    def since(self, pos: int) -> list[str] | None:
        """The nodes changed since position `pos`; None when they are no longer known."""
        if pos < self.base:
            return None
        return self.names[pos - self.base :]


def same_place(old: Node, new: Node) -> bool:
    """The same node for every index (the same flavors, selectors and domains would list it),
    though it may hold other amounts: usage of foreign pods, allocatable, healthy GPUs."""
    return (old.labels, old.taints, old.unschedulable) == (
        new.labels,
        new.taints,
        new.unschedulable,
    )


class _Domain:
    """One domain of one level: its nodes (positions in the index, in node order) and their
    rooms sorted, with prefix sums (rebuilt when one of them changed)."""

    __slots__ = ("members", "prefix", "sorted_rooms")

    def __init__(self) -> None:
        self.members: list[int] = []
        self.sorted_rooms: list[int] | None = None
        self.prefix: list[int] = []

    def holds(self, rooms: list[int], count: int) -> int:
        """Pods of a gang of `count` that its nodes hold: sum of min(room, count)."""
        ordered = self.sorted_rooms
        if ordered is None:
            ordered = sorted(rooms[i] for i in self.members)
            acc, prefix = 0, [0]
            for r in ordered:
                acc += r
                prefix.append(acc)
            self.sorted_rooms, self.prefix = ordered, prefix
        below = bisect_left(ordered, count)
        return self.prefix[below] + (len(ordered) - below) * count


class ShapeIndex:
    """Rooms and domains of one node list for one pod shape (see the module docstring)."""

    __slots__ = (
        "capacities",
        "domains",
        "levels",
        "memo",
        "nodes",
        "of_node",
        "per_pod",
        "pos",
        "position",
        "rooms",
    )

    def __init__(
        self,
        nodes: Sequence[Node],
        capacities: Mapping[str, Mapping[str, int]],
        levels: Sequence[str],
        per_pod: Mapping[str, int],
        used: NodeUse,
        log: ChangeLog,
    ) -> None:
        self.nodes = list(nodes)
        self.capacities = capacities
        self.levels = tuple(levels)
        self.per_pod = per_pod
        self.position = {n.name: i for i, n in enumerate(self.nodes)}
        self.domains: list[dict[tuple[str, ...], _Domain]] = [{} for _ in self.levels]
        self.of_node: list[list[_Domain]] = []
        """Per node, the domains it belongs to (a level whose label, or a coarser one, it
        lacks has none)."""
        for i, n in enumerate(self.nodes):
            mine = []
            key: tuple[str, ...] = ()
            for lv, by_key in zip(self.levels, self.domains, strict=True):
                value = n.labels.get(lv)
                if value is None:
                    break
                key = (*key, value)
                d = by_key.get(key)
                if d is None:
                    d = by_key[key] = _Domain()
                d.members.append(i)
                mine.append(d)
            self.of_node.append(mine)
        self.rooms = [self._room(n, used) for n in self.nodes]
        self.pos = log.end
        self.memo: dict[tuple[TopologyRequest | None, int], TopologyAssignment | str] = {}

    def _room(self, node: Node, used: NodeUse) -> int:
        empty: dict[str, int] = {}
        cap = self.capacities[node.name]
        return pods_fit(node, cap, used.get(node.name, empty), self.per_pod, UNCAPPED)

    def refresh(self, used: NodeUse, log: ChangeLog, nodes: Mapping[str, Node]) -> None:
        """Catch up with the changes logged since the last look: node usage, and Nodes
        replaced by ones that differ only in what they hold (`same_place`), taken from
        `nodes`."""
        changed = log.since(self.pos)
        self.pos = log.end
        if changed is None:
            todo: Iterable[int] = range(len(self.nodes))
        elif not changed:
            return
        else:
            todo = {self.position[name] for name in changed if name in self.position}
        for i in todo:
            node = self.nodes[i] = nodes.get(self.nodes[i].name, self.nodes[i])
            room = self._room(node, used)
            if room != self.rooms[i]:
                self.rooms[i] = room
                for d in self.of_node[i]:
                    d.sorted_rooms = None
                self.memo.clear()

    # --- the view `topology.place_on` reads ---------------------------------------------------
    def slots(self, count: int) -> list[Slot]:
        """Every node with room, in node order, its room capped at `count`."""
        return [
            Slot(n, r if r < count else count)
            for n, r in zip(self.nodes, self.rooms, strict=True)
            if r > 0
        ]

    def total(self, count: int) -> int:
        return sum(r if r < count else count for r in self.rooms)

    def smallest(self, idx: int, count: int) -> tuple[tuple[str, ...], list[Slot]] | None:
        """The domain of level `idx` that holds `count` pods with the least room, ties to the
        smallest key, with its nodes that have room."""
        best: tuple[int, tuple[str, ...]] | None = None
        for key, d in self.domains[idx].items():
            held = d.holds(self.rooms, count)
            if held >= count and (best is None or (held, key) < best):
                best = (held, key)
        if best is None:
            return None
        d = self.domains[idx][best[1]]
        return best[1], self._members(d, count)

    def largest(self, idx: int, count: int) -> int:
        return max((d.holds(self.rooms, count) for d in self.domains[idx].values()), default=0)

    def _members(self, d: _Domain, count: int) -> list[Slot]:
        rooms, nodes = self.rooms, self.nodes
        return [
            Slot(nodes[i], rooms[i] if rooms[i] < count else count)
            for i in d.members
            if rooms[i] > 0
        ]

    def slice_domains(self, chain: Chain, count: int) -> list[SliceDomain]:
        """As `slices.domains_of` builds them from every node, here from the domains' sums:
        the innermost slice level's domains with room (their nodes listed only if asked),
        then each outer level's grouped from the level inside it."""
        idx, size = chain[-1]
        layer: list[SliceDomain] = []
        for key in sorted(self.domains[idx]):
            dom = self.domains[idx][key]
            held = dom.holds(self.rooms, count)
            if held > 0:  # a node with room: the plain walk lists the domain
                fill = partial(self._members, dom, count)
                layer.append(SliceDomain(key, [], held // size, fill=fill))
        for k in range(len(chain) - 2, -1, -1):
            idx, size = chain[k]
            ratio = size // chain[k + 1][1]
            outer: dict[tuple[str, ...], list[SliceDomain]] = {}
            for d in layer:
                outer.setdefault(d.key[: idx + 1], []).append(d)
            layer = [
                SliceDomain(key, [], sum(d.holds for d in inner) // ratio, inner)
                for key, inner in sorted(outer.items())
            ]
        return layer


def place_indexed(
    index: ShapeIndex, request: TopologyRequest | None, count: int
) -> TopologyAssignment | str:
    """`topology.place` on the index's nodes as they are now (`refresh` first), memoised."""
    key = (request, count)
    hit = index.memo.get(key)
    if hit is None:
        hit = index.memo[key] = place_on(index, index.levels, request, count)
    return hit
