"""Node hot swap: a topology gang that lost one node moves only that node's pods.

When a node fails under a gang placed with topology, evicting the whole gang throws away every
other node's progress and sends it back to the queue. If the gang's domain still holds a free
node of the same kind, only the failed node's pods need a new home: the Workload's topology
assignment (controller-owned) names the replacement instead, the failed node's pods are
deleted, and the job's own controller recreates them; the pod template already confines them
to the domain, the failed node is cordoned, so kube-scheduler puts them on a live node there.

Pure: `plan` reads the Workload's admission, the flavors and the nodes as the API serves them
and either returns the new admission or says why the whole gang must be requeued. A swap is
taken only when it leaves the placement the job's template carries unchanged (node labels,
tolerations, domain: computed from the admission), so the job is never found to have drifted
from its admission and the recreated pods can land only in the domain quota was counted for.
That rules out a gang that lived on the failed node alone (its domain is that node) and several
pod sets placed together (pinned to their nodes): those are requeued whole. A pod set pinned
pod by pod (sliced or balanced) is swapped: its pins are in the running job's template, which
cannot change, so the pinning webhook pins a recreated pod to its index's place in the
Workload's assignment as it is now (webhooks/pinned.py).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.admission import placement
from queuectl.core import topology
from queuectl.core import types as core
from queuectl.jobs import PodSetPlacement

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Swap:
    """Move the pods the admission counted on `failed` to `replacement`."""

    failed: str
    replacement: str | None
    """None: the admission counted none of the gang's pods on the failed node (the scheduler
    put them there, the core counted them on other nodes of the domain): they are made again
    in the domain and nothing in the admission moves."""
    pods: int
    """How many of the gang's pods the admission counted on the failed node."""
    admission: dict[str, Any]
    """The Workload's status.admission with the failed node's domains naming the replacement."""


def assigned_nodes(wl: Obj) -> set[str]:
    """Nodes named by the Workload's topology assignment (hostname level)."""
    out: set[str] = set()
    admission = WorkloadView(wl).admission or {}
    for psa in admission.get("podSetAssignments") or ():
        topo = psa.get("topologyAssignment") or {}
        levels = topo.get("levels") or ()
        if not levels or levels[-1] != names.LABEL_HOSTNAME:
            continue
        for d in topo.get("domains") or ():
            values = d.get("values") or ()
            if values:
                out.add(values[-1])
    return out


def _on_node(psa: Obj, node: str) -> int:
    """Pods of a pod set assignment counted on `node` (0 without a hostname-level topology)."""
    topo = psa.get("topologyAssignment") or {}
    levels = topo.get("levels") or ()
    if not levels or levels[-1] != names.LABEL_HOSTNAME:
        return 0
    return sum(
        int(d.get("count", 0))
        for d in topo.get("domains") or ()
        if (d.get("values") or [None])[-1] == node
    )


def busy_nodes(workloads: Iterable[Obj], pods: Iterable[Obj]) -> set[str]:
    """Nodes that are not free: named by the topology assignment of a Workload holding quota,
    or running a pod that asks for an extended resource (a GPU or a slice of one)."""
    out: set[str] = set()
    for wl in workloads:
        if WorkloadView(wl).holds_quota:
            out |= assigned_nodes(wl)
    for pod in pods:
        spec = ObjectView(pod).spec
        node = spec.get("nodeName")
        if not node or ObjectView(pod).status.get("phase") in ("Succeeded", "Failed"):
            continue
        with contextlib.suppress(ValueError, TypeError, KeyError):
            if any(v > 0 and "/" in r for r, v in convert.pod_requests(spec).items()):
                out.add(str(node))
    return out


def _fits(node: core.Node, place: PodSetPlacement) -> bool:
    """The node is of the pod set's kind (its flavors' node labels), in its domain, and takes
    its pods (every hard taint tolerated)."""
    labels = node.labels
    if any(labels.get(k) != v for k, v in place.node_labels.items()):
        return False
    if any(labels.get(k) not in values for k, values in place.domain.items()):
        return False
    tolerations = [convert.toleration(t) for t in place.tolerations]
    return topology.tolerated(node.taints, tolerations)


