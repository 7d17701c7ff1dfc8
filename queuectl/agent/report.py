"""What `queuectl agent --once` prints: text for a person checking a node, JSON for scripts."""

from __future__ import annotations

import json
from typing import Any

from queuectl.agent import discovery
from queuectl.agent.reader import GpuSample, NvmlUnavailable
from queuectl.agent.shell import PassResult


def unavailable_text(node: str, status: NvmlUnavailable) -> str:
    return (
        f"Node {node}: NVML unavailable ({status.reason}).\n"
        "No GPU can be inspected here; a DaemonSet agent would stay idle and report "
        "GPUHealthy=Unknown (reason NVMLUnavailable)."
    )


def to_json(
    node: str, result: PassResult | None, unavailable: NvmlUnavailable | None, mode: str
) -> dict[str, Any]:
    """`mode`: 'dry-run' (nothing written), 'write' (written if it differed) or 'no-cluster'."""
    if result is None:
        return {
            "node": node,
            "nvml": "unavailable",
            "reason": unavailable.reason if unavailable else "",
            "mode": mode,
        }
    by_uuid = result.state
    gpus = []
    for gpu in result.inventory.gpus:
        sample = result.samples.get(gpu.index)
        state = by_uuid.get(gpu.uuid)
        entry: dict[str, Any] = {
            "index": gpu.index,
            "uuid": gpu.uuid,
            "name": gpu.name,
            "memoryMiB": gpu.memory_total_bytes // discovery.MIB,
            "pciBusId": gpu.pci_bus_id,
            "computeCapability": ".".join(map(str, gpu.compute_capability))
            if gpu.compute_capability
            else None,
            "healthy": state.healthy if state else True,
            "reason": state.reason if state else None,
            "message": state.message if state else "",
        }
        if isinstance(sample, GpuSample):
            entry["sample"] = {k: v for k, v in vars(sample).items() if k not in ("index", "uuid")}
        elif isinstance(sample, str):
            entry["notAnswering"] = sample
        gpus.append(entry)
    desired = result.desired
    return {
        "node": node,
        "nvml": "ok",
        "mode": mode,
        "gpus": gpus,
        "nvlink": discovery.nvlink_class(result.inventory),
        "topology": json.loads(discovery.topology_matrix(result.inventory)),
        "health": {
            "healthy": result.node_health.healthy,
            "healthyCount": result.node_health.healthy_count,
            "total": result.node_health.total,
            "reason": result.node_health.reason,
            "message": result.node_health.message,
        },
        "desired": {
            "labels": dict(desired.labels),
            "annotations": dict(desired.annotations),
            "taint": desired.taint_reason,
            "condition": vars(desired.condition),
        },
        "changes": list(result.patch.changes) if result.patch is not None else None,
        "written": result.written,
    }


def _fmt(value: float | int | None, unit: str, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:.0f}{unit}"


def to_text(node: str, result: PassResult, mode: str) -> str:
    inv = result.inventory
    lines = [f"Node {node}: {inv.count} GPU(s), NVLink class {discovery.nvlink_class(inv)}", ""]
    lines.append(
        f"{'GPU':<4}{'MODEL':<26}{'MEMORY':>11}  {'CC':<5}{'TEMP':>5}{'POWER':>7}{'UTIL':>6}"
        f"  {'HEALTH':<17}UUID"
    )
    for gpu in inv.gpus:
        sample = result.samples.get(gpu.index)
        s = sample if isinstance(sample, GpuSample) else GpuSample(gpu.index, gpu.uuid)
        state = result.state.get(gpu.uuid)
        verdict = "healthy" if state is None or state.healthy else str(state.reason)
        cc = ".".join(map(str, gpu.compute_capability)) if gpu.compute_capability else "-"
        lines.append(
            f"{gpu.index:<4}{gpu.name[:25]:<26}{gpu.memory_total_bytes // discovery.MIB:>7} MiB"
            f"  {cc:<5}{_fmt(s.temperature_c, 'C'):>5}{_fmt(s.power_w, 'W'):>7}"
            f"{_fmt(s.utilization_ratio, '%', 100):>6}  {verdict:<17}{gpu.uuid}"
        )
    matrix = json.loads(discovery.topology_matrix(inv))["matrix"]
    if inv.count > 1:
        lines += [
            "",
            "Topology:",
            ("      " + "".join(f"GPU{g.index:<4}" for g in inv.gpus)).rstrip(),
        ]
        for gpu, row in zip(inv.gpus, matrix, strict=True):
            lines.append((f"GPU{gpu.index:<3}" + "".join(f"{cell:<7}" for cell in row)).rstrip())
    lines += ["", f"Health: {result.node_health.message}"]
    if not result.node_health.healthy:
        lines.append(f"  reason {result.node_health.reason}")
    lines += ["", "Node state:"]
    for key, value in sorted(result.desired.labels.items()):
        if value is not None:
            lines.append(f"  label {key}={value}")
    taint = result.desired.taint_reason
    lines.append(
        f"  taint {'gpu.queuectl.io/unhealthy=' + taint + ':NoSchedule' if taint else '(none)'}"
    )
    cond = result.desired.condition
    lines.append(f"  condition GPUHealthy={cond.status} reason={cond.reason}")
    lines.append("")
    if result.patch is None:
        lines.append(
            "No cluster: the Node was not read; the state above is what the agent would write."
        )
    elif result.patch.empty:
        lines.append("The Node is up to date: nothing to write.")
    else:
        verb = (
            "Wrote"
            if result.written
            else ("Would write" if mode == "dry-run" else "Failed to write")
        )
        lines.append(f"{verb} (pass --write to apply):" if verb == "Would write" else f"{verb}:")
        lines += [f"  {change}" for change in result.patch.changes]
    return "\n".join(lines)
