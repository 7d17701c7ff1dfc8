"""The scheduling core: pure, synchronous, deterministic admission decisions.

Feed a `Scheduler` plain objects (`queuectl.core.types`) from watch events, call `run_cycle(now)`,
write out the `CycleResult`. See docs/design/core.md.
"""

from queuectl import native

__path__ = native.core_path(__path__)  # a compiled build of these sources, when asked for

from queuectl.core.eta import ASSUMES as ETA_ASSUMES
from queuectl.core.eta import Eta, EtaLimits, estimate_starts, prepare_estimate
from queuectl.core.fair_preempt import DEFAULT as FAIR_PREEMPTION_DEFAULT
from queuectl.core.fair_preempt import strategies as fair_preemption_rules
from queuectl.core.patience import DEFAULT_PATIENCE_SECONDS, waits_for_completions
from queuectl.core.results import (
    Admitted,
    CycleResult,
    Eviction,
    Explanation,
    PendingInfo,
    Preemption,
    Problem,
    QueueHolding,
    QueueStatus,
    QuotaHold,
)
from queuectl.core.runtimes import RuntimeHistory
from queuectl.core.scheduler import Scheduler, backoff_seconds
from queuectl.core.types import (
    GPU,
    Admission,
    AdmissionCheck,
    BorrowWithinCohort,
    CheckState,
    ClusterQueue,
    Cohort,
    DomainAssignment,
    Flavor,
    FlavorFungibility,
    FlavorQuotas,
    FlavorResource,
    GpuTimeBank,
    Node,
    PodSet,
    PodSetAssignment,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
    Topology,
    TopologyAssignment,
    TopologyRequest,
    Workload,
)

__all__ = [
    "DEFAULT_PATIENCE_SECONDS",
    "ETA_ASSUMES",
    "FAIR_PREEMPTION_DEFAULT",
    "GPU",
    "Admission",
    "AdmissionCheck",
    "Admitted",
    "BorrowWithinCohort",
    "CheckState",
    "ClusterQueue",
    "Cohort",
    "CycleResult",
    "DomainAssignment",
    "Eta",
    "EtaLimits",
    "Eviction",
    "Explanation",
    "Flavor",
    "FlavorFungibility",
    "FlavorQuotas",
    "FlavorResource",
    "GpuTimeBank",
    "Node",
    "PendingInfo",
    "PodSet",
    "PodSetAssignment",
    "Preemption",
    "PreemptionPolicy",
    "Problem",
    "QueueHolding",
    "QueueStatus",
    "QuotaHold",
    "ResourceGroup",
    "ResourceQuota",
    "RuntimeHistory",
    "Scheduler",
    "Taint",
    "Toleration",
    "Topology",
    "TopologyAssignment",
    "TopologyRequest",
    "Workload",
    "backoff_seconds",
    "estimate_starts",
    "fair_preemption_rules",
    "prepare_estimate",
    "waits_for_completions",
]
