"""The simulated fleet's GPUs, node by node: what is free, which nodes are down, and where the
pods of an admission land (the topology's own nodes, or best fit as kube-scheduler packs them).

The core decides admissions from its own view of the nodes; this is the kubelet side of the
simulation, so a failed node knows which jobs ran on it and fragmentation can be sampled.
"""

from __future__ import annotations

from collections.abc import Mapping

from queuectl.core import GPU, Node
from queuectl.core.fleet import fragmentation_ratio
from queuectl.core.types import Flavor

Placed = list[tuple[str, int]]
"""(node, GPUs) that one admission holds."""


class SimFleet:
    def __init__(self, nodes: tuple[Node, ...], flavors: tuple[Flavor, ...]) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.down: set[str] = set()
        self.free = {n.name: n.allocatable.get(GPU, 0) for n in nodes}
        self.by_flavor = {
            f.name: [
                n.name for n in nodes if all(n.labels.get(k) == v for k, v in f.node_labels.items())
            ]
            for f in flavors
        }
        self.up_by_flavor: dict[str, list[str]] = {}
        """`by_flavor` less the nodes that are down (dropped whenever `down` changes)."""

    @property
    def capacity(self) -> int:
        """GPUs on every node, up or down."""
        return sum(n.allocatable.get(GPU, 0) for n in self.nodes.values())

    def take(self, placed: Placed, node: str, gpus: int) -> None:
        self.free[node] = self.free.get(node, 0) - gpus
        placed.append((node, gpus))

    def place(self, placed: Placed, flavor: str, per_pod: int, count: int) -> int:
        """Pods of a flavor without a Topology: best fit, as kube-scheduler's MostAllocated
        scoring would pack them (the core does not tie them to nodes). Returns the pods that
        found no node."""
        candidates = self.up_by_flavor.get(flavor)
        if candidates is None:
            candidates = [n for n in self.by_flavor.get(flavor, ()) if n not in self.down]
            self.up_by_flavor[flavor] = candidates
        unplaced = 0
        for _ in range(count):
            best = None
            for n in candidates:
                f = self.free[n]
                if f >= per_pod and (best is None or f < self.free[best]):
                    best = n
                    if f == per_pod:
                        break
            if best is None:
                unplaced += 1
                continue
            self.take(placed, best, per_pod)
        return unplaced

    def release(self, placed: Placed) -> None:
        for node, gpus in placed:
            self.free[node] += gpus
        placed.clear()

    def up(self) -> list[str]:
        """The nodes that are up, by name."""
        return sorted(n for n in self.nodes if n not in self.down)

    def fail(self, name: str) -> int:
        """Mark `name` down; returns the GPUs it takes out of capacity."""
        self.down.add(name)
        self.up_by_flavor.clear()
        return self.nodes[name].allocatable.get(GPU, 0)

    def repair(self, name: str) -> int:
        """Mark `name` up again; returns the GPUs it gives back to capacity."""
        self.down.discard(name)
        self.up_by_flavor.clear()
        return self.nodes[name].allocatable.get(GPU, 0)

    def fragmentation(self, pending_sizes: Mapping[int, int]) -> float:
        free = {n: f for n, f in self.free.items() if n not in self.down}
        return fragmentation_ratio(free, pending_sizes)
