"""Pure: the node agents' GPU-use reports grouped by workload, and the Workload status they
write (`status.gpuUsage`, the `GPUIdle` condition). The decisions are `core/gpuuse.py`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from queuectl import convert
from queuectl.api import gpuuse, names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.admission.status import MAX_MESSAGE, set_condition
from queuectl.controller.watch.kube import Obj
from queuectl.core.gpuuse import IdleAction, IdlePolicy, NodeReport, NodeUse, Verdict, WorkloadUse


@dataclass(frozen=True)
class HeldGpu:
    """One GPU of a report, with the workload its pod belongs to (None: not queuectl's)."""

    uuid: str
    namespace: str
    pod: str
    container: str
    workload: str | None
    utilization: float


def group(
    node: str, report: gpuuse.UseReport, workload_of: Callable[[str, str], str | None]
) -> tuple[dict[str, NodeReport], list[HeldGpu]]:
    """Per workload key, its share of `report` (its GPUs there, their GPU-weighted mean
    utilization); and every GPU with its holder. `workload_of(namespace, pod)`: the pod's
    Workload key through its verified owner chain, None for a pod queuectl did not place."""
    gpus: dict[str, int] = {}
    weighted: dict[str, float] = {}
    held = []
    for c in report.containers:
        key = workload_of(c.namespace, c.pod)
        for uuid in c.gpus:
            held.append(HeldGpu(uuid, c.namespace, c.pod, c.container, key, c.utilization))
        if key is None or not c.gpus:
            continue
        gpus[key] = gpus.get(key, 0) + len(c.gpus)
        weighted[key] = weighted.get(key, 0.0) + len(c.gpus) * c.utilization
    shares = {
        key: NodeReport(node, report.start, report.end, n, weighted[key] / n)
        for key, n in gpus.items()
    }
    return shares, held


def idle_policy(cq: Obj | None) -> IdlePolicy | None:
    """The ClusterQueue's `spec.idlePolicy` (validated by the CRD schema), None when unset."""
    spec = ObjectView(cq).spec.get("idlePolicy") if cq is not None else None
    if not spec:
        return None
    return IdlePolicy(
        float(spec["thresholdPercent"]),
        float(spec["windowSeconds"]),
        IdleAction(spec.get("action") or IdleAction.WARN),
    )


def admitted_at(wl: Obj) -> float | None:
    cond = WorkloadView(wl).condition(names.COND_QUOTA_RESERVED) or {}
    return convert.parse_time(cond.get("lastTransitionTime"))


def use_from_status(wl: Obj) -> WorkloadUse:
    raw: Mapping[str, Any] = WorkloadView(wl).status.get("gpuUsage") or {}
    nodes = tuple(
        NodeUse(
            str(n["name"]),
            convert.parse_time(n.get("reportTime")) or 0.0,
            int(n.get("gpus") or 0),
            float(n.get("utilizationPercent") or 0),
        )
        for n in raw.get("nodes") or ()
    )
    return WorkloadUse(
        gpu_seconds=float(raw.get("gpuSeconds") or 0),
        used_gpu_seconds=float(raw.get("usedGpuSeconds") or 0),
        idle_since=convert.parse_time(raw.get("idleSince")),
        nodes=nodes,
    )


def usage_status(use: WorkloadUse) -> dict[str, Any]:
    return {
        "gpus": use.gpus,
        "utilizationPercent": round(use.utilization),
        "gpuSeconds": round(use.gpu_seconds),
        "usedGpuSeconds": round(use.used_gpu_seconds),
        "idleSince": None if use.idle_since is None else convert.format_time(use.idle_since),
        "nodes": [
            {
                "name": n.node,
                "reportTime": convert.format_time(n.at),
                "gpus": n.gpus,
                "utilizationPercent": round(n.utilization),
            }
            for n in use.nodes
        ],
    }


def idle_message(use: WorkloadUse, policy: IdlePolicy, now: float) -> str:
    idle_min = (now - (use.idle_since or now)) / 60
    then = {
        IdleAction.WARN: "it keeps running",
        IdleAction.REQUEUE: "it is preempted (after its grace period) and requeued",
        IdleAction.STOP: "it is preempted (after its grace period) and deactivated",
    }[policy.action]
    return (
        f"its {use.gpus} GPU(s) averaged {use.utilization:.0f}% utilization, under the "
        f"ClusterQueue's idle threshold of {policy.threshold:.0f}%, for {idle_min:.0f} min "
        f"(window {policy.window_s / 60:.0f} min); idle policy {policy.action.value}: {then}"
    )[:MAX_MESSAGE]


def status_patch(
    wl: Obj, use: WorkloadUse, verdict: Verdict, policy: IdlePolicy | None, now: float
) -> dict[str, Any]:
    """`status.gpuUsage`, and `GPUIdle` set while the verdict says idle, cleared (False) when
    a flagged workload works again; conditional on the version decided on."""
    status: dict[str, Any] = {"gpuUsage": usage_status(use)}
    conds = [dict(c) for c in WorkloadView(wl).conditions]
    flagged = WorkloadView(wl).condition(names.COND_GPU_IDLE) is not None
    gen = ObjectView(wl).meta.get("generation")
    if verdict is not Verdict.IN_USE and policy is not None:
        message = idle_message(use, policy, now)
        set_condition(conds, names.COND_GPU_IDLE, True, names.REASON_GPU_IDLE, message, now, gen)
        status["conditions"] = conds
    elif flagged:
        if use.idle_since is None:
            reason = names.REASON_GPU_IN_USE
            message = f"its GPUs averaged {use.utilization:.0f}% utilization in the latest reports"
        else:  # idle again, but not for a whole window since its (new) admission
            reason = names.REASON_GPU_IDLE_WINDOW
            message = (
                f"idle since {convert.format_time(use.idle_since)}, not yet for the whole "
                "window (the idle clock starts again with each admission)"
            )
        set_condition(conds, names.COND_GPU_IDLE, False, reason, message, now, gen)
        status["conditions"] = conds
    return {"metadata": {"resourceVersion": wl["metadata"]["resourceVersion"]}, "status": status}
