"""Placing a gang on real nodes inside one topology domain.

Quota says whether a workload may run; this module says whether the nodes can hold it, counting
free capacity per node (a 16-GPU gang does not fit two racks with 8 free GPUs each when rack is
required). Best fit at every level: the smallest domain that holds the pods, so that large domains
stay whole for large gangs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from queuectl.core.slices import Chain, SliceDomain, SliceView, domains_of, place_sliced, spread
from queuectl.core.slots import Slot, distribute, label
from queuectl.core.types import (
    GPU,
    DomainAssignment,
    Node,
    Taint,
    Toleration,
    TopologyAssignment,
    TopologyRequest,
)

NodeUse = dict[str, dict[str, int]]
"""node name -> resource -> amount"""

_HARD_EFFECTS = ("NoSchedule", "NoExecute")


def tolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> bool:
    """True when every hard taint is tolerated."""
    return all(
        taint.effect not in _HARD_EFFECTS or any(t.tolerates(taint) for t in tolerations)
        for taint in taints
    )


def node_capacity(node: Node) -> dict[str, int]:
    """Allocatable, with GPUs capped at the healthy count the agent reports."""
    cap = dict(node.allocatable)
    if node.healthy_gpus is not None and GPU in cap:
        cap[GPU] = min(cap[GPU], max(0, node.healthy_gpus))
    return cap


def pods_fit(
    node: Node,
    capacity: Mapping[str, int],
    used: Mapping[str, int],
    per_pod: Mapping[str, int],
    limit: int,
) -> int:
    """How many pods of `per_pod` the node still holds (at most `limit`).

    Only resources the node reports are checked, except extended resources (`vendor/name`,
    such as `nvidia.com/mig-1g.10gb`): as for the kube-scheduler, a node that does not report
    one has none. A node that reports `pods` also caps the count.
    """
    best = limit
    for res, want in per_pod.items():
        if want <= 0 or (res not in capacity and "/" not in res):
            continue
        free = capacity.get(res, 0) - node.used.get(res, 0) - used.get(res, 0)
        n = free // want if free > 0 else 0
        if n < best:
            best = n
    if "pods" in capacity and "pods" not in per_pod:
        free = capacity["pods"] - node.used.get("pods", 0) - used.get("pods", 0)
        best = min(best, max(0, free))
    return max(0, best)


def _assignment(
    picks: list[tuple[Slot, int]],
    levels: Sequence[str],
    level: str | None,
    domain: tuple[str, ...],
) -> TopologyAssignment:
    domains = tuple(
        DomainAssignment(
            values=tuple(label(s.node, lv) for lv in levels), nodes=(s.node.name,), count=n
        )
        for s, n in sorted(picks, key=lambda p: p[0].node.name)
        if n > 0
    )
    return TopologyAssignment(levels=tuple(levels), level=level, domain=domain, domains=domains)


def _in_one_domain(
    slots: list[Slot], count: int, levels: Sequence[str], idx: int
) -> tuple[tuple[str, ...], list[Slot]] | None:
    """The smallest domain at level `idx` whose nodes hold `count` pods."""
    domains: dict[tuple[str, ...], list[Slot]] = {}
    keys = levels[: idx + 1]
    for s in slots:
        values = tuple(s.node.labels.get(k) for k in keys)
        if any(v is None for v in values):
            continue
        domains.setdefault(tuple(v or "" for v in values), []).append(s)
    best: tuple[int, tuple[str, ...]] | None = None
    for key, group in domains.items():
        cap = sum(s.cap for s in group)
        if cap >= count and (best is None or (cap, key) < best):
            best = (cap, key)
    if best is None:
        return None
    return best[1], domains[best[1]]


class NodeView(SliceView, Protocol):
    """The nodes as placement reads them, for a gang of `count` pods: a plain walk (`_Plain`)
    or the index kept between evaluations (`node_index.ShapeIndex`); both give the same
    answers."""

    def slots(self, count: int) -> list[Slot]:
        """Every node with room, in node order, its room capped at `count`."""
        ...

    def total(self, count: int) -> int: ...

    def smallest(self, idx: int, count: int) -> tuple[tuple[str, ...], list[Slot]] | None:
        """The domain of level `idx` that holds `count` pods with the least room (ties: the
        smallest label values), with its nodes that have room."""
        ...

    def largest(self, idx: int, count: int) -> int:
        """What the domain of level `idx` that holds the most pods holds."""
        ...


class _Plain:
    """The view of a plain walk: the slots counted for this one placement."""

    def __init__(self, slots: list[Slot], levels: Sequence[str]) -> None:
        self._slots = slots
        self._levels = levels

    def slots(self, count: int) -> list[Slot]:
        return self._slots

    def total(self, count: int) -> int:
        return sum(s.cap for s in self._slots)

    def smallest(self, idx: int, count: int) -> tuple[tuple[str, ...], list[Slot]] | None:
        return _in_one_domain(self._slots, count, self._levels, idx)

    def largest(self, idx: int, count: int) -> int:
        return _largest_domain(self._slots, self._levels, idx)

    def slice_domains(self, chain: Chain, count: int) -> list[SliceDomain]:
        return domains_of(self._slots, self._levels, chain)


def place(
    nodes: Sequence[Node],
    capacities: Mapping[str, Mapping[str, int]],
    used: NodeUse,
    levels: Sequence[str],
    request: TopologyRequest | None,
    count: int,
    per_pod: Mapping[str, int],
) -> TopologyAssignment | str:
    """Place `count` pods of `per_pod` on `nodes`; an error message when no placement exists."""
    empty: dict[str, int] = {}
    slots = []
    for n in nodes:
        cap = pods_fit(n, capacities[n.name], used.get(n.name, empty), per_pod, count)
        if cap > 0:
            slots.append(Slot(n, cap))
    return place_on(_Plain(slots, levels), levels, request, count)


def place_on(
    view: NodeView, levels: Sequence[str], request: TopologyRequest | None, count: int
) -> TopologyAssignment | str:
    """Place `count` pods on the nodes `view` shows; an error message when no placement
    exists."""
    if request is not None and request.slices:
        return place_sliced(view, levels, request, count)
    wanted = request.required or request.preferred if request is not None else None
    if wanted is not None:
        if wanted not in levels:
            return f"topology level {wanted!r} is not one of {list(levels)}"
        idx = levels.index(wanted)
        lowest = idx if request is not None and request.required else 0
        for i in range(idx, lowest - 1, -1):
            found = view.smallest(i, count)
            if found is not None:
                domain, members = found
                if request is not None and request.balanced:
                    return _evenly(members, levels, i + 1, count, (levels[i], domain))
                picks = distribute(members, count, levels, i + 1)
                return _assignment(picks, levels, levels[i], domain)
        if request is not None and request.required:
            largest = view.largest(idx, count)
            return (
                f"no {wanted} domain has room for {count} pods "
                f"(the largest holds {largest}; {view.total(count)} fit over all nodes)"
            )
    total = view.total(count)
    if total < count:
        return f"the nodes hold {total} of {count} pods"
    slots = view.slots(count)
    if request is not None and request.balanced:
        return _evenly(slots, levels, 0, count, (None, ()))
    return _assignment(distribute(slots, count, levels, 0), levels, None, ())


def _evenly(
    members: list[Slot],
    levels: Sequence[str],
    idx: int,
    count: int,
    where: tuple[str | None, tuple[str, ...]],
) -> TopologyAssignment:
    """Balance without slices: slices of one pod over the domains of the level below the chosen
    domain (over nodes below the last level)."""
    placed = spread(members, levels, ((idx, 1),), count, True, where)
    assert placed is not None  # the domain (or all nodes) was chosen for holding `count`
    return placed


def _largest_domain(slots: list[Slot], levels: Sequence[str], idx: int) -> int:
    sums: dict[tuple[str | None, ...], int] = {}
    for s in slots:
        key = tuple(s.node.labels.get(k) for k in levels[: idx + 1])
        if None not in key:
            sums[key] = sums.get(key, 0) + s.cap
    return max(sums.values(), default=0)


def add_use(into: NodeUse, more: Mapping[str, Mapping[str, int]], sign: int = 1) -> None:
    """Add (sign=1) or take away (sign=-1) per-node usage `more` into `into`, in place: the one
    home of node-usage merging (charges, the core's own node accounting, placement)."""
    for node, use in more.items():
        dst = into.setdefault(node, {})
        for res, v in use.items():
            dst[res] = dst.get(res, 0) + sign * v


def with_use(base: NodeUse, more: NodeUse) -> NodeUse:
    """`base` plus `more`, leaving `base` untouched (only the nodes of `more` are copied)."""
    if not more:
        return base
    out = dict(base)
    for node in more:
        out[node] = dict(base.get(node, {}))
    add_use(out, more)
    return out


def node_requests(per_pod: Mapping[str, int], resources: Mapping[str, str]) -> Mapping[str, int]:
    """Per-pod requests as a node sees them: quota resources renamed by a flavor's
    `node_resources` (one `nvidia.com/gpu` is one `nvidia.com/mig-3g.40gb` on a MIG flavor)."""
    if not resources:
        return per_pod
    out: dict[str, int] = {}
    for res, v in per_pod.items():
        name = resources.get(res, res)
        out[name] = out.get(name, 0) + v
    return out


def charge_of(assignment: TopologyAssignment, per_pod: Mapping[str, int]) -> NodeUse:
    """Node usage of a placed pod set (for the core's own per-node accounting)."""
    out: NodeUse = {}
    for d in assignment.domains:
        for node in d.nodes:
            use = out.setdefault(node, {})
            for res, v in per_pod.items():
                if v > 0:
                    use[res] = use.get(res, 0) + v * d.count
            use["pods"] = use.get("pods", 0) + d.count
    return out
