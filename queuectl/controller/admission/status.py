"""Pure edits of Workload status: each returns the merge patch for the status subresource.

Every patch carries metadata.resourceVersion, so the API server applies it only to the version
we decided on (409 otherwise): the optimistic concurrency that keeps two writers — an old
leader and a new one, or a restarted controller — from ever admitting one workload twice.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import checks
from queuectl.core import backoff_seconds
from queuectl.core import types as core
from queuectl.core.results import Preemption

Obj = Mapping[str, Any]
Patch = dict[str, Any]
MAX_MESSAGE = 32768


def set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: float,
    generation: int | None = None,
) -> bool:
    """Set one condition in place (keyed by type); lastTransitionTime moves only when the
    status flips. Returns whether anything changed."""
    value = "True" if status else "False"
    message = message[:MAX_MESSAGE]
    for cond in conditions:
        if cond.get("type") != type_:
            continue
        if (cond.get("status"), cond.get("reason"), cond.get("message")) == (
            value,
            reason,
            message,
        ):
            return False
        if cond.get("status") != value:
            cond["lastTransitionTime"] = convert.format_time(now)
        cond.update(status=value, reason=reason, message=message)
        if generation is not None:
            cond["observedGeneration"] = generation
        return True
    new: dict[str, Any] = {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": convert.format_time(now),
    }
    if generation is not None:
        new["observedGeneration"] = generation
    conditions.append(new)
    return True


def _conditions(wl: Obj) -> list[dict[str, Any]]:
    return copy.deepcopy(list(WorkloadView(wl).status.get("conditions") or []))


def _patch(wl: Obj, status: dict[str, Any]) -> Patch:
    return {"metadata": {"resourceVersion": wl["metadata"]["resourceVersion"]}, "status": status}


def _gen(wl: Obj) -> int | None:
    gen = WorkloadView(wl).meta.get("generation")
    return int(gen) if gen is not None else None


def admit(
    wl: Obj, admission: core.Admission, now: float, check_names: tuple[str, ...] = ()
) -> Patch:
    """Reserve quota; admitted at once unless its queue has admission checks, which then all
    start Pending (`checks_passed` admits it once they are all Ready)."""
    conds = _conditions(wl)
    flavors = ", ".join(
        f"{ps.name}: " + ", ".join(f"{r}={f}" for r, f in sorted(ps.flavors.items()))
        for ps in admission.podsets
    )
    msg = f"Quota reserved in ClusterQueue {admission.cluster_queue} ({flavors})"
    # A balanced placement that could not be even says why, where `describe` shows it.
    notes = [
        f"{ps.name}: {ps.topology.note}"
        for ps in admission.podsets
        if ps.topology and ps.topology.note
    ]
    if notes:
        msg += "; " + "; ".join(notes)
    set_condition(
        conds, names.COND_QUOTA_RESERVED, True, names.REASON_QUOTA_RESERVED, msg, now, _gen(wl)
    )
    if check_names:
        set_condition(
            conds,
            names.COND_ADMITTED,
            False,
            names.REASON_WAITING_FOR_CHECKS,
            f"Quota reserved; waiting for admission checks: {', '.join(check_names)}",
            now,
            _gen(wl),
        )
    else:
        set_condition(
            conds,
            names.COND_ADMITTED,
            True,
            names.REASON_ADMITTED,
            "The workload is admitted",
            now,
            _gen(wl),
        )
    for stale in (names.COND_EVICTED, names.COND_PREEMPTED, names.COND_REQUEUED):
        for cond in conds:
            if cond.get("type") == stale and cond.get("status") == "True":
                set_condition(
                    conds,
                    stale,
                    False,
                    cond.get("reason") or "Admitted",
                    "Admitted again",
                    now,
                    _gen(wl),
                )
    body: dict[str, Any] = {
        "admission": convert.admission_to_status(admission),
        "conditions": conds,
        "preemption": None,
    }
    if check_names or checks.entries(wl):
        body["admissionChecks"] = checks.pending(check_names, now) or None
    return _patch(wl, body)


def checks_passed(wl: Obj, now: float) -> Patch | None:
    """Every admission check is Ready: Admitted (None when it already is)."""
    conds = _conditions(wl)
    message = f"The workload is admitted; its admission checks are Ready ({checks.summary(wl)})"
    if not set_condition(
        conds, names.COND_ADMITTED, True, names.REASON_ADMITTED, message, now, _gen(wl)
    ):
        return None
    return _patch(wl, {"conditions": conds})


def pending(wl: Obj, reason: str, message: str, now: float) -> Patch | None:
    """QuotaReserved=False with the core's reason; None when the condition already says so."""
    conds = _conditions(wl)
    if not set_condition(conds, names.COND_QUOTA_RESERVED, False, reason, message, now, _gen(wl)):
        return None
    return _patch(wl, {"conditions": conds})


