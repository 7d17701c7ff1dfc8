"""Two-phase admission: the rules of admission checks, in one place.

A ClusterQueue may list AdmissionChecks. The core's admission of such a queue's workload is a
quota *reservation*: it holds quota exactly like an admitted workload for every quota and
preemption rule (the core does not tell the two apart), while the checks' controllers decide.
Then, from the states those controllers write on the workload:
- every check Ready: the workload is admitted (its Job starts);
- any check Rejected: the workload is deactivated, with that check's message as the reason;
- else any check Retry: the reservation is released and the workload requeued with back-off;
- else (some still Pending): it keeps waiting, holding its quota.
Rejected wins over Retry: a workload that one check will never let in must not be retried.

A queue that names a check that does not exist, or whose controller has not marked it Active,
admits nothing (Kueue: the queue is inactive, AdmissionCheckNotFound / AdmissionCheckInactive):
reserving quota for a gate nobody will open would only block others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from queuectl.core import reasons
from queuectl.core.types import AdmissionCheck, CheckState, ClusterQueue

Verdict = Literal["admitted", "waiting", "retry", "rejected"]


def verdict(required: Iterable[str], states: Mapping[str, CheckState]) -> Verdict:
    """What the checks `required` of a reservation say together (`states`: name -> state; a
    required check without a state is Pending). No checks at all: admitted at once."""
    seen = [states.get(name, "Pending") for name in required]
    if "Rejected" in seen:
        return "rejected"
    if "Retry" in seen:
        return "retry"
    if all(s == "Ready" for s in seen):
        return "admitted"
    return "waiting"


def queue_issue(cq: ClusterQueue, checks: Mapping[str, AdmissionCheck]) -> tuple[str, str] | None:
    """(reason, message) when a check the queue lists is missing or not Active, else None."""
    missing = [n for n in cq.admission_checks if n not in checks]
    if missing:
        return reasons.ADMISSION_CHECK_NOT_FOUND, (
            f"admission check(s) {', '.join(missing)} not found; create the AdmissionCheck or "
            "remove it from spec.admissionChecks"
        )
    inactive = [checks[n] for n in cq.admission_checks if not checks[n].active]
    if inactive:
        detail = "; ".join(f"{c.name}: {c.message}" if c.message else c.name for c in inactive)
        return reasons.ADMISSION_CHECK_INACTIVE, (
            f"admission check(s) not Active ({detail}); their controller sets Active"
        )
    return None
