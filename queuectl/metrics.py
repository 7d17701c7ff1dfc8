"""Every Prometheus metric of queuectl, defined once, one registry per process kind.

Each process serves only its own registry (`AGENT_REGISTRY` for `queuectl agent`,
`CONTROLLER_REGISTRY` for the controller), so a controller scrape never shows empty GPU series.
Names follow Prometheus conventions (`_total` counters, base units, `_ratio` for 0..1).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

# =========================================================================================
# agent: `queuectl agent` on each GPU node (owner: the agent; docs/design/agent.md)
# =========================================================================================
AGENT_REGISTRY = CollectorRegistry()

# Labels of every per-GPU series, as DCGM exporter's gpu/UUID/modelName/Hostname.
GPU_LABELS = ("node", "gpu", "uuid", "model")


@dataclass(frozen=True)
class GpuMetricSample:
    """One GPU's latest readings; `None` where the GPU does not support the query."""

    node: str
    gpu: int
    uuid: str
    model: str
    healthy: bool
    last_xid: int = 0
    utilization_ratio: float | None = None
    memory_utilization_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    ecc_sbe_total: int | None = None
    ecc_dbe_total: int | None = None
    holders: tuple[tuple[str, str, str], ...] | None = None
    """(namespace, pod, container) the kubelet gave the GPU to; None: the kubelet not asked."""


_GAUGES = (
    (
        "queuectl_gpu_utilization_ratio",
        "Fraction of time a kernel ran on the GPU (DCGM_FI_DEV_GPU_UTIL).",
        "utilization_ratio",
    ),
    (
        "queuectl_gpu_memory_utilization_ratio",
        "Fraction of time device memory was read or written (DCGM_FI_DEV_MEM_COPY_UTIL).",
        "memory_utilization_ratio",
    ),
    (
        "queuectl_gpu_memory_used_bytes",
        "Device memory in use (DCGM_FI_DEV_FB_USED).",
        "memory_used_bytes",
    ),
    (
        "queuectl_gpu_memory_free_bytes",
        "Device memory free (DCGM_FI_DEV_FB_FREE).",
        "memory_free_bytes",
    ),
    (
        "queuectl_gpu_temperature_celsius",
        "GPU temperature (DCGM_FI_DEV_GPU_TEMP).",
        "temperature_c",
    ),
    ("queuectl_gpu_power_watts", "GPU power draw (DCGM_FI_DEV_POWER_USAGE).", "power_w"),
)