def preempted(wl: Obj, p: Preemption, now: float) -> Patch:
    conds = _conditions(wl)
    msg = f"{p.message} (preempted by {p.preemptor}; stops at {convert.format_time(p.deadline)})"
    set_condition(conds, names.COND_PREEMPTED, True, p.reason, msg, now, _gen(wl))
    return _patch(
        wl,
        {
            "conditions": conds,
            "preemption": {"preemptor": p.preemptor, "deadline": convert.format_time(p.deadline)},
        },
    )


def evicted(wl: Obj, reason: str, message: str, now: float) -> Patch:
    conds = _conditions(wl)
    set_condition(conds, names.COND_EVICTED, True, reason, message, now, _gen(wl))
    return _patch(wl, {"conditions": conds})


RETRY_BACKOFF_BASE_S = 5.0
"""Back-off after an admission check's Retry: 5 s, doubling per retry, at most 10 minutes."""
BACKOFF: Mapping[str, tuple[float, float]] = {
    names.REASON_EVICTED_CHECK_RETRY: (RETRY_BACKOFF_BASE_S, 600.0),
}
"""Eviction reason -> (base, cap) of the back-off its requeue waits (doubling per requeue);
other evictions requeue at once. The controller adds PodsReadyTimeout's from its options."""


def requeued(
    wl: Obj, now: float, accumulated: float, backoff: Mapping[str, tuple[float, float]] = BACKOFF
) -> Patch:
    """Quota released after the pods are gone: back to pending, at its original position.

    After an eviction `backoff` names (an admission check's Retry, pods not Ready in time) it
    backs off (`requeueState`: the count it now reaches and when it may be admitted again);
    its checks start again from Pending and its PodsReady condition goes (the next admission
    starts its own clock). After a Rejected check it is inactive and the check states stay as
    the checks left them, for `describe`."""
    conds = [c for c in _conditions(wl) if c.get("type") != names.COND_PODS_READY]
    evicted_cond = WorkloadView({"status": {"conditions": conds}}).condition(names.COND_EVICTED)
    why = (evicted_cond or {}).get("reason") or names.REASON_EVICTED_PREEMPTION
    evicted_message = (evicted_cond or {}).get("message") or "an admission check rejected it"
    extra: dict[str, Any] = {}
    if why in backoff:
        base, cap = backoff[why]
        count = int((WorkloadView(wl).status.get("requeueState") or {}).get("count") or 0) + 1
        wait = backoff_seconds(count, base=base, cap=cap)
        extra["requeueState"] = {"count": count, "requeueAt": convert.format_time(now + wait)}
    deactivated = why in names.DEACTIVATING_EVICTIONS
    if not deactivated and checks.entries(wl):
        extra["admissionChecks"] = checks.reset(wl, now)
    set_condition(
        conds,
        names.COND_QUOTA_RESERVED,
        False,
        names.REASON_PENDING,
        f"Quota released after eviction ({why}); waiting to be admitted again",
        now,
        _gen(wl),
    )
    set_condition(
        conds, names.COND_ADMITTED, False, why, "The workload's pods are gone", now, _gen(wl)
    )
    set_condition(
        conds, names.COND_EVICTED, False, why, "Eviction complete; pods are gone", now, _gen(wl)
    )
    set_condition(conds, names.COND_PREEMPTED, False, why, "Eviction complete", now, _gen(wl))
    if deactivated:
        message = f"Deactivated: {evicted_message}"
        set_condition(conds, names.COND_REQUEUED, False, why, message, now, _gen(wl))
    else:
        message = "Requeued at its original position"
        if "requeueState" in extra:
            message += f", backing off until {extra['requeueState']['requeueAt']}"
        set_condition(conds, names.COND_REQUEUED, True, why, message, now, _gen(wl))
    return _patch(
        wl,
        {
            "admission": None,
            "conditions": conds,
            "preemption": None,
            "accumulatedPastExecutionTimeSeconds": int(accumulated),
            **extra,
        },
    )


def pods_ready(wl: Obj, ready: bool, reason: str, message: str, now: float) -> Patch | None:
    """The PodsReady condition; None when it already says so."""
    conds = _conditions(wl)
    if not set_condition(conds, names.COND_PODS_READY, ready, reason, message, now, _gen(wl)):
        return None
    return _patch(wl, {"conditions": conds})


def finished(wl: Obj, reason: str, message: str, now: float) -> Patch:
    conds = _conditions(wl)
    set_condition(conds, names.COND_FINISHED, True, reason, message, now, _gen(wl))
    return _patch(wl, {"conditions": conds})


def admitted_seconds(wl: Obj, now: float) -> float:
    """Admitted time so far: past admissions plus the current one."""
    status = WorkloadView(wl).status
    past = float(status.get("accumulatedPastExecutionTimeSeconds") or 0)
    cond = WorkloadView(wl).condition(names.COND_ADMITTED)
    if cond and cond.get("status") == "True":
        since = convert.parse_time(cond.get("lastTransitionTime"))
        if since is not None:
            past += max(0.0, now - since)
    return past
