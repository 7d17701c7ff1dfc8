"""AdmissionCheck: a second gate between quota reservation and admission (Kueue's two phases).

A ClusterQueue lists checks by name in `spec.admissionChecks`. A workload of that queue first
reserves quota (QuotaReserved), then waits until every check's controller writes state Ready
into its `status.admissionChecks`; only then is it Admitted and its Job started. A check
controller is whatever component owns `spec.controllerName` (a built-in of queuectl, or someone
else's); it also sets the check's own Active condition: a ClusterQueue naming a check that is
missing or not Active admits nothing (docs/design/admission-checks.md).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Final, Literal

from pydantic import Field

from queuectl.api.base import (
    MAX_MESSAGE_LENGTH,
    MAX_NAME_LENGTH,
    Condition,
    KubeModel,
    Resource,
    Rule,
    cel_rules,
    conditions_field,
)
from queuectl.api.quota import ObjectName

MAX_CHECKS: Final = 8
"""Checks one ClusterQueue may list (Kueue allows more; eight gates is already a lot)."""
CONTROLLER_NAME_IMMUTABLE: Final = Rule(
    "self == oldSelf",
    "controllerName is immutable; to change who decides the check, create another check",
)


class CheckState(StrEnum):
    """What a check controller says about one workload."""

    PENDING = "Pending"
    """Not decided yet (every check starts so when quota is reserved)."""
    READY = "Ready"
    """This check lets the workload in."""
    RETRY = "Retry"
    """Not now: the reservation is released and the workload requeued with back-off."""
    REJECTED = "Rejected"
    """Never: the workload is deactivated, with the check's message as the reason."""


class AdmissionCheckParametersReference(KubeModel):
    """An object holding the check's configuration, read by its controller (as in Kueue)."""

    api_group: str = Field(max_length=MAX_NAME_LENGTH)
    kind: str = Field(min_length=1, max_length=63)
    name: ObjectName


class AdmissionCheckSpec(KubeModel):
    controller_name: str = Field(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        json_schema_extra=cel_rules(CONTROLLER_NAME_IMMUTABLE),
    )
    """Who decides this check, e.g. `queuectl.io/provision` (immutable)."""
    parameters: AdmissionCheckParametersReference | None = None


class AdmissionCheckStatus(KubeModel):
    conditions: list[Condition] = conditions_field()
    """Active: set by the check's controller; a check that is not Active holds its queues."""


class AdmissionCheck(Resource):
    """A gate that ClusterQueues name in spec.admissionChecks; decided by its controller."""

    kind: Literal["AdmissionCheck"] = "AdmissionCheck"
    spec: AdmissionCheckSpec
    status: AdmissionCheckStatus | None = None


class AdmissionCheckState(KubeModel):
    """One check's verdict on one workload (Workload status.admissionChecks[])."""

    name: ObjectName
    state: CheckState
    message: str = Field(default="", max_length=MAX_MESSAGE_LENGTH)
    last_transition_time: datetime | None = None
