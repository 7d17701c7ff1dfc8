"""Admission decision for Workloads: only the controller writes what grants or frees quota.

A Workload's status is what the controller and `is_job_admitted` trust: `status.admission` and
QuotaReserved/Admitted grant quota, Finished and Evicted free it or take it back. Anyone able to
write them could claim quota the scheduler never gave, or free quota while their pods keep
running. So for every user but the controller's identities (from configuration, see
docs/design/webhooks.md):
- a Workload may not be created with a status (other than `admissionChecks`);
- no update (of the object or its status subresource) may change its status, except
  `status.admissionChecks`, which AdmissionCheck controllers own;
- an admitted Workload's `spec.podSets` and `spec.queueName` are frozen: the admission was computed
  for them, and changing them would run a different shape than was charged.
Everything else (creating plain Workloads, deactivating one, labels) stays allowed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from queuectl.api import names
from queuectl.webhooks.review import Request, Response, allow, deny, user_name

ADMISSION_CONDITIONS = (names.COND_QUOTA_RESERVED, names.COND_ADMITTED)
FROZEN_WHILE_ADMITTED = ("podSets", "queueName")


def _part(obj: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    value = (obj or {}).get(key)
    return value if isinstance(value, dict) else {}


def _admission_claims(obj: Mapping[str, Any] | None) -> tuple[Any, dict[str, str]]:
    """(status.admission, {condition type: status}) for the conditions that grant quota."""
    status = _part(obj, "status")
    conditions = status.get("conditions")
    claimed: dict[str, str] = {}
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, dict) and cond.get("type") in ADMISSION_CONDITIONS:
            claimed[str(cond["type"])] = str(cond.get("status"))
    return status.get("admission"), claimed


def is_admitted(obj: Mapping[str, Any] | None) -> bool:
    """Holds (or claims) quota: an admission, or QuotaReserved/Admitted True."""
    admission, claimed = _admission_claims(obj)
    return admission is not None or "True" in claimed.values()


def _ref(request: Request) -> str:
    obj = request.get("object") or request.get("oldObject") or {}
    meta = _part(obj, "metadata")
    namespace = request.get("namespace") or meta.get("namespace") or ""
    return f"Workload {namespace}/{meta.get('name') or request.get('name') or ''}"


def guarded_status(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """The status fields only the controller may write: all but `admissionChecks`."""
    return {k: v for k, v in _part(obj, "status").items() if k != "admissionChecks"}


def validate_workload(request: Request, controller_users: Collection[str]) -> Response:
    """Allow the controller everything; refuse anyone else's write to what grants quota."""
    if user_name(request) in controller_users or request["operation"] not in ("CREATE", "UPDATE"):
        return allow(request)
    new, old = request.get("object"), request.get("oldObject")
    ref = _ref(request)
    only_controller = (
        "only the queuectl controller writes a Workload's status (admission, conditions); "
        "AdmissionCheck controllers may write status.admissionChecks"
    )
    if request["operation"] == "CREATE":
        if guarded_status(new):
            return deny(
                request,
                f"{ref}: a new Workload cannot carry a status; {only_controller}. "
                "Create it without status and let it queue.",
            )
        return allow(request)
    if guarded_status(new) != guarded_status(old):
        return deny(request, f"{ref}: its status cannot be changed by hand; {only_controller}.")
    if is_admitted(old):
        changed = [
            f"spec.{field}"
            for field in FROZEN_WHILE_ADMITTED
            if _part(new, "spec").get(field) != _part(old, "spec").get(field)
        ]
        if changed:
            return deny(
                request,
                f"{ref}: {' and '.join(changed)} cannot change while the Workload is admitted "
                "(its quota was charged for the admitted shape). Deactivate it (spec.active: "
                "false) and wait for the eviction, or delete and recreate it.",
            )
    return allow(request)
