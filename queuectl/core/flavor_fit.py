"""Choosing a flavor for one resource group of a pod set: the rule `assign` and `foresee` share.

The queue's flavors are tried in order. The first that fits within the queue's quota (and, for
a flavor with a Topology, on the nodes) wins. One that fits only by borrowing, or only by
preempting, is taken at once or remembered while later flavors are tried, as
`flavorFungibility` says. With no flavor chosen, the most useful reason why is told (the first
of the lowest rank met, `_PLACEMENT` first); it is built only then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from queuectl.core import reasons
from queuectl.core.node_index import MAX_INDEXES, ShapeIndex, place_indexed
from queuectl.core.podset_groups import Ground, Grouping, place_member
from queuectl.core.quota import QNode, available, potential
from queuectl.core.results import PendingInfo, waiting_for_quota
from queuectl.core.state import State
from queuectl.core.topology import NodeUse, node_requests, place, tolerated, with_use
from queuectl.core.types import (
    ClusterQueue,
    Flavor,
    FlavorResource,
    PodSet,
    ResourceGroup,
    TopologyAssignment,
    Workload,
)

Mode = Literal["fit", "borrow", "preempt"]
# Why no flavor was chosen, most useful to tell the user first: the first reason of the lowest
# rank met in the walk.
_PLACEMENT, _QUOTA, _EXCEEDS, _NO_RANK = 0, 1, 2, 3
"""TopologyPlacementFailed, WaitingForQuota, ExceedsMaxQuota; none yet (NoMatchingFlavor)."""


@dataclass(slots=True)
class Choice:
    flavor: str
    mode: Mode
    topology: TopologyAssignment | None = None


class NoFit(Exception):
    """No flavor for a part of the workload; `reason` builds why (only when it is told)."""

    def __init__(self, reason: Callable[[], PendingInfo]) -> None:
        self.reason = reason


@dataclass(slots=True)
class Notes:
    """What would have to change for a failed workload to fit: the wake-up conditions."""

    shorts: list[tuple[FlavorResource, int]] = field(default_factory=list)
    topology: bool = False
    placement: str | None = None
    """The first "quota allows it but no domain holds it" message, with the domain figures."""
    depends: list[FlavorResource] = field(default_factory=list)


@dataclass(slots=True)
class Fitting:
    """One workload's flavor choices in progress: what they read, and what is taken so far."""

    state: State
    w: Workload
    cq: ClusterQueue
    node: QNode
    taken: dict[FlavorResource, int]
    """What the pod sets chosen before take, per (flavor, resource)."""
    extra: NodeUse
    """What they take of each node (flavors with a Topology)."""
    notes: Notes
    grouping: Grouping | None
    places: bool = True
    """False: a flavor with a Topology ends the walk unanswered (`choose_flavor` answers None)
    instead of placing on the nodes (`foresee`: node placement would decide)."""
    explains: bool = True
    """False: no reason is built, nor notes kept, for a "no" (`foresee` needs only the kind)."""


def ineligible(flavor: Flavor, ps: PodSet) -> str | None:
    for k, v in ps.node_selector.items():
        have = flavor.node_labels.get(k)
        if have is not None and have != v:
            return f"node selector {k}={v} conflicts with the flavor's {k}={have}"
    if not tolerated(flavor.node_taints, flavor.tolerations + ps.tolerations):
        return "the pod set does not tolerate the flavor's taints"
    return None


def place_podset(
    state: State, flavor: Flavor, ps: PodSet, extra: NodeUse, grouping: Grouping | None = None
) -> TopologyAssignment | str | None:
    """Node placement for a flavor with a Topology (None: the flavor has none); a member of a
    pod-set group goes where its group is, or where all of it fits (`podset_groups`)."""
    if flavor.topology_name is None:
        return None
    topo = state.topologies.get(flavor.topology_name)
    if topo is None:
        return f"topology {flavor.topology_name} of flavor {flavor.name} not found"
    per_pod = node_requests(ps.requests, flavor.node_resources)
    group = ps.topology.group if ps.topology is not None else None
    if (grouping is None or group is None) and not extra and ps.count > 0:
        return place_indexed(
            shape_index(state, flavor, ps, topo.levels, per_pod), ps.topology, ps.count
        )
    used = with_use(state.node_used, extra)
    nodes = state.nodes_for(flavor, ps)
    if grouping is None or group is None:
        return place(nodes, state.capacity, used, topo.levels, ps.topology, ps.count, per_pod)
    mates = [
        (m, state.nodes_for(flavor, m), node_requests(m.requests, flavor.node_resources))
        for m in grouping.members[group]
        if m is not ps and group not in grouping.pins
    ]
    ground = Ground(flavor.topology_name, topo.levels, state.capacity, used)
    return place_member(ground, grouping, ps, nodes, per_pod, mates)


def shape_index(
    state: State, flavor: Flavor, ps: PodSet, levels: tuple[str, ...], per_pod: Mapping[str, int]
) -> ShapeIndex:
    """The index of what the flavor's nodes (for this pod set's selector and tolerations) hold
    of `per_pod`, caught up with node usage: kept across evaluations (`Caches.placement`)."""
    key = (
        flavor.name,
        tuple(sorted(ps.node_selector.items())),
        ps.tolerations,
        levels,
        tuple(sorted(per_pod.items())),
    )
    kept = state.cache.placement
    index = kept.pop(key, None)
    if index is None:
        nodes = state.nodes_for(flavor, ps)
        index = ShapeIndex(nodes, state.capacity, levels, per_pod, state.node_used, state.node_log)
        if len(kept) >= MAX_INDEXES:
            del kept[next(iter(kept))]  # the least recently used
    else:
        index.refresh(state.node_used, state.node_log, state.nodes)
    kept[key] = index  # last: the most recently used
    return index


