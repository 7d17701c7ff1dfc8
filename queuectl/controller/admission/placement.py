"""core.Admission + flavors -> what each pod set's template must carry (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from queuectl.api.views import ObjectView
from queuectl.core import types as core
from queuectl.jobs import PodPin, PodSetPlacement, pinning

Obj = Mapping[str, Any]


def domain_constraint(
    topo: core.TopologyAssignment, pin_nodes: bool = False
) -> dict[str, tuple[str, ...]]:
    """Node label -> allowed values. One domain: its label value at every level from the top
    down to the chosen one (and, with `pin_nodes`, the finest level's values in use too).
    Spread (no single domain): the finest level's values in use."""
    finest = topo.levels[-1] if topo.levels else None
    in_use = tuple(sorted({d.values[-1] for d in topo.domains if d.values}))
    if topo.level is not None and topo.level in topo.levels:
        depth = topo.levels.index(topo.level) + 1
        out: dict[str, tuple[str, ...]] = {
            label: (value,) for label, value in zip(topo.levels[:depth], topo.domain, strict=False)
        }
        if pin_nodes and finest is not None and finest not in out and in_use:
            out[finest] = in_use
        return out
    return {finest: in_use} if finest is not None and in_use else {}


def sliced(pod_sets: Sequence[Obj]) -> frozenset[str]:
    """The pod sets that ask for slices or balance: read from the Workload's spec (frozen
    while admitted), as the status keeps only the domains, in pod order."""
    out = set()
    for ps in pod_sets:
        request = ps.get("topologyRequest") or {}
        if request.get("podSetSliceRequiredTopologyConstraints") or request.get(
            "balancedPlacement"
        ):
            out.add(str(ps.get("name")))
    return frozenset(out)


def pod_pins(topo: core.TopologyAssignment) -> tuple[PodPin, ...]:
    """Where each pod goes, in pod order: the domains are listed slice by slice, so the pods
    covered by an entry are pinned to its values at every level (down to its node where the
    Topology names hosts)."""
    return pinning.pins_of(
        [(d.count, dict(zip(topo.levels, d.values, strict=False))) for d in topo.domains]
    )


def placements(
    admission: core.Admission, flavors: Mapping[str, Obj], pod_sets: Sequence[Obj] = ()
) -> list[PodSetPlacement]:
    """One placement per pod set: the union of its chosen flavors' node labels and
    tolerations, and its topology domain. `flavors` maps name -> ResourceFlavor object;
    `pod_sets` are the Workload's spec.podSets: a pod set placed in slices or balanced also
    gets its per-pod pins (a kind whose pods have stable indexes pins each pod to them, so
    kube-scheduler cannot split the slices differently).

    When several pod sets of one gang are placed by topology (a PyTorchJob's master and
    workers in one block), each is pinned to the nodes the core counted for it: naming only the
    shared domain lets kube-scheduler put one pod set's pods on another's nodes, and a pod set
    pinned to one host (the master) then fits nowhere."""
    several = sum(1 for psa in admission.podsets if psa.topology) > 1
    pin = sliced(pod_sets)
    out = []
    for psa in admission.podsets:
        labels: dict[str, str] = {}
        tolerations: list[Mapping[str, Any]] = []
        for flavor_name in sorted(set(psa.flavors.values())):
            spec = ObjectView(flavors.get(flavor_name) or {}).spec
            labels.update(spec.get("nodeLabels") or {})
            for tol in spec.get("tolerations") or ():
                if tol not in tolerations:
                    tolerations.append(tol)
        gpu_flavor = psa.flavors.get(core.GPU)
        gpu_spec = ObjectView(flavors.get(gpu_flavor) or {}).spec if gpu_flavor else {}
        out.append(
            PodSetPlacement(
                name=psa.name,
                gpu_resource=gpu_spec.get("gpuResource") or None,
                node_labels=labels,
                tolerations=tuple(tolerations),
                domain=domain_constraint(psa.topology, several) if psa.topology else {},
                pins=pod_pins(psa.topology) if psa.topology and psa.name in pin else (),
            )
        )
    return out
