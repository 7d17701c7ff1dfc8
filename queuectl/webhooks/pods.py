"""Admission decisions for plain pod groups: bare pods with the queue label (jobs/podgroup).

- mutate: on create, a queued bare pod gets the scheduling gate `queuectl.io/admission` and its
  ClusterQueue label; the controller lifts the gate once the whole group is admitted.
- validate: a queued pod must be created gated, with well-formed group labels; only the
  controller may lift the gate; the queue, group name and total count cannot change once the
  pod exists (the group's Workload was sized from them).
- every pod sent (queued or not): the keys the system owns (api/owned.py) are the controller's
  alone, but for a copy from the verified owner's template (webhooks/owned.py).

A pod whose controller is a registered job kind (a Job's, a JobSet's Job's) is its owner's
business; one whose controller is not (a ReplicaSet's) is queued as a plain pod, so its GPUs
never run outside the queue. A pod created claiming a queued Job that the Job's selector does
not match is refused (`owners.released_pod_problems`): the Job controller would release it.
Pure functions of (request, lookup), like webhooks/jobs.py.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.api.slicing import slice_problems
from queuectl.api.views import ObjectView
from queuectl.jobs import podgroup as pg
from queuectl.jobs.registry import KINDS, Registry
from queuectl.webhooks.formats import label_format_problems, podset_group_problems
from queuectl.webhooks.lookup import QueueLookup
from queuectl.webhooks.owned import owned_key_problems
from queuectl.webhooks.owners import released_pod_problems, unlabelled_pod_problems
from queuectl.webhooks.review import (
    DEFAULT_CONTROLLER_USERS,
    Request,
    Response,
    allow,
    deny,
    label_patch,
    namespace_of,
    user_name,
)

_FIXED_LABELS = (names.LABEL_QUEUE_NAME, names.LABEL_POD_GROUP_NAME)


def _pod(request: Request) -> Obj | None:
    obj = request.get("object")
    gvk = request.get("kind") or {}
    if not isinstance(obj, dict) or gvk.get("group") or gvk.get("kind") != "Pod":
        return None
    return obj


def _ref(request: Request, pod: Obj) -> str:
    name = request.get("name") or ObjectView(pod).meta.get("name") or "<generated>"
    return f"Pod {namespace_of(request)}/{name}"


def mutate_pod(request: Request, lookup: QueueLookup, kinds: Registry = KINDS) -> Response:
    """Gate a queued pod at create and label it with its ClusterQueue."""
    pod = _pod(request)
    if pod is None or request.get("operation") != "CREATE" or not pg.is_queued_pod(pod, kinds):
        return allow(request)
    ns = namespace_of(request)
    queue = ObjectView(pod).labels[names.LABEL_QUEUE_NAME]
    cluster_queue = lookup.local_queue(ns, queue)
    warnings = []
    if cluster_queue is None:
        warnings.append(
            f"LocalQueue {ns}/{queue} does not exist; the pod stays gated until it is created "
            f"(`kubectl get localqueues -n {ns}` lists the queues here)"
        )
    # Whole-map ops for the group's labels go first: the cluster-queue op then adds to them.
    group_ops = pg.lws_ops(pod)
    grouped = _apply_maps(pod, group_ops)
    ops = group_ops + label_patch(grouped, {names.LABEL_CLUSTER_QUEUE: cluster_queue})
    return allow(request, ops + pg.gate_ops(pod), warnings)


def _apply_maps(pod: Obj, ops: list[dict[str, Any]]) -> Obj:
    """The pod with `lws_ops`' whole-map replacements of its labels and annotations applied."""
    meta = dict(ObjectView(pod).meta)
    for op in ops:
        meta[op["path"].rsplit("/", 1)[1]] = op["value"]
    return {**pod, "metadata": meta}


LWS_TEMPLATES = ("leaderTemplate", "workerTemplate")
_PROPAGATED = (names.LABEL_QUEUE_NAME, names.LABEL_PRIORITY_CLASS)


