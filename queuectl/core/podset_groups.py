"""Pod-set groups: pod sets of one workload that name the same `podSetGroupName` are placed in
ONE domain of their topology level together (a PyTorchJob's master with its workers, an LWS
leader with its pods), as Kueue's PodSetGroup does.

Placed one by one, each pod set would take the smallest domain that holds it alone, so a
master could land in a half-free rack and its workers in another. So the first member placed
searches the domains for one where every member fits, one after another with the usage of those
before it; that domain is pinned and the later members are placed inside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from queuectl.core.topology import NodeUse, add_use, charge_of, place, with_use
from queuectl.core.types import Node, PodSet, TopologyAssignment, Workload


@dataclass(slots=True)
class Grouping:
    """One workload's pod-set groups and, once a member is placed, the domain each is pinned to."""

    members: dict[str, list[PodSet]]
    """group name -> its pod sets, in the workload's order"""
    pins: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    """group name -> (topology name, the domain's label values, coarse to its level)"""

    @classmethod
    def of(cls, w: Workload) -> Grouping | None:
        """None for the usual workload, whose pod sets name no group."""
        members: dict[str, list[PodSet]] = {}
        for ps in w.podsets:
            group = ps.topology.group if ps.topology is not None else None
            if group is not None:
                members.setdefault(group, []).append(ps)
        return cls(members) if members else None

    def mismatch(self) -> str | None:
        """Members of a group must ask for the same level the same way; say which do not."""
        for group, pods in sorted(self.members.items()):
            asks = {(ps.topology.required, ps.topology.preferred) for ps in pods if ps.topology}
            if len(asks) > 1:
                listed = ", ".join(ps.name for ps in pods)
                return (
                    f"pod sets {listed} of pod-set group {group} ask for different topology "
                    "levels; give every member the same required (or preferred) level"
                )
        return None

    def pin(self, ps: PodSet, topology: str, placed: TopologyAssignment) -> None:
        group = ps.topology.group if ps.topology is not None else None
        if group is not None and group not in self.pins and placed.level is not None:
            self.pins[group] = (topology, placed.domain)


@dataclass(frozen=True, slots=True)
class Ground:
    """What placing one pod set stands on: its flavor's nodes and topology, and node usage."""

    topology: str
    levels: Sequence[str]
    capacities: Mapping[str, Mapping[str, int]]
    used: NodeUse


def _inside(node: Node, levels: Sequence[str], domain: tuple[str, ...]) -> bool:
    return all(node.labels.get(levels[i]) == v for i, v in enumerate(domain))


def place_member(
    ground: Ground,
    grouping: Grouping,
    ps: PodSet,
    nodes: Sequence[Node],
    per_pod: Mapping[str, int],
    mates: Sequence[tuple[PodSet, Sequence[Node], Mapping[str, int]]],
) -> TopologyAssignment | str:
    """Place `ps`, a member of a group: inside its group's pinned domain, or, as the first
    member, in the first domain (best fit for `ps`) where `mates` (the other members, with
    their nodes and per-pod requests on this flavor) fit after it."""
    assert ps.topology is not None and ps.topology.group is not None
    group = ps.topology.group
    pin = grouping.pins.get(group)
    if pin is not None:
        topology, domain = pin
        if topology != ground.topology:
            return f"pod-set group {group} is placed in topology {topology}"
        inside = [n for n in nodes if _inside(n, ground.levels, domain)]
        return place(
            inside, ground.capacities, ground.used, ground.levels, ps.topology, ps.count, per_pod
        )
    level = ps.topology.required or ps.topology.preferred
    if level is None or level not in ground.levels:
        return place(
            nodes, ground.capacities, ground.used, ground.levels, ps.topology, ps.count, per_pod
        )
    tried: set[tuple[str, ...]] = set()
    depth = ground.levels.index(level) + 1
    while True:
        first = place(
            [n for n in nodes if _domain(n, ground.levels, depth) not in tried],
            ground.capacities,
            ground.used,
            ground.levels,
            ps.topology,
            ps.count,
            per_pod,
        )
        if isinstance(first, str) or first.level != level:
            break  # no domain of the level holds even this member (or it fell back coarser)
        if _mates_fit(ground, first, per_pod, mates):
            return first
        tried.add(first.domain)
    if ps.topology.preferred is not None:  # preferred: together if possible, else apart
        return place(
            nodes, ground.capacities, ground.used, ground.levels, ps.topology, ps.count, per_pod
        )
    pods = ps.count + sum(m.count for m, _, _ in mates)
    return (
        f"no {level} domain has room for pod-set group {group} "
        f"({pods} pods of {1 + len(mates)} pod sets)"
    )


def _domain(node: Node, levels: Sequence[str], depth: int) -> tuple[str, ...]:
    return tuple(node.labels.get(lv) or "" for lv in levels[:depth])


def _mates_fit(
    ground: Ground,
    first: TopologyAssignment,
    per_pod: Mapping[str, int],
    mates: Sequence[tuple[PodSet, Sequence[Node], Mapping[str, int]]],
) -> bool:
    extra: NodeUse = {}
    add_use(extra, charge_of(first, per_pod))
    for mate, nodes, mate_per_pod in mates:
        inside = [n for n in nodes if _inside(n, ground.levels, first.domain)]
        used = with_use(ground.used, extra)
        placed = place(
            inside, ground.capacities, used, ground.levels, mate.topology, mate.count, mate_per_pod
        )
        if isinstance(placed, str):
            return False
        add_use(extra, charge_of(placed, mate_per_pod))
    return True
