"""Reason spellings the core emits.

Copies of `queuectl.api.names` REASON_* values: the core may not import the api package, and a
unit test keeps the two equal.
"""

from typing import Final

PENDING: Final = "Pending"
WAITING_FOR_QUOTA: Final = "WaitingForQuota"
EXCEEDS_MAX_QUOTA: Final = "ExceedsMaxQuota"
NO_MATCHING_FLAVOR: Final = "NoMatchingFlavor"
TOPOLOGY_PLACEMENT_FAILED: Final = "TopologyPlacementFailed"
WAITING_FOR_PREEMPTED: Final = "WaitingForPreemptedWorkloads"
WAITING_FOR_PODS_READY: Final = "WaitingForPodsReady"
INACTIVE: Final = "Inactive"
CLUSTER_QUEUE_STOPPED: Final = "ClusterQueueStopped"
CLUSTER_QUEUE_NOT_FOUND: Final = "ClusterQueueNotFound"
CLUSTER_QUEUE_INACTIVE: Final = "ClusterQueueInactive"
INVALID_SPEC: Final = "InvalidSpec"
PREEMPTED_RECLAIM: Final = "InCohortReclamation"
PREEMPTED_WITHIN_CQ: Final = "InClusterQueue"
PREEMPTED_BORROW: Final = "InCohortReclaimWhileBorrowing"
PREEMPTED_CREDIT: Final = "InCohortReclaimWithCredit"
PREEMPTED_FAIR: Final = "InCohortFairSharing"
EVICTED_STOPPED: Final = "ClusterQueueStopped"
EVICTED_MAX_EXEC_TIME: Final = "MaximumExecutionTimeExceeded"
ADMISSION_CHECK_NOT_FOUND: Final = "AdmissionCheckNotFound"
ADMISSION_CHECK_INACTIVE: Final = "AdmissionCheckInactive"
