"""What the web view shows, as JSON: a pure function of a `Snapshot` of the controller.

Two answers, one per audience, each opened by its own RBAC rule in the visibility API
(`webview.py`): the cluster view (the cohort tree with quota, usage and borrowing per flavor,
each ClusterQueue's line with reason and estimated start, the GPU nodes by flavor and rack with
their allocation and health) and a namespace's view (its LocalQueues, each with its
ClusterQueue's quota and its own part of the line, nothing of other namespaces: not even the
names of their workloads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.core import ETA_ASSUMES
from queuectl.core.fleet import QuotaRow

CLUSTER_KIND = "ClusterView"
NAMESPACE_KIND = "NamespaceView"
PENDING_SHOWN = 50
"""Pending workloads listed per queue (the count says how many more wait)."""

Item = Mapping[str, Any]
"""A pending workload as the visibility API lists it (`visibility.pending_items`)."""


@dataclass(frozen=True)
class CohortFacts:
    name: str
    parent: str | None
    quota: tuple[QuotaRow, ...] = ()


@dataclass(frozen=True)
class QueueFacts:
    """A ClusterQueue: its quota table and its line, in the order the cycle tries it."""

    name: str
    cohort: str | None
    active: bool = True
    admitted: int = 0
    quota: tuple[QuotaRow, ...] = ()
    pending: tuple[Item, ...] = ()


@dataclass(frozen=True)
class LocalQueueFacts:
    namespace: str
    name: str
    cluster_queue: str


@dataclass(frozen=True)
class NodeFacts:
    name: str
    rack: str
    flavors: tuple[str, ...]
    gpus: int
    """Allocatable GPUs."""
    allocated: int
    """GPUs requested by the pods bound to the node."""
    unhealthy: int
    ready: bool = True
    unschedulable: bool = False


@dataclass(frozen=True)
class Snapshot:
    now: float
    cohorts: tuple[CohortFacts, ...] = ()
    queues: tuple[QueueFacts, ...] = ()
    local_queues: tuple[LocalQueueFacts, ...] = ()
    nodes: tuple[NodeFacts, ...] = ()
    notes: tuple[str, ...] = field(default=())
    """Said on the page as they are (a standby replica, estimates not yet made)."""


def _quota(rows: Sequence[QuotaRow]) -> list[dict[str, Any]]:
    def q(resource: str, value: int | None) -> str | int | None:
        return None if value is None else convert.quantity_string(resource, value)

    return [
        {
            "flavor": r.flavor,
            "resource": r.resource,
            "nominal": q(r.resource, r.nominal),
            "used": q(r.resource, r.used),
            "borrowed": q(r.resource, r.borrowed),
            "lent": q(r.resource, r.lent),
            "borrowingLimit": q(r.resource, r.borrowing_limit),
        }
        for r in rows
    ]


def _header(kind: str, snap: Snapshot) -> dict[str, Any]:
    return {
        "kind": kind,
        "apiVersion": f"{names.VISIBILITY_GROUP}/{names.VISIBILITY_VERSION}",
        "metadata": {},
        "generatedAt": convert.format_time(snap.now),
        "etaAssumes": ETA_ASSUMES,
        "notes": list(snap.notes),
    }


def _queue(q: QueueFacts, items: Sequence[Item], local_queues: list[str]) -> dict[str, Any]:
    return {
        "kind": "ClusterQueue",
        "name": q.name,
        "active": q.active,
        "admitted": q.admitted,
        "quota": _quota(q.quota),
        "pendingCount": len(items),
        "pending": list(items[:PENDING_SHOWN]),
        "localQueues": local_queues,
    }


def cluster_view(snap: Snapshot) -> dict[str, Any]:
    """Everything, for those who may read every queue (`list clusterqueues` in the API)."""
    lqs: dict[str, list[str]] = {}
    for lq in sorted(snap.local_queues, key=lambda lq: (lq.namespace, lq.name)):
        lqs.setdefault(lq.cluster_queue, []).append(f"{lq.namespace}/{lq.name}")
    children: dict[str | None, list[dict[str, Any]]] = {}
    known = {c.name for c in snap.cohorts}
    for q in sorted(snap.queues, key=lambda q: q.name):
        parent = q.cohort if q.cohort in known else None
        children.setdefault(parent, []).append(_queue(q, q.pending, lqs.get(q.name, [])))
    cohorts = sorted(snap.cohorts, key=lambda c: c.name)
    by_name = {c.name: c for c in cohorts}

    def cohort(c: CohortFacts, seen: frozenset[str]) -> dict[str, Any]:
        kids = [
            cohort(k, seen | {k.name}) for k in cohorts if k.parent == c.name and k.name not in seen
        ]
        return {
            "kind": "Cohort",
            "name": c.name,
            "quota": _quota(c.quota),
            "children": kids + children.get(c.name, []),
        }

    roots = [c for c in cohorts if c.parent not in by_name]
    body = _header(CLUSTER_KIND, snap)
    body["tree"] = [cohort(c, frozenset({c.name})) for c in roots] + children.get(None, [])
    body["nodeGroups"] = node_groups(snap.nodes)
    return body


def node_groups(nodes: Sequence[NodeFacts]) -> list[dict[str, Any]]:
    """GPU nodes by flavor and rack: totals, then each node's allocation and health."""
    groups: dict[tuple[str, str], list[NodeFacts]] = {}
    for n in nodes:
        if n.gpus <= 0:
            continue
        flavor = ",".join(n.flavors) or "-"
        groups.setdefault((flavor, n.rack or "-"), []).append(n)
    out = []
    for (flavor, rack), members in sorted(groups.items()):
        members.sort(key=lambda n: n.name)
        out.append(
            {
                "flavor": flavor,
                "rack": rack,
                "gpus": sum(n.gpus for n in members),
                "allocated": sum(min(n.allocated, n.gpus) for n in members),
                "unhealthy": sum(n.unhealthy for n in members),
                "nodes": [
                    {
                        "name": n.name,
                        "gpus": n.gpus,
                        "allocated": n.allocated,
                        "unhealthy": n.unhealthy,
                        "health": health(n),
                    }
                    for n in members
                ],
            }
        )
    return out


