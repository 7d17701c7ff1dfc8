"""Plain pod groups, what they ask for and how they start: a group's Workload has one pod set
per pod shape; every queued pod is created with the scheduling gate `queuectl.io/admission`,
and admission lifts the gate on each pod and adds the placement.

Unlike a Job there is no single object to suspend, so a group is not a `JobKind`: the
controller's steps (`controller/workloads/podgroup_steps.py`) and the pod webhook
(`webhooks/pods.py`) are thin shells over this package.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.api.views import ObjectView
from queuectl.jobs import pinning, podtemplate
from queuectl.jobs.kind import PodSet, PodSetPlacement
from queuectl.jobs.podgroup.membership import (
    GATE,
    GroupKey,
    active,
    holds_node,
    is_gated,
    lws_group,
    total_count,
)
from queuectl.jobs.workload import workload_spec

MAX_POD_SETS: Final = 8
"""The Workload's limit: a group of more shapes gets no Workload (and an event saying why)."""

_SHAPE_SPEC_FIELDS: Final = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "priorityClassName",
    "runtimeClassName",
    "overhead",
)
_SHAPE_ANNOTATIONS: Final = names.PODSET_TOPOLOGY_ANNOTATIONS


def shape(pod: Obj) -> dict[str, Any]:
    """The part of a pod that admission reads, as a pod template: each container's name and
    resources, the scheduling fields and the topology annotations. Names, images, env and the
    API server's per-pod additions (its service-account volume) do not make two pods differ."""
    spec = ObjectView(pod).spec

    def containers(key: str) -> list[dict[str, Any]]:
        out = []
        for c in spec.get(key) or ():
            entry = {
                "name": c.get("name", ""),
                "resources": copy.deepcopy(c.get("resources") or {}),
            }
            if c.get("restartPolicy"):
                entry["restartPolicy"] = c["restartPolicy"]
            out.append(entry)
        return out

    out_spec: dict[str, Any] = {"containers": containers("containers")}
    if init := containers("initContainers"):
        out_spec["initContainers"] = init
    for key in _SHAPE_SPEC_FIELDS:
        if spec.get(key):
            out_spec[key] = copy.deepcopy(spec[key])
    template: dict[str, Any] = {"spec": out_spec}
    annotations = {k: v for k, v in ObjectView(pod).annotations.items() if k in _SHAPE_ANNOTATIONS}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return template


def pod_set_name(template: Mapping[str, Any]) -> str:
    """`ps-<hash>` of the shape without container names: a leader and its workers that ask for
    the same resources are one pod set, placed (and kept inside one domain) together."""
    unnamed = copy.deepcopy(dict(template))
    spec = ObjectView(unnamed).spec
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            c.pop("name", None)
    digest = hashlib.sha256(json.dumps(unnamed, sort_keys=True).encode()).hexdigest()
    return f"ps-{digest[:10]}"


def pod_sets(pods: Iterable[Obj]) -> list[PodSet]:
    """One pod set per distinct shape among the active pods, ordered by name (a hash of the
    shape, so the same group always yields the same pod sets); the template is that of the
    shape's first pod by name."""
    by_name: dict[str, tuple[dict[str, Any], int]] = {}
    for pod in sorted(pods, key=lambda p: ObjectView(p).name):
        if not active(pod):
            continue
        template = shape(pod)
        name = pod_set_name(template)
        first, count = by_name.get(name, (template, 0))
        by_name[name] = (first, count + 1)
    return [
        PodSet(name, count, template, "pods of this shape in the group")
        for name, (template, count) in sorted(by_name.items())
    ]


@dataclass(frozen=True)
class Readiness:
    """Whether a group's Workload may be made now, and if not, why (for an event)."""

    ready: bool
    why: str = ""


