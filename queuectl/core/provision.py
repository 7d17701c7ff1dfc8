"""Can the nodes there now hold a reservation's pods? The rule of the provisioning check.

The `provision` admission check (docs/design/provisioning.md) asks an autoscaler for capacity
only for a reservation the current nodes cannot hold; this module answers that question, and
nothing else, by first-fit of each pod (largest pod sets first) onto the nodes its placement
allows (labels, domain, taints), after what bound pods already take. It is an estimate of what
the kube-scheduler will do, on purpose optimistic about nothing: a pod that fits nowhere makes
the answer "no", and an autoscaler is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from queuectl.core.topology import node_capacity, pods_fit, tolerated
from queuectl.core.types import Node, Toleration


@dataclass(frozen=True, slots=True)
class Shape:
    """One pod set as its pods will land: per-pod requests (canonical units), how many, and
    where they may go (label -> allowed values; all must match) and what they tolerate."""

    name: str
    per_pod: Mapping[str, int]
    count: int
    allowed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()


def eligible(node: Node, shape: Shape) -> bool:
    """Whether the kube-scheduler could put one of `shape`'s pods on `node` at all."""
    if node.unschedulable or not tolerated(node.taints, shape.tolerations):
        return False
    return all(node.labels.get(key) in values for key, values in shape.allowed.items())


def unplaced(
    nodes: Sequence[Node], used: Mapping[str, Mapping[str, int]], shapes: Sequence[Shape]
) -> dict[str, int]:
    """Pod set name -> how many of its pods no node can take now (absent: all placed).

    `used` is what bound pods already take per node (besides `Node.used`). Pod sets with the
    largest pods go first, as a person packing a fleet would; nodes in name order, so the
    answer is the same for the same cluster.
    """
    taken: dict[str, dict[str, int]] = {n.name: dict(used.get(n.name) or {}) for n in nodes}
    left: dict[str, int] = {}
    ordered = sorted(shapes, key=lambda s: (-sum(s.per_pod.values()), s.name))
    for shape in ordered:
        need = shape.count
        for node in sorted(nodes, key=lambda n: n.name):
            if need <= 0:
                break
            if not eligible(node, shape):
                continue
            fit = pods_fit(node, node_capacity(node), taken[node.name], shape.per_pod, need)
            if fit <= 0:
                continue
            for res, want in shape.per_pod.items():
                taken[node.name][res] = taken[node.name].get(res, 0) + want * fit
            if "pods" not in shape.per_pod:
                taken[node.name]["pods"] = taken[node.name].get("pods", 0) + fit
            need -= fit
        if need > 0:
            left[shape.name] = need
    return left


def gpu_demand(
    shapes: Sequence[Shape], flavors: Mapping[str, str], is_gpu: Callable[[str], bool]
) -> dict[tuple[str, str], int]:
    """(flavor, resource) -> devices a reservation asks for: whole GPUs and each MIG profile
    apart (`flavors`: pod set -> its GPU flavor; `is_gpu` says which resources count)."""
    out: dict[tuple[str, str], int] = {}
    for shape in shapes:
        flavor = flavors.get(shape.name)
        for res, want in shape.per_pod.items():
            if flavor and want > 0 and is_gpu(res):
                out[(flavor, res)] = out.get((flavor, res), 0) + want * shape.count
    return out
