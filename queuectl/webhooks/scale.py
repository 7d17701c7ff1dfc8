"""Admission for a job kind's scale subresource (`kubectl scale pytorchjob/x --replicas=3`).

A scale request carries an autoscaling/v1 Scale, not the job: it has no labels (the queued-job
hook's objectSelector cannot match it) and no pod sets, and its `request.resource` names the
job's resource with `subResource: scale`. What it changes is the job's replica count (the
CRD's specReplicasPath), which decides how many pods run; while the job holds quota that is as
frozen as any other count (`jobs/frozen.py`). So the decision reads the job itself, from the
controller's cache or, when the cache lacks it, from the API server (`read_job`), and never
trusts the Scale for anything but the two counts it compares.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.api.views import ObjectView
from queuectl.jobs import JobKind
from queuectl.jobs.registry import KINDS, Registry
from queuectl.webhooks.lookup import QueueLookup
from queuectl.webhooks.review import Request, Response, allow, deny, user_name

SUBRESOURCE = "scale"


def scaled_kind(request: Request, kinds: Registry = KINDS) -> JobKind | None:
    """The registered kind whose scale subresource the request writes; None for any other."""
    if request.get("subResource") != SUBRESOURCE:
        return None
    res = request.get("resource") or {}
    group, plural = str(res.get("group") or ""), str(res.get("resource") or "")
    return next(
        (k for k in kinds.values() if (k.resource.group, k.resource.plural) == (group, plural)),
        None,
    )


def _where(request: Request) -> tuple[str, str]:
    return str(request.get("namespace") or ""), str(request.get("name") or "")


def _replicas(scale: Any) -> Any:
    spec = scale.get("spec") if isinstance(scale, dict) else None
    return spec.get("replicas", 0) if isinstance(spec, dict) else 0


async def read_job(request: Request, lookup: QueueLookup, kinds: Registry = KINDS) -> None:
    """Before a scale request is decided: the job, when the cache lacks it, read from the API
    server (a job scaled right after it was created may not have come through the watch)."""
    kind = scaled_kind(request, kinds)
    if kind is None:
        return
    ns, name = _where(request)
    if lookup.owner_object(kind.resource, ns, name) is None:
        await lookup.read_owner(kind.resource, ns, name)


def validate_scale(
    request: Request,
    lookup: QueueLookup,
    controller_users: Collection[str],
    kinds: Registry = KINDS,
) -> Response:
    """Refuse a change of a queued job's replicas through its scale subresource while it is
    admitted or running; a waiting job may be scaled (its Workload follows), an unqueued one
    is not queuectl's. A job that cannot be found is refused: the API server read it to build
    the Scale, so it exists, and the Scale alone says nothing about its queue."""
    kind = scaled_kind(request, kinds)
    if kind is None or user_name(request) in controller_users:
        return allow(request)
    if request.get("operation") != "UPDATE":
        return allow(request)
    old, new = _replicas(request.get("oldObject")), _replicas(request.get("object"))
    if old == new:
        return allow(request)
    ns, name = _where(request)
    what = f"{kind.resource.kind} {ns}/{name}"
    job = lookup.owner_object(kind.resource, ns, name)
    if job is None:
        return deny(
            request,
            f"{what}: queuectl cannot read it to check whether it is admitted, so its scale "
            "cannot change now; try again in a moment",
        )
    return _decide(request, kind, job, what, lookup, old, new)


def _decide(
    request: Request, kind: JobKind, job: Obj, what: str, lookup: QueueLookup, old: Any, new: Any
) -> Response:
    labels = ObjectView(job).labels
    if names.LABEL_QUEUE_NAME not in labels:
        return allow(request)
    ns, name = _where(request)
    if not (lookup.is_job_admitted(ns, name, kind.resource) or not kind.is_suspended(job)):
        return allow(request)  # waiting: the Workload is rebuilt from the new shape
    return deny(
        request,
        f"{what}: its replicas cannot change from {old} to {new} through the scale "
        "subresource while it is admitted: the quota it holds was sized for its shape, and "
        "more pods than its queue admitted would run; wait until it finishes, or delete it "
        "and create it again with the new shape",
    )