def readiness(key: GroupKey, pods: Sequence[Obj]) -> Readiness:
    """A group is ready when its active pods agree on the total and reach it, in at most
    MAX_POD_SETS shapes. More pods than declared is an error the user must fix (delete some)."""
    live = [p for p in pods if active(p)]
    if not live:
        return Readiness(False, "no pods")
    totals = {total_count(p) for p in live}
    if len(totals) != 1 or None in totals:
        return Readiness(
            False,
            f"pods of group {key.name!r} disagree on {names.ANNOTATION_POD_GROUP_TOTAL_COUNT} "
            f"({sorted(str(t) for t in totals)}); give every pod the same count",
        )
    total = totals.pop()
    assert total is not None
    if len(live) < total:
        return Readiness(False, f"{len(live)} of {total} pods exist; waiting for the rest")
    if len(live) > total:
        return Readiness(
            False,
            f"{len(live)} pods in group {key.name!r} but {names.ANNOTATION_POD_GROUP_TOTAL_COUNT}"
            f" says {total}; delete the extra pods or raise the count on every pod",
        )
    if (n := len(pod_sets(live))) > MAX_POD_SETS:
        return Readiness(
            False, f"{n} different pod shapes; a Workload holds at most {MAX_POD_SETS}"
        )
    return Readiness(True)


def group_workload_spec(pods: Sequence[Obj]) -> dict[str, Any]:
    """The Workload spec for a complete group: queue, priority class and time limit from the
    first pod's labels (by name, so the choice is stable), pod sets from the shapes."""
    live = sorted((p for p in pods if active(p)), key=lambda p: str(ObjectView(p).meta.get("name")))
    return workload_spec(live[0], pod_sets(live))


def placement_for(pod: Obj, placements: Sequence[PodSetPlacement]) -> PodSetPlacement:
    """The placement of the pod set this pod's shape belongs to (none for an unknown shape)."""
    name = pod_set_name(shape(pod))
    return next((p for p in placements if p.name == name), PodSetPlacement(name))


def own_pin(pod: Obj, placement: PodSetPlacement) -> PodSetPlacement:
    """`placement` narrowed to this pod's own pin when the pod set has pins and the pod a
    stable index: an LWS pod's worker index (the leader is 0; in a pod set of workers alone,
    worker k is its pod k - 1). Any other pod gets the pod set's domain alone."""
    group = lws_group(pod)
    index = ObjectView(pod).labels.get(names.LABEL_LWS_WORKER_INDEX, "")
    if not placement.pins or group is None or not index.isdigit():
        return placement
    at = int(index)
    if sum(p.count for p in placement.pins) != group[1]:  # the leader is a pod set of its own
        at = max(at - 1, 0)
    pin = pinning.pin_for(placement, at)
    return pinning.pinned(placement, pin) if pin else placement


def ungate_patch(pod: Obj, placement: PodSetPlacement, workload: str) -> dict[str, Any]:
    """A merge patch that lets an admitted group's pod schedule: its gate lifted, the placement
    (narrowed to the pod's own pin, `own_pin`) added as required node affinity (appended to each
    existing term) and tolerations, and the workload label. The API server allows exactly these
    on a gated pod: affinity set where there was none or requirements added to existing terms,
    tolerations added, gates removed."""
    spec = pod.get("spec") or {}
    gates = [g for g in spec.get("schedulingGates") or () if g.get("name") != GATE]
    out_spec: dict[str, Any] = {"schedulingGates": gates or None}
    out_spec.update(podtemplate.inject(spec, own_pin(pod, placement)))
    meta = {
        "labels": {names.LABEL_WORKLOAD: workload},
        "annotations": {names.ANNOTATION_POD_SET: placement.name},
    }
    return {"metadata": meta, "spec": out_spec}


_RESIZABLE: Final = ("cpu", "memory")
"""What a running pod's `resize` subresource may change in place (nothing else of its shape)."""


def placed_shape(template: Mapping[str, Any], placement: PodSetPlacement) -> dict[str, Any]:
    """The shape a pod of `template` has once `ungate_patch` placed it (a merge patch)."""
    out = copy.deepcopy(dict(template))
    spec = out.get("spec") or {}
    out["spec"] = podtemplate.deep_merge(spec, podtemplate.inject(spec, placement))
    return out


def _resize_blind(template: Mapping[str, Any]) -> str:
    """`pod_set_name` of the shape without the quantities an in-place resize can change."""
    out = copy.deepcopy(dict(template))
    for key in ("containers", "initContainers"):
        for c in ObjectView(out).spec.get(key) or ():
            for part in ("requests", "limits"):
                for res in _RESIZABLE:
                    ((c.get("resources") or {}).get(part) or {}).pop(res, None)
    return pod_set_name(out)


