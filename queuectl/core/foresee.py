"""Seeing ahead what `assign` would answer, where the cycle needs no more than its kind.

The first pass sets aside a workload that fits only by borrowing (the borrowing pass decides
for it), so the admission `assign` would build for it is thrown away. `fits_only_by_borrowing`
answers just that, with `assign`'s own flavor walk and without the reasons for a "no".
"""

from __future__ import annotations

from queuectl.core.assign import ineligible
from queuectl.core.quota import QNode, available, potential
from queuectl.core.state import State
from queuectl.core.types import ClusterQueue, PodSet, ResourceGroup, Workload


def fits_only_by_borrowing(st: State, w: Workload) -> bool:
    """Would `assign` admit it, but only by borrowing? (False: no, or not sure.)

    The first pass needs nothing more of that answer than its kind: such a bucket waits for
    the borrowing pass, so the admission `assign` would build is thrown away. This is
    `_choose`'s flavor walk for one pod set without a topology flavor, minus every reason
    for a "no"; anything else answers False and `assign` decides.
    """
    if len(w.podsets) != 1:
        return False
    ps = w.podsets[0]
    name = w.cluster_queue
    cq = st.queues[name]
    node = st.tree.queues[name]
    covering = st.tree.covering[name]
    groups: dict[int, list[tuple[str, int]]] = {}
    for r, v in ps.requests.items():
        if v > 0:
            gi = covering.get(r)
            if gi is None:
                return False
            groups.setdefault(gi, []).append((r, v * ps.count))
    borrows = False
    for gi, needs in groups.items():
        mode = _fit_mode(st, cq, node, ps, cq.resource_groups[gi], needs)
        if mode is None:
            return False
        borrows = borrows or mode
    return borrows


def _fit_mode(
    st: State,
    cq: ClusterQueue,
    node: QNode,
    ps: PodSet,
    group: ResourceGroup,
    needs: list[tuple[str, int]],
) -> bool | None:
    """`_choose` for one resource group of a single pod set (nothing taken before it):
    True when it picks a borrowing fit, False a fit within quota, None anything else."""
    borrow_seen = False
    for fq in group.flavors:
        flavor = st.flavors[fq.name]
        if flavor.topology_name is not None:
            return None  # node placement decides: not sure
        if ineligible(flavor, ps) is not None:
            continue
        fits, borrows, possible = True, False, True
        for r, n in needs:
            fr = (flavor.name, r)
            if n > available(node, fr):
                fits = False
                if n > potential(node, fr):
                    possible = False
            if node.borrows(fr, n):
                borrows = True
        if fits:
            if not borrows:
                return False
            if cq.flavor_fungibility.when_can_borrow == "Borrow":
                return True
            borrow_seen = True
        elif (
            possible
            and cq.preemption.any
            and cq.flavor_fungibility.when_can_preempt == "Preempt"
            and not borrow_seen
        ):
            return None  # `_choose` stops here to preempt
    return True if borrow_seen else None
