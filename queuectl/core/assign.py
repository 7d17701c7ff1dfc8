"""Flavor assignment: can this workload be admitted now, by preemption, or why not.

Pod sets are taken in order; for each resource group a pod set needs, flavors are tried in the
queue's order and the first one that fits without borrowing wins. A flavor that fits only by
borrowing, or only by preempting, is taken at once or remembered while later flavors are tried, as
`flavorFungibility` says. The answer is all-or-nothing over pod sets (a gang), and every "no"
carries the resource, flavor, requested and available amounts that explain it. This same function
serves the cycle and `explain`, and it never changes the state it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Literal

from queuectl.core import reasons
from queuectl.core.decision import Decision
from queuectl.core.podset_groups import Ground, Grouping, place_member
from queuectl.core.preempt import search
from queuectl.core.quota import QNode, available, potential
from queuectl.core.results import PendingInfo, waiting_for_quota
from queuectl.core.state import State
from queuectl.core.topology import (
    NodeUse,
    add_use,
    charge_of,
    node_requests,
    place,
    tolerated,
    with_use,
)
from queuectl.core.types import (
    Admission,
    ClusterQueue,
    Flavor,
    FlavorResource,
    PodSet,
    PodSetAssignment,
    ResourceGroup,
    TopologyAssignment,
    Workload,
)

Mode = Literal["fit", "borrow", "preempt"]
# Lower rank = more useful to tell the user.
_RANK = {
    reasons.TOPOLOGY_PLACEMENT_FAILED: 0,
    reasons.WAITING_FOR_QUOTA: 1,
    reasons.EXCEEDS_MAX_QUOTA: 2,
    reasons.NO_MATCHING_FLAVOR: 3,
}


@dataclass(slots=True)
class _Choice:
    flavor: str
    mode: Mode
    topology: TopologyAssignment | None = None


def ineligible(flavor: Flavor, ps: PodSet) -> str | None:
    for k, v in ps.node_selector.items():
        have = flavor.node_labels.get(k)
        if have is not None and have != v:
            return f"node selector {k}={v} conflicts with the flavor's {k}={have}"
    if not tolerated(flavor.node_taints, flavor.tolerations + ps.tolerations):
        return "the pod set does not tolerate the flavor's taints"
    return None


def place_podset(
    st: State, flavor: Flavor, ps: PodSet, extra: NodeUse, grouping: Grouping | None = None
) -> TopologyAssignment | str | None:
    """Node placement for a flavor with a Topology (None: the flavor has none); a member of a
    pod-set group goes where its group is, or where all of it fits (`podset_groups`)."""
    if flavor.topology_name is None:
        return None
    topo = st.topologies.get(flavor.topology_name)
    if topo is None:
        return f"topology {flavor.topology_name} of flavor {flavor.name} not found"
    used = with_use(st.node_used, extra)
    nodes = st.nodes_for(flavor, ps)
    per_pod = node_requests(ps.requests, flavor.node_resources)
    group = ps.topology.group if ps.topology is not None else None
    if grouping is None or group is None:
        return place(nodes, st.capacity, used, topo.levels, ps.topology, ps.count, per_pod)
    mates = [
        (m, st.nodes_for(flavor, m), node_requests(m.requests, flavor.node_resources))
        for m in grouping.members[group]
        if m is not ps and group not in grouping.pins
    ]
    ground = Ground(flavor.topology_name, topo.levels, st.capacity, used)
    return place_member(ground, grouping, ps, nodes, per_pod, mates)


class _Fail(Exception):
    def __init__(self, info: PendingInfo) -> None:
        self.info = info


@dataclass(slots=True)
class _Notes:
    """What would have to change for a failed workload to fit: the wake-up conditions."""

    shorts: list[tuple[FlavorResource, int]] = field(default_factory=list)
    topology: bool = False
    placement: str | None = None
    """The first "quota allows it but no domain holds it" message, with the domain figures."""
    depends: list[FlavorResource] = field(default_factory=list)


def _choose(
    st: State,
    w: Workload,
    cq: ClusterQueue,
    node: QNode,
    ps: PodSet,
    group: ResourceGroup,
    rs: list[str],
    totals: dict[str, int],
    acc: dict[FlavorResource, int],
    extra: NodeUse,
    notes: _Notes,
    grouping: Grouping | None,
) -> _Choice:
    borrow_choice: _Choice | None = None
    preempt_choice: _Choice | None = None
    worst: tuple[int, Callable[[], PendingInfo]] | None = None
    """The most useful reason so far, built only if no flavor is chosen (the usual answer)."""
    skipped: list[str] = []
    name = cq.name

    def note(reason: str, build: Callable[[], PendingInfo]) -> None:
        nonlocal worst
        rank = _RANK[reason]
        if worst is None or rank < worst[0]:
            worst = (rank, build)

    for fq in group.flavors:
        flavor = st.flavors[fq.name]
        why = ineligible(flavor, ps)
        if why is not None:
            skipped.append(f"{flavor.name}: {why}")
            continue
        fits = True
        borrows = False
        possible = True
        short: tuple[FlavorResource, int, int] | None = None
        for r in rs:
            fr = (flavor.name, r)
            n = acc.get(fr, 0) + totals[r]
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
        if fits:
            topo = place_podset(st, flavor, ps, extra, grouping)
            if isinstance(topo, str):
                notes.topology = True
                msg = f"quota allows flavor {flavor.name} for pod set {ps.name} but {topo}"
                notes.placement = notes.placement or msg
                note(
                    reasons.TOPOLOGY_PLACEMENT_FAILED,
                    partial(
                        PendingInfo,
                        w.key,
                        reasons.TOPOLOGY_PLACEMENT_FAILED,
                        msg,
                        flavor=flavor.name,
                    ),
                )
                if cq.preemption.any and preempt_choice is None:
                    preempt_choice = _Choice(flavor.name, "preempt")
                continue
            choice = _Choice(flavor.name, "borrow" if borrows else "fit", topo)
            if not borrows or cq.flavor_fungibility.when_can_borrow == "Borrow":
                return choice
            borrow_choice = borrow_choice or choice
            continue
        assert short is not None
        (f, r), n, a = short
        if possible:
            notes.shorts.append(((f, r), n - max(a, 0)))
            note(
                reasons.WAITING_FOR_QUOTA,
                partial(waiting_for_quota, w.key, name, (f, r), n, a, podset=ps.name),
            )
            if cq.preemption.any:
                if cq.flavor_fungibility.when_can_preempt == "Preempt" and borrow_choice is None:
                    return _Choice(flavor.name, "preempt")
                preempt_choice = preempt_choice or _Choice(flavor.name, "preempt")
        else:
            note(reasons.EXCEEDS_MAX_QUOTA, partial(_exceeds, w.key, ps.name, (f, r), n, a, name))
    if borrow_choice is not None:
        return borrow_choice
    if preempt_choice is not None:
        return preempt_choice
    if worst is None:
        raise _Fail(
            PendingInfo(
                w.key,
                reasons.NO_MATCHING_FLAVOR,
                f"no flavor of ClusterQueue {name} fits pod set {ps.name}: " + "; ".join(skipped),
                resource=rs[0],
            )
        )
    raise _Fail(worst[1]())


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


def assign(st: State, w: Workload, now: float) -> Decision:
    """Decide for one pending workload whose ClusterQueue is active."""
    name = w.cluster_queue
    cq = st.queues[name]
    node = st.tree.queues[name]
    covering = st.tree.covering[name]
    acc: dict[FlavorResource, int] = {}
    extra: NodeUse = {}
    picks: list[PodSetAssignment] = []
    chosen: list[dict[str, str]] = []
    needs_preempt = False
    borrows = False
    notes = _Notes()
    grouping = Grouping.of(w)
    try:
        mismatch = grouping.mismatch() if grouping is not None else None
        if mismatch is not None:
            raise _Fail(PendingInfo(w.key, reasons.TOPOLOGY_PLACEMENT_FAILED, mismatch))
        for ps in w.podsets:
            totals = {r: v * ps.count for r, v in ps.requests.items() if v > 0}
            groups: dict[int, list[str]] = {}
            for r in sorted(totals):
                gi = covering.get(r)
                if gi is None:
                    raise _Fail(
                        PendingInfo(
                            w.key,
                            reasons.NO_MATCHING_FLAVOR,
                            f"resource {r} is not covered by ClusterQueue {name}",
                            resource=r,
                            requested=totals[r],
                            available=0,
                            shortfall=totals[r],
                        )
                    )
                groups.setdefault(gi, []).append(r)
            flavors: dict[str, str] = {}
            topo: TopologyAssignment | None = None
            for gi in sorted(groups):
                rs = groups[gi]
                choice = _choose(
                    st,
                    w,
                    cq,
                    node,
                    ps,
                    cq.resource_groups[gi],
                    rs,
                    totals,
                    acc,
                    extra,
                    notes,
                    grouping,
                )
                # Less of a flavor taken without preempting may send this part elsewhere.
                fungible = len(cq.resource_groups[gi].flavors) > 1 and choice.mode != "preempt"
                for r in rs:
                    fr = (choice.flavor, r)
                    acc[fr] = acc.get(fr, 0) + totals[r]
                    flavors[r] = choice.flavor
                    if fungible:
                        notes.depends.append(fr)
                if choice.mode == "preempt":
                    needs_preempt = True
                if choice.mode == "borrow":
                    borrows = True
                if choice.topology is not None and topo is None:
                    topo = choice.topology
                    chosen_flavor = st.flavors[choice.flavor]
                    add_use(
                        extra,
                        charge_of(topo, node_requests(ps.requests, chosen_flavor.node_resources)),
                    )
                    if grouping is not None and chosen_flavor.topology_name is not None:
                        grouping.pin(ps, chosen_flavor.topology_name, topo)
            chosen.append(flavors)
            picks.append(PodSetAssignment(ps.name, ps.count, flavors, totals, topo))
    except _Fail as fail:
        return Decision(
            "fail",
            info=fail.info,
            topology=notes.topology,
            shorts=notes.shorts,
            hopeless=True,
            depends=notes.depends,
        )
    admission = Admission(name, tuple(picks))
    if not needs_preempt:
        return Decision("fit", admission=admission, borrows=borrows)
    d = search(st, w, cq, node, acc, _placer(st, w, chosen), now)
    if d.kind == "fail":
        d.shorts = notes.shorts
        d.depends = notes.depends
        d.topology = d.topology or notes.topology
        info = d.info
        if (
            info is not None
            and info.reason == reasons.TOPOLOGY_PLACEMENT_FAILED
            and notes.placement
        ):
            # Say which domain came closest, not only that preemption cannot make room.
            d.info = replace(info, message=f"{notes.placement}; preempting would not make room")
    return d


def _placer(st: State, w: Workload, chosen: list[dict[str, str]]) -> Callable[[], bool]:
    """A check that every pod set with a topology flavor can be placed on the nodes as they are."""
    todo = []
    for ps, flavors in zip(w.podsets, chosen, strict=True):
        for fname in dict.fromkeys(flavors.values()):
            flavor = st.flavors[fname]
            if flavor.topology_name is not None:
                todo.append((flavor, ps))
                break

    def check() -> bool:
        extra: NodeUse = {}
        grouping = Grouping.of(w)
        for flavor, ps in todo:
            topo = place_podset(st, flavor, ps, extra, grouping)
            if topo is None or isinstance(topo, str):
                return False
            add_use(extra, charge_of(topo, node_requests(ps.requests, flavor.node_resources)))
            if grouping is not None and flavor.topology_name is not None:
                grouping.pin(ps, flavor.topology_name, topo)
        return True

    return check
