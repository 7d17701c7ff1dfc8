"""Admission checks as the API objects carry them (pure): an AdmissionCheck for the core, and a
Workload's `status.admissionChecks` read and written (docs/design/admission-checks.md).

The rule of what the states mean together lives in `queuectl.core.checks.verdict`; this module
only reads and writes the fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.core import types as core
from queuectl.core.checks import Verdict, verdict

Obj = Mapping[str, Any]
STATES: frozenset[str] = frozenset(("Pending", "Ready", "Retry", "Rejected"))


def admission_check(obj: Obj) -> core.AdmissionCheck:
    """Active only when its controller set the Active condition True."""
    cond = WorkloadView(obj).condition(names.COND_ACTIVE) or {}
    active = cond.get("status") == "True"
    message = (
        "" if active else str(cond.get("message") or "its controller has not marked it Active")
    )
    return core.AdmissionCheck(obj["metadata"]["name"], active=active, message=message)


def active_view(obj: Obj) -> tuple[Any, ...]:
    """What of an AdmissionCheck the core reads (its spec, its Active condition)."""
    cond = WorkloadView(obj).condition(names.COND_ACTIVE) or {}
    return obj.get("spec"), cond.get("status"), cond.get("message")


def entries(wl: Obj) -> list[dict[str, Any]]:
    return [dict(c) for c in WorkloadView(wl).status.get("admissionChecks") or ()]


def required(wl: Obj) -> tuple[str, ...]:
    """The checks its reservation must pass: those written when quota was reserved."""
    return tuple(str(c["name"]) for c in entries(wl))


def states(wl: Obj) -> dict[str, core.CheckState]:
    """name -> state; an unknown state reads as Pending (nothing is decided on it)."""
    out: dict[str, core.CheckState] = {}
    for c in entries(wl):
        state = c.get("state")
        out[str(c["name"])] = cast(core.CheckState, state if state in STATES else "Pending")
    return out


def of(wl: Obj) -> Verdict:
    """What a reserved Workload's checks say together (no checks: admitted)."""
    return verdict(required(wl), states(wl))


def pending(check_names: tuple[str, ...], now: float) -> list[dict[str, Any]]:
    """The list written with a reservation: every check Pending."""
    stamp = convert.format_time(now)
    return [
        {"name": n, "state": "Pending", "message": "", "lastTransitionTime": stamp}
        for n in check_names
    ]


def reset(wl: Obj, now: float) -> list[dict[str, Any]]:
    """After a released reservation: every check back to Pending (decided again next time)."""
    out = []
    for c in entries(wl):
        if c.get("state") != "Pending":
            c.update(
                state="Pending",
                message=f"reset after {c.get('state')}: {c.get('message') or ''}".rstrip(": "),
                lastTransitionTime=convert.format_time(now),
            )
        out.append(c)
    return out


def deciding(wl: Obj, wanted: Verdict) -> list[tuple[str, str]]:
    """(name, message) of the checks that made the verdict `wanted` (Retry or Rejected)."""
    state = {"retry": "Retry", "rejected": "Rejected"}.get(wanted, "")
    return [
        (str(c["name"]), str(c.get("message") or ""))
        for c in entries(wl)
        if c.get("state") == state
    ]


def summary(wl: Obj) -> str:
    """`a: Ready, b: Pending` for messages."""
    return ", ".join(f"{c['name']}: {c.get('state', 'Pending')}" for c in entries(wl))


def queue_checks(cq: Obj | None) -> tuple[str, ...]:
    return tuple(ObjectView(cq or {}).spec.get("admissionChecks") or ())
