"""Which requests each of queuectl's webhooks is sent: rules, selectors, CEL match conditions.

Every hook is narrowed so that the rest of the cluster never waits on queuectl: only the
kinds, labels and claims it judges are sent (docs/design/webhooks.md). `configs` assembles the
hooks from these.
"""

from __future__ import annotations

import json
from typing import Any

from queuectl.api import names, owned
from queuectl.jobs.registry import Registry

SYSTEM_NAMESPACES = ("kube-system",)  # plus the namespace queuectl is installed in
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
QUEUECTL_RESOURCES = ["clusterqueues", "cohorts", "localqueues"]
CONTROLLED = (
    "(has({o}.metadata.ownerReferences) && "
    "{o}.metadata.ownerReferences.exists(r, has(r.controller) && r.controller))"
)
"""CEL: the object `{o}` has a controller ownerReference."""
CARRIES_PINS = (
    "has(object.metadata.annotations) && "
    f"'{names.ANNOTATION_POD_PINS}' in object.metadata.annotations"
)
"""CEL: a pod created carrying the pod-pins annotation (an admitted sliced job's,
webhooks/pinned.py)."""
CLAIMS_A_JOB_UNSELECTED = (
    "request.operation == 'CREATE' && has(object.metadata.ownerReferences) && "
    "object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller && "
    "r.apiVersion == 'batch/v1' && r.kind == 'Job' && !(has(object.metadata.labels) && "
    "'batch.kubernetes.io/controller-uid' in object.metadata.labels && "
    "object.metadata.labels['batch.kubernetes.io/controller-uid'] == r.uid))"
)
"""CEL: a pod created naming a Job as its controller without that Job's `controller-uid`
label. The Job controller labels every pod it makes so (unless the Job sets `manualSelector`),
so only forged claims and manual selectors' pods are sent, and the cluster's Job pods never wait
on queuectl."""
CLAIMS_A_KUBEFLOW_JOB_UNLABELLED = (
    "request.operation == 'CREATE' && has(object.metadata.ownerReferences) && "
    "object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller && "
    "r.apiVersion.startsWith('kubeflow.org/')) && !(has(object.metadata.labels) && "
    f"'{names.LABEL_WORKLOAD}' in object.metadata.labels)"
)
"""CEL: a pod created naming a Kubeflow job (PyTorchJob, MPIJob) as its controller without the
workload label its operator copies from the admitted templates: made by hand, not by the
operator, so it is judged (`owners.unlabelled_pod_problems`); the operator's pods never wait."""
LWS_RULES = [  # accepted while the LWS CRD is absent; matches nothing until it is installed
    {
        "apiGroups": ["leaderworkerset.x-k8s.io"],
        "apiVersions": ["v1"],
        "resources": ["leaderworkersets"],
        "operations": ["CREATE", "UPDATE"],
        "scope": "Namespaced",
    }
]
POD_RULES = [
    {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
        "operations": ["CREATE", "UPDATE"],
        "scope": "Namespaced",
    }
]


def excluded_namespaces(namespace: str = names.SYSTEM_NAMESPACE) -> list[str]:
    """Namespaces the Job webhooks skip: kube-system and queuectl's own (its pods must start)."""
    return [*SYSTEM_NAMESPACES, namespace]


def namespace_selector(namespace: str) -> dict[str, Any]:
    return {
        "matchExpressions": [
            {
                "key": NAMESPACE_NAME_LABEL,
                "operator": "NotIn",
                "values": excluded_namespaces(namespace),
            }
        ]
    }


def queue_label(operator: str, kueue: str | None = None) -> dict[str, Any]:
    """Jobs by their queue label; `kueue` adds a term for Kueue's queue label."""
    terms = [{"key": names.LABEL_QUEUE_NAME, "operator": operator}]
    if kueue is not None:
        terms.append({"key": names.LABEL_KUEUE_QUEUE_NAME, "operator": kueue})
    return {"matchExpressions": terms}


def carries_our_keys(pod: bool) -> str:
    """CEL: the object, before or after the request, carries one of queuectl's labels or
    annotations on its metadata (or, for a job kind, in a Job's pod template); for a pod, its
    old object carries our scheduling gate. Only such objects are sent to the owned-keys
    webhooks, so the rest of the cluster never waits on queuectl."""
    parts = []
    for var in ("object", "oldObject"):
        metas = [f"{var}.metadata"]
        if not pod:
            metas.append(f"{var}.spec.template.metadata")
        for field, keys in (
            ("labels", owned.OWNED_LABELS),
            ("annotations", owned.OWNED_ANNOTATIONS),
        ):
            listed = json.dumps(sorted(keys))
            for meta in metas:
                steps = meta.split(".")
                guards = [f"has({'.'.join(steps[: i + 1])})" for i in range(1, len(steps))]
                parts.append(
                    f"({var} != null && {' && '.join(guards)} && has({meta}.{field}) && "
                    f"{listed}.exists(k, k in {meta}.{field}))"
                )
    if pod:
        gates = json.dumps(sorted(owned.OWNED_GATES))
        parts.append(
            "(oldObject != null && has(oldObject.spec.schedulingGates) && "
            f"oldObject.spec.schedulingGates.exists(g, g.name in {gates}))"
        )
    return " || ".join(parts)


def job_rules(
    kinds: Registry, operations: list[str], subresource: str = ""
) -> list[dict[str, Any]]:
    """One rule per registered kind (its `subresource` when given: `pytorchjobs/scale`). A rule
    for a resource whose CRD is not installed, or for a subresource its CRD does not have, is
    accepted by the API server and matches nothing until the CRD serves it."""
    suffix = f"/{subresource}" if subresource else ""
    return [
        {
            "apiGroups": [kind.resource.group],
            "apiVersions": [kind.resource.version],
            "resources": [kind.resource.plural + suffix],
            "operations": operations,
            "scope": "Namespaced",
        }
        for kind in kinds.values()
    ]
