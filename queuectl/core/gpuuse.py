"""A workload's GPU use, folded from its nodes' reports, and the idle policy's verdict. Pure.

Each GPU node's agent reports, once per window, every container's GPUs and their mean
utilization over the window (docs/design/agent.md, "GPU use per container"). The controller
groups a report's containers by workload and folds each workload's share into the workload's
running record (`fold`), kept on its status so it survives a controller restart:

- GPU-seconds: the workload's GPUs on that node times the time since that node's last counted
  report (a report already counted, seen again after a relist or a restart, adds nothing; one
  missed in between is covered by the next; nothing before the workload's admission counts);
- used GPU-seconds: the same weighted by the window's mean utilization;
- utilization: the GPU-weighted mean of each node's latest report (a gang spans nodes);
- idle since: when the workload's utilization went under its queue's threshold and stayed.

`verdict` then says what the queue's idle policy asks: nothing, flag it idle, or stop it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Final

STALE_WINDOWS: Final = 3
"""A node whose latest report is older than this many windows no longer counts toward the
workload's utilization (its pods left, or its agent stopped reporting)."""
DEFAULT_IDLE_THRESHOLD: Final = 5.0
"""Percent under which GPU-seconds count as idle for the fleet figures when the queue has no
idle policy: the policy's own threshold otherwise."""


class IdleAction(enum.StrEnum):
    WARN = "Warn"
    """Condition GPUIdle and a Warning Event; the workload keeps running."""
    REQUEUE = "Requeue"
    """As Warn, then preempted with its grace period and requeued."""
    STOP = "Stop"
    """As Warn, then preempted with its grace period and deactivated (not requeued)."""


@dataclass(frozen=True)
class IdlePolicy:
    threshold: float
    """Percent utilization under which a workload's GPUs are idle."""
    window_s: float
    """How long they must stay idle before the action."""
    action: IdleAction = IdleAction.WARN


@dataclass(frozen=True)
class NodeReport:
    """One node's report, for one workload: its GPUs there and their mean utilization."""

    node: str
    start: float
    end: float
    gpus: int
    utilization: float


@dataclass(frozen=True)
class NodeUse:
    """The latest report counted from one node."""

    node: str
    at: float
    gpus: int
    utilization: float


@dataclass(frozen=True)
class WorkloadUse:
    gpu_seconds: float = 0.0
    used_gpu_seconds: float = 0.0
    idle_since: float | None = None
    nodes: tuple[NodeUse, ...] = ()

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def utilization(self) -> float:
        """GPU-weighted mean over the nodes' latest reports (0 without GPUs)."""
        gpus = self.gpus
        return sum(n.gpus * n.utilization for n in self.nodes) / gpus if gpus else 0.0

    @property
    def last_report(self) -> float | None:
        return max((n.at for n in self.nodes), default=None)


@dataclass(frozen=True)
class Counted:
    """What one report added: for the fleet's counters."""

    gpu_seconds: float
    used_gpu_seconds: float
    idle_gpu_seconds: float


def fold(
    use: WorkloadUse,
    report: NodeReport,
    *,
    admitted_at: float | None,
    threshold: float | None,
) -> tuple[WorkloadUse, Counted] | None:
    """`use` with `report` counted; None when the report adds nothing (already counted, or
    it ended before the admission). `threshold`: the queue's idle threshold, None without an
    idle policy (then no idle clock runs)."""
    since = admitted_at if admitted_at is not None else float("-inf")
    window = max(report.end - report.start, 1.0)
    previous = next((n for n in use.nodes if n.node == report.node), None)
    counted_to = previous.at if previous is not None else float("-inf")
    if report.end <= max(counted_to, since):
        return None
    # A report missed in between (a write that lost a conflict, a relist that skipped one) is
    # counted with this one, at its utilization; a gap longer than a few windows is not.
    begin = report.start
    if previous is not None and report.start - previous.at <= STALE_WINDOWS * window:
        begin = previous.at
    span = report.end - max(begin, since)
    gpu_seconds = report.gpus * max(span, 0.0)
    used = gpu_seconds * report.utilization / 100.0
    idle_under = DEFAULT_IDLE_THRESHOLD if threshold is None else threshold
    idle = gpu_seconds if report.utilization < idle_under else 0.0

    stale_before = report.end - STALE_WINDOWS * window
    nodes = tuple(
        n for n in use.nodes if n.node != report.node and n.at >= max(stale_before, since)
    )
    nodes = (*nodes, NodeUse(report.node, report.end, report.gpus, report.utilization))
    folded = replace(
        use,
        gpu_seconds=use.gpu_seconds + gpu_seconds,
        used_gpu_seconds=use.used_gpu_seconds + used,
        nodes=tuple(sorted(nodes, key=lambda n: n.node)),
    )
    folded = replace(folded, idle_since=_idle_since(use, folded, report, since, threshold))
    return folded, Counted(gpu_seconds, used, idle)


def _idle_since(
    before: WorkloadUse,
    after: WorkloadUse,
    report: NodeReport,
    since: float,
    threshold: float | None,
) -> float | None:
    """Keeps running while the workload stays under the threshold; starts at the window that
    first showed it idle (not before the admission); stops at a window that shows use."""
    if threshold is None or after.utilization >= threshold:
        return None
    if before.idle_since is not None and before.idle_since >= since:
        return before.idle_since
    return max(report.start, since)


class Verdict(enum.Enum):
    IN_USE = "in-use"
    """Not idle (or not long enough): no condition, or clear it."""
    IDLE = "idle"
    """Idle for the policy's window: condition GPUIdle and a Warning Event."""
    STOP = "stop"
    """Idle for the window under Requeue or Stop: preempt it too."""


def verdict(use: WorkloadUse, policy: IdlePolicy | None, now: float) -> Verdict:
    """What the idle policy asks for a workload whose GPU use is `use` at `now`."""
    if policy is None or use.idle_since is None or now - use.idle_since < policy.window_s:
        return Verdict.IN_USE
    return Verdict.IDLE if policy.action is IdleAction.WARN else Verdict.STOP
