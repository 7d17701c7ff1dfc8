"""Where a job and its Workload disagree: its shape (pod sets, pods, requests, topology), its
placement (nodeSelector, node affinity, tolerations, nodeName) or its queue. Pure, but for
`follow_job`, the one write.

A Workload holding quota must describe its job exactly, or more could run than was admitted,
or run on another flavor's nodes: the reconciler evicts such a Workload and resizes it once its
quota is released. A waiting Workload simply follows its job (docs/design/controller.md, "A job
that changes"). The Workload records the templates as the user wrote them, and the controller
injects the admission's placement into the job's: while it holds quota, the job's placement must
be the recorded one (not yet started) or the recorded one with exactly that injection
(`admitted_pod_sets`), nothing else.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.convert import pod_requests
from queuectl.jobs import JobKind, PodSetPlacement
from queuectl.jobs import podtemplate as pt

Topology = tuple[str | None, str | None, str | None]
"""required, preferred, podSetGroupName"""
PodSetShape = tuple[str, int, tuple[tuple[str, int], ...], Topology]


def pod_set_shapes(pod_sets: Sequence[Mapping[str, Any]]) -> tuple[PodSetShape, ...]:
    """What quota is sized for: per pod set its name, count, one pod's requests (canonical,
    so `1` and `1000m` agree) and topology request. The rest of the template does not count."""
    shapes = []
    for ps in pod_sets:
        pod_spec = (ps.get("template") or {}).get("spec") or {}
        topo = ps.get("topologyRequest") or {}
        shapes.append(
            (
                str(ps.get("name") or "main"),
                int(ps.get("count", 1)),
                tuple(sorted(pod_requests(pod_spec).items())),
                (topo.get("required"), topo.get("preferred"), topo.get("podSetGroupName")),
            )
        )
    return tuple(shapes)


def _describe(shape: Sequence[PodSetShape]) -> str:
    return ", ".join(
        f"{name}: {count} x {{{', '.join(f'{r}={v}' for r, v in requests)}}}"
        + (f" topology {'/'.join(t for t in topo if t)}" if any(topo) else "")
        for name, count, requests, topo in shape
    )


PLACEMENT_FIELDS = ("nodeSelector", "affinity.nodeAffinity", "tolerations", "nodeName")
"""What in a pod spec says which nodes, so which flavor, its pods run on."""


def placement(pod_set: Mapping[str, Any]) -> dict[str, str]:
    """A pod set's placement fields (`PLACEMENT_FIELDS`), each as canonical JSON."""
    spec = (pod_set.get("template") or {}).get("spec") or {}
    values = {
        "nodeSelector": spec.get("nodeSelector") or None,
        "affinity.nodeAffinity": (spec.get("affinity") or {}).get("nodeAffinity") or None,
        "tolerations": spec.get("tolerations") or None,
        "nodeName": spec.get("nodeName") or None,
    }
    return {k: json.dumps(v, sort_keys=True) for k, v in values.items()}


def admitted_pod_sets(
    adapter: JobKind, job: Obj, workload: Obj, placed: Sequence[PodSetPlacement]
) -> list[Obj]:
    """The pod sets the job would ask for once the controller has placed it: each template's
    placement fields put back as the Workload recorded them, then the kind's own `run_patch`
    for this admission applied (never written; `pt.apply_merge`)."""
    recorded = list(WorkloadView(workload).pod_sets)
    by_name = {str(ps.get("name")): ps for ps in recorded}
    expected = copy.deepcopy(job)
    for ps in adapter.pod_sets(expected):  # templates inside `expected`, for most kinds
        was = ((by_name.get(ps.name) or {}).get("template") or {}).get("spec") or {}
        spec = ps.template.get("spec") if isinstance(ps.template, dict) else None
        if not isinstance(spec, dict):
            continue
        for key in ("nodeSelector", "tolerations", "nodeName"):
            if was.get(key) is None:
                spec.pop(key, None)
            else:
                spec[key] = copy.deepcopy(was[key])
        affinity = dict(spec.get("affinity") or {})
        affinity.pop("nodeAffinity", None)
        if (was.get("affinity") or {}).get("nodeAffinity"):
            affinity["nodeAffinity"] = copy.deepcopy(was["affinity"]["nodeAffinity"])
        if affinity:
            spec["affinity"] = affinity
        else:
            spec.pop("affinity", None)
    placed_job = pt.apply_merge(expected, adapter.run_patch(expected, recorded, placed))
    return WorkloadView.of_spec(adapter.workload_spec(placed_job)).pod_sets