def _moved(admission: Obj, failed: str, labels: Mapping[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(dict(admission))
    for psa in out.get("podSetAssignments") or ():
        topo = psa.get("topologyAssignment") or {}
        levels = topo.get("levels") or ()
        for d in topo.get("domains") or ():
            if (d.get("values") or [None])[-1] == failed:
                d["values"] = [labels.get(lv, "") for lv in levels]
    return out


def _per_pod(psa: Obj) -> dict[str, int]:
    count = max(1, int(psa.get("count", 1)))
    usage = psa.get("resourceUsage") or {}
    return {res: convert.canonical(res, v) // count for res, v in usage.items()}


def plan(
    wl: Obj,
    failed: str,
    on_failed: int,
    nodes: Sequence[Obj],
    flavors: Mapping[str, Obj],
    busy: Set[str],
) -> Swap | str:
    """A hot swap of `failed` for the Workload `wl`, or why there is none (the gang is then
    requeued whole). `on_failed` is how many of its pods are bound to the failed node, `nodes`
    the cluster's Nodes, `flavors` the ResourceFlavors by name, `busy` the nodes that are not
    free (`busy_nodes`).

    Only a gang of one pod set placed by topology down to its hosts is swapped (with several
    pod sets, which of them a pod on the failed node belongs to is not known). What moves is
    what the admission counted on the failed node: the scheduler may place a pod on any node
    of the domain, not only where the core counted it, so a pod bound there but counted
    elsewhere only needs making again (and a swap written before a restart, whose pods were
    not deleted yet, is finished without another node). The replacement is the first node by
    name that is free, schedulable, of the same kind, in the gang's domain and holds the
    counted pods."""
    view = WorkloadView(wl)
    admission = view.admission or {}
    assignments: list[Obj] = list(admission.get("podSetAssignments") or ())
    if len(assignments) != 1:
        return "it has several pod sets"
    psa = assignments[0]
    levels = (psa.get("topologyAssignment") or {}).get("levels") or ()
    if not levels or levels[-1] != names.LABEL_HOSTNAME:
        return "it was not placed by topology down to its nodes"
    pods = _on_node(psa, failed)
    if pods == 0 and on_failed == 0:
        return f"none of its pods is on node {failed}"
    if pods == 0:
        return Swap(failed, None, 0, copy.deepcopy(dict(admission)))
    try:
        (before,) = placement.placements(
            convert.admission_from_status(admission), flavors, view.pod_sets
        )
        per_pod = _per_pod(psa)
    except (KeyError, ValueError, TypeError):
        return "its admission cannot be read"
    need = topology.node_requests(per_pod, {core.GPU: before.gpu_resource or core.GPU})
    for obj in sorted(nodes, key=lambda n: str(n["metadata"]["name"])):
        name = str(obj["metadata"]["name"])
        if name == failed or name in busy:
            continue
        if names.ANNOTATION_NODE_DRAINED in ObjectView(obj).annotations:
            continue
        try:
            node = convert.node(obj)
        except (ValueError, KeyError, TypeError):
            continue
        if node.unschedulable or not _fits(node, before):
            continue  # cordoned, not Ready, GPUs in doubt; another kind; outside the domain
        if topology.pods_fit(node, topology.node_capacity(node), {}, need, pods) < pods:
            continue
        moved = _moved(admission, failed, node.labels)
        (after,) = placement.placements(
            convert.admission_from_status(moved), flavors, view.pod_sets
        )
        if replace(after, pins=()) != replace(before, pins=()):
            continue  # its pods would have to carry another placement than they do
        return Swap(failed, name, pods, moved)
    where = ", ".join(f"{k}={'|'.join(v)}" for k, v in sorted(before.domain.items()))
    return f"no free node of its kind{f' in {where}' if where else ''} holds its {pods} pod(s)"
