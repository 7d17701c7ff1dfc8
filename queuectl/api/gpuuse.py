"""The agent's GPU-use report: which container held which GPUs and how much it used them.

The agent writes one report per window on its own Node (`gpu.queuectl.io/gpu-use`, the
channel it already writes labels and health through); the controller reads it from its Node
watch. Compact JSON, so a node of 8 GPUs costs a few hundred bytes:

    {"v": 1, "from": 1.7e9, "to": 1.7e9, "c": [[ns, pod, container, [uuid, ...], util, mem], ...]}

`util` is the mean utilization (percent, 0-100) of the container's GPUs over the window, `mem`
the most GPU memory (bytes) they held at once. Only containers that hold a GPU are listed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final

VERSION: Final = 1


@dataclass(frozen=True)
class ContainerUse:
    namespace: str
    pod: str
    container: str
    gpus: tuple[str, ...]
    """UUIDs of the GPUs the kubelet gave the container."""
    utilization: float
    """Mean utilization of those GPUs over the window, percent."""
    memory_bytes: int = 0


@dataclass(frozen=True)
class UseReport:
    start: float
    end: float
    containers: tuple[ContainerUse, ...]


class BadReport(ValueError):
    """A report that does not parse; the message names what is wrong."""


def encode(report: UseReport) -> str:
    rows = [
        [c.namespace, c.pod, c.container, list(c.gpus), round(c.utilization, 1), c.memory_bytes]
        for c in report.containers
    ]
    # Whole seconds: the controller keeps the last counted end in a Workload's status, where
    # times are RFC 3339 seconds; a fraction would be counted again from there.
    body = {"v": VERSION, "from": round(report.start), "to": round(report.end), "c": rows}
    return json.dumps(body, separators=(",", ":"))


def decode(text: str) -> UseReport:
    """The report in `text`; `BadReport` says what is wrong with one that does not parse."""
    try:
        body: Any = json.loads(text)
    except ValueError as exc:
        raise BadReport(f"not JSON: {exc}") from None
    if not isinstance(body, dict) or body.get("v") != VERSION:
        raise BadReport(f'expected an object with "v": {VERSION}')
    start, end = _number(body.get("from"), "from"), _number(body.get("to"), "to")
    if end < start:
        raise BadReport(f"window ends ({end}) before it starts ({start})")
    rows = body.get("c")
    if not isinstance(rows, list):
        raise BadReport('"c" must be a list of containers')
    containers = []
    for i, row in enumerate(rows):
        if not (isinstance(row, list) and len(row) == 6):
            raise BadReport(f"container {i}: expected [ns, pod, container, gpus, util, mem]")
        ns, pod, container, gpus, util, mem = row
        if not all(isinstance(v, str) and v for v in (ns, pod, container)):
            raise BadReport(f"container {i}: namespace, pod and container must be names")
        if not (isinstance(gpus, list) and all(isinstance(g, str) for g in gpus)):
            raise BadReport(f"container {i}: gpus must be a list of UUIDs")
        utilization = _number(util, f"container {i} util")
        containers.append(
            ContainerUse(
                ns,
                pod,
                container,
                tuple(gpus),
                min(max(utilization, 0.0), 100.0),
                int(_number(mem, f"container {i} mem")),
            )
        )
    return UseReport(start, end, tuple(containers))


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadReport(f"{what} must be a number, got {value!r}")
    return float(value)
