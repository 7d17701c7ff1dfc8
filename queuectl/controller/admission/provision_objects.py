"""The objects the provisioning check asks an autoscaler with, built from a Workload (pure).

Placeholder pods (any autoscaler that watches pending pods: Karpenter, cluster-autoscaler) and
ProvisioningRequests with their PodTemplates (cluster-autoscaler's own API). Both carry the pod
sets' exact shape: the Workload's recorded pod spec with the placement the real pods will get
(`jobs.podtemplate.inject`: the flavor's node labels and tolerations, the topology domain, a
GPU resource renamed for a shared flavor), containers swapped for a pause image with the same
requests. docs/design/provisioning.md says why each field is what it is.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from queuectl import convert
from queuectl.api import names
from queuectl.api.resource import WORKLOADS
from queuectl.api.views import ObjectView, WorkloadView, owner_reference
from queuectl.controller.admission.placement import placements
from queuectl.core import types as core
from queuectl.core.provision import Shape
from queuectl.jobs import PodSetPlacement
from queuectl.jobs.podtemplate import inject, original_pod_spec

Obj = Mapping[str, Any]
PAUSE_IMAGE: Final = "registry.k8s.io/pause:3.10"
_KEPT = ("nodeSelector", "affinity", "tolerations", "runtimeClassName", "overhead")


def short(name: str, limit: int = 63) -> str:
    """A DNS label from `name`: kept when short enough, else cut with a hash of the whole."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-.')}-{digest}"


def pod_placements(wl: Obj, flavors: Mapping[str, Obj]) -> list[PodSetPlacement]:
    """Where each pod set of a reserved Workload will be placed (its admission's flavors)."""
    admission = convert.admission_from_status(WorkloadView(wl).status["admission"])
    return placements(admission, flavors)


def counts(wl: Obj) -> dict[str, int]:
    """Pod set -> pods its reservation holds quota for."""
    adm = WorkloadView(wl).admission or {}
    return {str(a["name"]): int(a.get("count", 0)) for a in adm.get("podSetAssignments") or ()}


def pod_spec(wl: Obj, placement: PodSetPlacement) -> dict[str, Any]:
    """The placeholder's pod spec: where the real pod may go, what it asks for, nothing run."""
    pod_sets = WorkloadView(wl).pod_sets
    original = original_pod_spec(pod_sets, placement.name)
    spec: dict[str, Any] = {k: copy.deepcopy(original[k]) for k in _KEPT if k in original}
    injected = inject(original, placement)
    spec.update(injected)
    source = injected.get("containers") or original.get("containers") or []

    def pause(c: Obj) -> dict[str, Any]:
        out = {"name": c["name"], "image": PAUSE_IMAGE, "resources": c.get("resources") or {}}
        if c.get("restartPolicy"):
            out["restartPolicy"] = c["restartPolicy"]  # a sidecar keeps its place in the sum
        return out

    spec["containers"] = [pause(c) for c in source]
    if original.get("initContainers"):
        spec["initContainers"] = [pause(c) for c in original["initContainers"]]
    spec["priorityClassName"] = names.PRIORITY_CLASS_PLACEHOLDER
    spec["terminationGracePeriodSeconds"] = 0
    spec["automountServiceAccountToken"] = False
    return spec


def owner(wl: Obj) -> dict[str, Any]:
    """Placeholders go with their Workload (the garbage collector deletes them with it)."""
    return owner_reference(wl, WORKLOADS, controller=None, block_owner_deletion=False)


def placeholder_name(wl_name: str, pod_set: str, index: int) -> str:
    return short(f"{wl_name}-cap-{pod_set}-{index}", 253)


def placeholder_pods(wl: Obj, flavors: Mapping[str, Obj]) -> list[dict[str, Any]]:
    """One pending pod per pod the reservation holds quota for, at the placeholder priority."""
    meta = wl["metadata"]
    many = counts(wl)
    out = []
    for placement in pod_placements(wl, flavors):
        spec = pod_spec(wl, placement)
        for i in range(many.get(placement.name, 0)):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": placeholder_name(meta["name"], placement.name, i),
                        "namespace": meta["namespace"],
                        "labels": {
                            names.LABEL_PLACEHOLDER_FOR: short(meta["name"]),
                            names.LABEL_PLACEHOLDER_POD_SET: short(placement.name),
                        },
                        "ownerReferences": [owner(wl)],
                    },
                    "spec": copy.deepcopy(spec),
                }
            )
    return out


def shapes(wl: Obj, flavors: Mapping[str, Obj]) -> list[Shape]:
    """The reservation's pod sets as `core.provision` fits them onto nodes."""
    many = counts(wl)
    out = []
    for placement in pod_placements(wl, flavors):
        spec = pod_spec(wl, placement)
        allowed: dict[str, tuple[str, ...]] = {
            k: (v,) for k, v in (spec.get("nodeSelector") or {}).items()
        }
        allowed.update({k: (v,) for k, v in placement.node_labels.items()})
        allowed.update({k: tuple(v) for k, v in placement.domain.items()})
        out.append(
            Shape(
                name=placement.name,
                per_pod=convert.pod_requests(spec),
                count=many.get(placement.name, 0),
                allowed=allowed,
                tolerations=tuple(convert.toleration(t) for t in spec.get("tolerations") or ()),
            )
        )
    return out


