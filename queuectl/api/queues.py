"""Cohort, ClusterQueue and LocalQueue: the quota tree and the doors into it."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Final, Literal

from pydantic import ConfigDict, Field, model_validator

from queuectl.api.admissioncheck import MAX_CHECKS
from queuectl.api.base import (
    INT32_MAX,
    Condition,
    KubeModel,
    Resource,
    Rule,
    cel_rules,
    conditions_field,
)
from queuectl.api.corev1 import LabelSelector
from queuectl.api.quantity import Quantity
from queuectl.api.quota import (
    FairSharing,
    ObjectName,
    ResourceGroups,
    ResourceName,
    has_limits,
    limits_need_parent,
)

MAX_STATUS_FLAVORS: Final = 64

CQ_LIMITS_NEED_COHORT: Final = limits_need_parent("cohortName", "cohort")
COHORT_LIMITS_NEED_PARENT: Final = limits_need_parent("parentName", "parent cohort")
COHORT_NOT_OWN_PARENT: Final = Rule(
    "!has(self.spec) || !has(self.spec.parentName) || self.spec.parentName != self.metadata.name",
    "a cohort cannot be its own parent; set spec.parentName to another cohort or remove it",
)
BORROW_PREEMPTION_NEEDS_RECLAIM: Final = Rule(
    "self.reclaimWithinCohort != 'Never' || !has(self.borrowWithinCohort) || "
    "self.borrowWithinCohort.policy == 'Never'",
    "borrowWithinCohort.policy needs reclaimWithinCohort other than Never",
)
CLUSTER_QUEUE_IMMUTABLE: Final = Rule(
    "self == oldSelf",
    "clusterQueue is immutable; to send this queue's work elsewhere, delete and recreate "
    "the LocalQueue",
)


class QueueingStrategy(StrEnum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    """Workloads that do not fit let the ones behind them pass."""
    STRICT_FIFO = "StrictFIFO"
    """A head that does not fit blocks the queue."""


class StopPolicy(StrEnum):
    NONE = "None"
    HOLD = "Hold"
    """Admit nothing new; running work continues."""
    HOLD_AND_DRAIN = "HoldAndDrain"
    """Admit nothing new and evict what runs."""


class WithinClusterQueuePolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohortPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowWithinCohortPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class FungibilityPolicy(StrEnum):
    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class BorrowWithinCohort(KubeModel):
    """Whether a workload that must borrow may preempt lower-priority work in the cohort."""

    policy: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    max_priority_threshold: int | None = Field(default=None, ge=-INT32_MAX, le=INT32_MAX)
    """Only workloads at or below this priority may be preempted."""


class ClusterQueuePreemption(KubeModel):
    """Which running workloads a pending one of this queue may preempt."""

    model_config = ConfigDict(json_schema_extra=cel_rules(BORROW_PREEMPTION_NEEDS_RECLAIM))

    within_cluster_queue: WithinClusterQueuePolicy = WithinClusterQueuePolicy.NEVER
    reclaim_within_cohort: ReclaimWithinCohortPolicy = ReclaimWithinCohortPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohort | None = None

    @model_validator(mode="after")
    def _check(self) -> ClusterQueuePreemption:
        bwc = self.borrow_within_cohort
        if (
            self.reclaim_within_cohort == ReclaimWithinCohortPolicy.NEVER
            and bwc is not None
            and bwc.policy != BorrowWithinCohortPolicy.NEVER
        ):
            raise ValueError(BORROW_PREEMPTION_NEEDS_RECLAIM.message)
        return self


class FlavorFungibility(KubeModel):
    """When to stop at a flavor and when to try the next one (H100 -> A100 fallback)."""

    when_can_borrow: FungibilityPolicy = FungibilityPolicy.MAY_STOP_SEARCH
    when_can_preempt: FungibilityPolicy = FungibilityPolicy.TRY_NEXT_FLAVOR


class ResourceUsage(KubeModel):
    """Usage of one resource in a flavor."""

    name: ResourceName
    total: Quantity = 0
    borrowed: Quantity | None = None
    """The part of total above nominal quota (ClusterQueue status only)."""


class FlavorUsage(KubeModel):
    """Usage per resource in one flavor."""

    name: ObjectName
    resources: list[ResourceUsage] = Field(default_factory=list, max_length=16)


class FairSharingStatus(KubeModel):
    weighted_share: int = 0
    """Dominant-resource share above nominal, per mille, divided by the weight."""


class GpuTimeBank(KubeModel):
    """GPU time banking: credit for nominal GPUs left idle, spent while borrowing. A queue with
    credit borrows before queues without and is reclaimed after them (docs/design/banking.md)."""

    accrual_rate: float = Field(default=1.0, ge=0, le=1000)
    """GPU-hours of credit per hour for each GPU of nominal quota left unused."""
    cap_gpu_hours: float = Field(gt=0, le=1e9, alias="capGPUHours")
    """The most credit the queue may hold, in GPU-hours."""
    half_life_hours: float | None = Field(default=None, gt=0, le=1e6)
    """Credit halves every this many hours; unset: it never decays."""


class GpuTimeBankStatus(KubeModel):
    balance_gpu_hours: float = Field(default=0.0, ge=0, alias="balanceGPUHours")
    """Credit in GPU-hours (a restarted controller starts from it)."""
    last_update_time: datetime | None = None
    """When the balance was written."""


# --- Cohort ------------------------------------------------------------------------------


class CohortSpec(KubeModel):
    """A node of the quota tree: children lend to it, it may have quota of its own."""

    model_config = ConfigDict(json_schema_extra=cel_rules(COHORT_LIMITS_NEED_PARENT))

    parent_name: ObjectName | None = None
    resource_groups: ResourceGroups = Field(default_factory=list)
    fair_sharing: FairSharing | None = None

    @model_validator(mode="after")
    def _check(self) -> CohortSpec:
        if self.parent_name is None and has_limits(self.resource_groups):
            raise ValueError(COHORT_LIMITS_NEED_PARENT.message)
        return self


class CohortStatus(KubeModel):
    conditions: list[Condition] = conditions_field()
    fair_sharing: FairSharingStatus | None = None


class Cohort(Resource):
    """A group of ClusterQueues (and cohorts) that lend each other unused quota."""

    model_config = ConfigDict(json_schema_extra=cel_rules(COHORT_NOT_OWN_PARENT))

    kind: Literal["Cohort"] = "Cohort"
    spec: CohortSpec = Field(default_factory=CohortSpec)
    status: CohortStatus | None = None

    @model_validator(mode="after")
    def _check(self) -> Cohort:
        if self.spec.parent_name is not None and self.spec.parent_name == self.metadata.name:
            raise ValueError(COHORT_NOT_OWN_PARENT.message)
        return self


# --- ClusterQueue ------------------------------------------------------------------------


class WaitForPodsReady(KubeModel):
    """This queue's own pods-ready timeouts; each unset field keeps the controller's flag
    (`queuectl controller --pods-ready-*`)."""

    timeout_seconds: int | None = Field(default=None, ge=0, le=31_536_000)
    """Startup: every admitted pod Ready this long after admission, or evicted; 0: off."""
    recovery_timeout_seconds: int | None = Field(default=None, ge=0, le=31_536_000)
    """A running workload that lost a Ready pod gets it back within this, or is evicted; 0: off."""
    requeue_limit: int | None = Field(default=None, ge=0, le=1000)
    """Requeues for PodsReadyTimeout before the workload is deactivated; 0: no limit."""
    block_admission: bool | None = None
    """All-or-nothing start: while a workload of this queue has not all its pods Ready,
    nothing else (of any queue) is admitted into its flavors; unset: the controller's flag."""


