"""An admitted workload's hold on quota and nodes, and its rank as a victim.

A `Charge` is what `State` adds to and takes from the quota tree and the per-node counts;
`victim_rank` is the one order of admitted work inside a queue that every victim search uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from queuectl.core.topology import NodeUse, add_use, charge_of, node_requests
from queuectl.core.types import Admission, Flavor, FlavorResource, Workload


@dataclass(slots=True, eq=False)
class Charge:
    """An admitted workload's hold on quota and nodes (it stays while the workload drains)."""

    key: str
    cq: str
    usage: dict[FlavorResource, int]
    nodes: NodeUse
    priority: int
    created: float
    admitted_at: float
    min_runtime: float
    admission: Admission


def charge_for(
    w: Workload,
    admission: Admission,
    admitted_at: float,
    flavors: Mapping[str, Flavor] | None = None,
) -> Charge:
    """The hold of an admitted workload; `flavors` rename node resources (MIG flavors)."""
    usage: dict[FlavorResource, int] = {}
    nodes: NodeUse = {}
    per_pod = {ps.name: ps.requests for ps in w.podsets}
    for psa in admission.podsets:
        renames: dict[str, str] = {}
        for res, amount in psa.usage.items():
            flavor = psa.flavors.get(res)
            if flavor is None or amount <= 0:
                continue
            fr = (flavor, res)
            usage[fr] = usage.get(fr, 0) + amount
            spec = flavors.get(flavor) if flavors is not None else None
            if spec is not None and res in spec.node_resources:
                renames[res] = spec.node_resources[res]
        if psa.topology is not None:
            requests = node_requests(per_pod.get(psa.name, {}), renames)
            add_use(nodes, charge_of(psa.topology, requests))
    return Charge(
        key=w.key,
        cq=admission.cluster_queue,
        usage=usage,
        nodes=nodes,
        priority=w.priority,
        created=w.created,
        admitted_at=admitted_at,
        min_runtime=w.minimum_runtime_seconds,
        admission=admission,
    )


Rank = tuple[int, float, float, str]
"""Victim order inside one queue (see `victim_rank`)."""


def victim_rank(c: Charge) -> Rank:
    """Where admitted work stands as a victim inside its queue: the lowest rank goes first.

    1. lower priority first;
    2. then the most recently admitted (it has lost the least work);
    3. then the most recently created;
    4. then by key, so that the order is total and decisions are deterministic.
    (Across queues, `preempt` puts other queues first, the nearest in the tree, then the
    largest fair share first.)
    """
    return (c.priority, -c.admitted_at, -c.created, c.key)
