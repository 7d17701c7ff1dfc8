"""Who owns a job kind's object, verified: the webhooks' half of "ownership is verified, not
claimed" (docs/design/webhooks.md). A claimed owner is one only when `registry.owner` confirms
it through the lookup; a verified child must agree with its owner (`frozen.child_problems`),
may not start while its owner waits, and may not leave its owner.
"""

from __future__ import annotations

from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.api.selectors import selector_matches
from queuectl.api.views import ObjectView
from queuectl.jobs import JobKind
from queuectl.jobs.frozen import child_problems
from queuectl.jobs.kubeflow import ReplicaSpecsKind
from queuectl.jobs.registry import KINDS, MAX_OWNER_DEPTH, Registry, owner
from queuectl.webhooks.lookup import QueueLookup
from queuectl.webhooks.review import Request

Owner = tuple[JobKind, Obj]


def owner_of(obj: Any, lookup: QueueLookup, kinds: Registry = KINDS) -> Owner | None:
    """The verified owner of a job kind's object (`registry.owner`: it exists with the uid
    its ownerReference names, makes such objects and is queued): the object is part of that
    owner's Workload (a JobSet's Jobs, a RayJob's RayCluster). A claim that does not hold is
    no owner: the object is queued on its own like any other."""
    if not isinstance(obj, dict):
        return None
    found = owner(obj, kinds, lookup.owner_object)
    return None if found is None or found[1] is None else (found[0], dict(found[1]))


async def read_owners(
    job: Obj, lookup: QueueLookup, kinds: Registry = KINDS, fresh: bool = False
) -> None:
    """The chain of controllers `job` names, each read from the API server when the cache
    lacks it or holds it under another uid (`fresh`: the direct owner in any case). An
    operator creates a child a moment after its owner (JobSet its Jobs at once); the watch may
    not have brought the owner yet, and the child, taken for an object nobody owns, would be
    suspended and queued on its own."""
    for _ in range(MAX_OWNER_DEPTH):
        meta = ObjectView(job).meta
        ref = ObjectView(job).controller_ref
        group = str((ref or {}).get("apiVersion") or "").rpartition("/")[0]
        found_kind = kinds.for_group_kind(group, str((ref or {}).get("kind") or ""))
        if ref is None or found_kind is None or not ref.get("uid"):
            return
        args = (found_kind.resource, str(meta.get("namespace") or ""), str(ref.get("name")))
        found = lookup.owner_object(*args)
        if fresh or found is None or ObjectView(found).meta.get("uid") != ref.get("uid"):
            await lookup.read_owner(*args)
            found = lookup.owner_object(*args)
        if found is None:
            return
        job, fresh = found, False


def problems(
    request: Request, kind: JobKind, job: Obj, parent: Owner | None, was: Owner | None
) -> list[str]:
    """A child's CREATE or UPDATE (`frozen.child_problems`); an UPDATE may not take it away
    from the owner it had (a child without its owner is a job nobody queued), unless that
    owner is going (the garbage collector orphans children so)."""
    if ObjectView(job).meta.get("deletionTimestamp"):
        return []
    if was is not None:
        was_kind, was_obj = was
        was_meta = ObjectView(was_obj).meta
        same = parent is not None and (parent[1].get("metadata") or {}).get("uid") == was_meta.get(
            "uid"
        )
        if not same and not was_meta.get("deletionTimestamp"):
            return [
                f"its controller ownerReference to {was_kind.resource.kind} "
                f"{was_meta.get('name')!r} cannot be removed or changed: it runs as part of "
                "that job's Workload; delete it instead"
            ]
    if parent is None:
        return []
    parent_kind, parent_obj = parent
    starts = not kind.is_suspended(job) and (was is None or kind.is_suspended(_old_obj(request)))
    if starts and parent_kind.is_suspended(parent_obj):
        what, owner_what = kind.resource.kind, parent_kind.resource.kind
        return [
            f"it cannot run while its {owner_what} "
            f"{(parent_obj.get('metadata') or {}).get('name')!r} is suspended: that "
            f"{owner_what}'s Workload is what queuectl admits; set {kind.suspend_field}=true, "
            f"and the {owner_what}'s operator resumes the {what} once queuectl admits it"
        ]
    # An object that only now names its owner is judged whole, as if created so: what it
    # already was (scaled while it was a job of its own) is no less a departure.
    old = request.get("oldObject") if was is not None else None
    return child_problems(parent[0], parent[1], kind.resource.kind, old, job)