def mutate_lws(request: Request) -> Response:
    """A LeaderWorkerSet labelled with a queue: copy its queue (and priority class) labels into
    its leader and worker templates, so every pod it makes is queued (gated, grouped per
    replica by `mutate_pod`). LWS has no suspend field: its pods are held by their gates."""
    lws = request.get("object")
    if not isinstance(lws, dict) or request.get("operation") not in ("CREATE", "UPDATE"):
        return allow(request)
    wanted = {k: v for k, v in ObjectView(lws).labels.items() if k in _PROPAGATED and v}
    if not wanted:
        return allow(request)
    lwt = ObjectView(lws).spec.get("leaderWorkerTemplate")
    if not isinstance(lwt, dict):
        return allow(request)
    ops: list[dict[str, Any]] = []
    for name in LWS_TEMPLATES:
        template = lwt.get(name)
        if not isinstance(template, dict):
            continue
        meta = ObjectView(template).meta
        labels = dict(meta.get("labels") or {})
        if all(labels.get(k) == v for k, v in wanted.items()):
            continue
        labels.update(wanted)
        base = f"/spec/leaderWorkerTemplate/{name}/metadata"
        if "metadata" not in template:
            ops.append({"op": "add", "path": base, "value": {"labels": labels}})
        else:
            ops.append({"op": "add", "path": f"{base}/labels", "value": labels})
    return allow(request, ops)


def validate_pod(
    request: Request,
    lookup: QueueLookup,
    controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
    kinds: Registry = KINDS,
) -> Response:
    """Refuse a queued pod that would start outside its queue, a change to its group, or a
    write of the system's keys on any pod."""
    pod = _pod(request)
    if pod is None or user_name(request) in controller_users:
        return allow(request)
    old = request.get("oldObject") or {}
    operation = request.get("operation")
    problems: list[str] = []
    if operation == "CREATE" and (pg.is_queued_pod(pod, kinds) or pg.held_by_queue(pod, kinds)):
        problems = _create_problems(pod)
    elif operation == "UPDATE" and pg.is_queued_pod(old, kinds):
        problems = _update_problems(pod, old)
    if operation == "CREATE":
        problems += released_pod_problems(pod, lookup, kinds)
        problems += unlabelled_pod_problems(pod, lookup, kinds)
    problems += owned_key_problems(request, lookup, None, kinds)
    if problems:
        return deny(request, f"{_ref(request, pod)}: " + "; ".join(problems))
    return allow(request)


def _create_problems(pod: Obj) -> list[str]:
    problems = label_format_problems(ObjectView(pod).labels, {}) + pg.group_problems(pod)
    topology = tuple(ObjectView(pod).annotation(key) for key in names.PODSET_TOPOLOGY_ANNOTATIONS)
    meta = ObjectView(pod).meta
    name = str(meta.get("name") or meta.get("generateName") or "")
    problems += podset_group_problems([(name, topology)], noun="pod")
    problems += slice_problems(topology, None, f"pod {name!r}")
    if not pg.is_gated(pod):
        problems.append(
            f"a queued pod must be created with the scheduling gate {pg.GATE} so that queuectl "
            "can admit its group; the queuectl mutating webhook adds it, so check that "
            f"MutatingWebhookConfiguration {names.MUTATING_WEBHOOK_CONFIGURATION} exists"
        )
    return problems


def _update_problems(pod: Obj, old: Obj) -> list[str]:
    if ObjectView(pod).meta.get("deletionTimestamp"):
        return []
    new_labels, old_labels = ObjectView(pod).labels, ObjectView(old).labels
    problems = [
        f"label {key} cannot change on a queued pod (its group's Workload was made from it); "
        "delete the pod and create it again"
        for key in _FIXED_LABELS
        if new_labels.get(key) != old_labels.get(key)
    ]
    count = names.ANNOTATION_POD_GROUP_TOTAL_COUNT
    if ObjectView(pod).annotation(count) != ObjectView(old).annotation(count):
        problems.append(
            f"annotation {count} cannot change on a queued pod; delete the group's pods and "
            "create them again with the new count"
        )
    return problems  # lifting the gate is refused with every owned key (webhooks/owned.py)
