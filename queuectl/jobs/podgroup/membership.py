"""Plain pod groups, who belongs: bare pods queued as one gang, read from the pods themselves.

A pod with the queue label whose controller is not a registered job kind (none, a
ReplicaSet, a StatefulSet, a LeaderWorkerSet's) is queued directly; a pod whose controller is
one (a Job's) is its owner's business. Pods naming the same `queuectl.io/pod-group-name`
in one namespace form a group of `queuectl.io/pod-group-total-count` pods; a pod without a
group name is a group of one; a LeaderWorkerSet's group is one replica (leader and workers).
This module says which group a pod or a Workload is, and when a group has ended;
`pod_sets.py` what its Workload asks for and how admission lets its pods run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.jobs.kind import JobKind
from queuectl.jobs.registry import KINDS, controlled_by
from queuectl.jobs.workload import workload_name_for

GATE: Final = names.SCHEDULING_GATE_ADMISSION

# LeaderWorkerSet (sigs.k8s.io/lws v0.7.0): what its pods carry (api/leaderworkerset/v1).
LWS_NAME: Final = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX: Final = "leaderworkerset.sigs.k8s.io/group-index"
LWS_SIZE: Final = "leaderworkerset.sigs.k8s.io/size"
_MAX_LABEL_VALUE: Final = 63


@dataclass(frozen=True, order=True)
class GroupKey:
    """A group: its namespace and name (a single pod's own name), and whether it is one pod."""

    namespace: str
    name: str
    single: bool = False


def lws_group(pod: Obj) -> tuple[str, int] | None:
    """(group name, size) for a LeaderWorkerSet's pod: each replica (a leader and its workers,
    `size` pods sharing a group index) is one group, `<lws>-<index>`; None for other pods."""
    view = ObjectView(pod)
    name, index = view.labels.get(LWS_NAME), view.labels.get(LWS_GROUP_INDEX)
    size = view.annotations.get(LWS_SIZE, "")
    if not name or index is None or not size.isdigit():
        return None
    group = f"{name}-{index}"
    if len(group) > _MAX_LABEL_VALUE:
        digest = hashlib.sha256(group.encode()).hexdigest()[:8]
        group = f"{name[: _MAX_LABEL_VALUE - len(index) - 10]}-{digest}-{index}"
    return group, int(size)


def is_queued_pod(pod: Obj, kinds: Mapping[str, JobKind] = KINDS) -> bool:
    """A pod with the queue label that queuectl queues itself: one whose controller is not a
    registered job kind (a bare pod, a ReplicaSet's or a StatefulSet's: each a plain pod
    group, of one unless it names a group), or a LeaderWorkerSet's (each replica a group).
    A pod whose controller is a registered kind (a Job's) is its owner's business: the owner
    is queued. Letting the others through ungated would run their GPUs outside any queue."""
    labels = ObjectView(pod).labels
    if lws_group(pod) is not None:
        return bool(labels.get(names.LABEL_QUEUE_NAME))
    return held_by_queue(pod, kinds) and LWS_NAME not in labels


def held_by_queue(pod: Obj, kinds: Mapping[str, JobKind] = KINDS) -> bool:
    """A pod with the queue label that no registered kind's object controls: it must be
    created gated. The same as `is_queued_pod` but for a LeaderWorkerSet pod that LWS's own
    webhook has not given its group index yet: queued once it has (the mutating webhook runs
    again), and refused if it reaches the validating webhook without one."""
    return (
        bool(ObjectView(pod).labels.get(names.LABEL_QUEUE_NAME))
        and controlled_by(pod, kinds) is None
    )


def lws_ops(pod: Obj) -> list[dict[str, Any]]:
    """JSON patch ops giving a LeaderWorkerSet pod its group's name and count, so it is queued
    as any pod group is; empty for other pods, or when it already carries them."""
    found = lws_group(pod)
    if found is None:
        return []
    group, size = found
    ops: list[dict[str, Any]] = []
    view = ObjectView(pod)
    labels = dict(view.labels)
    if labels.get(names.LABEL_POD_GROUP_NAME) != group:
        labels[names.LABEL_POD_GROUP_NAME] = group
        ops.append({"op": "add", "path": "/metadata/labels", "value": labels})
    annotations = dict(view.annotations)
    if annotations.get(names.ANNOTATION_POD_GROUP_TOTAL_COUNT) != str(size):
        annotations[names.ANNOTATION_POD_GROUP_TOTAL_COUNT] = str(size)
        ops.append({"op": "add", "path": "/metadata/annotations", "value": annotations})
    return ops


def group_of(pod: Obj) -> GroupKey:
    view = ObjectView(pod)
    name = view.labels.get(names.LABEL_POD_GROUP_NAME)
    return (
        GroupKey(view.namespace, name, False) if name else GroupKey(view.namespace, view.name, True)
    )


def total_count(pod: Obj) -> int | None:
    """The group's declared size: 1 for a single pod; None when missing or not a count."""
    if group_of(pod).single:
        return 1
    raw = ObjectView(pod).annotations.get(names.ANNOTATION_POD_GROUP_TOTAL_COUNT, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def group_problems(pod: Obj) -> list[str]:
    """What is wrong with a queued pod's group labels, in words that say what to write."""
    view = ObjectView(pod)
    labels, annotations = view.labels, view.annotations
    if names.LABEL_POD_GROUP_NAME not in labels:
        if names.ANNOTATION_POD_GROUP_TOTAL_COUNT in annotations:
            return [
                f"annotation {names.ANNOTATION_POD_GROUP_TOTAL_COUNT} needs label "
                f"{names.LABEL_POD_GROUP_NAME} (the group it counts); a pod without a group "
                "name is queued alone"
            ]
        return []
    if total_count(pod) is None:
        got = annotations.get(names.ANNOTATION_POD_GROUP_TOTAL_COUNT)
        return [
            f"a pod in group {labels[names.LABEL_POD_GROUP_NAME]!r} needs annotation "
            f"{names.ANNOTATION_POD_GROUP_TOTAL_COUNT} set to the number of pods in the group "
            f"(a positive integer, the same on every pod){'' if got is None else f'; got {got!r}'}"
        ]
    return []


def workload_name(key: GroupKey, pod_uid: str = "") -> str:
    """A single pod's Workload carries its uid (a recreated pod of the same name is a new job);
    a group's is its name alone, so replacement pods find the Workload their group kept."""
    if key.single:
        return workload_name_for("pod", key.name, pod_uid)
    return workload_name_for("podgroup", key.name, key.namespace)


def active(pod: Obj) -> bool:
    """Counts towards the group: not finished, not being deleted."""
    view = ObjectView(pod)
    return view.status.get("phase") not in ("Succeeded", "Failed") and not view.deleting


def holds_node(pod: Obj) -> bool:
    """Still runs (or may) and so holds what it asked for: not finished, deleted or not."""
    return ObjectView(pod).status.get("phase") not in ("Succeeded", "Failed")


def is_gated(pod: Obj) -> bool:
    gates = ObjectView(pod).spec.get("schedulingGates") or ()
    return any(g.get("name") == GATE for g in gates)


def group_of_workload(wl: Obj) -> GroupKey | None:
    """The group a Workload stands for: named by its pod-group label, or a single pod that
    controls it; None for a job's Workload."""
    view = ObjectView(wl)
    ns = view.namespace
    if name := view.labels.get(names.LABEL_POD_GROUP_NAME):
        return GroupKey(ns, str(name), False)
    for ref in view.owner_refs:
        if ref.get("controller") and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
            return GroupKey(ns, str(ref.get("name") or ""), True)
    return None


def ended(pod: Obj) -> bool:
    return ObjectView(pod).status.get("phase") in ("Succeeded", "Failed")


def finished(group: GroupKey, wl: Obj, pods: Sequence[Obj]) -> tuple[bool, str] | None:
    """(succeeded, message) once the group is done: a single pod ended, or as many pods of a
    group Succeeded as the Workload counts (a Failed pod of a group may be replaced)."""
    phases = [ObjectView(p).status.get("phase") for p in pods]
    if group.single:
        if "Succeeded" in phases:
            return True, "Pod succeeded"
        if "Failed" in phases:
            return False, "Pod failed"
        return None
    want = sum(int(ps.get("count", 1)) for ps in WorkloadView(wl).pod_sets)
    done = phases.count("Succeeded")
    if done >= want and not any(active(p) for p in pods):
        return True, f"All {done} pods of the group succeeded"
    return None


def missing_pods(wl: Obj, key: GroupKey, pods: Sequence[Obj]) -> str | None:
    """Why a group's Workload must not be admitted now: its pods do not all exist (before the
    first admission, or after preemption deleted them); None when they do."""
    want = sum(int(ps.get("count", 1)) for ps in WorkloadView(wl).pod_sets)
    have = sum(1 for p in pods if active(p))
    if have >= want:
        return None
    what = "pod" if key.single else f"pod group {key.name!r}"
    return (
        f"{have} of the {want} pods of {what} exist; it is admitted once all do (after a "
        "preemption its pods are deleted: create replacements with the same group name)"
    )


class PodPriority:
    """What a Workload's priority is resolved from, for a pod: its own priorityClassName (a
    job kind answers this for its template)."""

    def pod_priority_class(self, pod: Obj) -> str | None:
        value = ObjectView(pod).spec.get("priorityClassName")
        return str(value) if value else None