def _old_obj(request: Request) -> Obj:
    old = request.get("oldObject")
    return old if isinstance(old, dict) else {}


JOB: Final = ("batch", "Job")
"""The kind whose controller releases the pods it claims but does not select."""


def released_pod_problems(pod: Obj, lookup: QueueLookup, kinds: Registry = KINDS) -> list[str]:
    """A pod created claiming a queued Job as its controller that the Job's selector does not
    match. The Job controller releases such a pod (it removes the ownerReference) and it runs
    on as a bare pod of nobody's queue, so it is refused at create. Pods the Job controller
    makes carry the selector's labels; a reference to another uid names no Job (the garbage
    collector deletes the pod), and a Job nobody queued is not ours."""
    meta = ObjectView(pod).meta
    ref = ObjectView(pod).controller_ref
    group = str((ref or {}).get("apiVersion") or "").rpartition("/")[0]
    kind = kinds.for_group_kind(group, str((ref or {}).get("kind") or ""))
    if ref is None or kind is None or (kind.resource.group, kind.resource.kind) != JOB:
        return []
    name = str(ref.get("name") or "")
    found = lookup.owner_object(kind.resource, str(meta.get("namespace") or ""), name)
    if found is None or ObjectView(found).meta.get("uid") != ref.get("uid"):
        return []
    if kind.queue_name(found) is None and owner(found, kinds, lookup.owner_object) is None:
        return []
    selector = ObjectView(found).spec.get("selector")
    if selector is None or selector_matches(selector, meta.get("labels") or {}):
        return []
    return [
        f"it claims Job {name!r} as its controller but lacks the labels that Job's "
        "selector matches: the Job controller would release it, and it would run outside the "
        "queue that admitted the Job. Let the Job create its pods; to queue a pod of your own, "
        f"create it without the ownerReference and with the label {names.LABEL_QUEUE_NAME}"
    ]


def unlabelled_pod_problems(pod: Obj, lookup: QueueLookup, kinds: Registry = KINDS) -> list[str]:
    """A pod created claiming, as its controller, a queued job whose operator makes its pods
    straight from the job's templates (the Kubeflow kinds: PyTorchJob, MPIJob), without the
    `queuectl.io/workload` label the controller puts on those templates when it admits the job.
    Every pod the operator makes carries it; one that does not was made by hand, and no
    Workload's count would include it (found by the bypass fuzzer: an 8-GPU pod claiming an
    admitted MPIJob ran beside its workers)."""
    ref = ObjectView(pod).controller_ref
    group = str((ref or {}).get("apiVersion") or "").rpartition("/")[0]
    kind = kinds.for_group_kind(group, str((ref or {}).get("kind") or ""))
    if ref is None or not isinstance(kind, ReplicaSpecsKind):
        return []
    name = str(ref.get("name") or "")
    found = lookup.owner_object(kind.resource, str(ObjectView(pod).namespace), name)
    if found is None or ObjectView(found).meta.get("uid") != ref.get("uid"):
        return []
    if kind.queue_name(found) is None and owner(found, kinds, lookup.owner_object) is None:
        return []
    want = kind.workload_name(found)
    if ObjectView(pod).labels.get(names.LABEL_WORKLOAD) == want:
        return []
    what = kind.resource.kind
    return [
        f"it claims {what} {name!r} as its controller but lacks the label "
        f"{names.LABEL_WORKLOAD}={want} that every pod {what}'s operator makes from its admitted "
        f"templates carries: it would run outside the queue that admitted the {what}. Let the "
        f"operator create its pods; to queue a pod of your own, create it without the "
        f"ownerReference and with the label {names.LABEL_QUEUE_NAME}"
    ]