class PodSetIndex:
    """Which admitted pod set a started pod is, read from its spec alone: its shape as admitted
    or as placed (the API server keeps both immutable but for an in-place resize of CPU and
    memory, so a shape that matches only without those is matched that way when one pod set
    alone fits). Never from the `queuectl.io/pod-set` annotation, which users may write."""

    def __init__(
        self, pod_sets: Sequence[Mapping[str, Any]], placements: Sequence[PodSetPlacement] = ()
    ) -> None:
        by_name = {p.name: p for p in placements}
        self.pinned = [  # pod sets whose pods may carry a pin of their own
            (str(ps.get("name")), ps["template"], by_name[str(ps.get("name"))])
            for ps in pod_sets
            if ps.get("template")
            and str(ps.get("name")) in by_name
            and by_name[str(ps.get("name"))].pins
        ]
        self.exact: dict[str, str] = {}
        blind: dict[str, set[str]] = {}
        for ps in pod_sets:
            name = str(ps.get("name"))
            self.exact[name] = name  # a group's pod set is named by its shape
            template = ps.get("template")
            if not template:
                continue
            for t in (template, placed_shape(template, by_name.get(name, PodSetPlacement(name)))):
                self.exact[pod_set_name(t)] = name
                blind.setdefault(_resize_blind(t), set()).add(name)
        self.blind = {k: next(iter(v)) for k, v in blind.items() if len(v) == 1}

    def of(self, pod: Obj) -> str | None:
        """The pod set of a started pod; None when its shape matches none (or several)."""
        template = shape(pod)
        found = self.exact.get(pod_set_name(template)) or self.blind.get(_resize_blind(template))
        if found is not None:
            return found
        for name, admitted, placement in self.pinned:  # placed with its own pin
            narrowed = own_pin(pod, placement)
            if narrowed is not placement:
                placed = placed_shape(admitted, narrowed)
                if pod_set_name(template) == pod_set_name(placed):
                    return name
        return None


def to_ungate(
    pods: Sequence[Obj],
    pod_sets: Sequence[Mapping[str, Any]],
    placements: Sequence[PodSetPlacement] = (),
) -> list[Obj]:
    """The gated pods an admitted group may start: per pod set, as many as its admitted count
    leaves room for beside the pods already started (oldest first), and never more in all
    than the admission counts. A pod added to a running group beyond its count stays gated:
    more pods than its queue admitted never run.

    Every started pod (ungated, not finished) counts, whatever it says: by its shape against
    the Workload's pod sets (`PodSetIndex`), and one whose shape matches no pod set takes room
    from each pod set, as it could be any of them. A started pod being deleted counts until
    it is gone: it holds its GPUs through its grace period (an operator that remakes a group,
    as LeaderWorkerSet does after a template change, would otherwise run both at once)."""
    index = PodSetIndex(pod_sets, placements)
    room = {str(ps.get("name")): int(ps.get("count", 1)) for ps in pod_sets}
    total = sum(room.values())
    unknown = 0
    for pod in pods:
        if holds_node(pod) and not is_gated(pod):
            total -= 1
            started = index.of(pod)
            if started is None:
                unknown += 1
            else:
                room[started] -= 1
    out = []
    waiting = [p for p in pods if active(p) and is_gated(p)]
    for pod in sorted(
        waiting,
        key=lambda p: (
            str(ObjectView(p).meta.get("creationTimestamp") or ""),
            ObjectView(p).name,
        ),
    ):
        name = pod_set_name(shape(pod))
        if total > 0 and room.get(name, 0) - unknown > 0:
            room[name] -= 1
            total -= 1
            out.append(pod)
    return out


def gate_ops(pod: Obj) -> list[dict[str, Any]]:
    """JSON patch ops that create the pod gated; empty when it already is."""
    if is_gated(pod):
        return []
    spec = ObjectView(pod).spec
    if spec.get("schedulingGates"):
        return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}]
    return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]
