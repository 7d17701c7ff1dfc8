"""A RayClusterSpec's pod sets and placement, shared by RayCluster (spec) and RayJob
(spec.rayClusterSpec): the head group and each worker group, as KubeRay v1.5.0 runs them.

A worker group runs `replicas` pods, held within [minReplicas, maxReplicas], times numOfHosts
(KubeRay's GetWorkerGroupDesiredReplicas). With in-tree autoscaling the autoscaler moves
`replicas` by itself, so quota is reserved for maxReplicas x numOfHosts: scaling anywhere up to
that admitted size changes no pod set and is no bypass; raising maxReplicas is.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.jobs import podtemplate as pt
from queuectl.jobs.kind import PodSet, PodSetPlacement

HEAD: Final = "head"
_MAX_INT32: Final = 2**31 - 1


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)


def autoscaling(spec: Mapping[str, Any]) -> bool:
    return bool(spec.get("enableInTreeAutoscaling"))


def worker_count(spec: Mapping[str, Any], group: Mapping[str, Any]) -> tuple[int, str]:
    """(pods, the fields they come from) for one worker group."""
    hosts = _int(group.get("numOfHosts"), 1)
    low = _int(group.get("minReplicas"), 0)
    high = _int(group.get("maxReplicas"), _MAX_INT32)
    if group.get("suspend"):
        return 0, "a suspended worker group"
    if autoscaling(spec):
        return high * hosts, "maxReplicas x numOfHosts (autoscaling)"
    replicas = _int(group.get("replicas"), low)
    return min(max(replicas, low), high) * hosts, "replicas x numOfHosts"


def pod_sets(spec: Mapping[str, Any], at: str = "spec") -> list[PodSet]:
    """The head (one pod) and each worker group, in the spec's order, named by groupName;
    `at` is where the spec sits in the object (for the field paths refusals name)."""
    head = pt.at_path(spec, ("headGroupSpec", "template")) or {}
    out = [PodSet(HEAD, 1, head, "one head", f"{at}.headGroupSpec.template")]
    for i, group in enumerate(spec.get("workerGroupSpecs") or ()):
        count, source = worker_count(spec, group)
        name, template = str(group.get("groupName") or ""), group.get("template") or {}
        out.append(PodSet(name, count, template, source, f"{at}.workerGroupSpecs[{i}].template"))
    return out


def _with_pod_spec(template: Mapping[str, Any] | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """`template` with `fields` set in its pod spec (a None value deletes the field)."""
    out = copy.deepcopy(dict(template or {}))
    pod = out.setdefault("spec", {})
    for key, value in fields.items():
        if key == "affinity":
            affinity = dict(pod.get("affinity") or {})
            node = dict(affinity.get("nodeAffinity") or {})
            wanted = (value or {}).get("nodeAffinity", {}).get(pt.AFFINITY_KEY)
            if wanted is None:
                node.pop(pt.AFFINITY_KEY, None)
            else:
                node[pt.AFFINITY_KEY] = wanted
            if node:
                affinity["nodeAffinity"] = node
            else:
                affinity.pop("nodeAffinity", None)
            if affinity:
                pod["affinity"] = affinity
            else:
                pod.pop("affinity", None)
        elif value is None:
            pod.pop(key, None)
        else:
            pod[key] = value
    return out


def workload_label(template: Mapping[str, Any] | None, workload: str) -> dict[str, Any]:
    """`template` with the queuectl.io/workload label: pods no batch Job owns are known as
    this Workload's by it (not foreign usage; evicted with it when their node fails)."""
    out = copy.deepcopy(dict(template or {}))
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), names.LABEL_WORKLOAD: workload}
    return out


def run_fragment(
    spec: Mapping[str, Any],
    path: Sequence[str],
    workload: str,
    pod_sets: Sequence[Obj],
    placements: Sequence[PodSetPlacement],
) -> dict[str, Any]:
    """A merge patch placing the head (a dict path) and every worker group (inside a list, so
    the whole workerGroupSpecs list is written back with each template injected), each
    template labelled with its `workload`."""
    by_name = {p.name: p for p in placements}
    head = by_name.get(HEAD, PodSetPlacement(HEAD))
    out = pt.deep_merge(
        pt.merge_at(
            [*path, "headGroupSpec", "template", "metadata", "labels"],
            {names.LABEL_WORKLOAD: workload},
        ),
        pt.run_fragment([*path, "headGroupSpec", "template"], pod_sets, head),
    )
    groups = []
    for group in spec.get("workerGroupSpecs") or ():
        name = str(group.get("groupName") or "")
        placement = by_name.get(name, PodSetPlacement(name))
        injected = pt.inject(pt.original_pod_spec(pod_sets, name), placement)
        template = workload_label(group.get("template"), workload)
        groups.append({**group, "template": _with_pod_spec(template, injected)})
    if groups:
        out = pt.deep_merge(out, pt.merge_at([*path, "workerGroupSpecs"], groups))
    return out


def restore_fragment(
    job: Obj, spec: Mapping[str, Any], path: Sequence[str], pod_sets: Sequence[Obj]
) -> dict[str, Any] | None:
    """A merge patch putting the head and worker templates back as the Workload recorded
    them; None when they already are."""
    found = []
    head = pt.restore_fragment(job, [*path, "headGroupSpec", "template"], pod_sets, HEAD)
    if head is not None:
        found.append(head)
    groups, changed = [], False
    for group in spec.get("workerGroupSpecs") or ():
        name = str(group.get("groupName") or "")
        restored = _with_pod_spec(
            group.get("template"), pt.restore(pt.original_pod_spec(pod_sets, name))
        )
        changed = changed or restored != (group.get("template") or {})
        groups.append({**group, "template": restored})
    if changed:
        found.append(pt.merge_at([*path, "workerGroupSpecs"], groups))
    return pt.deep_merge(*found) if found else None
