"""The drain budget: at most a share of each flavor's nodes drained at once.

One bad event (a firmware push, a flaky switch, a rack's power) must not take more than
`share` of a flavor's nodes out of service at once; the rest stay marked (nothing new lands on
them) and keep their running work until a drained node recovers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from queuectl.api.views import ObjectView
from queuectl.controller.watch.kube import Obj


def flavor_members(flavors: Iterable[Obj], nodes: Iterable[Obj]) -> dict[str, set[str]]:
    """Flavor name -> names of the nodes carrying all its nodeLabels (healthy or not)."""
    node_list = list(nodes)
    out: dict[str, set[str]] = {}
    for fl in flavors:
        want = (ObjectView(fl).spec.get("nodeLabels") or {}).items()
        out[fl["metadata"]["name"]] = {
            n["metadata"]["name"]
            for n in node_list
            if all(ObjectView(n).labels.get(k) == v for k, v in want)
        }
    return out


def budget_limit(members: int, share: float) -> int:
    """Nodes of a flavor of `members` nodes that may be drained at once."""
    return max(1, math.floor(share * members + 1e-9))


def over_budget(
    node_name: str, members: Mapping[str, set[str]], drained: set[str], share: float
) -> str | None:
    """Why draining `node_name` now would exceed a flavor's budget; None when it may go."""
    for flavor, nodes in sorted(members.items()):
        if node_name not in nodes:
            continue
        busy = len((nodes & drained) - {node_name})
        limit = budget_limit(len(nodes), share)
        if busy + 1 > limit:
            return (
                f"flavor {flavor}: {busy} of its {len(nodes)} nodes already drained "
                f"(at most {limit} at once)"
            )
    return None
