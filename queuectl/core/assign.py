"""Flavor assignment: can this workload be admitted now, by preemption, or why not.

Pod sets are taken in order; for each resource group a pod set needs, a flavor is chosen by
`flavor_fit.choose_flavor` (the queue's flavors in order, as `flavorFungibility` says). The
answer is all-or-nothing over pod sets (a gang), and every "no" carries the resource, flavor,
requested and available amounts that explain it. This same function serves the cycle and
`explain`, and it never changes the state it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial

from queuectl.core import reasons
from queuectl.core.decision import Decision
from queuectl.core.fair_preempt import search
from queuectl.core.flavor_fit import Fitting, NoFit, Notes, choose_flavor, place_podset
from queuectl.core.podset_groups import Grouping
from queuectl.core.results import PendingInfo
from queuectl.core.state import State
from queuectl.core.topology import NodeUse, add_use, charge_of, node_requests
from queuectl.core.types import (
    Admission,
    FlavorResource,
    PodSetAssignment,
    TopologyAssignment,
    Workload,
)


def assign(state: State, w: Workload, now: float) -> Decision:
    """Decide for one pending workload whose ClusterQueue is active."""
    name = w.cluster_queue
    cq = state.queues[name]
    node = state.tree.queues[name]
    covering = state.tree.covering[name]
    acc: dict[FlavorResource, int] = {}
    extra: NodeUse = {}
    picks: list[PodSetAssignment] = []
    chosen: list[dict[str, str]] = []
    needs_preempt = False
    borrows = False
    notes = Notes()
    grouping = Grouping.of(w)
    fitting = Fitting(state, w, cq, node, acc, extra, notes, grouping)
    try:
        mismatch = grouping.mismatch() if grouping is not None else None
        if mismatch is not None:
            raise NoFit(partial(PendingInfo, w.key, reasons.TOPOLOGY_PLACEMENT_FAILED, mismatch))
        for ps in w.podsets:
            totals = {r: v * ps.count for r, v in ps.requests.items() if v > 0}
            groups: dict[int, list[str]] = {}
            for r in sorted(totals):
                gi = covering.get(r)
                if gi is None:
                    raise NoFit(
                        partial(
                            PendingInfo,
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
                choice = choose_flavor(fitting, ps, cq.resource_groups[gi], rs, totals)
                assert choice is not None  # it places on the nodes: always answered
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
                    chosen_flavor = state.flavors[choice.flavor]
                    add_use(
                        extra,
                        charge_of(topo, node_requests(ps.requests, chosen_flavor.node_resources)),
                    )
                    if grouping is not None and chosen_flavor.topology_name is not None:
                        grouping.pin(ps, chosen_flavor.topology_name, topo)
            chosen.append(flavors)
            picks.append(PodSetAssignment(ps.name, ps.count, flavors, totals, topo))
    except NoFit as fail:
        return Decision(
            "fail",
            info=fail.reason(),
            topology=notes.topology,
            shorts=notes.shorts,
            hopeless=True,
            depends=notes.depends,
        )
    admission = Admission(name, tuple(picks))
    if not needs_preempt:
        return Decision("fit", admission=admission, borrows=borrows)
    d = search(state, w, cq, node, acc, _placer(state, w, chosen), now)
    if d.kind == "preempt" and notes.topology:
        d.needs_room = True  # a flavor failed on placement: freed room may fit it there
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


def _placer(state: State, w: Workload, chosen: list[dict[str, str]]) -> Callable[[], bool]:
    """A check that every pod set with a topology flavor can be placed on the nodes as they are."""
    todo = []
    for ps, flavors in zip(w.podsets, chosen, strict=True):
        for fname in dict.fromkeys(flavors.values()):
            flavor = state.flavors[fname]
            if flavor.topology_name is not None:
                todo.append((flavor, ps))
                break

    def check() -> bool:
        extra: NodeUse = {}
        grouping = Grouping.of(w)
        for flavor, ps in todo:
            topo = place_podset(state, flavor, ps, extra, grouping)
            if topo is None or isinstance(topo, str):
                return False
            add_use(extra, charge_of(topo, node_requests(ps.requests, flavor.node_resources)))
            if grouping is not None and flavor.topology_name is not None:
                grouping.pin(ps, flavor.topology_name, topo)
        return True

    return check