class IdleAction(StrEnum):
    WARN = "Warn"
    """Condition GPUIdle and a Warning Event; the workload keeps running."""
    REQUEUE = "Requeue"
    """As Warn, then preempted with its priority class's grace period and requeued."""
    STOP = "Stop"
    """As Warn, then preempted with its grace period and deactivated (not requeued)."""


class IdlePolicy(KubeModel):
    """What to do with a workload whose GPUs stay under a utilization threshold for a window
    (the node agents' reports, docs/design/gpu-use.md)."""

    threshold_percent: int = Field(ge=1, le=100)
    """GPU utilization (percent, the mean over the workload's GPUs) under which it is idle."""
    window_seconds: int = Field(ge=10, le=31_536_000)
    """How long it must stay idle before the action (agents report once a minute by default:
    a window shorter than their report period acts on the first idle report)."""
    action: IdleAction = IdleAction.WARN


class ClusterQueueSpec(KubeModel):
    """Quota, order and preemption rules of one queue of the tree."""

    model_config = ConfigDict(json_schema_extra=cel_rules(CQ_LIMITS_NEED_COHORT))

    cohort_name: ObjectName | None = None
    """The Cohort this queue borrows from and lends to."""
    namespace_selector: LabelSelector | None = None
    """Namespaces whose LocalQueues may use this queue: unset = none, {} = all."""
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    resource_groups: ResourceGroups = Field(default_factory=list)
    preemption: ClusterQueuePreemption = Field(
        default_factory=ClusterQueuePreemption, json_schema_extra={"default": {}}
    )
    flavor_fungibility: FlavorFungibility = Field(
        default_factory=FlavorFungibility, json_schema_extra={"default": {}}
    )
    fair_sharing: FairSharing | None = None
    stop_policy: StopPolicy = StopPolicy.NONE
    admission_checks: list[ObjectName] | None = Field(
        default=None,
        max_length=MAX_CHECKS,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """AdmissionChecks every workload must pass after reserving quota, before it is admitted."""
    gpu_time_bank: GpuTimeBank | None = None
    """Off when unset."""
    wait_for_pods_ready: WaitForPodsReady | None = None
    """Overrides of the controller's pods-ready timeouts for this queue's workloads."""
    idle_policy: IdlePolicy | None = None
    """Flag (and optionally stop) workloads whose GPUs idle; off when unset."""

    @model_validator(mode="after")
    def _check(self) -> ClusterQueueSpec:
        if self.cohort_name is None and has_limits(self.resource_groups):
            raise ValueError(CQ_LIMITS_NEED_COHORT.message)
        return self


class ClusterQueueStatus(KubeModel):
    conditions: list[Condition] = conditions_field()
    flavors_reservation: list[FlavorUsage] = Field(
        default_factory=list, max_length=MAX_STATUS_FLAVORS
    )
    """Quota reserved by workloads (admitted or about to be)."""
    flavors_usage: list[FlavorUsage] = Field(default_factory=list, max_length=MAX_STATUS_FLAVORS)
    """Quota used by admitted workloads."""
    pending_workloads: int = Field(default=0, ge=0)
    reserving_workloads: int = Field(default=0, ge=0)
    admitted_workloads: int = Field(default=0, ge=0)
    fair_sharing: FairSharingStatus | None = None
    gpu_time_bank: GpuTimeBankStatus | None = None


class ClusterQueue(Resource):
    """A queue with quota in flavors, part of a cohort tree."""

    kind: Literal["ClusterQueue"] = "ClusterQueue"
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus | None = None


# --- LocalQueue --------------------------------------------------------------------------


class LocalQueueSpec(KubeModel):
    cluster_queue: ObjectName = Field(json_schema_extra=cel_rules(CLUSTER_QUEUE_IMMUTABLE))
    """The ClusterQueue this namespace's work goes to (immutable)."""
    stop_policy: StopPolicy = StopPolicy.NONE


class QuotaLine(KubeModel):
    """One resource of a flavor, as its ClusterQueue holds it now."""

    name: ResourceName
    nominal: Quantity = 0
    used: Quantity = 0
    borrowable: Quantity = 0
    """What it could borrow now beyond its unused quota (its cohort's idle quota, within the
    limits on the way)."""


class FlavorQuota(KubeModel):
    name: ObjectName
    resources: list[QuotaLine] = Field(default_factory=list, max_length=16)


class PendingRequest(KubeModel):
    name: ResourceName
    requested: Quantity = 0
    """What the ClusterQueue's pending workloads ask for in all."""


class ClusterQueueQuota(KubeModel):
    """A LocalQueue's ClusterQueue's quota, for namespace users who may not read it."""

    flavors: list[FlavorQuota] = Field(default_factory=list, max_length=MAX_STATUS_FLAVORS)
    pending: list[PendingRequest] = Field(default_factory=list, max_length=16)
    gpus: str = Field(default="", max_length=200)
    """One line: GPUs used of nominal, how many more it could borrow now, how many pending ask
    for (`kubectl get localqueue -o wide`)."""


class LocalQueueStatus(KubeModel):
    conditions: list[Condition] = conditions_field()
    pending_workloads: int = Field(default=0, ge=0)
    reserving_workloads: int = Field(default=0, ge=0)
    admitted_workloads: int = Field(default=0, ge=0)
    flavors_reservation: list[FlavorUsage] = Field(
        default_factory=list, max_length=MAX_STATUS_FLAVORS
    )
    flavors_usage: list[FlavorUsage] = Field(default_factory=list, max_length=MAX_STATUS_FLAVORS)
    cluster_queue_quota: ClusterQueueQuota | None = None


class LocalQueue(Resource):
    """A namespace's door to a ClusterQueue; Jobs name it in queuectl.io/queue-name."""

    NAMESPACED = True

    kind: Literal["LocalQueue"] = "LocalQueue"
    spec: LocalQueueSpec
    status: LocalQueueStatus | None = None
