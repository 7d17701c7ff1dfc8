"""A core Admission <-> a Workload's status.admission (the controller writes one and reads it
back after a restart)."""

from __future__ import annotations

from typing import Any

from queuectl.api import names
from queuectl.convert.units import Obj, canonical, quantity_string
from queuectl.core import types as core


def admission_to_status(admission: core.Admission) -> dict[str, Any]:
    """core.Admission -> Workload status.admission (quantities as canonical integers)."""
    return {
        "clusterQueue": admission.cluster_queue,
        "podSetAssignments": [_assignment_to_status(a) for a in admission.podsets],
    }


def _assignment_to_status(a: core.PodSetAssignment) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": a.name,
        "count": a.count,
        "flavors": dict(a.flavors),
        "resourceUsage": {res: quantity_string(res, v) for res, v in a.usage.items()},
    }
    if a.topology is not None:
        # The CRD keeps levels and per-domain values and counts; the single domain and the
        # node names are derived back from them (see _topology_from_status).
        out["topologyAssignment"] = {
            "levels": list(a.topology.levels),
            "domains": [{"values": list(d.values), "count": d.count} for d in a.topology.domains],
        }
    return out


def admission_from_status(adm: Obj) -> core.Admission:
    podsets = []
    for a in adm.get("podSetAssignments") or ():
        topo = a.get("topologyAssignment")
        podsets.append(
            core.PodSetAssignment(
                name=a["name"],
                count=int(a.get("count", 0)),
                flavors=dict(a.get("flavors") or {}),
                usage={res: canonical(res, v) for res, v in (a.get("resourceUsage") or {}).items()},
                topology=_topology_from_status(topo) if topo else None,
            )
        )
    return core.Admission(cluster_queue=adm["clusterQueue"], podsets=tuple(podsets))


def _topology_from_status(topo: Obj) -> core.TopologyAssignment:
    """Rebuild the core's assignment: a domain's node is its hostname-level value, and the
    single domain is the deepest level at which every pod set domain agrees."""
    levels = tuple(topo.get("levels") or ())
    domains = tuple(
        core.DomainAssignment(
            values=tuple(d.get("values") or ()),
            nodes=(d["values"][-1],)
            if levels and levels[-1] == names.LABEL_HOSTNAME and d.get("values")
            else (),
            count=int(d.get("count", 0)),
        )
        for d in topo.get("domains") or ()
    )
    depth = 0
    while (
        domains
        and depth < len(levels)
        and all(
            len(d.values) > depth and d.values[depth] == domains[0].values[depth] for d in domains
        )
    ):
        depth += 1
    level = levels[depth - 1] if depth else None
    domain = domains[0].values[:depth] if depth else ()
    return core.TopologyAssignment(levels=levels, level=level, domain=domain, domains=domains)
