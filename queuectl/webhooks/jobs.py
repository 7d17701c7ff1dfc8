"""Admission decisions for every registered job kind: queue them on create, keep them from
escaping the queue. The kind comes from the AdmissionReview's group and kind, through the
registry (queuectl.jobs.registry); what differs between kinds is behind `JobKind`.

Pure functions of (request, lookup): no I/O, so they are tested directly and the server is a thin
shell. The rules are in docs/design/webhooks.md; the short version:
- mutate: a Job with a queue label, or an unlabelled one in a namespace with a LocalQueue named
  `default`, is created suspended and labelled with its LocalQueue and ClusterQueue;
- validate: only the controller (by identity) or an admitted Workload may unsuspend a queued Job;
  the queue label cannot be removed, nor changed while the Job is admitted or running; nor can
  the Job's shape (pods at once, requests) or placement while it is (`jobs/frozen.py`); a
  child whose owner is verified (`registry.owner`) must agree with that owner on what it runs
  and where; a WorkloadPriorityClass may be named only in the namespaces its namespaceSelector
  selects; the keys the system owns (api/owned.py) are the controller's alone, on the job, in
  its pod templates and on its children (webhooks/owned.py); label values must be well formed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.api.selectors import namespace_selected
from queuectl.api.slicing import slice_problems
from queuectl.api.views import ObjectView
from queuectl.jobs import JobKind
from queuectl.jobs.frozen import placement_changes
from queuectl.jobs.registry import KINDS, Registry
from queuectl.jobs.shape import shape, shape_changes
from queuectl.webhooks import inputs, kueue_label, owners
from queuectl.webhooks.formats import (
    label_format_problems,
    podset_group_problems,
    priority_class_problem,
)
from queuectl.webhooks.lookup import QueueLookup
from queuectl.webhooks.owned import owned_key_problems
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


def kind_of(request: Request, kinds: Registry = KINDS) -> JobKind | None:
    """The registered kind the request is about, None for any other (never sent one)."""
    gvk = request.get("kind") or {}
    return kinds.for_group_kind(str(gvk.get("group") or ""), str(gvk.get("kind") or ""))


def _job_ref(request: Request, kind: JobKind) -> str:
    obj = request.get("object") or request.get("oldObject") or {}
    name = request.get("name") or ObjectView(obj).meta.get("name") or "<generated>"
    return f"{kind.resource.kind} {namespace_of(request)}/{name}"


async def read_inputs(request: Request, lookup: QueueLookup, kinds: Registry = KINDS) -> None:
    """What a job route awaits before its decision: a created job's input as the API server
    has it (`inputs.read_current`), and the owners its ownerReferences name that the cache lacks
    (`read_owners`)."""
    job = request.get("object")
    kind = kind_of(request, kinds)
    if kind is None or not isinstance(job, dict):
        return
    old = request.get("oldObject")
    if request.get("operation") == "CREATE":
        await inputs.read_current(kind, job, lookup)
    # A child resumed (or made running) right after its owner: the cache may not have seen
    # the owner's resume yet, and the decision asks whether the owner still holds back.
    starts = not kind.is_suspended(job) and (not isinstance(old, dict) or kind.is_suspended(old))
    await owners.read_owners(job, lookup, kinds, fresh=starts)
    if isinstance(old, dict):
        await owners.read_owners(old, lookup, kinds)


def mutate_job(
    request: Request,
    lookup: QueueLookup,
    kinds: Registry = KINDS,
    kueue_queue_label: bool = False,
) -> Response:
    """Queue a job on create; keep its cluster-queue label in step when its queue changes.
    `kueue_queue_label`: a new job's Kueue queue label counts as its queue label
    (webhooks/kueue_label.py)."""
    job = request.get("object")
    kind = kind_of(request, kinds)
    if kind is None or not isinstance(job, dict) or owners.owner_of(job, lookup, kinds) is not None:
        return allow(request)  # not a kind we queue, or a part of a job that is queued whole
    what = kind.resource.kind
    ns = namespace_of(request)
    labels = ObjectView(job).labels
    queue = labels.get(names.LABEL_QUEUE_NAME)
    if request.get("operation") == "UPDATE":
        old_labels = ObjectView(request.get("oldObject") or {}).labels
        warnings = _priority_class_warnings(labels, old_labels, lookup, what)
        old_queue = old_labels.get(names.LABEL_QUEUE_NAME)
        if queue is None or queue == old_queue:
            return allow(request, [], warnings)
        cluster_queue = lookup.local_queue(ns, queue)
        if cluster_queue is None:
            return allow(request, [], warnings)
        patch = label_patch(job, {names.LABEL_CLUSTER_QUEUE: cluster_queue})
        return allow(request, patch, warnings)
    if request.get("operation") != "CREATE":
        return allow(request)
    if kueue_queue_label:
        if (problem := kueue_label.disagreement(labels)) is not None:
            return deny(request, f"{_job_ref(request, kind)}: {problem}")
        queue = kueue_label.queue_name(labels, honour_kueue=True)
    warnings = _priority_class_warnings(labels, {}, lookup, what)
    if queue is None:
        if lookup.local_queue(ns, names.DEFAULT_LOCAL_QUEUE) is None:
            return allow(request)  # not queued: no label and no default LocalQueue here
        queue = names.DEFAULT_LOCAL_QUEUE
    cluster_queue = lookup.local_queue(ns, queue)
    if cluster_queue is None:
        warnings.append(
            f"LocalQueue {ns}/{queue} does not exist; the {what} stays suspended until it is "
            f"created (`kubectl get localqueues -n {ns}` lists the queues here)"
        )
    wanted = {names.LABEL_QUEUE_NAME: queue, names.LABEL_CLUSTER_QUEUE: cluster_queue}
    recorded, refusal = inputs.snapshot_ops(kind, job, lookup)
    if refusal is not None:
        return deny(request, f"{_job_ref(request, kind)}: {refusal}")
    return allow(request, label_patch(job, wanted) + kind.suspend_ops(job) + recorded, warnings)


def _priority_class_warnings(
    labels: Mapping[str, str], old: Mapping[str, str], lookup: QueueLookup, what: str
) -> list[str]:
    """A warning (not a refusal: a class applied in the same `kubectl apply` may not have
    reached the cache yet) when the job names a WorkloadPriorityClass that does not exist."""
    wanted = labels.get(names.LABEL_PRIORITY_CLASS)
    if not wanted or wanted == old.get(names.LABEL_PRIORITY_CLASS):
        return []
    if priority_class_problem(wanted) is not None or lookup.priority_class_exists(wanted):
        return []  # a malformed value is refused by the validating webhook instead
    return [
        f"WorkloadPriorityClass {wanted} does not exist; the {what} waits until it is created "
        f"(`kubectl get workloadpriorityclasses` lists them) or its "
        f"{names.LABEL_PRIORITY_CLASS} label names an existing class or is removed"
    ]


def _owned_problems(request: Request, lookup: QueueLookup, kinds: Registry) -> list[str]:
    """Our keys are ours (webhooks/owned.py), on the object and its pod templates: read through
    the kind the object is, queued or a part of a queued job (a JobSet's Job)."""
    gvk = request.get("kind") or {}
    kind = kinds.for_group_kind(str(gvk.get("group") or ""), str(gvk.get("kind") or ""))
    return owned_key_problems(request, lookup, kind, kinds)


def validate_job(
    request: Request,
    lookup: QueueLookup,
    controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
    kinds: Registry = KINDS,
    children_only: bool = False,
    kueue_queue_label: bool = False,
) -> Response:
    """Refuse changes to a queued job that would bypass the queue or corrupt its labels, and
    changes to a child that would make it run other than its owner says. `children_only`:
    the route that sees unlabelled objects judges only children (their owners are queued, so
    they carry no queue label of their own)."""
    job = request.get("object")
    if user_name(request) in controller_users or not isinstance(job, dict):
        return allow(request)
    problems = _owned_problems(request, lookup, kinds)
    kind = kind_of(request, kinds)
    if kind is None:  # not a kind we queue (never sent one)
        if not problems:
            return allow(request)
        gvk, meta = request.get("kind") or {}, ObjectView(job).meta
        what = f"{gvk.get('kind')} {namespace_of(request)}/{meta.get('name') or '<generated>'}"
        return deny(request, f"{what}: " + "; ".join(problems))
    operation = request.get("operation")
    parent = owners.owner_of(job, lookup, kinds)
    old = request.get("oldObject") if operation == "UPDATE" else None
    was = owners.owner_of(old, lookup, kinds)
    if parent is not None or was is not None:
        problems = owners.problems(request, kind, job, parent, was) + problems
        if problems:
            return deny(request, f"{_job_ref(request, kind)}: " + "; ".join(problems))
        return allow(request)  # a part of a job that is queued whole
    if children_only:  # an object no verified owner stands behind: its own queue judges it
        if problems:
            return deny(request, f"{_job_ref(request, kind)}: " + "; ".join(problems))
        return allow(request)
    warnings: list[str] = []
    if kueue_queue_label and operation in ("CREATE", "UPDATE"):
        old_labels = ObjectView(old).labels if isinstance(old, dict) else None
        if (problem := kueue_label.disagreement(ObjectView(job).labels, old_labels)) is not None:
            problems.append(problem)
    if operation == "CREATE":
        problems = _create_problems(request, kind, job, lookup) + problems
    elif operation == "UPDATE":
        problems = _update_problems(request, kind, job, lookup) + problems
        warnings = _resize_warnings(request, kind, job)
    else:
        return allow(request)
    if problems:
        return deny(request, f"{_job_ref(request, kind)}: " + "; ".join(problems))
    return allow(request, [], warnings)


def _priority_class_problems(
    request: Request, new: Mapping[str, str], old: Mapping[str, str], lookup: QueueLookup
) -> list[str]:
    """A class the request names (sets or changes) whose namespaceSelector leaves the Job's
    namespace out. A class not in the cache yet is the controller's to judge when it arrives."""
    wanted = new.get(names.LABEL_PRIORITY_CLASS)
    if not wanted or wanted == old.get(names.LABEL_PRIORITY_CLASS):
        return []
    selector = lookup.priority_class_selector(wanted)
    if selector is None:
        return []
    ns = namespace_of(request)
    if namespace_selected(selector, ns, lookup.namespace_labels(ns)):
        return []
    return [
        f"WorkloadPriorityClass {wanted!r} may not be used in namespace {ns!r}: its "
        "namespaceSelector does not select this namespace; name a class this namespace may "
        f"use (`kubectl get wpc`), remove the {names.LABEL_PRIORITY_CLASS} label, or ask a "
        "cluster admin to extend the class's namespaceSelector"
    ]


def _resize_warnings(request: Request, kind: JobKind, job: Obj) -> list[str]:
    """Say what a shape change of a waiting job does (the refusal covers an admitted one)."""
    old = request.get("oldObject") or {}
    queue = ObjectView(job).labels.get(names.LABEL_QUEUE_NAME)
    if (
        queue is None
        or not kind.is_suspended(old)
        or not (changes := shape_changes(kind, old, job))
    ):
        return []
    return [
        f"this changes {'; '.join(changes)}: queuectl resizes the {kind.resource.kind}'s "
        "Workload, which waits "
        f"in LocalQueue {queue!r} for quota for its new shape"
    ]


def _topology_problems(kind: JobKind, job: Obj) -> list[str]:
    """Pod-set group annotations (`formats.podset_group_problems`), slice and balance
    annotations (`slicing.slice_problems`, with each pod set's count). A body whose pod sets cannot
    be read at all (a string for `parallelism`, a number for a template) comes only from a
    review sent by hand: the API server decodes a Job against its schema before any webhook
    sees it. Such a body has no groups to judge, and must not make this webhook fail."""
    try:
        sets = shape(kind, job)
    except (TypeError, ValueError, AttributeError, KeyError):
        return []
    problems = podset_group_problems([(ps.name, ps.topology) for ps in sets])
    for ps in sets:
        problems += slice_problems(ps.topology, ps.count, f"pod set {ps.name!r}")
    return problems


def _create_problems(request: Request, kind: JobKind, job: Obj, lookup: QueueLookup) -> list[str]:
    labels = ObjectView(job).labels
    queue = labels.get(names.LABEL_QUEUE_NAME)
    problems = inputs.create_problems(kind, job, lookup, queued=queue is not None)
    if queue is None:
        return problems
    problems += label_format_problems(labels, {})
    problems += _topology_problems(kind, job)
    problems += _priority_class_problems(request, labels, {}, lookup)
    if not kind.is_suspended(job):
        field = kind.suspend_field
        problems.append(
            f"a {kind.resource.kind} queued in LocalQueue {queue!r} must be created with "
            f"{field}=true so that queuectl can admit it; the queuectl mutating webhook sets it, "
            f"so check that MutatingWebhookConfiguration {names.MUTATING_WEBHOOK_CONFIGURATION} "
            f"exists and that no other webhook clears {field}"
        )
    expected = lookup.local_queue(namespace_of(request), queue)
    given = labels.get(names.LABEL_CLUSTER_QUEUE)
    if expected is not None and given is not None and given != expected:
        problems.append(
            f"label {names.LABEL_CLUSTER_QUEUE}={given!r} does not match LocalQueue {queue!r}, "
            f"which feeds ClusterQueue {expected!r}; queuectl sets this label, so leave it out"
        )
    return problems


def _update_problems(request: Request, kind: JobKind, job: Obj, lookup: QueueLookup) -> list[str]:
    old = request.get("oldObject") or {}
    what, field = kind.resource.kind, kind.suspend_field
    if ObjectView(job).meta.get("deletionTimestamp"):
        return []  # finalizers being removed from a job on its way out
    ns, name = namespace_of(request), str(request.get("name") or job["metadata"].get("name", ""))
    new_labels, old_labels = ObjectView(job).labels, ObjectView(old).labels
    new_queue = new_labels.get(names.LABEL_QUEUE_NAME)
    old_queue = old_labels.get(names.LABEL_QUEUE_NAME)
    problems = label_format_problems(new_labels, old_labels)
    if new_queue is not None:
        problems += _priority_class_problems(request, new_labels, old_labels, lookup)
    admitted = lookup.is_job_admitted(ns, name, kind.resource)
    running = not kind.is_suspended(old)
    changes = shape_changes(kind, old, job) if old_queue is not None else []
    if new_queue is not None and (changes or old_queue is None):
        problems += _topology_problems(kind, job)
    if old_queue is not None and (admitted or running) and changes:
        problems.append(
            f"it cannot change {'; '.join(changes)} while it is admitted: the quota it holds "
            "was sized for its shape, and more pods than its queue admitted would run; wait "
            "until it finishes, or delete it and create it again with the new shape"
        )
    moved = placement_changes(kind, old, job) if old_queue is not None else []
    if (admitted or running) and moved:
        problems.append(
            f"it cannot change {', '.join(moved)} while it is admitted: they decide which "
            "nodes its pods run on, and its quota was admitted on one flavor's nodes; wait "
            "until it finishes, or delete it and create it again with the new placement"
        )

    if old_queue is not None and new_queue is None:
        problems.append(
            f"label {names.LABEL_QUEUE_NAME} cannot be removed from a queued {what}; to run it "
            f"outside queuectl, delete the {what} and create it again without the label"
        )
    elif old_queue is not None and new_queue != old_queue and (admitted or running):
        problems.append(
            f"label {names.LABEL_QUEUE_NAME} cannot change from {old_queue!r} to {new_queue!r} "
            f"while the {what} is admitted; wait until it finishes, or delete it and create it "
            "again in the other queue"
        )
    elif old_queue is None and new_queue is not None and not kind.is_suspended(job):
        problems.append(
            f"label {names.LABEL_QUEUE_NAME} can only be added to a suspended {what}; set "
            f"{field}=true in the same change, or delete the {what} and create it with the label"
        )

    old_cq = old_labels.get(names.LABEL_CLUSTER_QUEUE)
    new_cq = new_labels.get(names.LABEL_CLUSTER_QUEUE)
    if new_cq != old_cq and (
        new_cq is None or new_queue is None or new_cq != lookup.local_queue(ns, new_queue)
    ):
        problems.append(
            f"label {names.LABEL_CLUSTER_QUEUE} is set by queuectl from the LocalQueue; "
            "leave it as it is"
        )
    problems += inputs.update_problems(kind, old, job)

    if (
        new_queue is not None
        and kind.is_suspended(old)
        and not kind.is_suspended(job)
        and not admitted
    ):
        problems.append(
            f"it is queued in LocalQueue {new_queue!r} and not admitted yet, so it cannot be "
            "unsuspended by hand; queuectl unsuspends it once quota is available (see why it "
            f"waits with `kubectl get workloads -n {ns}` or "
            f"`queuectl describe {what.lower()} {name} -n {ns}`)"
        )
    return problems
