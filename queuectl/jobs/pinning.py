"""Per-pod pins: each pod of a sliced (or balanced) pod set on the nodes the core chose for it.

A job's pod template is shared by all its pods, so the pin of pod i cannot be written there as
node affinity. Instead `run_patch` writes the whole assignment once, as the owned annotation
`queuectl.io/pod-pins` on the template, with where a pod finds its index (an Indexed Job's
completion index; for a JobSet's child Job also the Job's index and pods per Job). Every pod
inherits it; the mutating pod webhook (`webhooks/pinned.py`) reads the pod's own index and
adds the node affinity for its pin when the pod is created. Nothing is looked up: the pod
carries both halves, so a pod created a moment after its job was unsuspended (before any cache
has seen the admission) is pinned all the same. LWS pods are gated; their pin is added when the
controller ungates them (`pin_for`).

Format, JSON: {"index": LABEL, "group": LABEL, "per": N, "levels": [LABEL, ...],
"pods": [[count, value, ...], ...]}: pod index = group index x per + index (group and per
only for a JobSet), and the first `count` indexes are pinned to the first values (one per
level), and so on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.api.views import ObjectView
from queuectl.jobs.kind import PodPin, PodSetPlacement


@dataclass(frozen=True)
class IndexSource:
    """Where a pod of one kind reads its index in the pod set."""

    label: str
    """The label (or annotation) with its index among its Job's (or group's) pods."""
    group: str | None = None
    """The label with its Job's index among the pod set's Jobs (a JobSet's child Jobs)."""
    per_group: int = 1
    """Pods per group: pod index = group index x per_group + index."""


INDEXED_JOB = IndexSource(names.LABEL_JOB_COMPLETION_INDEX)


def pins_of(entries: Sequence[tuple[int, Mapping[str, str]]]) -> tuple[PodPin, ...]:
    """(count, labels) in pod order -> pins, neighbours with the same labels merged."""
    out: list[PodPin] = []
    for count, labels in entries:
        if count <= 0:
            continue
        if out and dict(out[-1].labels) == dict(labels):
            out[-1] = PodPin(out[-1].count + count, out[-1].labels)
        else:
            out.append(PodPin(count, dict(labels)))
    return tuple(out)


def annotation(placement: PodSetPlacement, source: IndexSource) -> str | None:
    """The `queuectl.io/pod-pins` value for a template of `placement`; None without pins."""
    if not placement.pins:
        return None
    levels = sorted({k for pin in placement.pins for k in pin.labels})
    doc: dict[str, Any] = {"index": source.label}
    if source.group is not None:
        doc |= {"group": source.group, "per": source.per_group}
    doc["levels"] = levels
    doc["pods"] = [
        [pin.count, *(pin.labels.get(lv, "") for lv in levels)] for pin in placement.pins
    ]
    return json.dumps(doc, separators=(",", ":"))


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _read_index(pod: Obj, key: str) -> int | None:
    view = ObjectView(pod)
    return _int(view.labels.get(key)) if key in view.labels else _int(view.annotation(key))


def _doc(pod: Obj) -> tuple[list[str], list[tuple[int, list[str]]], int] | None:
    """(levels, pins, the pod's index) from its annotation; None without one, or when it is
    malformed (the controller's alone to write) or the pod carries no index."""
    raw = ObjectView(pod).annotation(names.ANNOTATION_POD_PINS)
    if not raw:
        return None
    try:
        doc = json.loads(raw)
        levels = [str(lv) for lv in doc["levels"]]
        pods = [(int(p[0]), [str(v) for v in p[1:]]) for p in doc["pods"]]
        index = _read_index(pod, str(doc["index"]))
        if doc.get("group") is not None:
            group = _read_index(pod, str(doc["group"]))
            index = None if group is None or index is None else group * int(doc["per"]) + index
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return None if index is None else (levels, pods, index)


def pin_of(pod: Obj) -> dict[str, str] | None:
    """The node labels pod `pod` is pinned to by its `queuectl.io/pod-pins` annotation and its
    own index; None when it carries none, or its index lies outside the pins (a malformed
    annotation is the controller's alone to write, and pins nothing)."""
    found = _doc(pod)
    return None if found is None else _at(found[1], found[0], found[2])


def index_of(pod: Obj) -> int | None:
    """The pod's index in its pod set, as its pins annotation says where to read it."""
    found = _doc(pod)
    return None if found is None else found[2]


def pin_in(topology_assignment: Mapping[str, Any], index: int) -> dict[str, str] | None:
    """The node labels pod `index` is placed on by a Workload's status topology assignment of
    a pod set placed in slices or balanced (its domains are in pod order); None past them."""
    levels = [str(lv) for lv in topology_assignment.get("levels") or ()]
    pods = [
        (int(d.get("count", 0)), [str(v) for v in d.get("values") or ()])
        for d in topology_assignment.get("domains") or ()
    ]
    return _at(pods, levels, index)


def _at(
    pods: Sequence[tuple[int, Sequence[str]]], levels: Sequence[str], i: int
) -> dict[str, str] | None:
    for count, values in pods:
        if i < count:
            return {lv: v for lv, v in zip(levels, values, strict=False) if v}
        i -= count
    return None


def pin_for(placement: PodSetPlacement, index: int) -> dict[str, str] | None:
    """The labels pod `index` of `placement` is pinned to; None past its pins."""
    for pin in placement.pins:
        if index < pin.count:
            return dict(pin.labels)
        index -= pin.count
    return None


def pinned(placement: PodSetPlacement, labels: Mapping[str, str]) -> PodSetPlacement:
    """`placement` narrowed to one pod's pin: the pin's labels replace the domain's values."""
    domain = {**placement.domain, **{k: (v,) for k, v in labels.items()}}
    return replace(placement, domain=domain, pins=())