def gpu_flavors(wl: Obj) -> dict[str, str]:
    """Pod set -> the flavor its GPUs come from (its first GPU-like resource's flavor)."""
    adm = WorkloadView(wl).admission or {}
    out = {}
    for a in adm.get("podSetAssignments") or ():
        for res, flavor in sorted((a.get("flavors") or {}).items()):
            if is_gpu(res):
                out[str(a["name"])] = str(flavor)
                break
    return out


def is_gpu(resource: str) -> bool:
    return resource == names.GPU_RESOURCE or resource.startswith(names.RESOURCE_MIG_PREFIX)


def priority_class() -> dict[str, Any]:
    """The lowest priority, and never preempting: a placeholder must not displace anything."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": names.PRIORITY_CLASS_PLACEHOLDER},
        "value": names.PRIORITY_PLACEHOLDER_VALUE,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "queuectl placeholder pods that ask an autoscaler for capacity for a "
        "queued workload; anything else preempts them",
    }


# --- cluster-autoscaler's ProvisioningRequest ---------------------------------------------
def request_name(wl_name: str, check: str) -> str:
    return short(f"{wl_name}-{check}", 253)


def template_name(request: str, pod_set: str) -> str:
    return short(f"ppt-{request}-{pod_set}", 253)


def provisioning_objects(
    wl: Obj, check: str, klass: str, flavors: Mapping[str, Obj]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(PodTemplates, ProvisioningRequest) for a reservation: one template per pod set."""
    meta = wl["metadata"]
    request = request_name(meta["name"], check)
    many = counts(wl)
    templates, sets = [], []
    for placement in pod_placements(wl, flavors):
        name = template_name(request, placement.name)
        templates.append(
            {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {
                    "name": name,
                    "namespace": meta["namespace"],
                    "labels": {names.LABEL_PLACEHOLDER_FOR: short(meta["name"])},
                    "ownerReferences": [owner(wl)],
                },
                "template": {"spec": pod_spec(wl, placement)},
            }
        )
        sets.append({"podTemplateRef": {"name": name}, "count": many.get(placement.name, 0)})
    req = {
        "apiVersion": f"{names.PROVREQ_GROUP}/v1",
        "kind": "ProvisioningRequest",
        "metadata": {
            "name": request,
            "namespace": meta["namespace"],
            "labels": {names.LABEL_PLACEHOLDER_FOR: short(meta["name"])},
            "ownerReferences": [owner(wl)],
        },
        "spec": {"provisioningClassName": klass, "podSets": sets},
    }
    return templates, req


def request_state(req: Obj) -> tuple[core.CheckState, str] | None:
    """What a ProvisioningRequest's conditions mean for the check (None: not decided yet).

    Provisioned: Ready. Failed, BookingExpired or CapacityRevoked: Retry (the reservation is
    released and tried again with back-off; a new request is made then)."""
    true = ObjectView(req).true_conditions
    for kind in ("Failed", "CapacityRevoked", "BookingExpired"):
        c = true.get(kind)
        if c is not None:
            return "Retry", f"ProvisioningRequest {kind}: {c.get('message') or c.get('reason')}"
    c = true.get("Provisioned")
    if c is not None:
        return (
            "Ready",
            f"ProvisioningRequest Provisioned: {c.get('message') or 'capacity is there'}",
        )
    return None


def parameters_issue(params: Obj | None) -> str | None:
    """Why the check's parameters are unusable (None: fine). No parameters: placeholder pods;
    {apiGroup: autoscaling.x-k8s.io, kind: ProvisioningRequestClass, name: <class>}:
    ProvisioningRequests of that class."""
    if not params:
        return None
    group, kind, name = params.get("apiGroup"), params.get("kind"), params.get("name")
    if group != names.PROVREQ_GROUP or kind != names.PROVREQ_PARAMETERS_KIND:
        return (
            f"spec.parameters {group}/{kind} is not understood by {names.CHECK_PROVISIONING}: "
            f"leave it out (placeholder pods) or name apiGroup {names.PROVREQ_GROUP}, kind "
            f"{names.PROVREQ_PARAMETERS_KIND}"
        )
    if name not in names.PROVREQ_CLASSES:
        return f"provisioning class {name!r} is not one queuectl knows; choose one of " + ", ".join(
            names.PROVREQ_CLASSES
        )
    return None


def request_class(params: Obj | None) -> str | None:
    """The ProvisioningRequest class the parameters select (None: placeholder pods)."""
    return str(params["name"]) if params else None


def bound_placeholders(pods: Sequence[Obj], namespace: str, wl_name: str) -> list[Obj]:
    """The Workload's placeholder pods among `pods` (the cache keeps bound ones only)."""
    label = short(wl_name)
    return [
        p
        for p in pods
        if ObjectView(p).meta.get("namespace") == namespace
        and ObjectView(p).labels.get(names.LABEL_PLACEHOLDER_FOR) == label
        and ObjectView(p).spec.get("nodeName")
    ]
