"""Workloads (and the pod templates of their pod sets) -> the core's Workloads and PodSets."""

from __future__ import annotations

from typing import Any

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.convert.admissions import admission_from_status
from queuectl.convert.cluster import toleration
from queuectl.convert.units import Obj, canonical, parse_time
from queuectl.core import types as core


def pod_requests(pod_spec: Obj) -> dict[str, int]:
    """What one pod reserves: the sum over containers, at least the largest init container
    (they run one at a time before the others), plus the pod overhead. Limits stand in for
    missing requests, as the API server defaults them."""

    def of(container: Obj) -> dict[str, int]:
        res = container.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {name: canonical(name, value) for name, value in merged.items()}

    total: dict[str, int] = {}
    for c in pod_spec.get("containers") or ():
        for name, value in of(c).items():
            total[name] = total.get(name, 0) + value
    sidecars: dict[str, int] = {}
    for c in pod_spec.get("initContainers") or ():
        req = of(c)
        if c.get("restartPolicy") == "Always":  # a sidecar runs alongside the containers
            for name, value in req.items():
                sidecars[name] = sidecars.get(name, 0) + value
            continue
        for name, value in req.items():
            total[name] = max(total.get(name, 0), value + sidecars.get(name, 0))
    for name, value in sidecars.items():
        total[name] = total.get(name, 0) + value
    for name, value in (pod_spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + canonical(name, value)
    return {k: v for k, v in total.items() if v}


def _topology_request(podset: Obj) -> core.TopologyRequest | None:
    req = podset.get("topologyRequest") or {}
    slices = tuple(
        (str(c.get("topology")), int(c.get("size", 0)))
        for c in req.get("podSetSliceRequiredTopologyConstraints") or ()
    )
    balanced = bool(req.get("balancedPlacement"))
    if not req.get("required") and not req.get("preferred") and not slices and not balanced:
        return None
    return core.TopologyRequest(
        required=req.get("required"),
        preferred=req.get("preferred"),
        group=req.get("podSetGroupName"),
        slices=slices,
        balanced=balanced,
    )


def podset(ps: Obj) -> core.PodSet:
    """The core's PodSet; equal ones are one shared object (`_shared_podset`)."""
    pod_spec = (ps.get("template") or {}).get("spec") or {}
    return _shared_podset(
        core.PodSet(
            name=ps.get("name") or "main",
            count=int(ps.get("count", 1)),
            requests=pod_requests(pod_spec),
            topology=_topology_request(ps),
            node_selector=dict(pod_spec.get("nodeSelector") or {}),
            tolerations=tuple(toleration(t) for t in pod_spec.get("tolerations") or ()),
        )
    )


_PODSETS: dict[tuple[Any, ...], core.PodSet] = {}
MAX_SHARED_PODSETS = 4096


def _shared_podset(ps: core.PodSet) -> core.PodSet:
    """Thousands of pending Workloads have one of a few shapes; the core keeps each one's
    PodSets (a frozen record of two dicts), so equal ones are shared. Bounded: when full, the
    table starts over (what was shared stays shared)."""
    key = (
        ps.name,
        ps.count,
        tuple(sorted(ps.requests.items())),
        ps.topology,
        tuple(sorted(ps.node_selector.items())),
        ps.tolerations,
    )
    found = _PODSETS.get(key)
    if found is not None:
        return found
    if len(_PODSETS) >= MAX_SHARED_PODSETS:
        _PODSETS.clear()
    _PODSETS[key] = ps
    return ps


def workload(
    obj: Obj,
    cluster_queue_name: str,
    *,
    grace_seconds: float = 0.0,
    minimum_runtime_seconds: float = 0.0,
    priority: int | None = None,
) -> core.Workload:
    """The core's view of a Workload whose LocalQueue resolved to `cluster_queue_name`
    (`priority`: instead of spec.priority, when that was never resolved)."""
    view = WorkloadView(obj)
    spec, status = view.spec, view.status
    admission = admission_from_status(status["admission"]) if view.holds_quota else None
    admitted_at = None
    if admission is not None:
        cond = view.condition(names.COND_QUOTA_RESERVED)
        admitted_at = parse_time(cond.get("lastTransitionTime") if cond else None)
    max_exec = spec.get("maximumExecutionTimeSeconds")
    past = float(status.get("accumulatedPastExecutionTimeSeconds") or 0)
    if max_exec is not None and admission is not None:
        max_exec = _exec_budget(view, float(max_exec), admitted_at)
    requeue_at = parse_time((status.get("requeueState") or {}).get("requeueAt"))
    return core.Workload(
        key=view.key,
        cluster_queue=cluster_queue_name,
        podsets=tuple(podset(ps) for ps in view.pod_sets),
        priority=priority if priority is not None else int(spec.get("priority") or 0),
        created=parse_time(view.meta.get("creationTimestamp")) or 0.0,
        active=spec.get("active", True) is not False,
        admission=admission,
        admitted_at=admitted_at,
        preemption_grace_seconds=grace_seconds,
        minimum_runtime_seconds=minimum_runtime_seconds,
        max_execution_seconds=None if max_exec is None else max(0.0, float(max_exec) - past),
        not_before=requeue_at or 0.0,
        front=admission is None and view.requeued_for_node_failure,
        starting=admission is not None and not view.is_true(names.COND_PODS_READY),
    )


def _exec_budget(view: WorkloadView, max_exec: float, reserved_at: float | None) -> float | None:
    """The core times maximumExecutionTimeSeconds from the reservation; only admitted time
    counts, so a reservation still waiting for its checks has no deadline yet, and one admitted
    later gets the wait added."""
    cond = view.condition(names.COND_ADMITTED)
    if cond is None:
        return max_exec
    if cond.get("status") != "True":
        return None  # quota reserved, waiting for its admission checks
    since = parse_time(cond.get("lastTransitionTime"))
    if since is None or reserved_at is None:
        return max_exec
    return max_exec + max(0.0, since - reserved_at)