def health(n: NodeFacts) -> str:
    if not n.ready:
        return "NotReady"
    if n.unhealthy:
        return (
            f"{n.unhealthy} GPU unhealthy" if n.unhealthy == 1 else f"{n.unhealthy} GPUs unhealthy"
        )
    if n.unschedulable:
        return "cordoned"
    return "ok"


def namespace_view(snap: Snapshot, namespace: str) -> dict[str, Any]:
    """One namespace's LocalQueues, for those who may read them (`list localqueues` in the
    namespace): each with its ClusterQueue's quota and its own workloads' part of the line.
    Positions in the ClusterQueue stay (they say how many stand in front), names of other
    namespaces' workloads do not appear."""
    queues = {q.name: q for q in snap.queues}
    out = []
    for lq in sorted(snap.local_queues, key=lambda lq: lq.name):
        if lq.namespace != namespace:
            continue
        q = queues.get(lq.cluster_queue)
        items = [
            i
            for i in (q.pending if q is not None else ())
            if i["metadata"]["namespace"] == namespace and i["localQueueName"] == lq.name
        ]
        out.append(
            {
                "kind": "LocalQueue",
                "name": lq.name,
                "clusterQueue": lq.cluster_queue,
                "active": q is not None and q.active,
                "quota": _quota(q.quota if q is not None else ()),
                "pendingCount": len(items),
                "pending": items[:PENDING_SHOWN],
            }
        )
    body = _header(NAMESPACE_KIND, snap)
    body["namespace"] = namespace
    body["localQueues"] = out
    return body
