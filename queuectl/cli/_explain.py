"""Why a workload is where it is, in words: the core's `Explanation` formatted for a person.

Nothing here computes a decision; it only prints what `Scheduler.explain` (or the controller's
withholding reason) said: the reason, the resource and flavor that is short and by how much,
which queues hold that resource and whether they borrow it, and whether preemption would help.
"""

from __future__ import annotations

from queuectl.api import names
from queuectl.cli._render import Term, quantity
from queuectl.core import Explanation, PendingInfo, QueueHolding

Withheld = tuple[str, str]
"""(reason, message) of a workload the controller keeps from the core."""


def _holders(resource: str, holders: tuple[QueueHolding, ...]) -> str:
    parts = []
    for h in holders:
        text = f"{h.cluster_queue} uses {quantity(resource, h.usage)}"
        if h.borrowed:
            text += f" ({quantity(resource, h.borrowed)} borrowed)"
        parts.append(text)
    return "; ".join(parts)


def shortfall_line(info: PendingInfo) -> str | None:
    """'needs 32 nvidia.com/gpu of flavor h100, 8 available: 24 short' (None without details)."""
    if info.resource is None or info.flavor is None:
        return None
    res = info.resource
    parts = [f"needs {quantity(res, info.requested)} {res} of flavor {info.flavor}"]
    if info.available is not None:
        parts.append(f"{quantity(res, max(0, info.available))} available")
    line = ", ".join(parts)
    if info.shortfall is not None and info.shortfall > 0:
        line += f": {quantity(res, info.shortfall)} short"
    return line


def _per_level(info: PendingInfo) -> tuple[str, list[str]]:
    """A failed sliced placement's message and, apart, what the largest domain of each level
    holds ("the largest rack holds 3 slices of 4 pods"), one line each."""
    if info.reason != names.REASON_TOPOLOGY_PLACEMENT_FAILED:
        return info.message, []
    parts = info.message.split("; ")
    levels = [p for p in parts if p.startswith("the largest ")]
    return "; ".join(p for p in parts if p not in levels), levels


def explain_lines(
    expl: Explanation | None, withheld: Withheld | None, term: Term | None = None
) -> list[str]:
    """The explanation as `Label: text` lines (no trailing newline)."""
    t = term or Term()
    if withheld is not None:
        reason, message = withheld
        return [f"Reason:      {t.paint(reason, 'yellow', 'bold')}", f"Detail:      {message}"]
    if expl is None or expl.state == "unknown":
        return ["Reason:      the scheduler does not know this workload (finished or deleted)"]
    if expl.state == "admitted":
        cq = expl.admission.cluster_queue if expl.admission else "?"
        return [f"Reason:      {t.paint('Admitted', 'green', 'bold')} to ClusterQueue {cq}"]
    info = expl.pending
    lines: list[str] = []
    reason = info.reason if info is not None else names.REASON_PENDING
    if expl.state == "inactive":
        reason = names.REASON_INACTIVE
    lines.append(f"Reason:      {t.paint(reason, 'yellow', 'bold')}")
    if expl.state == "inactive":
        lines.append(
            "Detail:      spec.active is false; `queuectl resume workload` queues it again"
        )
        return lines
    if info is not None and info.message:
        detail, per_level = _per_level(info)
        lines.append(f"Detail:      {detail}")
        lines += [f"{'Per level:' if i == 0 else '':<13}{part}" for i, part in enumerate(per_level)]
    if info is not None:
        short = shortfall_line(info)
        if short is not None:
            lines.append(f"Missing:     {t.paint(short, 'red')}")
        if info.holders and info.resource is not None:
            lines.append(f"Held by:     {_holders(info.resource, info.holders)}")
    if expl.state == "nominated":
        victims = ", ".join(expl.would_evict) or "-"
        lines.append(f"Preemption:  under way; waiting for these to release quota: {victims}")
    elif expl.admission is not None:
        lines.append("Preemption:  not needed: it fits now")
    elif expl.preemption_possible:
        lines.append(f"Preemption:  would admit it by evicting {', '.join(expl.would_evict)}")
    elif info is not None and info.reason == names.REASON_WAITING_FOR_QUOTA:
        lines.append(
            "Preemption:  cannot help: the preemption policies allow no victims that would "
            "free enough"
        )
    elif info is not None and info.reason == names.REASON_TOPOLOGY_PLACEMENT_FAILED:
        lines.append("Preemption:  cannot help: no node placement exists even after preemption")
    return lines


def one_line(expl: Explanation | None, withheld: Withheld | None) -> str:
    """A short reason for tables: 'WaitingForQuota: 24 nvidia.com/gpu short in h100'."""
    if withheld is not None:
        return withheld[0]
    if expl is None or expl.state == "unknown":
        return "-"
    if expl.state == "admitted":
        return names.REASON_ADMITTED
    if expl.state == "inactive":
        return names.REASON_INACTIVE
    if expl.state == "nominated":
        return names.REASON_WAITING_FOR_PREEMPTED
    if expl.admission is not None:
        return "FitsNow"
    info = expl.pending
    if info is None:
        return names.REASON_PENDING
    if info.resource and info.flavor and info.shortfall:
        return (
            f"{info.reason}: {quantity(info.resource, info.shortfall)} {info.resource} "
            f"short in {info.flavor}"
        )
    if expl.preemption_possible:
        return f"fits by preempting {len(expl.would_evict)}"
    return info.reason
