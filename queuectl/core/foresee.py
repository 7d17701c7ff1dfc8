"""Seeing ahead what `assign` would answer, where the cycle needs no more than its kind.

The first pass sets aside a workload that fits only by borrowing (the borrowing pass decides
for it), so the admission `assign` would build for it is thrown away. `fits_only_by_borrowing`
answers just that, with `assign`'s own flavor choice (`flavor_fit.choose_flavor`).
"""

from __future__ import annotations

from queuectl.core.flavor_fit import Fitting, Notes, choose_flavor
from queuectl.core.state import State
from queuectl.core.types import Workload


def fits_only_by_borrowing(state: State, w: Workload) -> bool:
    """Would `assign` admit it, but only by borrowing? (False: no, or not sure.)

    The first pass needs nothing more of that answer than its kind: such a bucket waits for
    the borrowing pass, so the admission `assign` would build is thrown away. Answered for one
    pod set whose flavors, up to the one chosen, have no Topology (node placement would
    decide); anything else answers False and `assign` decides.
    """
    if len(w.podsets) != 1:
        return False
    ps = w.podsets[0]
    name = w.cluster_queue
    cq = state.queues[name]
    covering = state.tree.covering[name]
    totals = {r: v * ps.count for r, v in ps.requests.items() if v > 0}
    groups: dict[int, list[str]] = {}
    for r in totals:  # in request order (often the GPU first): the first "no" ends it
        gi = covering.get(r)
        if gi is None:
            return False
        groups.setdefault(gi, []).append(r)
    # Nothing is taken between the groups: they hold different resources.
    node = state.tree.queues[name]
    fitting = Fitting(state, w, cq, node, {}, {}, Notes(), None, places=False, explains=False)
    borrows = False
    for gi, rs in groups.items():
        choice = choose_flavor(fitting, ps, cq.resource_groups[gi], rs, totals)
        if choice is None or choice.mode == "preempt":
            return False
        borrows = borrows or choice.mode == "borrow"
    return borrows
