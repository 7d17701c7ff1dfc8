"""The controller's metrics (`CONTROLLER_REGISTRY`, served by the controller). Every series has
bounded labels: ClusterQueue names, priority class names, flavors and resources are
configuration, not per-workload values."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

CONTROLLER_REGISTRY = CollectorRegistry()

CONTROLLER_PENDING = Gauge(
    "queuectl_pending_workloads",
    "Workloads waiting for admission, by ClusterQueue and priority class.",
    ["cluster_queue", "priority_class"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_ADMITTED_ACTIVE = Gauge(
    "queuectl_admitted_active_workloads",
    "Workloads holding quota now, by ClusterQueue.",
    ["cluster_queue"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_ADMITTED = Counter(
    "queuectl_admitted_workloads_total",
    "Admissions written, by ClusterQueue.",
    ["cluster_queue"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_EVICTED = Counter(
    "queuectl_evicted_workloads_total",
    "Evictions, by reason (Preempted, MaximumExecutionTimeExceeded, ClusterQueueStopped ...).",
    ["reason"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_PREEMPTED = Counter(
    "queuectl_preempted_workloads_total",
    "Preemption notices served, by reason (InClusterQueue, InCohortReclamation ...).",
    ["reason"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_ADMISSION_WAIT = Histogram(
    "queuectl_admission_wait_time_seconds",
    "From Workload creation to its admission.",
    ["cluster_queue"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600),
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_RESERVATION_TO_ADMISSION = Histogram(
    "queuectl_reservation_to_admission_seconds",
    "From quota reservation to admission, for workloads behind admission checks (the time "
    "their checks, e.g. provisioning, took).",
    ["cluster_queue"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_PROVISION_PENDING_GPUS = Gauge(
    "queuectl_provision_pending_gpus",
    "GPU devices (whole GPUs and each MIG profile apart) of reservations waiting for the "
    "provisioning check's capacity, by flavor and resource.",
    ["flavor", "resource"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_PROVISION_REQUESTS = Gauge(
    "queuectl_provision_requests",
    "Capacity requests of the provisioning check standing now, by mode (placeholders, "
    "provisioningrequest) and state (Pending, Provisioned).",
    ["mode", "state"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_PROVISION_DECISIONS = Counter(
    "queuectl_provision_decisions_total",
    "Decisions of the provisioning check, by mode and outcome (Fits: no capacity needed, "
    "Provisioned, Retry).",
    ["mode", "outcome"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_QUOTA = Gauge(
    "queuectl_cluster_queue_quota",
    "Quota per ClusterQueue, flavor and resource in canonical units; kind is nominal, used or "
    "borrowed.",
    ["cluster_queue", "flavor", "resource", "kind"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_GPU_TIME_BANK = Gauge(
    "queuectl_cluster_queue_gpu_time_bank_gpu_hours",
    "GPU time credit of a ClusterQueue with spec.gpuTimeBank, in GPU-hours.",
    ["cluster_queue"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_CYCLE_SECONDS = Histogram(
    "queuectl_scheduling_cycle_duration_seconds",
    "Wall time of one core scheduling cycle.",
    # Finer between 50 ms and 1 s, where large fleets' cycles fall (p99 within one bucket).
    buckets=(
        0.0005,
        0.001,
        0.0025,
        0.005,
        0.01,
        0.025,
        0.05,
        0.075,
        0.1,
        0.15,
        0.2,
        0.3,
        0.4,
        0.5,
        0.75,
        1,
        1.5,
        2.5,
        5,
    ),
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_ADMISSIONS_PER_CYCLE = Histogram(
    "queuectl_admissions_per_cycle",
    "Workloads admitted by one scheduling cycle.",
    buckets=(0, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000),
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_DECISIONS_IN_FLIGHT = Gauge(
    "queuectl_decisions_in_flight",
    "Admissions, preemption notices and evictions decided but not yet written; the next cycle "
    "waits while there are more than the controller's limit (64).",
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_CYCLE_WRITE_WAIT = Counter(
    "queuectl_cycle_write_wait_seconds_total",
    "Time scheduling cycles waited for earlier decisions to be written (the API server's pace).",
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_LEADER = Gauge(
    "queuectl_controller_is_leader",
    "1 while this replica holds the scheduling Lease.",
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_EVENTS_DROPPED = Counter(
    "queuectl_events_dropped_total",
    "Kubernetes Events not sent: over the event rate limit (rate_limit), too many in flight "
    "(in_flight), or routine ones while status writes queue up (busy).",
    ["reason"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_PENDING_DEFERRED = Counter(
    "queuectl_pending_writes_deferred_total",
    "Pending-reason writes put off because the pending-write budget was spent (the pending "
    "sweep writes them later).",
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_API_ERRORS = Counter(
    "queuectl_controller_api_errors_total",
    "Failed writes to the API server, by operation.",
    ["operation"],
    registry=CONTROLLER_REGISTRY,
)

# --- fleet figures: what the CLI and dashboards show, computed by queuectl.core.fleet and
# set by the controller (docs/design/cli.md lists the wiring) ---
CONTROLLER_FINISHED = Counter(
    "queuectl_finished_workloads_total",
    "Workloads that finished, by ClusterQueue and reason (Succeeded, Failed).",
    ["cluster_queue", "reason"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_GPU_SECONDS = Counter(
    "queuectl_gpu_seconds_total",
    "GPU-seconds held by admitted workloads (chargeback), by namespace, ClusterQueue and flavor.",
    ["namespace", "cluster_queue", "flavor"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_GPU_COST = Counter(
    "queuectl_gpu_cost",
    "Cost of the GPU-seconds of queuectl_gpu_seconds_total on flavors with a price "
    "(spec.cost), at the price in force when each second was charged, by namespace, "
    "ClusterQueue, flavor and currency.",
    ["namespace", "cluster_queue", "flavor", "currency"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_FLAVOR_GPUS = Gauge(
    "queuectl_flavor_gpus",
    "GPUs per flavor; kind is capacity (healthy GPUs of schedulable nodes with the flavor's "
    "labels) or allocated (held by admitted workloads).",
    ["flavor", "kind"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_GPU_ALLOCATION = Gauge(
    "queuectl_gpu_allocation_ratio",
    "Allocated over capacity GPUs of a flavor (0 when it has no capacity).",
    ["flavor"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_FRAGMENTATION = Gauge(
    "queuectl_gpu_fragmentation_ratio",
    "Free GPUs on nodes where no pending pod's GPU request fits, over all free GPUs "
    "(0 when nothing is free or nothing is pending).",
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_UNHEALTHY_GPUS = Gauge(
    "queuectl_unhealthy_gpus",
    "GPUs the node agents report unhealthy (healthy-count label, or the unhealthy taint).",
    registry=CONTROLLER_REGISTRY,
)
# --- auto-drain (docs/design/controller.md "Auto-drain and GPU health") ---
CONTROLLER_NODES_DRAINED = Counter(
    "queuectl_nodes_drained_total",
    "Nodes cordoned and drained because a GPU went unhealthy, by the agent's reason "
    "(CriticalXid, DoubleBitEccError ...).",
    ["reason"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_DRAINED_NODES = Gauge(
    "queuectl_drained_nodes",
    "Nodes currently held drained by the controller (cordoned until their GPUs recover or "
    "they are Ready again).",
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_UNKNOWN_GPUS = Gauge(
    "queuectl_unknown_gpus",
    "GPUs of nodes whose agent went silent (the controller's gpu.queuectl.io/unknown taint).",
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_NODE_HOT_SWAPS = Counter(
    "queuectl_node_hot_swaps_total",
    "Topology gangs that kept running when a node failed: its pods moved to a free node of "
    "the gang's domain instead of the whole gang being requeued.",
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_PODS_FORCE_DELETED = Counter(
    "queuectl_pods_force_deleted_total",
    "Pods force-deleted on a failed node after their deletion deadline (no kubelet confirms).",
    registry=CONTROLLER_REGISTRY,
)
# --- the enforcement loop (docs/design/controller.md "What runs is the truth") ---
CONTROLLER_PODS_EXCEED_ADMISSION = Counter(
    "queuectl_pods_exceed_admission_total",
    "Workloads whose running pods were found beyond their admission and stopped, by ClusterQueue "
    "and how (pods, podSet, gpus, flavor; unadmitted: a pod group ran with no quota behind it).",
    ["cluster_queue", "reason"],
    registry=CONTROLLER_REGISTRY,
)
# --- admission webhooks (docs/design/webhooks.md "Hostile input and internal errors") ---
WEBHOOK_REJECTED_REQUESTS = Counter(
    "queuectl_webhook_rejected_requests_total",
    "Webhook requests answered with an HTTP error before any decision, by route and reason "
    "(malformed, too_large, read_timeout, disconnected).",
    ["route", "reason"],
    registry=CONTROLLER_REGISTRY,
)
WEBHOOK_INTERNAL_ERRORS = Counter(
    "queuectl_webhook_internal_errors_total",
    "Admission decisions that raised, by route and the answer the route's failure policy gave "
    "(allowed or denied).",
    ["route", "answer"],
    registry=CONTROLLER_REGISTRY,
)
# --- GPU use from the node agents' reports (docs/design/gpu-use.md) ---
CONTROLLER_USED_GPU_SECONDS = Counter(
    "queuectl_used_gpu_seconds_total",
    "GPU-seconds held by admitted workloads weighted by their GPUs' utilization (agents' "
    "reports), by ClusterQueue.",
    ["cluster_queue"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_IDLE_GPU_SECONDS = Counter(
    "queuectl_idle_gpu_seconds_total",
    "GPU-seconds held by admitted workloads while under their ClusterQueue's idle threshold "
    "(5% without an idle policy), by ClusterQueue.",
    ["cluster_queue"],
    registry=CONTROLLER_REGISTRY,
)
CONTROLLER_IDLE_ACTIONS = Counter(
    "queuectl_idle_workloads_total",
    "Workloads flagged GPUIdle by their ClusterQueue's idle policy, by ClusterQueue and action.",
    ["cluster_queue", "action"],
    registry=CONTROLLER_REGISTRY,
)
