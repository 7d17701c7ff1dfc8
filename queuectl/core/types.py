"""The core's plain input types: what the controller builds from watch events.

Frozen dataclasses with slots so that a cycle can never change what it was given. Quantities are
canonical integers (millicores, bytes, device counts) and times are floats passed in by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

FlavorResource = tuple[str, str]
"""(flavor name, resource name): the unit in which quota is kept."""

QueueingStrategy = Literal["BestEffortFIFO", "StrictFIFO"]
WithinClusterQueue = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimWithinCohort = Literal["Never", "LowerPriority", "Any"]
BorrowPolicy = Literal["Never", "LowerPriority"]
WhenCanBorrow = Literal["Borrow", "TryNextFlavor"]
WhenCanPreempt = Literal["Preempt", "TryNextFlavor"]
StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]
FairPreemptionStrategy = Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
"""A fair-sharing preemption rule (`queuectl.core.fair_preempt`)."""

GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes toleration matching: empty key with Exists matches every taint."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Flavor:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None
    node_resources: Mapping[str, str] = field(default_factory=dict)
    """Quota resource -> the node resource that serves it on this flavor's nodes: a flavor of
    MIG slices maps `nvidia.com/gpu` to `nvidia.com/mig-3g.40gb`, so one requested GPU is one
    slice there (placement and node usage count the slice; quota stays in the quota resource)."""


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    levels: tuple[str, ...]
    """Node label keys, coarse to fine (block, rack, hostname)."""


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    name: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]
    """In the order they are tried."""


@dataclass(frozen=True, slots=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class BorrowWithinCohort:
    policy: BorrowPolicy = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    within_cluster_queue: WithinClusterQueue = "Never"
    reclaim_within_cohort: ReclaimWithinCohort = "Never"
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort()

    @property
    def any(self) -> bool:
        return (
            self.within_cluster_queue != "Never"
            or self.reclaim_within_cohort != "Never"
            or self.borrow_within_cohort.policy != "Never"
        )


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: WhenCanBorrow = "Borrow"
    when_can_preempt: WhenCanPreempt = "TryNextFlavor"


@dataclass(frozen=True, slots=True)
class GpuTimeBank:
    """GPU time banking of one ClusterQueue (see `queuectl.core.bank`)."""

    cap_gpu_hours: float
    """The most credit the queue may hold, in GPU-hours."""
    accrual_rate: float = 1.0
    """GPU-hours of credit per hour per GPU of nominal quota left unused."""
    half_life_hours: float | None = None
    """Credit halves every this many hours (None: it never decays)."""


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    cohort: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    preemption: PreemptionPolicy = PreemptionPolicy()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    fair_weight: float = 1.0
    stop_policy: StopPolicy = "None"
    admission_checks: tuple[str, ...] = ()
    """AdmissionChecks its workloads pass after reserving quota (`queuectl.core.checks`)."""
    gpu_time_bank: GpuTimeBank | None = None
    block_admission: bool | None = None
    """A starting workload of this queue holds its flavors (`core.starting`); None: the
    scheduler's default."""


@dataclass(frozen=True, slots=True)
class AdmissionCheck:
    """What the core needs of an AdmissionCheck: whether its controller says it is Active."""

    name: str
    active: bool = False
    message: str = ""
    """Why it is not Active (its condition's message), for the queue's reason."""


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    required: str | None = None
    preferred: str | None = None
    group: str | None = None
    """podSetGroupName: the workload's pod sets of one group share one domain (`podset_groups`)."""
    slices: tuple[tuple[str, int], ...] = ()
    """(level, size) outermost first: the pods in slices of `size`, each slice in one domain of
    `level`; each inner size divides the outer one, and the count is whole outer slices
    (`slices`)."""
    balanced: bool = False
    """Once the domains are chosen, spread the pods (or slices) over them as evenly as they
    allow instead of packing the first ones full (`slices`)."""


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int
    requests: Mapping[str, int]
    """Per pod."""
    topology: TopologyRequest | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class DomainAssignment:
    values: tuple[str, ...]
    """The node's label values for every level of the topology."""
    nodes: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    levels: tuple[str, ...]
    level: str | None
    """The level whose single domain holds the gang; None when the pods are spread."""
    domain: tuple[str, ...]
    """Label values of that domain, coarse to `level`."""
    domains: tuple[DomainAssignment, ...]
    """Per node, sorted by node name; with `slices`, in pod order instead: the first `size` pods
    of the listed counts are the first slice of that level, and so on."""
    slices: tuple[tuple[str, int], ...] = ()
    """The slice levels the placement honours, as the request gave them."""
    note: str | None = None
    """Why a balanced placement is not even (a domain holds less than its even share)."""


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    name: str
    count: int
    flavors: Mapping[str, str]
    """resource -> flavor"""
    usage: Mapping[str, int]
    """resource -> total over the pod set"""
    topology: TopologyAssignment | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    cluster_queue: str
    podsets: tuple[PodSetAssignment, ...]


@dataclass(frozen=True, slots=True)
class Workload:
    key: str
    """namespace/name"""
    cluster_queue: str
    podsets: tuple[PodSet, ...]
    priority: int = 0
    created: float = 0.0
    active: bool = True
    admission: Admission | None = None
    admitted_at: float | None = None
    preemption_grace_seconds: float = 0.0
    minimum_runtime_seconds: float = 0.0
    max_execution_seconds: float | None = None
    not_before: float = 0.0
    """Backoff: not eligible for admission before this time (requeueState.requeueAt)."""
    front: bool = False
    """Requeue ahead of peers of equal priority (evicted for node failure)."""
    starting: bool = False
    """Holding quota while its pods are not yet all Ready (no PodsReady=True): with block
    admission on, its flavors admit nothing else meanwhile (`core.starting`)."""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    used: Mapping[str, int] = field(default_factory=dict)
    """Used by pods the core does not account for (not of a queuectl workload)."""
    unschedulable: bool = False
    healthy_gpus: int | None = None
    taints: tuple[Taint, ...] = ()