class GpuCollector(Collector):
    """Per-GPU series from the agent's latest pass. A snapshot replaces the previous one whole,
    so a GPU that disappears leaves no stale series behind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: tuple[GpuMetricSample, ...] = ()

    def update(self, samples: Sequence[GpuMetricSample]) -> None:
        with self._lock:
            self._samples = tuple(samples)

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        with self._lock:
            samples = self._samples
        for name, doc, attr in _GAUGES:
            family = GaugeMetricFamily(name, doc, labels=GPU_LABELS)
            for s in samples:
                value = getattr(s, attr)
                if value is not None:
                    family.add_metric(_labels(s), float(value))
            yield family
        ecc = CounterMetricFamily(
            "queuectl_gpu_ecc_errors",
            "ECC errors since the driver loaded, by type (DCGM_FI_DEV_ECC_SBE/DBE_VOL_TOTAL).",
            labels=(*GPU_LABELS, "type"),
        )
        xid = GaugeMetricFamily(
            "queuectl_gpu_last_xid",
            "Last XID the GPU raised, 0 if none (DCGM_FI_DEV_XID_ERRORS).",
            labels=GPU_LABELS,
        )
        healthy = GaugeMetricFamily(
            "queuectl_gpu_healthy", "1 if the agent considers the GPU healthy.", labels=GPU_LABELS
        )
        for s in samples:
            for kind, value in (("single", s.ecc_sbe_total), ("double", s.ecc_dbe_total)):
                if value is not None:
                    ecc.add_metric([*_labels(s), kind], float(value))
            xid.add_metric(_labels(s), float(s.last_xid))
            healthy.add_metric(_labels(s), 1.0 if s.healthy else 0.0)
        yield ecc
        yield xid
        yield healthy
        yield from _holder_families(samples)


HOLDER_LABELS = (*GPU_LABELS, "namespace", "pod", "container")


def _holder_families(samples: Sequence[GpuMetricSample]) -> Iterable[GaugeMetricFamily]:
    """dcgm-exporter's pod mapping: the GPU's figures again, labelled with who holds it."""
    allocated = GaugeMetricFamily(
        "queuectl_gpu_allocated", "1 if the kubelet gave the GPU to a container.", labels=GPU_LABELS
    )
    util = GaugeMetricFamily(
        "queuectl_gpu_container_utilization_ratio",
        "queuectl_gpu_utilization_ratio of a GPU, by the container holding it.",
        labels=HOLDER_LABELS,
    )
    memory = GaugeMetricFamily(
        "queuectl_gpu_container_memory_used_bytes",
        "queuectl_gpu_memory_used_bytes of a GPU, by the container holding it.",
        labels=HOLDER_LABELS,
    )
    for s in samples:
        if s.holders is None:
            continue
        allocated.add_metric(_labels(s), 1.0 if s.holders else 0.0)
        for holder in s.holders:
            if s.utilization_ratio is not None:
                util.add_metric([*_labels(s), *holder], s.utilization_ratio)
            if s.memory_used_bytes is not None:
                memory.add_metric([*_labels(s), *holder], float(s.memory_used_bytes))
    yield from (allocated, util, memory)


def _labels(s: GpuMetricSample) -> list[str]:
    return [s.node, str(s.gpu), s.uuid, s.model]


GPU_COLLECTOR = GpuCollector()
AGENT_REGISTRY.register(GPU_COLLECTOR)

AGENT_NVML_AVAILABLE = Gauge(
    "queuectl_agent_nvml_available",
    "1 if the agent could open NVML.",
    ["node"],
    registry=AGENT_REGISTRY,
)
AGENT_PASSES = Counter(
    "queuectl_agent_passes_total",
    "Discovery and health passes run.",
    ["node"],
    registry=AGENT_REGISTRY,
)
AGENT_NODE_WRITES = Counter(
    "queuectl_agent_node_writes_total",
    "Patches the agent sent to its Node, by result.",
    ["node", "result"],
    registry=AGENT_REGISTRY,
)

# =========================================================================================
# controller: the queuectl controller (owner: the controller engineer; fill in below)
# =========================================================================================
CONTROLLER_REGISTRY = CollectorRegistry()

# (controller metrics go here, each with registry=CONTROLLER_REGISTRY)

# Every series below has bounded labels: ClusterQueue names, priority class names, flavors
# and resources are configuration, not per-workload values.
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


@dataclass(frozen=True)
class HeldGpuSample:
    """A GPU of a node's latest report and who holds it; `cluster_queue`/`workload` empty for
    a pod queuectl did not place."""

    node: str
    uuid: str
    namespace: str
    pod: str
    container: str
    workload: str
    cluster_queue: str
    utilization_ratio: float


class HeldGpuCollector(Collector):
    """dcgm-exporter's per-GPU pod mapping, with the queue workload (the controller resolves
    it through the pod's verified owner chain), and the fleet's allocated and used GPUs by
    ClusterQueue. Each node's rows are replaced by its next report, dropped with the node."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, tuple[HeldGpuSample, ...]] = {}

    def update(self, node: str, rows: Sequence[HeldGpuSample] | None) -> None:
        with self._lock:
            if rows is None:
                self._nodes.pop(node, None)
            else:
                self._nodes[node] = tuple(rows)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        with self._lock:
            rows = [r for node_rows in self._nodes.values() for r in node_rows]
        labels = ("node", "uuid", "namespace", "pod", "container", "workload", "cluster_queue")
        util = GaugeMetricFamily(
            "queuectl_workload_gpu_utilization_ratio",
            "Mean utilization of a GPU over its node's latest report, by who holds it.",
            labels=labels,
        )
        allocated = GaugeMetricFamily(
            "queuectl_gpus_allocated",
            "GPUs held by containers in the nodes' latest reports, by ClusterQueue ('' outside).",
            labels=("cluster_queue",),
        )
        used = GaugeMetricFamily(
            "queuectl_gpus_used",
            "Those GPUs weighted by their utilization (GPU-equivalents busy), by ClusterQueue.",
            labels=("cluster_queue",),
        )
        per_queue: dict[str, list[float]] = {}
        for r in rows:
            util.add_metric(
                [r.node, r.uuid, r.namespace, r.pod, r.container, r.workload, r.cluster_queue],
                r.utilization_ratio,
            )
            per_queue.setdefault(r.cluster_queue, []).append(r.utilization_ratio)
        for queue, ratios in sorted(per_queue.items()):
            allocated.add_metric([queue], float(len(ratios)))
            used.add_metric([queue], sum(ratios))
        yield from (util, allocated, used)


HELD_GPU_COLLECTOR = HeldGpuCollector()
CONTROLLER_REGISTRY.register(HELD_GPU_COLLECTOR)