def _placement_drift(
    wanted: Sequence[Mapping[str, Any]],
    recorded: Sequence[Mapping[str, Any]],
    placed: Sequence[Mapping[str, Any]] | None,
) -> list[str]:
    """Pod sets whose placement is neither the recorded one nor (`placed`, while it holds
    quota) the recorded one with the admission's placement injected."""
    old = {str(ps.get("name")): placement(ps) for ps in recorded}
    injected = {str(ps.get("name")): placement(ps) for ps in placed or ()}
    changes = []
    for ps in wanted:
        name, now = str(ps.get("name") or "main"), placement(ps)
        was = old.get(name)
        if was is None or now == was or now == injected.get(name):
            continue  # a pod set of its own is a shape change, said already
        against = injected.get(name) or was
        fields = [f for f in PLACEMENT_FIELDS if now[f] != against[f]]
        changes.append(f"pod set {name!r}: {', '.join(fields)} not as admitted")
    return changes


def drift(
    wanted: Mapping[str, Any],
    workload: Obj,
    placed: Sequence[Mapping[str, Any]] | None = None,
) -> list[str]:
    """How the Workload spec the job asks for now (`JobKind.workload_spec`) differs from the
    Workload's, in words; empty when the Workload still describes the job. `placed`: the pod
    sets with the admission's placement injected (`admitted_pod_sets`), for a Workload
    holding quota: a job the controller has placed so is no change."""
    new, old = WorkloadView.of_spec(wanted), WorkloadView(workload)
    changes = []
    queue, old_queue = new.queue_name, old.queue_name
    if queue and queue != old_queue:  # a removed label (refused by the webhook) is not a move
        changes.append(f"queue {old_queue!r} -> {queue!r}")
    new_shape = pod_set_shapes(new.pod_sets)
    old_shape = pod_set_shapes(old.pod_sets)
    if new_shape != old_shape:
        changes.append(f"pod sets [{_describe(old_shape)}] -> [{_describe(new_shape)}]")
    changes += _placement_drift(new.pod_sets, old.pod_sets, placed)
    return changes


def follow_patch(workload: Obj, wanted: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch that makes a waiting Workload describe its job again (pod sets and queue),
    applied only to the version decided on (and refused by the CRD once it holds quota)."""
    new = WorkloadView.of_spec(wanted)
    queue = new.queue_name or WorkloadView(workload).queue_name
    return {
        "metadata": {
            "resourceVersion": workload["metadata"]["resourceVersion"],
            "labels": {names.LABEL_QUEUE_NAME: queue},
        },
        "spec": {"podSets": new.pod_sets, "queueName": queue},
    }


async def follow_job(
    kube: Kube, cache: Cache, adapter: JobKind, job: Obj, workload: Obj
) -> list[str]:
    """Make a waiting Workload take its job's current shape and queue (scaled, requests
    changed, relabelled to another LocalQueue), keeping its place in line. The caller passes a
    job whose template is its original (restored), so what placement injected is never copied.
    Returns the changes written; empty when there were none or the write lost a race (the
    Workload's next event brings the caller back)."""
    wanted = adapter.workload_spec(job)
    changes = drift(wanted, workload)
    if not changes:
        return []
    meta = workload["metadata"]
    try:
        new = await kube.patch(
            k.WORKLOADS, meta["name"], follow_patch(workload, wanted), meta["namespace"]
        )
    except KubeError as err:
        if err.not_found or err.conflict:
            return []
        raise
    cache.store(k.WORKLOADS).upsert_local(new)
    return changes
