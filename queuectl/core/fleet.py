"""Fleet-wide figures read off the core's state, for `queuectl describe|list` and the metrics.

Pure and read-only: quota tables of queues and cohorts as the quota tree sees them, the order in
which a ClusterQueue's pending workloads will be tried, GPU allocation per flavor, fragmentation,
unhealthy GPUs and GPU-seconds. Nothing here decides anything; it only reports what the
scheduler's own state says, so the CLI, the dashboard and the decisions never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from queuectl.core.quota import QNode
from queuectl.core.types import GPU, FlavorResource, Node

if TYPE_CHECKING:
    from queuectl.core.scheduler import Scheduler

UNHEALTHY_TAINT = "gpu.queuectl.io/unhealthy"
"""Copy of queuectl.api.names.TAINT_GPU_UNHEALTHY (the core may not import api; a test keeps
them equal)."""


# --- quota tables ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class QuotaRow:
    """One (flavor, resource) of a ClusterQueue or Cohort, in canonical units."""

    flavor: str
    resource: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    used: int
    """A queue: what its admitted workloads hold. A cohort: what its children use beyond the
    part of their quota they keep for themselves (the quota tree's own bookkeeping)."""
    borrowed: int
    """Used beyond the node's own quota (its nominal plus what its children lend it)."""
    lent: int
    """Of the quota it lends, the part others in its tree borrow now. When several nodes lend
    idle quota, each shows the most that can have come from it."""


def _order(node: QNode, spec_order: Iterable[FlavorResource]) -> list[FlavorResource]:
    seen: list[FlavorResource] = []
    for fr in spec_order:
        if fr not in seen:
            seen.append(fr)
    extra = set(node.nominal) | set(node.subtree) | set(node.usage)
    return seen + sorted(fr for fr in extra if fr not in seen)


def _under(node: QNode) -> set[str]:
    """Names of the queues in `node`'s subtree (itself if it is a queue)."""
    if node.is_queue:
        return {node.name}
    out: set[str] = set()
    for child in node.children:
        out |= _under(child)
    return out


def _lent(s: Scheduler, node: QNode, fr: FlavorResource) -> int:
    if node.parent is None:
        return 0
    g = node.guaranteed.get(fr, 0)
    lendable = node.subtree.get(fr, 0) - g
    idle = max(0, lendable - max(0, node.usage.get(fr, 0) - g))
    if idle == 0:
        return 0
    mine = _under(node)
    others = sum(
        q.borrowed(fr) for q in s.state.tree.leaves.get(node.root, ()) if q.name not in mine
    )
    return min(idle, others)


def quota_table(s: Scheduler, name: str, *, cohort: bool = False) -> tuple[QuotaRow, ...] | None:
    """The quota table of a ClusterQueue (or, with `cohort`, a Cohort); None if unknown."""
    state = s.state
    state.ensure_tree()
    node = (state.tree.cohorts if cohort else state.tree.queues).get(name)
    if node is None:
        return None
    spec = state.cohorts.get(name) if cohort else state.queues.get(name)
    spec_order = [
        (fq.name, rq.name)
        for rg in (spec.resource_groups if spec is not None else ())
        for fq in rg.flavors
        for rq in fq.resources
    ]
    return tuple(
        QuotaRow(
            flavor=fr[0],
            resource=fr[1],
            nominal=node.nominal.get(fr, 0),
            borrowing_limit=node.borrowing_limit.get(fr),
            lending_limit=node.lending_limit.get(fr),
            used=node.usage.get(fr, 0),
            borrowed=node.borrowed(fr) if node.parent is not None else 0,
            lent=_lent(s, node, fr),
        )
        for fr in _order(node, spec_order)
    )


def cohort_members(s: Scheduler, name: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(child cohorts, child ClusterQueues) of a cohort, by name; None if unknown."""
    state = s.state
    state.ensure_tree()
    node = state.tree.cohorts.get(name)
    if node is None:
        return None
    kids = sorted(node.children, key=lambda c: c.name)
    return (
        tuple(c.name for c in kids if not c.is_queue),
        tuple(c.name for c in kids if c.is_queue),
    )


# --- queue order ----------------------------------------------------------------------------
def pending_order(s: Scheduler, cluster_queue: str) -> tuple[str, ...]:
    """Keys of the workloads queued in a ClusterQueue, in the order the cycle tries them:
    the core's own sort key (priority, requeued-at-front, age). Workloads backing off,
    inactive or nominated are not in line and are not listed."""
    q = s.book.pending.get(cluster_queue)
    if q is None:
        return ()
    return tuple(key for key, _ in sorted(q.entries.items(), key=lambda kv: kv[1][0]))


# --- GPUs -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FlavorGpus:
    flavor: str
    capacity: int
    """Healthy GPUs of the schedulable nodes that carry the flavor's node labels; for a flavor
    that serves `nvidia.com/gpu` with MIG slices (`node_resources`), those slices."""
    allocated: int
    """GPUs of the flavor held by admitted workloads (quota charged)."""

    @property
    def ratio(self) -> float:
        return self.allocated / self.capacity if self.capacity > 0 else 0.0


def gpu_allocation(s: Scheduler) -> tuple[FlavorGpus, ...]:
    """Per flavor, in name order: GPU capacity and what admitted workloads hold."""
    state = s.state
    allocated: dict[str, int] = {}
    for charge in state.charges.values():
        for (flavor, res), amount in charge.usage.items():
            if res == GPU:
                allocated[flavor] = allocated.get(flavor, 0) + amount
    out = []
    for name in sorted({*state.flavors, *allocated}):
        spec = state.flavors.get(name)
        capacity = 0
        if spec is not None:
            device = spec.node_resources.get(GPU, GPU)
            for node in state.nodes.values():
                if node.unschedulable:
                    continue
                if all(node.labels.get(k) == v for k, v in spec.node_labels.items()):
                    capacity += state.capacity.get(node.name, {}).get(device, 0)
        out.append(FlavorGpus(name, capacity, allocated.get(name, 0)))
    return tuple(out)


def free_gpus(s: Scheduler, pod_gpus: Mapping[str, int] | None = None) -> dict[str, int]:
    """Free healthy GPUs per schedulable node.

    `pod_gpus` (node -> GPUs requested by the pods bound to it) is the truth when the caller
    has it; without it the core's own view is used: what other pods use plus the placements of
    admitted workloads with a topology assignment (others are not tied to nodes in the core).
    """
    state = s.state
    out: dict[str, int] = {}
    for name, node in state.nodes.items():
        if node.unschedulable:
            continue
        cap = state.capacity.get(name, {}).get(GPU, 0)
        if cap <= 0:
            continue
        if pod_gpus is not None:
            used = pod_gpus.get(name, 0)
        else:
            used = node.used.get(GPU, 0) + state.node_used.get(name, {}).get(GPU, 0)
        out[name] = max(0, cap - used)
    return out


def pending_gpu_requests(s: Scheduler) -> tuple[int, ...]:
    """Per-pod GPU requests of the pod sets of every workload not admitted (sorted, distinct)."""
    state = s.state
    wanted = {
        int(ps.requests.get(GPU, 0))
        for key, w in state.workloads.items()
        if key not in state.charges and w.active
        for ps in w.podsets
        if ps.count > 0 and ps.requests.get(GPU, 0) > 0
    }
    return tuple(sorted(wanted))


def fragmentation_ratio(free: Mapping[str, int], requests: Iterable[int]) -> float:
    """Free GPUs on nodes where no pending pod's GPU request fits, over all free GPUs.

    0 when nothing is free or nothing with GPUs is pending: stranded capacity only means
    something while there is demand it cannot serve.
    """
    smallest = min((r for r in requests if r > 0), default=None)
    total = sum(f for f in free.values() if f > 0)
    if smallest is None or total == 0:
        return 0.0
    stranded = sum(f for f in free.values() if 0 < f < smallest)
    return stranded / total


def unhealthy_gpus(nodes: Iterable[Node], taint_key: str = UNHEALTHY_TAINT) -> int:
    """GPUs the node agent reports unhealthy: allocatable minus the healthy-count label, or
    every GPU of a node carrying the unhealthy taint without a count."""
    total = 0
    for node in nodes:
        gpus = node.allocatable.get(GPU, 0)
        if gpus <= 0:
            continue
        if node.healthy_gpus is not None:
            total += max(0, gpus - max(0, node.healthy_gpus))
        elif any(t.key == taint_key for t in node.taints):
            total += gpus
    return total


# --- GPU-seconds (chargeback) -----------------------------------------------------------
GpuSecondsKey = tuple[str, str, str]
"""(namespace, ClusterQueue, flavor)"""


class GpuSecondsMeter:
    """GPU-seconds consumed by admitted workloads between successive readings.

    Each `advance(now)` returns what was consumed since the previous one, for a counter to add.
    The first reading returns nothing: a restarted controller must not charge again the time
    before it started (its counter restarted at zero).
    """

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: float | None = None

    def advance(self, s: Scheduler, now: float) -> dict[GpuSecondsKey, float]:
        last, self.last = self.last, now
        out: dict[GpuSecondsKey, float] = {}
        if last is None or now <= last:
            return out
        for charge in s.state.charges.values():
            start = max(last, charge.admitted_at)
            if now <= start:
                continue
            namespace = charge.key.split("/", 1)[0]
            for (flavor, res), amount in charge.usage.items():
                if res == GPU and amount > 0:
                    k = (namespace, charge.cq, flavor)
                    out[k] = out.get(k, 0.0) + amount * (now - start)
        return out
