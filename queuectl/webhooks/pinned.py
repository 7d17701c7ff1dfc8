"""Pin a pod of an admitted sliced job to the place the core chose for its index.

The pod's template carried the whole assignment (`queuectl.io/pod-pins`, written by the
controller with the admission, jobs/pinning.py) and the pod carries its own index (an Indexed
Job's completion index, a JobSet child Job's index): at CREATE the pod gets the node affinity
of its pin, added to every required node selector term. Only pods carrying the annotation are
sent (the webhook's matchConditions), and the route fails closed, so such a pod is never
created unpinned: the Job controller retries the create while the webhook is down.

The pod carries both halves, so a pod created a moment after its job was unsuspended (before
any cache has seen the admission) is pinned all the same. The Workload's topology assignment
(controller-owned) is read too when the cache holds it: a node hot swap (controller/nodes/
hotswap.py) moves a failed node's pods to a free node of the domain by rewriting that
assignment, and a running job's template, hence its pins, cannot change, so a recreated pod
is pinned to its index's place in the assignment as it is now. A pod whose place is a node the
controller drained is refused: the cache may not have seen the swap yet, and the job's
controller retries the create.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from queuectl.api import names
from queuectl.api.resource import NODES, WORKLOADS, Obj
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.jobs import PodSetPlacement, pinning, podtemplate
from queuectl.jobs.registry import KINDS, MAX_OWNER_DEPTH, Registry
from queuectl.webhooks.lookup import QueueLookup
from queuectl.webhooks.review import Request, Response, allow, deny, namespace_of


def pin_ops(pod: dict[str, Any], pin: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """JSON patch ops that add the pod's pin (`pin`, else its annotation's) to its node
    affinity; [] without one."""
    pin = pin if pin is not None else pinning.pin_of(pod)
    if not pin:
        return []
    spec = pod.get("spec") or {}
    wanted = [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(pin.items())]
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(podtemplate.AFFINITY_KEY) or {}
    ).get("nodeSelectorTerms") or []
    if terms and all(all(w in (t.get("matchExpressions") or []) for w in wanted) for t in terms):
        return []  # pinned already (the webhook ran again after another one)
    placement = PodSetPlacement("", domain={k: (v,) for k, v in pin.items()})
    injected = podtemplate.inject(spec, placement)
    affinity = copy.deepcopy(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    node_affinity.update(injected["affinity"]["nodeAffinity"])
    affinity["nodeAffinity"] = node_affinity
    return [{"op": "add", "path": "/spec/affinity", "value": affinity}]


def workload_of(pod: Obj, lookup: QueueLookup, kinds: Registry = KINDS) -> str | None:
    """The nearest `queuectl.io/workload` label on the pod or its controllers of a registered
    kind, each as the cache holds it with the uid its reference names (a Job's pod finds it
    on its Job, a JobSet's on its child Job or the JobSet)."""
    obj: Obj = pod
    namespace = ObjectView(pod).namespace
    for _ in range(MAX_OWNER_DEPTH + 1):
        if found := ObjectView(obj).labels.get(names.LABEL_WORKLOAD):
            return str(found)
        ref = ObjectView(obj).controller_ref
        kind = kinds.for_owner(ref) if ref is not None else None
        if ref is None or kind is None:
            return None
        owner = lookup.input_object(kind.resource, namespace, str(ref.get("name") or ""))
        if owner is None or not ref.get("uid") or ObjectView(owner).meta.get("uid") != ref["uid"]:
            return None
        obj = owner
    return None


def current_pin(pod: Obj, lookup: QueueLookup, kinds: Registry = KINDS) -> dict[str, str] | None:
    """The pod's place in its Workload's topology assignment as the cache holds it now; None
    where that cannot be told (no Workload in the cache, no admission, several pod sets
    placed by topology: which one is the pod's is not written on it)."""
    index = pinning.index_of(pod)
    name = workload_of(pod, lookup, kinds) if index is not None else None
    if index is None or name is None:
        return None
    wl = lookup.input_object(WORKLOADS, ObjectView(pod).namespace, name)
    assignments = (WorkloadView(wl or {}).admission or {}).get("podSetAssignments") or ()
    placed = [a["topologyAssignment"] for a in assignments if a.get("topologyAssignment")]
    return pinning.pin_in(placed[0], index) if len(placed) == 1 else None


def mutate_pinned_pod(
    request: Request, lookup: QueueLookup | None = None, kinds: Registry = KINDS
) -> Response:
    """Add its pin to a pod created with the pod-pins annotation."""
    pod = request.get("object")
    if request.get("operation") != "CREATE" or not isinstance(pod, dict):
        return allow(request)
    pin = pinning.pin_of(pod)
    if pin and lookup is not None:
        pin = current_pin(pod, lookup, kinds) or pin
        host = pin.get(names.LABEL_HOSTNAME)
        node = lookup.input_object(NODES, "", host) if host else None
        if node is not None and names.ANNOTATION_NODE_DRAINED in ObjectView(node).annotations:
            name = ObjectView(pod).meta.get("name") or ObjectView(pod).meta.get("generateName")
            return deny(
                request,
                f"Pod {namespace_of(request)}/{name}: its place, node {host}, was drained by "
                "queuectl (a failed node or GPU); the controller moves its workload, and the "
                "create succeeds once this webhook's cache has the new placement",
            )
    return allow(request, pin_ops(pod, pin))
