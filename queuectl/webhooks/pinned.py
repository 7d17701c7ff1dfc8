"""Pin a pod of an admitted sliced job to the place the core chose for its index.

The pod's template carried the whole assignment (`queuectl.io/pod-pins`, written by the
controller with the admission, jobs/pinning.py) and the pod carries its own index (an Indexed
Job's completion index, a JobSet child Job's index): at CREATE the pod gets the node affinity
of its pin, added to every required node selector term. Only pods carrying the annotation are
sent (the webhook's matchConditions), and the route fails closed, so such a pod is never
created unpinned: the Job controller retries the create while the webhook is down. Pure: it
reads the pod alone.
"""

from __future__ import annotations

import copy
from typing import Any

from queuectl.jobs import PodSetPlacement, pinning, podtemplate
from queuectl.webhooks.review import Request, Response, allow


def pin_ops(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """JSON patch ops that add the pod's pin to its node affinity; [] without one."""
    pin = pinning.pin_of(pod)
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


def mutate_pinned_pod(request: Request) -> Response:
    """Add its pin to a pod created with the pod-pins annotation."""
    pod = request.get("object")
    if request.get("operation") != "CREATE" or not isinstance(pod, dict):
        return allow(request)
    return allow(request, pin_ops(pod))