Short = tuple[FlavorResource, int, int]
"""What a part lacks in a flavor: (flavor, resource), what it needs, what is available."""


def quota_fit(
    node: QNode,
    flavor: str,
    rs: list[str],
    totals: dict[str, int],
    taken: dict[FlavorResource, int],
) -> tuple[bool, bool, bool, Short | None]:
    """The part (`rs` of `totals`, on top of what is `taken`) in `flavor`: (does it fit in
    what the queue may use now, does it borrow, could it ever fit (`potential`), what is short:
    the first resource that can never fit, else the first short now)."""
    fits, borrows, possible = True, False, True
    short: Short | None = None
    for r in rs:
        fr = (flavor, r)
        n = taken.get(fr, 0) + totals[r]
        a = available(node, fr)
        if n > a:
            fits = False
            p = potential(node, fr)
            if n > p:
                if possible:
                    short = (fr, n, p)
                possible = False
            elif short is None:
                short = (fr, n, a)
        if node.borrows(fr, n):
            borrows = True
    return fits, borrows, possible, short


def choose_flavor(
    f: Fitting, ps: PodSet, group: ResourceGroup, rs: list[str], totals: dict[str, int]
) -> Choice | None:
    """The flavor for resources `rs` of pod set `ps` (totals over its pods), by the rule of the
    module docstring: one that fits within quota at once; one that fits only by borrowing at
    once when `whenCanBorrow` is Borrow, else the first such after the walk; one that fits only
    by preempting (quota short, or node placement failed) at once when `whenCanPreempt` is
    Preempt, it is short of quota and no borrowing fit came before, else the first such after
    the walk, behind a borrowing fit. None: not answered (`Fitting.places`), or no flavor
    when `Fitting.explains` is False; with it, no flavor raises `NoFit`."""
    state, cq, node, explains = f.state, f.cq, f.node, f.explains
    fungibility = cq.flavor_fungibility
    borrow_choice: Choice | None = None
    preempt_choice: Choice | None = None
    worst = _NO_RANK
    """The rank of the most useful reason so far; it is built (`why`) only if no flavor is
    chosen."""
    why: Callable[[], PendingInfo] | None = None
    skipped: list[str] = []
    for fq in group.flavors:
        flavor = state.flavors[fq.name]
        if not f.places and flavor.topology_name is not None:
            return None  # node placement decides: not sure
        bad = ineligible(flavor, ps)
        if bad is not None:
            if explains:
                skipped.append(f"{flavor.name}: {bad}")
            continue
        fits, borrows, possible, short = quota_fit(node, flavor.name, rs, totals, f.taken)
        if fits:
            topo = place_podset(state, flavor, ps, f.extra, f.grouping)
            if isinstance(topo, str):
                msg = f"quota allows flavor {flavor.name} for pod set {ps.name} but {topo}"
                f.notes.topology = True
                f.notes.placement = f.notes.placement or msg
                if worst > _PLACEMENT:
                    worst, why = _PLACEMENT, partial(_unplaced, f.w.key, msg, flavor.name)
                if cq.preemption.any and preempt_choice is None:
                    preempt_choice = Choice(flavor.name, "preempt")
                continue
            choice = Choice(flavor.name, "borrow" if borrows else "fit", topo)
            if not borrows or fungibility.when_can_borrow == "Borrow":
                return choice
            borrow_choice = borrow_choice or choice
            continue
        assert short is not None
        fr, n, a = short
        if possible:
            if explains:
                f.notes.shorts.append((fr, n - max(a, 0)))
                if worst > _QUOTA:
                    worst = _QUOTA
                    why = partial(waiting_for_quota, f.w.key, cq.name, fr, n, a, podset=ps.name)
            if cq.preemption.any:
                if fungibility.when_can_preempt == "Preempt" and borrow_choice is None:
                    return Choice(flavor.name, "preempt")
                preempt_choice = preempt_choice or Choice(flavor.name, "preempt")
        elif explains and worst > _EXCEEDS:
            worst, why = _EXCEEDS, partial(_exceeds, f.w.key, ps.name, fr, n, a, cq.name)
    if borrow_choice is not None:
        return borrow_choice
    if preempt_choice is not None:
        return preempt_choice
    if not explains:
        return None
    if why is None:
        raise NoFit(
            partial(
                PendingInfo,
                f.w.key,
                reasons.NO_MATCHING_FLAVOR,
                f"no flavor of ClusterQueue {cq.name} fits pod set {ps.name}: "
                + "; ".join(skipped),
                resource=rs[0],
            )
        )
    raise NoFit(why)


def _unplaced(key: str, message: str, flavor: str) -> PendingInfo:
    return PendingInfo(key, reasons.TOPOLOGY_PLACEMENT_FAILED, message, flavor=flavor)


def _exceeds(key: str, podset: str, fr: FlavorResource, n: int, a: int, cq: str) -> PendingInfo:
    f, r = fr
    return PendingInfo(
        key,
        reasons.EXCEEDS_MAX_QUOTA,
        f"pod set {podset} needs {n} {r} in flavor {f}, more than ClusterQueue {cq} "
        f"can ever hold ({a})",
        resource=r,
        flavor=f,
        requested=n,
        available=a,
        shortfall=n - a,
    )
