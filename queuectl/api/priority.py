"""WorkloadPriorityClass: priority for queueing and preemption, plus the notice a victim gets.

Its fields sit at the top level, as in scheduling.k8s.io PriorityClass, so it reads like one.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from queuectl.api.base import INT32_MAX, Resource
from queuectl.api.corev1 import LabelSelector

MAX_DESCRIPTION_LENGTH: Final = 2048
# A day of grace or protected runtime is already generous; the bound catches unit mistakes.
MAX_SECONDS: Final = 7 * 24 * 3600


class WorkloadPriorityClass(Resource):
    """Priority of the workloads that name it, and how gently they are preempted."""

    kind: Literal["WorkloadPriorityClass"] = "WorkloadPriorityClass"
    value: int = Field(ge=-INT32_MAX, le=INT32_MAX)
    """Higher runs first and may preempt lower."""
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION_LENGTH)
    preemption_grace_period_seconds: int = Field(default=0, ge=0, le=MAX_SECONDS)
    """Notice a preempted workload gets (to checkpoint) before its Job is suspended."""
    minimum_runtime_seconds: int | None = Field(default=None, ge=0, le=MAX_SECONDS)
    """A workload that ran less than this is not chosen as a preemption victim."""
    namespace_selector: LabelSelector | None = None
    """The namespaces whose Jobs may name this class. Unset: every namespace (a class is
    public, as a PriorityClass is); set, only the namespaces it selects (`{}`: all). Lets an
    admin keep a top class to the teams entitled to it."""
