"""What a cycle (and `explain`) answers: plain frozen dataclasses the controller writes out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from queuectl.core.reasons import WAITING_FOR_QUOTA
from queuectl.core.types import Admission, FlavorResource


@dataclass(frozen=True, slots=True)
class Admitted:
    key: str
    admission: Admission


@dataclass(frozen=True, slots=True)
class Preemption:
    victim: str
    preemptor: str
    reason: str
    """InClusterQueue | InCohortReclamation | InCohortReclaimWhileBorrowing |
    InCohortReclaimWithCredit | InCohortFairSharing"""
    message: str
    deadline: float
    """now + the victim's preemption grace period: when its Job is suspended."""


@dataclass(frozen=True, slots=True)
class Eviction:
    key: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class QueueHolding:
    """A queue that holds part of a contended (flavor, resource)."""

    cluster_queue: str
    usage: int
    borrowed: int


@dataclass(frozen=True, slots=True)
class PendingInfo:
    key: str
    reason: str
    message: str
    resource: str | None = None
    flavor: str | None = None
    requested: int | None = None
    available: int | None = None
    shortfall: int | None = None
    holders: tuple[QueueHolding, ...] = ()
    victims: tuple[str, ...] = ()
    """For WaitingForPreemptedWorkloads: the victims still draining."""


def waiting_for_quota(
    key: str,
    cluster_queue: str,
    fr: FlavorResource,
    requested: int,
    available: int,
    podset: str | None = None,
    why: str | None = None,
) -> PendingInfo:
    """The one WaitingForQuota reason: what is short, by how much, for which queue (a negative
    `available` reads as 0); `why` says what else was tried."""
    flavor, res = fr
    a = max(0, available)
    part = f"pod set {podset} " if podset is not None else ""
    tail = f"; {why}" if why else ""
    return PendingInfo(
        key,
        WAITING_FOR_QUOTA,
        f"insufficient {res} in flavor {flavor}: {part}needs {requested}, {a} available to "
        f"ClusterQueue {cluster_queue} (short by {requested - a}){tail}",
        resource=res,
        flavor=flavor,
        requested=requested,
        available=a,
        shortfall=requested - a,
    )


@dataclass(frozen=True, slots=True)
class Problem:
    kind: str
    """Cohort | ClusterQueue"""
    name: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class CycleResult:
    admitted: tuple[Admitted, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    pending: tuple[PendingInfo, ...] = ()
    """Only workloads whose reason changed; `Scheduler.pending_info` has the rest."""
    problems: tuple[Problem, ...] = ()
    next_wakeup: float | None = None
    evaluated: int = 0
    """Admission attempts made (a measure of work, for metrics and the benchmark)."""


ExplainState = Literal["admitted", "pending", "nominated", "inactive", "unknown"]


@dataclass(frozen=True, slots=True)
class Explanation:
    key: str
    state: ExplainState
    pending: PendingInfo | None = None
    admission: Admission | None = None
    preemption_possible: bool = False
    would_evict: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class QuotaHold:
    """What an admitted workload holds, as the core counts it (`Scheduler.held_quota`)."""

    key: str
    cluster_queue: str
    usage: Mapping[FlavorResource, int]
    admitted_at: float


@dataclass(frozen=True, slots=True)
class QueueStatus:
    name: str
    active: bool
    problem: str | None
    pending: int
    admitted: int
    usage: Mapping[FlavorResource, int] = field(default_factory=dict)
    borrowed: Mapping[FlavorResource, int] = field(default_factory=dict)
    weighted_share: float = 0.0
    reason: str | None = None
    """Why it is inactive: InvalidSpec, or AdmissionCheckNotFound/Inactive (see `problem`)."""
