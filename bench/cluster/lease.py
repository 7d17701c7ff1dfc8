"""The controller's leader Lease, watched during the load: how long it went without renewal.

A scheduling cycle that blocks the event loop shows here first: the elector renews every 2 s
and gives up leading after 10 s without a renewal (controller/leader.py). Gaps are measured
between the `renewTime`s the controller wrote (its own clock, microseconds), not between the
runner's observations, so a slow watch does not lengthen them. The Lease counts as lost if its
holder changed or was cleared, its `leaseTransitions` moved, or a gap exceeded its
`leaseDurationSeconds` (anyone could have taken it then).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from bench.cluster.kubeapi import Api, ApiError
from bench.cluster.record import parse_time

log = logging.getLogger(__name__)


@dataclass
class LeaseLog:
    """Pure: every version of the Lease seen, reduced to what the figures need."""

    renewals: list[float] = field(default_factory=list)
    """Distinct renewTimes, in the order seen (epoch seconds)."""
    holders: list[str | None] = field(default_factory=list)
    """Each holder in turn (a repeat only after a change)."""
    transitions: list[int] = field(default_factory=list)
    duration_s: float = 15.0
    deleted: bool = False

    def observe(self, spec: dict[str, Any] | None) -> None:
        spec = spec or {}
        holder = spec.get("holderIdentity") or None
        if not self.holders or self.holders[-1] != holder:
            self.holders.append(holder)
        transitions = int(spec.get("leaseTransitions") or 0)
        if not self.transitions or self.transitions[-1] != transitions:
            self.transitions.append(transitions)
        if spec.get("leaseDurationSeconds"):
            self.duration_s = float(spec["leaseDurationSeconds"])
        renewed = parse_time(spec.get("renewTime"))
        if renewed is not None and (not self.renewals or renewed > self.renewals[-1]):
            self.renewals.append(renewed)

    def max_gap(self, until: float | None = None) -> float | None:
        """The longest time between two renewals, and from the last one to `until` (the end of
        the load, epoch seconds) when given; None with fewer than two points."""
        points = [*self.renewals, *([until] if until is not None and self.renewals else [])]
        if len(points) < 2:
            return None
        return max(b - a for a, b in itertools.pairwise(points))

    def summary(self, until: float | None = None) -> dict[str, Any]:
        gap = self.max_gap(until)
        holder_changed = len(self.holders) > 1
        expired = gap is not None and gap > self.duration_s
        return {
            "renewals": len(self.renewals),
            "max_gap_s": gap,
            "lost": holder_changed or len(self.transitions) > 1 or expired or self.deleted,
            "holder_changed": holder_changed,
            "holders": self.holders,
            "duration_s": self.duration_s,
        }


async def watch(api: Api, namespace: str, name: str, into: LeaseLog) -> None:
    """Observe the Lease until cancelled (list for its current version, then one watch,
    resumed on disconnect and re-listed on 410)."""
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    params = {"fieldSelector": f"metadata.name={name}"}
    while True:
        try:
            listed = await api.request("GET", base, params=params, urgent=True)
            for lease in listed.get("items") or ():
                into.observe(lease.get("spec"))
            rv = str(listed["metadata"]["resourceVersion"])
            async for event in api.watch(base, rv, params):
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    raise ApiError(int(obj.get("code") or 500), str(obj.get("message")))
                if kind == "DELETED":
                    into.deleted = True
                elif kind in ("ADDED", "MODIFIED"):
                    into.observe(obj.get("spec"))
        except ApiError as err:
            if err.status != 410:
                log.warning("lease watch: %s; resuming", err)
        except (TimeoutError, OSError) as err:
            log.warning("lease watch: %s; resuming", err)
        await asyncio.sleep(0.2)
