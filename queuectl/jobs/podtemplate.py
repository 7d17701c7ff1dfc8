"""Pod-template helpers every kind reuses: placement in and out of one template, found at a
path of dict keys inside the job.

A kind whose templates sit at dict paths (a Job's spec.template, a PyTorchJob's
spec.pytorchReplicaSpecs.Worker.template) builds its run and restore patches from
`run_fragment` / `restore_fragment` merged with `deep_merge`. A template inside a list (a
JobSet's replicatedJobs) cannot be addressed by a merge patch: that kind replaces the list,
using `inject` / `restore` on each template.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from queuectl.api import gpushare, names, slicing
from queuectl.api.resource import Obj
from queuectl.api.views import ObjectView
from queuectl.jobs import pinning
from queuectl.jobs.kind import PodSetPlacement

AFFINITY_KEY: Final = "requiredDuringSchedulingIgnoredDuringExecution"
Path = Sequence[str]


def at_path(obj: Mapping[str, Any] | None, path: Path) -> Any:
    """The value at `path` (dict keys), None where any step is missing."""
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def merge_at(path: Path, value: Any) -> dict[str, Any]:
    """`value` nested under `path`: a merge patch that sets only that field."""
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    if not isinstance(out, dict):
        raise ValueError("merge_at needs a non-empty path")
    return out


def deep_merge(*patches: Mapping[str, Any]) -> dict[str, Any]:
    """Merge patches into one (later wins; dicts merge key by key, anything else replaces)."""
    out: dict[str, Any] = {}
    for patch in patches:
        for key, value in patch.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), dict):
                out[key] = deep_merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
    return out


def inject(pod_spec: Obj, placement: PodSetPlacement) -> dict[str, Any]:
    """The affinity and tolerations fields of `pod_spec` with the placement added: every
    original node selector term gets the flavor's and the domain's requirements (terms are
    ORed, requirements inside one are ANDed, so each term must carry them)."""
    extra: list[dict[str, Any]] = [
        {"key": k, "operator": "In", "values": [v]}
        for k, v in sorted(placement.node_labels.items())
    ]
    extra += [
        {"key": k, "operator": "In", "values": sorted(vs)}
        for k, vs in sorted(placement.domain.items())
    ]
    original = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(AFFINITY_KEY)
    terms = copy.deepcopy((original or {}).get("nodeSelectorTerms") or [{}])
    for term in terms:
        term["matchExpressions"] = list(term.get("matchExpressions") or []) + extra
    out: dict[str, Any] = {}
    if extra:
        out["affinity"] = {"nodeAffinity": {AFFINITY_KEY: {"nodeSelectorTerms": terms}}}
    tolerations = list(pod_spec.get("tolerations") or [])
    for tol in placement.tolerations:
        if dict(tol) not in tolerations:
            tolerations.append(dict(tol))
    if placement.tolerations:
        out["tolerations"] = tolerations
    if placement.gpu_resource:
        out["containers"] = gpushare.rename_containers(
            pod_spec, names.RESOURCE_GPU, placement.gpu_resource
        )
    return out


def restore(pod_spec: Obj) -> dict[str, Any]:
    """The affinity and tolerations fields as the original pod spec had them (null deletes)."""
    original = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(AFFINITY_KEY)
    return {
        "affinity": {"nodeAffinity": {AFFINITY_KEY: copy.deepcopy(original)}},
        "tolerations": copy.deepcopy(pod_spec.get("tolerations")),
    }


def original_pod_spec(pod_sets: Sequence[Mapping[str, Any]], name: str) -> Obj:
    """The pod spec the Workload recorded for pod set `name` (before any injection)."""
    for ps in pod_sets:
        if ps.get("name") == name:
            spec: Obj = (ps.get("template") or {}).get("spec") or {}
            return spec
    return {}


def run_fragment(
    template_path: Path,
    pod_sets: Sequence[Mapping[str, Any]],
    placement: PodSetPlacement,
    pins: pinning.IndexSource | None = None,
) -> dict[str, Any]:
    """A merge patch injecting `placement` into the template at `template_path`, computed over
    the Workload's original pod spec of that pod set; {} when there is nothing to inject.
    `pins`: the kind's pods have stable indexes read so, and the placement's per-pod pins go on
    the template (`queuectl.io/pod-pins`) for the pod webhook to apply."""
    injected = inject(original_pod_spec(pod_sets, placement.name), placement)
    out = merge_at([*template_path, "spec"], injected) if injected else {}
    annotations: dict[str, Any] = {}
    if placement.gpu_resource:  # say which device stands in, so `original` can undo it
        annotations[names.ANNOTATION_GPU_RESOURCE] = placement.gpu_resource
    if pins is not None and (value := pinning.annotation(placement, pins)):
        annotations[names.ANNOTATION_POD_PINS] = value
    if annotations:
        out = deep_merge(out, merge_at([*template_path, "metadata"], {"annotations": annotations}))
    return out


def restore_fragment(
    job: Obj, template_path: Path, pod_sets: Sequence[Mapping[str, Any]], pod_set: str
) -> dict[str, Any] | None:
    """A merge patch putting the template at `template_path` back as the Workload recorded it
    for `pod_set`; None when it already is."""
    original = original_pod_spec(pod_sets, pod_set)
    wanted = restore(original)
    current = at_path(job, [*template_path, "spec"]) or {}
    now_aff = ((current.get("affinity") or {}).get("nodeAffinity") or {}).get(AFFINITY_KEY)
    want_aff = wanted["affinity"]["nodeAffinity"][AFFINITY_KEY]
    renamed = gpushare.served_by(at_path(job, template_path) or {})
    pinned = names.ANNOTATION_POD_PINS in ObjectView(at_path(job, template_path) or {}).annotations
    if (
        now_aff == want_aff
        and current.get("tolerations") == wanted["tolerations"]
        and renamed is None
        and not pinned
    ):
        return None
    out = merge_at([*template_path, "spec"], wanted)
    if renamed is not None:  # the containers ask for nvidia.com/gpu again
        wanted["containers"] = copy.deepcopy(original.get("containers"))
        annotations = {names.ANNOTATION_GPU_RESOURCE: None}
        out = deep_merge(out, merge_at([*template_path, "metadata"], {"annotations": annotations}))
    if pinned:
        annotations = {names.ANNOTATION_POD_PINS: None}
        out = deep_merge(out, merge_at([*template_path, "metadata"], {"annotations": annotations}))
    return out


def topology_request(template: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod set's topology request, from the template's queuectl annotations."""
    annotations = ObjectView(template).annotations
    req: dict[str, Any] = {
        "required": annotations.get(names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY),
        "preferred": annotations.get(names.ANNOTATION_PODSET_PREFERRED_TOPOLOGY),
    }
    if req["required"] or req["preferred"]:  # a group without a level places nothing
        req["podSetGroupName"] = annotations.get(names.ANNOTATION_PODSET_GROUP_NAME)
    slices = slicing.slices_of(
        annotations.get(names.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY),
        annotations.get(names.ANNOTATION_PODSET_SLICE_SIZE),
    )
    if slices:
        req["podSetSliceRequiredTopologyConstraints"] = [
            {"topology": level, "size": size} for level, size in slices
        ]
    if slicing.balanced_of(annotations.get(names.ANNOTATION_PODSET_BALANCED_PLACEMENT)):
        req["balancedPlacement"] = True
    return {k: v for k, v in req.items() if v} or None


def priority_class(template: Mapping[str, Any]) -> str | None:
    """The template's spec.priorityClassName, or None."""
    pc = ObjectView(template).spec.get("priorityClassName")
    return str(pc) if pc else None


def apply_merge(obj: Any, patch: Any) -> Any:
    """`patch` applied to `obj` as a JSON merge patch (RFC 7386: dicts merge key by key, null
    deletes, anything else replaces): the job as the API server would hold it after a
    `run_patch` or `restore_patch`, for comparing without writing."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(obj) if isinstance(obj, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge(out.get(key), value)
    return out
