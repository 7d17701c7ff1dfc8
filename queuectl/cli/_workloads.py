"""Facts about one Workload object that tables and descriptions show (pure, from its dict)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import WorkloadView

Obj = Mapping[str, Any]

STATUSES = ("pending", "admitted", "finished")


def key(wl: Obj) -> str:
    return WorkloadView(wl).key


def namespace(wl: Obj) -> str:
    return WorkloadView(wl).namespace


def name(wl: Obj) -> str:
    return WorkloadView(wl).name


def queue(wl: Obj) -> str:
    return WorkloadView(wl).queue_name


def priority(wl: Obj) -> int:
    return int(WorkloadView(wl).spec.get("priority") or 0)


def priority_class(wl: Obj) -> str:
    return str(WorkloadView(wl).spec.get("priorityClassName") or "")


def status(wl: Obj) -> str:
    """pending | admitted | finished: what `--status` filters on."""
    if WorkloadView(wl).is_true(names.COND_FINISHED):
        return "finished"
    if WorkloadView(wl).holds_quota:
        return "admitted"
    return "pending"


def state(wl: Obj) -> str:
    """The word a table shows: Pending, Inactive, Reserved, Admitted, Preempting, Finished."""
    st, view = status(wl), WorkloadView(wl)
    if st == "finished":
        cond = view.condition(names.COND_FINISHED) or {}
        return f"Finished ({cond.get('reason')})" if cond.get("reason") else "Finished"
    if st == "admitted":
        if view.is_true(names.COND_PREEMPTED) or view.is_true(names.COND_EVICTED):
            return "Evicting"
        return "Admitted" if view.is_true(names.COND_ADMITTED) else "Reserved"
    if view.spec.get("active", True) is False:
        return "Inactive"
    return "Pending"


def created(wl: Obj) -> float | None:
    return convert.parse_time(WorkloadView(wl).meta.get("creationTimestamp"))


def admitted_at(wl: Obj) -> float | None:
    """When its current quota reservation started."""
    if not WorkloadView(wl).holds_quota:
        return None
    cond = WorkloadView(wl).condition(names.COND_QUOTA_RESERVED) or {}
    return convert.parse_time(cond.get("lastTransitionTime"))


def runtime(wl: Obj, now: float) -> float | None:
    """Admitted time so far, including earlier admissions (accumulatedPastExecutionTime)."""
    start = admitted_at(wl)
    past = float(WorkloadView(wl).status.get("accumulatedPastExecutionTimeSeconds") or 0)
    if start is None:
        return past or None
    return past + max(0.0, now - start)


@dataclass(frozen=True)
class PodSetView:
    name: str
    count: int
    requests: Mapping[str, int]
    """per pod, canonical units"""
    topology: str
    flavors: Mapping[str, str]
    """resource -> flavor, once admitted"""
    placement: str


def podsets(wl: Obj) -> list[PodSetView]:
    view = WorkloadView(wl)
    admission = view.admission if view.holds_quota else None
    assigned: dict[str, Mapping[str, Any]] = {
        str(a.get("name")): a for a in ((admission or {}).get("podSetAssignments") or ())
    }
    out = []
    for ps in view.pod_sets:
        core_ps = convert.podset(ps)
        req = ps.get("topologyRequest") or {}
        topo = (
            f"required {req['required']}"
            if req.get("required")
            else (f"preferred {req['preferred']}" if req.get("preferred") else "")
        )
        if topo and req.get("podSetGroupName"):
            topo += f", with pod-set group {req['podSetGroupName']}"
        slices = req.get("podSetSliceRequiredTopologyConstraints") or []
        if slices:
            said = ", ".join(f"{c.get('size')} per {c.get('topology')}" for c in slices)
            topo = f"{topo}, slices of {said}" if topo else f"slices of {said}"
        if req.get("balancedPlacement"):
            topo = f"{topo}, balanced" if topo else "balanced"
        a = assigned.get(core_ps.name) or {}
        placement = ""
        ta = a.get("topologyAssignment")
        if ta:
            levels = ta.get("levels") or []
            doms = ta.get("domains") or []
            hosts = sorted({str((d.get("values") or ["?"])[-1]) for d in doms})
            placement = f"{len(hosts)} node(s): {', '.join(hosts[:4])}" + (
                f" +{len(hosts) - 4}" if len(hosts) > 4 else ""
            )
            if levels and len(levels) > 1 and doms:
                first = doms[0].get("values") or []
                shared = [
                    f"{levels[i]}={first[i]}"
                    for i in range(min(len(levels) - 1, len(first)))
                    if all((d.get("values") or [None] * len(levels))[i] == first[i] for d in doms)
                ]
                if shared:
                    placement = f"{shared[-1]}; {placement}"
        out.append(
            PodSetView(
                name=core_ps.name,
                count=core_ps.count,
                requests=dict(core_ps.requests),
                topology=topo,
                flavors=dict(a.get("flavors") or {}),
                placement=placement,
            )
        )
    return out


def gpus(wl: Obj) -> int:
    """GPUs the whole gang asks for."""
    return sum(ps.count * ps.requests.get(names.GPU_RESOURCE, 0) for ps in podsets(wl))


def flavors(wl: Obj) -> str:
    used = sorted({f for ps in podsets(wl) for f in ps.flavors.values()})
    return ",".join(used)


def condition_message(wl: Obj) -> tuple[str, str] | None:
    """(reason, message) of the QuotaReserved condition the controller wrote, if any."""
    cond = WorkloadView(wl).condition(names.COND_QUOTA_RESERVED)
    if cond is None:
        return None
    return str(cond.get("reason") or ""), str(cond.get("message") or "")


def gpu_use(wl: Obj, now: float) -> str | None:
    """`describe`'s GPU use line, from `status.gpuUsage` (the node agents' reports, folded by
    the controller); None before any report was counted."""
    use = WorkloadView(wl).status.get("gpuUsage") or {}
    held = float(use.get("gpuSeconds") or 0)
    if not held:
        return None
    used = float(use.get("usedGpuSeconds") or 0)
    reports = [convert.parse_time(n.get("reportTime")) for n in use.get("nodes") or ()]
    latest = max((t for t in reports if t is not None), default=None)
    said = f"{int(use.get('gpus') or 0)} GPU(s) at {int(use.get('utilizationPercent') or 0)}%"
    if latest is not None:
        said += f" (report {max(now - latest, 0):.0f}s ago)"
    said += f"; {used / 3600:.2f} of {held / 3600:.2f} GPU-hours used ({100 * used / held:.0f}%)"
    idle_since = convert.parse_time(use.get("idleSince"))
    if idle_since is not None:
        said += f"; idle for {max(now - idle_since, 0) / 60:.0f} min"
    cond = WorkloadView(wl).condition(names.COND_GPU_IDLE)
    if cond is not None and cond.get("status") == "True":
        said += f"; GPUIdle: {cond.get('message') or ''}"
    return said
